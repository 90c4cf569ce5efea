package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/mark3labs/mcp-go/mcp"
)

var toolNames = []string{"shoal_exec", "shoal_get", "shoal_plan", "shoal_apply", "shoal_pty_open",
	"shoal_pty_write", "shoal_pty_read", "shoal_pty_list", "shoal_pty_close", "shoal_cancel", "shoal_wait"}

func TestHandshake(t *testing.T) {
	sd := newStateDir(t)
	p := startStdio(t, sd, "agent:test")

	// The client probes the stateless protocol first; the facade answers
	// with the handshake revision, which has resources/subscribe.
	if v := p.c.ProtocolVersion(); v != mcp.LATEST_LEGACY_PROTOCOL_VERSION {
		t.Errorf("protocol version %q, want %q", v, mcp.LATEST_LEGACY_PROTOCOL_VERSION)
	}
	caps := p.c.GetServerCapabilities()
	if caps.Resources == nil || !caps.Resources.Subscribe || caps.Resources.ListChanged {
		t.Errorf("resources capability %+v, want subscribe:true listChanged:false", caps.Resources)
	}
	if caps.Tools == nil {
		t.Error("tools capability missing")
	}

	res, rerr := p.raw("tools/list", map[string]any{})
	if rerr != nil {
		t.Fatal(rerr.Message)
	}
	var list struct {
		Tools []struct {
			Name         string          `json:"name"`
			Description  string          `json:"description"`
			InputSchema  json.RawMessage `json:"inputSchema"`
			OutputSchema json.RawMessage `json:"outputSchema"`
		} `json:"tools"`
	}
	if err := json.Unmarshal(res, &list); err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, tool := range list.Tools {
		names = append(names, tool.Name)
		if len(tool.Description) < 60 {
			t.Errorf("%s: description too thin for a model: %q", tool.Name, tool.Description)
		}
		for what, schema := range map[string]json.RawMessage{"input": tool.InputSchema, "output": tool.OutputSchema} {
			var s struct {
				Type string `json:"type"`
			}
			if err := json.Unmarshal(schema, &s); err != nil || s.Type != "object" {
				t.Errorf("%s: %s schema %s is not an object schema", tool.Name, what, schema)
			}
		}
		if tool.Name == "shoal_get" && strings.Contains(string(tool.InputSchema), `"format"`) {
			t.Error("shoal_get must not offer format (M1)")
		}
	}
	slices.Sort(names)
	want := slices.Clone(toolNames)
	slices.Sort(want)
	if !slices.Equal(names, want) {
		t.Errorf("tools %v, want %v", names, want)
	}

	ctx, cancel := p.ctx()
	defer cancel()
	//lint:ignore SA1019 ping is still part of the protocol versions the facade negotiates
	if err := p.c.Ping(ctx); err != nil {
		t.Errorf("ping: %v", err)
	}
}

