package main

// Golden transcript of the MCP surface. One fixed session of raw JSON-RPC
// requests goes to a facade over stdio; each exchange (request and the
// exact result or error object) is normalised and compared with a
// pretty-printed file in testdata/golden. A renamed tool, a changed
// schema, result field, error code or URI form shows up as a diff.
//
// Update the files after an intended change with
//
//	go test ./cmd/shoal-mcp -run Golden -update
//
// and review the diff of testdata/golden before committing it.

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"unicode/utf8"

	mcpclient "github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/mcp"
)

var updateGolden = flag.Bool("update", false, "rewrite the golden transcript files in testdata/golden")

const goldenDir = "testdata/golden"

// goldenStep is one request of the fixed session.
type goldenStep struct {
	name   string // testdata/golden/NN_name.json, NN its place in the session
	method string
	params any
	// check, when set, guards the session itself (not the golden
	// comparison): it stops the test before a later step could do harm.
	check func(t *testing.T, result json.RawMessage, rerr *mcp.JSONRPCErrorDetails)
}

func goldenCall(tool string, args map[string]any) map[string]any {
	return map[string]any{"name": tool, "arguments": args}
}

// goldenSteps is the session. Its order matters: out:N numbers follow it.
func goldenSteps() []goldenStep {
	return []goldenStep{
		{name: "initialize", method: "initialize", params: map[string]any{
			"protocolVersion": "2025-06-18",
			"capabilities":    map[string]any{},
			"clientInfo":      map[string]any{"name": "shoal-golden", "version": "1"},
		}},
		{name: "tools_list", method: "tools/list", params: map[string]any{}},
		{name: "resource_templates", method: "resources/templates/list", params: map[string]any{}},
		{name: "resources_list", method: "resources/list", params: map[string]any{}},
		// Executions: out:1 … in order.
		{name: "exec_echo", method: "tools/call", params: goldenCall("shoal_exec", map[string]any{"source": "echo hi"})},
		{name: "exec_from_json", method: "tools/call", params: goldenCall("shoal_exec", map[string]any{"source": `printf '{"a":[1,2,3]}' | from json`})},
		{name: "exec_exit3", method: "tools/call", params: goldenCall("shoal_exec", map[string]any{"source": "exit 3"})},
		{name: "exec_syntax_error", method: "tools/call", params: goldenCall("shoal_exec", map[string]any{"source": "echo 'unterminated"})},
		// The refusal must be a tool error; anything else means the source
		// might have run, and the session stops here. (GNU rm's default
		// --preserve-root is the last line of defence for `rm -rf /`.)
		{name: "exec_refused", method: "tools/call", params: goldenCall("shoal_exec", map[string]any{"source": "rm -rf /"}),
			check: func(t *testing.T, result json.RawMessage, rerr *mcp.JSONRPCErrorDetails) {
				var r struct {
					IsError bool `json:"isError"`
				}
				if rerr != nil || json.Unmarshal(result, &r) != nil || !r.IsError {
					t.Fatalf("rm -rf / was not refused as a tool error: %s %v", result, rerr)
				}
			}},
		// Reads of out:2 ({"a":[1,2,3]}), by tool and by resource.
		{name: "get_path_slice", method: "tools/call", params: goldenCall("shoal_get", map[string]any{"target": "out:2", "path": ".a", "slice": "1..3"})},
		{name: "get_record", method: "tools/call", params: goldenCall("shoal_get", map[string]any{"target": "out:1"})},
		{name: "read_path_slice", method: "resources/read", params: map[string]any{"uri": "shoal://out/2?path=.a&slice=0..2"}},
		{name: "read_render", method: "resources/read", params: map[string]any{"uri": "shoal://out/1?path=.stdout&format=render"}},
		// Reads that cannot be answered.
		{name: "read_missing_out", method: "resources/read", params: map[string]any{"uri": "shoal://out/99"}},
		{name: "get_missing_out", method: "tools/call", params: goldenCall("shoal_get", map[string]any{"target": "out:99"})},
		{name: "get_bad_path", method: "tools/call", params: goldenCall("shoal_get", map[string]any{"target": "out:2", "path": ".nope"})},
		{name: "read_bad_view", method: "resources/read", params: map[string]any{"uri": "shoal://session/nope"}},
		// The session's working directory: a fresh temp dir ($CWD).
		{name: "read_cwd", method: "resources/read", params: map[string]any{"uri": "shoal://session/cwd"}},
		{name: "exec_pwd", method: "tools/call", params: goldenCall("shoal_exec", map[string]any{"source": "pwd"})},
		// A plan of a risky command: analysed, never run; then its other
		// forms (short ref, URI, resources/list entry).
		{name: "plan_risky", method: "tools/call", params: goldenCall("shoal_plan", map[string]any{"source": "git push --force origin main"})},
		{name: "get_plan", method: "tools/call", params: goldenCall("shoal_get", map[string]any{"target": goldenPlanRef})},
		{name: "read_plan", method: "resources/read", params: map[string]any{"uri": "shoal://plan/" + goldenPlanHex}},
		{name: "resources_list_plan", method: "resources/list", params: map[string]any{}},
		{name: "apply_unapproved", method: "tools/call", params: goldenCall("shoal_apply", map[string]any{"plan": goldenPlanRef})},
		// Bad calls.
		{name: "exec_missing_source", method: "tools/call", params: goldenCall("shoal_exec", map[string]any{})},
		{name: "unknown_tool", method: "tools/call", params: goldenCall("shoal_nope", map[string]any{})},
	}
}

