package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/mcp"

	"github.com/shoal-sh/shoal/providers/pty"
)

// nextLog waits for a notifications/message whose data contains want.
func (p *mcpPeer) nextLog(want string) map[string]any {
	p.t.Helper()
	deadline := time.After(waitLong)
	for {
		select {
		case n := <-p.notes:
			if n.Method != string(mcp.MethodNotificationMessage) {
				continue
			}
			b, _ := json.Marshal(n.Params)
			var m map[string]any
			_ = json.Unmarshal(b, &m)
			if strings.Contains(fmt.Sprint(m["data"]), want) {
				return m
			}
		case <-deadline:
			p.t.Fatalf("no notifications/message with %q\nfacade stderr:\n%s", want, p.stderr.String())
		}
	}
}

// TestLogging: logging/setLevel is accepted (a bad level is not), and the
// facade's warnings reach the client as notifications/message: here the
// subscription its kernel took down.
func TestLogging(t *testing.T) {
	sd := newStateDir(t)
	p := startStdio(t, sd, "agent:log")
	if _, e := p.raw("logging/setLevel", map[string]any{"level": "loud"}); e == nil {
		t.Error("logging/setLevel accepted the level loud")
	}
	if _, e := p.raw("logging/setLevel", map[string]any{"level": "info"}); e != nil {
		t.Fatalf("logging/setLevel info: %+v", e)
	}
	if _, e := p.raw("resources/subscribe", map[string]any{"uri": "shoal://events/journal"}); e != nil {
		t.Fatalf("subscribe: %+v", e)
	}
	sd.stopKernel(t)
	m := p.nextLog("subscription ended with its kernel connection")
	if m["level"] != "warning" || m["logger"] != "shoal-mcp" {
		t.Errorf("message %v", m)
	}
	// Above the level the client chose, nothing is sent.
	if _, e := p.raw("logging/setLevel", map[string]any{"level": "error"}); e != nil {
		t.Fatal(e)
	}
	if _, e := p.raw("resources/subscribe", map[string]any{"uri": "shoal://events/journal"}); e != nil {
		t.Fatalf("subscribe again: %+v", e)
	}
	sd.stopKernel(t)
	p.callOK("shoal_exec", map[string]any{"source": "true"}) // a round trip after the warning would have been sent
	for {
		select {
		case n := <-p.notes:
			if n.Method == string(mcp.MethodNotificationMessage) {
				t.Errorf("a warning reached a client at level error: %v", n.Params)
			}
			continue
		default:
		}
		break
	}
}

// TestCompletion: completion/complete fills template arguments from the
// kernel's state: out numbers, task ids, plan refs, channels, views.
func TestCompletion(t *testing.T) {
	sd := newStateDir(t)
	gate := filepath.Join(sd.dir, "gate")
	t.Cleanup(func() { os.WriteFile(gate, nil, 0o600) })
	p := startStdio(t, sd, "agent:complete")
	run, _ := p.callOK("shoal_exec", map[string]any{"source": "echo one"})
	task, _ := p.callOK("shoal_exec", map[string]any{"source": fmt.Sprintf("while [ ! -e %s ]; do sleep 0.02; done", gate), "background": true})
	plan, _ := p.callOK("shoal_plan", map[string]any{"source": "rm -rf build"})
	outN := strings.TrimPrefix(run["ref"].(string), "out:")
	taskID := strings.TrimPrefix(task["task"].(string), "task:")
	planHex := strings.TrimPrefix(plan["ref"].(string), "plan:")

	complete := func(uri, arg, value string) []string {
		t.Helper()
		raw, e := p.raw("completion/complete", map[string]any{
			"ref": map[string]any{"type": "ref/resource", "uri": uri}, "argument": map[string]any{"name": arg, "value": value}})
		if e != nil {
			t.Fatalf("complete %s %s: %+v", uri, arg, e)
		}
		var r struct {
			Completion struct {
				Values []string `json:"values"`
			} `json:"completion"`
		}
		if err := json.Unmarshal(raw, &r); err != nil {
			t.Fatal(err)
		}
		return r.Completion.Values
	}
	for _, tc := range []struct {
		uri, arg, value, want string
	}{
		{"shoal://out/{n}{?path,slice,grep,context,format}", "n", "", outN},
		{"shoal://task/{id}", "id", "", taskID},
		{"shoal://plan/{ref}", "ref", planHex[:3], planHex},
		{"shoal://events/{channel}{?since,limit}", "channel", "task.", "task." + taskID},
		{"shoal://events/{channel}{?since,limit}", "channel", "appr", "approval"},
		{"shoal://session/{view}", "view", "r", "reef"},
	} {
		if got := complete(tc.uri, tc.arg, tc.value); !slices.Contains(got, tc.want) {
			t.Errorf("complete %s %s=%q: %v; want %s among them", tc.uri, tc.arg, tc.value, got, tc.want)
		}
	}
	if got := complete("shoal://session/{view}", "view", "zz"); len(got) != 0 {
		t.Errorf("complete view zz: %v; want none", got)
	}
}