func TestExecAndGet(t *testing.T) {
	sd := newStateDir(t)
	p := startStdio(t, sd, "agent:test")

	m, text := p.callOK("shoal_exec", map[string]any{"source": "echo hi"})
	ref, _ := m["ref"].(string)
	if !strings.HasPrefix(ref, "out:") || m["uri"] != "shoal://out/"+strings.TrimPrefix(ref, "out:") {
		t.Errorf("ref %v uri %v", m["ref"], m["uri"])
	}
	if m["ok"] != true || m["exit"] != float64(0) {
		t.Errorf("ok %v exit %v, want true 0", m["ok"], m["exit"])
	}
	if !strings.Contains(text, "hi") || !strings.Contains(text, ref) {
		t.Errorf("text %q lacks the ref or the output", text)
	}

	// A failing command is a normal result.
	res := p.call("shoal_exec", map[string]any{"source": "echo oops >&2; exit 3"})
	if res.IsError {
		t.Fatalf("exit 3 must not be isError: %s", resultText(res))
	}
	var failed map[string]any
	json.Unmarshal(res.RawStructuredContent, &failed)
	if failed["ok"] != false || failed["exit"] != float64(3) {
		t.Errorf("exit 3: ok %v exit %v", failed["ok"], failed["exit"])
	}

	// A structured value, then drilling into it without re-running.
	m, _ = p.callOK("shoal_exec", map[string]any{"source": `printf '{"items":["a","b","c"]}' | from json`})
	ref = m["ref"].(string)
	got, _ := p.callOK("shoal_get", map[string]any{"target": ref, "path": ".items[1]"})
	if v, _ := json.Marshal(got["value"]); string(v) != `"b"` {
		t.Errorf("path .items[1] = %s", v)
	}
	// typed asks for the typed wire form.
	got, _ = p.callOK("shoal_get", map[string]any{"target": ref, "path": ".items[1]", "typed": true})
	if v, _ := json.Marshal(got["value"]); string(v) != `{"$":"str","v":"b"}` {
		t.Errorf("typed .items[1] = %s", v)
	}
	if got["uri"] == nil {
		t.Error("shoal_get result lacks uri")
	}
	got, _ = p.callOK("shoal_get", map[string]any{"target": "shoal://out/" + strings.TrimPrefix(ref, "out:"), "path": ".items", "slice": "1..3"})
	if b, _ := json.Marshal(got["value"]); string(b) != `["b","c"]` {
		t.Errorf("slice 1..3 = %s", b)
	}
	got, _ = p.callOK("shoal_get", map[string]any{"target": ref, "path": ".items", "slice": "-1.."})
	if b, _ := json.Marshal(got["value"]); string(b) != `["c"]` {
		t.Errorf("slice -1.. = %s", b)
	}
	// a.. (to the end), as values.md documents and the URI accepts.
	got, _ = p.callOK("shoal_get", map[string]any{"target": ref, "path": ".items", "slice": "1.."})
	if b, _ := json.Marshal(got["value"]); string(b) != `["b","c"]` {
		t.Errorf("slice 1.. = %s", b)
	}
	if uri := p.read("shoal://out/" + strings.TrimPrefix(ref, "out:") + "?path=.items&slice=1.."); string(uri.StructuredContent) != `{"$":"list","v":[{"$":"str","v":"b"},{"$":"str","v":"c"}]}` {
		t.Errorf("URI slice 1.. = %s", uri.StructuredContent)
	}
	got, _ = p.callOK("shoal_get", map[string]any{"target": ref, "path": ".items", "elide": map[string]any{"max_items": 1}})
	if got["elided"] != true || got["next"] != `shoal_get {"target":"`+ref+`","path":".items","slice":"1..2"} shows the next part` {
		t.Errorf("elide max_items 1 on 3 items: elided = %v next %v (%v)", got["elided"], got["next"], got["value"])
	}

	// Reads that cannot be answered are tool errors a model can act on.
	for _, tc := range []struct {
		args map[string]any
		want string
	}{
		{map[string]any{"target": ref, "path": ".nope"}, "BAD_PATH (-32005)"},
		{map[string]any{"target": "out:9999"}, "kernel error:"},
		{map[string]any{"target": ref, "slice": "5..2"}, "kernel error:"},
	} {
		res := p.call("shoal_get", tc.args)
		if !res.IsError || !strings.Contains(resultText(res), tc.want) {
			t.Errorf("shoal_get %v: isError %v text %q, want %q", tc.args, res.IsError, resultText(res), tc.want)
		}
	}
	// Bad arguments too (schema validation), not protocol errors.
	res = p.call("shoal_exec", map[string]any{"source": 42})
	if !res.IsError {
		t.Errorf("shoal_exec with a number for source: want isError, got %s", resultText(res))
	}
}

func TestPolicyPlanApply(t *testing.T) {
	sd := newStateDir(t)
	p := startStdio(t, sd, "agent:test")
	target := filepath.Join(sd.dir, "victim")
	if err := os.MkdirAll(target, 0o700); err != nil {
		t.Fatal(err)
	}
	risky := "rm -rf " + target

	res := p.call("shoal_exec", map[string]any{"source": risky})
	text := resultText(res)
	if !res.IsError || !strings.Contains(text, "POLICY_REFUSED") || !strings.Contains(text, "shoal_plan") {
		t.Fatalf("risky exec: isError %v text %q; want a refusal that points at shoal_plan", res.IsError, text)
	}
	if _, err := os.Stat(target); err != nil {
		t.Fatalf("refused source ran: %v", err)
	}

	plan, text := p.callOK("shoal_plan", map[string]any{"source": risky})
	ref, _ := plan["ref"].(string)
	if !strings.HasPrefix(ref, "plan:") || plan["verdict"] != "ask" {
		t.Fatalf("plan %v", plan)
	}
	for _, k := range []string{"effects", "reversible", "approval"} {
		if _, ok := plan[k]; !ok {
			t.Errorf("plan lacks %s", k)
		}
	}
	if !strings.Contains(text, ref) {
		t.Errorf("plan text %q lacks its ref", text)
	}
	res = p.call("shoal_apply", map[string]any{"plan": ref})
	if !res.IsError || !strings.Contains(resultText(res), "kernel error:") {
		t.Errorf("apply of an unapproved ask plan: isError %v text %q", res.IsError, resultText(res))
	}

	plan, _ = p.callOK("shoal_plan", map[string]any{"source": "echo planned"})
	if plan["verdict"] != "allow" {
		t.Fatalf("echo verdict %v", plan["verdict"])
	}
	m, text := p.callOK("shoal_apply", map[string]any{"plan": plan["ref"]})
	if m["ok"] != true || !strings.Contains(text, "planned") {
		t.Errorf("apply: %v %q", m, text)
	}
}