// goldenPlanRef and goldenPlanHex in a step's params stand for the ref
// (plan:<hex>) and the hex the previous shoal_plan returned: plan refs
// carry a random nonce. Golden files show the params as written.
const (
	goldenPlanRef = "plan:$PLAN"
	goldenPlanHex = "$PLAN"
)

// goldenExchange is what a golden file holds: the request as sent and
// either the result or the error object as received.
type goldenExchange struct {
	Request struct {
		Method string `json:"method"`
		Params any    `json:"params"`
	} `json:"request"`
	Result json.RawMessage          `json:"result,omitempty"`
	Error  *mcp.JSONRPCErrorDetails `json:"error,omitempty"`
}

func TestGoldenTranscript(t *testing.T) {
	// The session's working directory is the kernel's, inherited from the
	// facade: an empty temp dir, so plan targets and estimates do not
	// depend on the checkout. Made first, so that it is removed last,
	// after the kernel has stopped.
	cwd, err := os.MkdirTemp("", "shw")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(cwd) })
	sd := newStateDir(t)
	p := startGoldenFacade(t, sd, cwd)

	norm := newGoldenNormaliser(sd.dir, cwd)
	var planRef string
	produced := map[string]bool{}
	for i, st := range goldenSteps() {
		file := fmt.Sprintf("%02d_%s.json", i, st.name)
		params := st.params
		if planRef != "" {
			params = substitute(params, goldenPlanHex, strings.TrimPrefix(planRef, "plan:"))
		}
		result, rerr := p.raw(st.method, params)
		if st.check != nil {
			st.check(t, result, rerr)
		}
		if st.method == "initialize" && rerr == nil {
			// The handshake ends with the client's notification.
			ctx, cancel := p.ctx()
			err := p.c.GetTransport().SendNotification(ctx, mcp.JSONRPCNotification{
				JSONRPC: mcp.JSONRPC_VERSION, Notification: mcp.Notification{Method: "notifications/initialized"}})
			cancel()
			if err != nil {
				t.Fatalf("notifications/initialized: %v", err)
			}
		}
		if ref := planRefOf(result); ref != "" {
			planRef = ref
		}

		var ex goldenExchange
		ex.Request.Method, ex.Request.Params = st.method, st.params
		ex.Result, ex.Error = result, rerr
		b, err := json.Marshal(ex)
		if err != nil {
			t.Fatal(err)
		}
		got, err := norm.normalise(b)
		if err != nil {
			t.Fatalf("%s: normalise: %v\n%s", file, err, b)
		}
		produced[file] = true
		compareGolden(t, filepath.Join(goldenDir, file), got)
	}

	// A golden file no step produces is a step that was dropped.
	entries, _ := os.ReadDir(goldenDir)
	for _, e := range entries {
		if produced[e.Name()] || e.IsDir() {
			continue
		}
		if *updateGolden {
			os.Remove(filepath.Join(goldenDir, e.Name()))
			continue
		}
		t.Errorf("%s/%s: no step produces it any more (go test ./cmd/shoal-mcp -run Golden -update removes it)", goldenDir, e.Name())
	}
}