// TestPTYSchemaIsBehaviour: shoal_pty_open's schema states the defaults
// and bounds the kernel applies, not others: in its constants and
// through a real kernel.
func TestPTYSchemaIsBehaviour(t *testing.T) {
	var f Facade
	for _, def := range f.toolDefs() {
		if def.name != "shoal_pty_open" {
			continue
		}
		var schema struct {
			Properties map[string]struct {
				Minimum, Maximum, Default int
			} `json:"properties"`
		}
		if err := json.Unmarshal([]byte(def.input), &schema); err != nil {
			t.Fatal(err)
		}
		cols, rows := schema.Properties["cols"], schema.Properties["rows"]
		if cols.Default != pty.DefaultCols || rows.Default != pty.DefaultRows {
			t.Errorf("schema defaults %dx%d; the kernel opens %dx%d", cols.Default, rows.Default, pty.DefaultCols, pty.DefaultRows)
		}
		if cols.Minimum != pty.MinSize || rows.Minimum != pty.MinSize || cols.Maximum != pty.MaxCols || rows.Maximum != pty.MaxRows {
			t.Errorf("schema bounds cols %d..%d rows %d..%d; the kernel takes %d..%d and %d..%d",
				cols.Minimum, cols.Maximum, rows.Minimum, rows.Maximum, pty.MinSize, pty.MaxCols, pty.MinSize, pty.MaxRows)
		}
		// And through a real kernel: no size opens the schema's default,
		// the schema's bounds are accepted, one past them refused.
		p := startStdio(t, newStateDir(t), "agent:pty")
		open := func(args map[string]any) *mcp.CallToolResult {
			t.Helper()
			args["command"] = "cat"
			res := p.call("shoal_pty_open", args)
			if !res.IsError {
				m := res.StructuredContent.(map[string]any)
				t.Cleanup(func() { p.call("shoal_pty_close", map[string]any{"pty": m["pty"]}) })
			}
			return res
		}
		res := open(map[string]any{})
		if m, _ := res.StructuredContent.(map[string]any); res.IsError || fmt.Sprint(m["cols"], "x", m["rows"]) != fmt.Sprint(cols.Default, "x", rows.Default) {
			t.Errorf("shoal_pty_open without a size: %v; the schema says %dx%d", res.StructuredContent, cols.Default, rows.Default)
		}
		for _, size := range [][2]int{{cols.Minimum, rows.Minimum}, {cols.Maximum, rows.Maximum}} {
			if res := open(map[string]any{"cols": size[0], "rows": size[1]}); res.IsError {
				t.Errorf("shoal_pty_open %dx%d, inside the schema's bounds: %s", size[0], size[1], resultText(res))
			}
		}
		for _, size := range [][2]int{{cols.Minimum - 1, rows.Default}, {cols.Default, rows.Maximum + 1}} {
			if res := open(map[string]any{"cols": size[0], "rows": size[1]}); !res.IsError {
				t.Errorf("shoal_pty_open %dx%d, outside the schema's bounds, was accepted", size[0], size[1])
			}
		}
		return
	}
	t.Fatal("no shoal_pty_open")
}