func TestTasksAndWait(t *testing.T) {
	sd := newStateDir(t)
	p := startStdio(t, sd, "agent:test")
	gate := filepath.Join(sd.dir, "gate")

	// A background run that ends only when the test says so.
	src := fmt.Sprintf("while [ ! -e %s ]; do sleep 0.02; done; echo released", gate)
	m, text := p.callOK("shoal_exec", map[string]any{"source": src, "background": true})
	task, _ := m["task"].(string)
	if !strings.HasPrefix(task, "task:") || m["ok"] != nil || m["exit"] != nil {
		t.Fatalf("background exec: task %v ok %v exit %v", m["task"], m["ok"], m["exit"])
	}
	if !strings.Contains(text, "shoal_wait") {
		t.Errorf("task text %q does not say how to wait", text)
	}
	w, _ := p.callOK("shoal_wait", map[string]any{"target": task, "timeout_ms": 50})
	if w["satisfied"] != false || w["timed_out"] != true {
		t.Errorf("wait on a gated task: %v", w)
	}
	if err := os.WriteFile(gate, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	w, _ = p.callOK("shoal_wait", map[string]any{"target": "shoal://task/" + strings.TrimPrefix(task, "task:"), "timeout_ms": 60000})
	if w["satisfied"] != true {
		t.Fatalf("wait: %v", w)
	}
	got, _ := p.callOK("shoal_get", map[string]any{"target": m["ref"], "path": ".stdout"})
	if v, _ := json.Marshal(got["value"]); !strings.Contains(string(v), "released") {
		t.Errorf("task value stdout = %s", v)
	}

	// Past timeout_ms the reply is a task, and the run goes on.
	gate2 := gate + "2"
	m, _ = p.callOK("shoal_exec", map[string]any{"source": fmt.Sprintf("while [ ! -e %s ]; do sleep 0.02; done", gate2), "timeout_ms": 20})
	if task, _ := m["task"].(string); !strings.HasPrefix(task, "task:") {
		t.Fatalf("timeout_ms 20: no task in %v", m)
	}
	os.WriteFile(gate2, nil, 0o600)
	if w, _ := p.callOK("shoal_wait", map[string]any{"target": m["task"], "timeout_ms": 60000}); w["satisfied"] != true {
		t.Errorf("wait 2: %v", w)
	}

	// Waiting on an event channel.
	p.callOK("shoal_exec", map[string]any{"source": `emit user.waited '{"n":1}'`})
	if w, _ := p.callOK("shoal_wait", map[string]any{"target": "shoal://events/user.waited", "until": 0, "timeout_ms": 60000}); w["satisfied"] != true {
		t.Errorf("wait on channel: %v", w)
	}
}

func TestPTYTools(t *testing.T) {
	sd := newStateDir(t)
	p := startStdio(t, sd, "agent:test")

	scr, _ := p.callOK("shoal_pty_open", map[string]any{"command": "cat", "cols": 40, "rows": 10})
	pty, _ := scr["pty"].(string)
	if !strings.HasPrefix(pty, "pty:") {
		t.Fatalf("pty_open: %v", scr)
	}
	if scr["cols"] != float64(40) || scr["rows"] != float64(10) {
		t.Errorf("size %vx%v", scr["cols"], scr["rows"])
	}
	p.callOK("shoal_pty_write", map[string]any{"pty": pty, "input": "hello pty\n"})
	if w, _ := p.callOK("shoal_wait", map[string]any{"target": pty, "pattern": "hello pty", "timeout_ms": 60000}); w["satisfied"] != true {
		t.Fatalf("wait for echo: %v", w)
	}
	scr, text := p.callOK("shoal_pty_read", map[string]any{"pty": pty})
	if !strings.Contains(text, "hello pty") || scr["alive"] != true {
		t.Errorf("read: %q alive %v", text, scr["alive"])
	}
	p.callOK("shoal_pty_write", map[string]any{"pty": pty, "input": "", "keys": []string{"Ctrl-C"}})

	list, text := p.callOK("shoal_pty_list", map[string]any{})
	if ptys, _ := list["ptys"].([]any); len(ptys) != 1 || !strings.Contains(text, pty) {
		t.Errorf("list: %v %q", list, text)
	}
	closed, _ := p.callOK("shoal_pty_close", map[string]any{"pty": pty})
	if closed["pty"] != pty {
		t.Errorf("close: %v", closed)
	}
	res := p.call("shoal_pty_read", map[string]any{"pty": pty})
	if !res.IsError || !strings.Contains(resultText(res), "UNKNOWN_PTY") || !strings.Contains(resultText(res), "shoal_pty_list") {
		t.Errorf("read of a closed pty: isError %v %q", res.IsError, resultText(res))
	}
	if list, _ := p.callOK("shoal_pty_list", map[string]any{}); len(list["ptys"].([]any)) != 0 {
		t.Errorf("list after close: %v", list)
	}
}