// startGoldenFacade starts a facade over stdio as startStdio does, with
// the working directory dir, and without the library's handshake: the
// session's initialize is the first golden exchange.
func startGoldenFacade(t *testing.T, sd *stateDir, dir string) *mcpPeer {
	t.Helper()
	stderr := &syncBuffer{}
	tr := stdioIn(dir, sd.facadeArgs("agent:golden"), stderr)
	if err := tr.Start(context.Background()); err != nil {
		t.Fatalf("start facade: %v\n%s", err, stderr.String())
	}
	c := mcpclient.NewClient(tr)
	if err := c.Start(context.Background()); err != nil {
		c.Close()
		t.Fatalf("start client: %v", err)
	}
	p := &mcpPeer{c: c, stderr: stderr, notes: make(chan mcp.JSONRPCNotification, 1024)}
	p.adopt(t)
	return p
}

// planRefOf finds structuredContent.ref of a shoal_plan result.
func planRefOf(result json.RawMessage) string {
	var r struct {
		StructuredContent struct {
			Ref string `json:"ref"`
		} `json:"structuredContent"`
	}
	if json.Unmarshal(result, &r) == nil && strings.HasPrefix(r.StructuredContent.Ref, "plan:") {
		return r.StructuredContent.Ref
	}
	return ""
}

// substitute replaces from with to in the strings of a step's params.
func substitute(v any, from, to string) any {
	switch v := v.(type) {
	case map[string]any:
		out := make(map[string]any, len(v))
		for k, x := range v {
			out[k] = substitute(x, from, to)
		}
		return out
	case string:
		return strings.ReplaceAll(v, from, to)
	}
	return v
}

// ---- normalisation ------------------------------------------------------

// goldenNormaliser replaces what differs from run to run, and nothing
// else. Objects keep their key order as received: they are only
// re-indented, never sorted.
type goldenNormaliser struct {
	// paths are members whose values vary by nature, replaced by a
	// placeholder naming the member. A path is a list of object keys
	// from the exchange's root; "*" matches any key or array index.
	paths [][]string
	// dirs are temp directories replaced (literally) in every string by
	// a placeholder.
	dirs []goldenTempDir
	// strs are rewrites applied to every string after dirs, including
	// the JSON and status texts embedded in tool results and read
	// envelopes.
	strs []goldenRewrite
}

type goldenTempDir struct{ path, placeholder string }

type goldenRewrite struct {
	re   *regexp.Regexp
	repl string // may use ${1} and so on
}

func newGoldenNormaliser(stateDir, cwd string) *goldenNormaliser {
	n := &goldenNormaliser{
		paths: [][]string{
			// How long an execution ran (shoal_exec, shoal_apply).
			{"result", "structuredContent", "duration_ns"},
			{"result", "structuredContent", "ms"},
			// When a plan was made, in ns: shoal_plan, a resources/read of
			// shoal://plan/…, and shoal_get of plan:… (which wraps it).
			{"result", "structuredContent", "created"},
			{"result", "structuredContent", "value", "created"},
		},
		strs: []goldenRewrite{
			// Plan refs hash a random nonce (docs/policy.md: two plans
			// never share a ref), so they differ every run:
			// plan:<16 hex> and shoal://plan/<16 hex>.
			{regexp.MustCompile(`\bplan([:/])[0-9a-f]{16}\b`), "plan${1}<hex>"},
			// The duration in an execution's status line, e.g.
			// "out:1 ok, exit 0, 1.2ms" (time.Duration's String form).
			{regexp.MustCompile(`(\bout:\d+ (?:ok|failed), exit -?\d+), [0-9][0-9.hmµns]*s\b`), "${1}, <duration>"},
			// The plan record's "created" (ns) inside the plan's text,
			// which embeds the record as pretty JSON.
			{regexp.MustCompile(`("created": )\d+`), `${1}"<created>"`},
		},
	}
	// The state dir and the session's working directory are fresh temp
	// dirs; they may also appear with symbolic links resolved. Longest
	// first, so no placeholder eats part of a longer path.
	for _, d := range []goldenTempDir{{stateDir, "$STATE"}, {cwd, "$CWD"}} {
		n.dirs = append(n.dirs, d)
		if real, err := filepath.EvalSymlinks(d.path); err == nil && real != d.path {
			n.dirs = append(n.dirs, goldenTempDir{real, d.placeholder})
		}
	}
	slices.SortFunc(n.dirs, func(a, b goldenTempDir) int { return len(b.path) - len(a.path) })
	return n
}