// TestReefViewDocumented: every field shoal://session/reef answers with,
// and every field of its tools, is named in docs/mcp.md.
func TestReefViewDocumented(t *testing.T) {
	sd := newStateDir(t)
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "reef.toml"), []byte("[tools]\nsh = \"*\"\nnope-not-here = \"*\"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	p := startIn(t, sd, dir, nil)
	env := p.read("shoal://session/reef")
	var view map[string]any
	if err := json.Unmarshal(env.StructuredContent, &view); err != nil {
		t.Fatalf("%s: %v", env.StructuredContent, err)
	}
	docs, err := os.ReadFile("../../docs/mcp.md")
	if err != nil {
		t.Fatal(err)
	}
	fields := map[string]bool{}
	collect := func(v any) {
		if m, ok := v.(map[string]any); ok {
			for k := range m {
				fields[k] = true
			}
		}
	}
	collect(unwrapTyped(view))
	if tools, ok := unwrapTyped(view).(map[string]any)["tools"].([]any); ok {
		for _, tool := range tools {
			collect(unwrapTyped(tool))
		}
	}
	if !fields["tools"] || !fields["name"] {
		t.Fatalf("unexpected reef view %s", env.StructuredContent)
	}
	for f := range fields {
		if !strings.Contains(string(docs), "`"+f+"`") {
			t.Errorf("docs/mcp.md does not name the reef view's field %q", f)
		}
	}
}

// unwrapTyped removes the typed wire form's {"$": tag, "v": …} wrapping.
func unwrapTyped(v any) any {
	m, ok := v.(map[string]any)
	if !ok {
		return v
	}
	if inner, ok := m["v"]; ok && m["$"] != nil {
		return unwrapTyped(inner)
	}
	out := map[string]any{}
	for k, x := range m {
		out[k] = unwrapTyped(x)
	}
	return out
}

// TestConfinementNotice: a run the OS confinement refused something tells
// the client as a notifications/message warning (logger shoal-kernel)
// naming the run and the refused path, beside the tool result's confined
// note; at level error the client does not get it.
func TestConfinementNotice(t *testing.T) {
	sd := newStateDir(t)
	p := startHost(t, sd, t.TempDir(), hostClient{})
	token := filepath.Join(sd.dir, "token")
	m, _ := p.callOK("shoal_exec", map[string]any{"source": "read x < " + token})
	if m["confined"] == nil {
		t.Skipf("SKIP: sessions are not confined on this machine (no Landlock), so nothing is refused: %v", m)
	}
	note := p.nextLog("refused: " + token)
	if note["level"] != "warning" || note["logger"] != "shoal-kernel" || !strings.HasPrefix(fmt.Sprint(note["data"]), m["ref"].(string)+": the OS confinement refused") {
		t.Errorf("notice %v for %v", note, m)
	}
	if _, e := p.raw("logging/setLevel", map[string]any{"level": "error"}); e != nil {
		t.Fatal(e)
	}
	if m, _ := p.callOK("shoal_exec", map[string]any{"source": "read x < " + token}); m["confined"] == nil {
		t.Fatalf("the second run was not refused: %v", m)
	}
	p.callOK("shoal_exec", map[string]any{"source": "true"}) // a round trip after the notice would have been sent
	for more := true; more; {
		select {
		case n := <-p.notes:
			if n.Method == string(mcp.MethodNotificationMessage) {
				t.Errorf("a warning reached a client at level error: %v", n.Params)
			}
		default:
			more = false
		}
	}
}