func (n *goldenNormaliser) normalise(b []byte) ([]byte, error) {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	v, err := decodeOrdered(dec)
	if err != nil {
		return nil, err
	}
	v = n.walk(v, nil)
	var out bytes.Buffer
	enc := json.NewEncoder(&out)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return out.Bytes(), nil
}

func (n *goldenNormaliser) walk(v any, path []string) any {
	switch v := v.(type) {
	case orderedObject:
		for i, m := range v {
			p := append(slices.Clip(path), m.key)
			if n.varies(p) {
				v[i].val = "<" + m.key + ">"
				continue
			}
			v[i].val = n.walk(m.val, p)
		}
		return v
	case []any:
		for i := range v {
			v[i] = n.walk(v[i], append(slices.Clip(path), "*"))
		}
		return v
	case string:
		for _, d := range n.dirs {
			v = strings.ReplaceAll(v, d.path, d.placeholder)
		}
		for _, r := range n.strs {
			v = r.re.ReplaceAllString(v, r.repl)
		}
		return v
	}
	return v
}

// varies reports whether the member at path is one of n.paths.
func (n *goldenNormaliser) varies(path []string) bool {
	for _, want := range n.paths {
		if len(want) != len(path) {
			continue
		}
		match := true
		for i := range want {
			if want[i] != "*" && want[i] != path[i] {
				match = false
				break
			}
		}
		if match {
			return true
		}
	}
	return false
}

// orderedObject is a JSON object with its members in the order received.
type orderedObject []orderedMember

type orderedMember struct {
	key string
	val any
}

// decodeOrdered reads one JSON value: orderedObject, []any, string,
// json.Number, bool or nil.
func decodeOrdered(dec *json.Decoder) (any, error) {
	tok, err := dec.Token()
	if err != nil {
		return nil, err
	}
	switch tok := tok.(type) {
	case json.Delim:
		switch tok {
		case '{':
			obj := orderedObject{}
			for dec.More() {
				kt, err := dec.Token()
				if err != nil {
					return nil, err
				}
				key, ok := kt.(string)
				if !ok {
					return nil, fmt.Errorf("object key %v", kt)
				}
				val, err := decodeOrdered(dec)
				if err != nil {
					return nil, err
				}
				obj = append(obj, orderedMember{key, val})
			}
			_, err := dec.Token() // '}'
			return obj, err
		case '[':
			arr := []any{}
			for dec.More() {
				val, err := decodeOrdered(dec)
				if err != nil {
					return nil, err
				}
				arr = append(arr, val)
			}
			_, err := dec.Token() // ']'
			return arr, err
		}
		return nil, fmt.Errorf("unexpected %v", tok)
	default:
		return tok, nil
	}
}

// MarshalJSON writes the members in their order, without HTML escaping
// (an Encoder with SetIndent then lays it out).
func (o orderedObject) MarshalJSON() ([]byte, error) {
	var b bytes.Buffer
	b.WriteByte('{')
	for i, m := range o {
		if i > 0 {
			b.WriteByte(',')
		}
		if err := encodeUnescaped(&b, m.key); err != nil {
			return nil, err
		}
		b.WriteByte(':')
		if err := encodeUnescaped(&b, m.val); err != nil {
			return nil, err
		}
	}
	b.WriteByte('}')
	return b.Bytes(), nil
}

func encodeUnescaped(b *bytes.Buffer, v any) error {
	enc := json.NewEncoder(b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return err
	}
	b.Truncate(b.Len() - 1) // Encode's newline
	return nil
}

// ---- comparison ---------------------------------------------------------

func compareGolden(t *testing.T, path string, got []byte) {
	t.Helper()
	if *updateGolden {
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		t.Errorf("%s is missing; create it with: go test ./cmd/shoal-mcp -run Golden -update\ngot:\n%s", path, got)
		return
	}
	if err != nil {
		t.Fatal(err)
	}
	if bytes.Equal(want, got) {
		return
	}
	t.Errorf("%s differs from the golden file (- golden, + got):\n%s%s\nIf the change is intended: go test ./cmd/shoal-mcp -run Golden -update, and review the diff of %s.",
		path, lineDiff(string(want), string(got), 3), firstDifference(string(want), string(got)), goldenDir)
}

// firstDifference shows where two texts first differ, with a little
// context, when that is on a long line: tool texts carry whole JSON
// documents on one line, hard to compare by eye in a line diff.
func firstDifference(want, got string) string {
	i := 0
	for i < len(want) && i < len(got) && want[i] == got[i] {
		i++
	}
	for i > 0 && i < len(want) && !utf8.RuneStart(want[i]) {
		i--
	}
	lineStart := strings.LastIndexByte(want[:i], '\n') + 1
	lineEnd := strings.IndexByte(want[i:], '\n')
	if lineEnd < 0 {
		lineEnd = len(want) - i
	}
	if i+lineEnd-lineStart <= 120 {
		return ""
	}
	line := strings.Count(want[:i], "\n") + 1
	col := i - lineStart + 1
	around := func(s string) string {
		from, to := max(0, i-40), min(len(s), i+40)
		for from > 0 && !utf8.RuneStart(s[from]) {
			from--
		}
		for to < len(s) && !utf8.RuneStart(s[to]) {
			to++
		}
		return fmt.Sprintf("%q", s[from:to])
	}
	return fmt.Sprintf("first difference at golden line %d, column %d:\n  golden: …%s…\n  got:    …%s…\n", line, col, around(want), around(got))
}

// lineDiff is a unified-style diff of two texts by line, with ctx lines
// of context around each change. It uses a longest common subsequence,
// which is plenty for golden files of a few hundred lines.
func lineDiff(a, b string, ctx int) string {
	al := strings.SplitAfter(a, "\n")
	bl := strings.SplitAfter(b, "\n")
	// lcs[i][j] is the LCS length of al[i:] and bl[j:].
	lcs := make([][]int, len(al)+1)
	for i := range lcs {
		lcs[i] = make([]int, len(bl)+1)
	}
	for i := len(al) - 1; i >= 0; i-- {
		for j := len(bl) - 1; j >= 0; j-- {
			if al[i] == bl[j] {
				lcs[i][j] = lcs[i+1][j+1] + 1
			} else {
				lcs[i][j] = max(lcs[i+1][j], lcs[i][j+1])
			}
		}
	}
	type line struct {
		op   byte // ' ', '-', '+'
		text string
		a, b int // 1-based line numbers in a and b
	}
	var lines []line
	i, j := 0, 0
	for i < len(al) || j < len(bl) {
		switch {
		case i < len(al) && j < len(bl) && al[i] == bl[j]:
			lines = append(lines, line{' ', al[i], i + 1, j + 1})
			i++
			j++
		case i < len(al) && (j == len(bl) || lcs[i+1][j] >= lcs[i][j+1]):
			lines = append(lines, line{'-', al[i], i + 1, j + 1})
			i++
		default:
			lines = append(lines, line{'+', bl[j], i + 1, j + 1})
			j++
		}
	}
	var out strings.Builder
	last := -1 // index of the last line printed
	for k, l := range lines {
		if l.op == ' ' {
			continue
		}
		start := max(k-ctx, last+1)
		if start > last+1 || last < 0 {
			fmt.Fprintf(&out, "@@ golden line %d, got line %d @@\n", lines[start].a, lines[start].b)
		}
		for m := start; m <= k; m++ {
			if m > last {
				writeDiffLine(&out, lines[m].op, lines[m].text)
				last = m
			}
		}
		// Trailing context, unless another change follows within it.
		for m := k + 1; m < len(lines) && m <= k+ctx && lines[m].op == ' '; m++ {
			writeDiffLine(&out, ' ', lines[m].text)
			last = m
		}
	}
	return out.String()
}

func writeDiffLine(w io.StringWriter, op byte, text string) {
	text = strings.TrimSuffix(text, "\n")
	w.WriteString(string(op) + text + "\n")
}
