package main

// Scenarios of issue 13, through a real MCP client (mcp-go's, talking to
// the facade binary over stdio): what a model finds, follows, stops and
// keeps, with the bytes a host would feed it counted two ways — as
// JSON.stringify(structuredContent), which Claude Code hands the model,
// and as the text content.

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/mcp"
)

// resultBytes measures one tool result: JSON.stringify of its
// structuredContent (re-encoded without HTML escaping, as JavaScript
// would) and the bytes of its text.
func resultBytes(t testing.TB, res *mcp.CallToolResult) (structured, text int) {
	t.Helper()
	dec := json.NewDecoder(bytes.NewReader(res.RawStructuredContent))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		t.Fatalf("structuredContent %s: %v", res.RawStructuredContent, err)
	}
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		t.Fatal(err)
	}
	return len(bytes.TrimRight(b.Bytes(), "\n")), len(resultText(res))
}

// tally adds up what a scenario fed the model.
type tally struct {
	t                testing.TB
	name             string
	calls            int
	structured, text int
}

func (ty *tally) add(res *mcp.CallToolResult) {
	ty.t.Helper()
	s, x := resultBytes(ty.t, res)
	ty.calls++
	ty.structured += s
	ty.text += x
	if s > defaultResultBudget {
		ty.t.Errorf("%s: one result's structuredContent is %d bytes, over the %d budget", ty.name, s, defaultResultBudget)
	}
}

// report logs the tally and checks structuredContent ≤ text.
func (ty *tally) report() {
	ty.t.Helper()
	ty.t.Logf("%s: %d calls, structuredContent %d bytes, text %d bytes", ty.name, ty.calls, ty.structured, ty.text)
	if ty.structured > ty.text {
		ty.t.Errorf("%s: structuredContent %d bytes > text %d bytes", ty.name, ty.structured, ty.text)
	}
}

// structuredOf decodes a result's structuredContent.
func structuredOf(t testing.TB, res *mcp.CallToolResult) map[string]any {
	t.Helper()
	if res.IsError {
		t.Fatalf("isError: %s", resultText(res))
	}
	var m map[string]any
	if err := json.Unmarshal(res.RawStructuredContent, &m); err != nil {
		t.Fatalf("structuredContent %s: %v", res.RawStructuredContent, err)
	}
	return m
}

// TestScenarioLiveOutput: a task printing a line every 200 ms can be
// read while it runs, each read starting where the last ended.
func TestScenarioLiveOutput(t *testing.T) {
	sd := newStateDir(t)
	p := startStdio(t, sd, "agent:test")
	ty := &tally{t: t, name: "live output"}
	res := p.call("shoal_exec", map[string]any{"source": "for i in $(seq 1 20); do echo tick $i; sleep 0.2; done", "background": true})
	ty.add(res)
	m := structuredOf(t, res)
	task, _ := m["task"].(string)
	if task == "" || !strings.Contains(m["next"].(string), "/stdout?since=0") {
		t.Fatalf("background exec: %v", m)
	}
	id := strings.TrimPrefix(task, "task:")
	var got strings.Builder
	var offsets []int64
	since := int64(0)
	readsWhileRunning := 0
	ended := waitFor(waitLong, func() bool {
		res := p.call("shoal_get", map[string]any{"target": "shoal://task/" + id + "/stdout?since=" + itoa(since)})
		ty.add(res)
		m := structuredOf(t, res)
		out := m["output"].(map[string]any)
		chunk, _ := m["value"].(string)
		got.WriteString(chunk)
		next := int64(out["next"].(float64))
		if next < since {
			t.Fatalf("next %d went back from %d", next, since)
		}
		if out["state"] == "running" && chunk != "" {
			readsWhileRunning++
			offsets = append(offsets, next)
		}
		since = next
		if out["state"] != "running" {
			return true
		}
		time.Sleep(150 * time.Millisecond) // a model reads now and then, not in a busy loop
		return false
	})
	if !ended {
		t.Fatal("the task did not end")
	}
	t.Logf("offsets read while running: %v", offsets)
	if readsWhileRunning < 2 {
		t.Errorf("only %d reads with new output while the task ran", readsWhileRunning)
	}
	// What was followed is the whole output, in order.
	var want strings.Builder
	for i := 1; i <= 20; i++ {
		want.WriteString("tick " + itoa(int64(i)) + "\n")
	}
	rest := p.call("shoal_get", map[string]any{"target": "shoal://task/" + id + "/stdout?since=" + itoa(since)})
	got.WriteString(structuredOf(t, rest)["value"].(string))
	if got.String() != want.String() {
		t.Errorf("followed %q, want %q", got.String(), want.String())
	}
	ty.report()
}

func itoa(n int64) string { return strconv.FormatInt(n, 10) }

// TestScenarioCancel: the client cancels a running shoal_exec of sleep 30
// (mcp-go sends notifications/cancelled when the call's context ends);
// the process is gone and the session answers the next echo.
func TestScenarioCancel(t *testing.T) {
	sd := newStateDir(t)
	p := startStdio(t, sd, "agent:test")
	ty := &tally{t: t, name: "cancel"}
	marker := filepath.Join(t.TempDir(), "sleep.pid")
	ctx, cancel := context.WithCancel(context.Background())
	callDone := make(chan error, 1)
	go func() {
		req := mcp.CallToolRequest{}
		req.Params.Name = "shoal_exec"
		req.Params.Arguments = map[string]any{"source": "sh -c 'echo $$ > " + marker + "; exec sleep 30'"}
		_, err := p.c.CallTool(ctx, req)
		callDone <- err
	}()
	var pid int
	if !waitFor(waitLong, func() bool {
		b, err := os.ReadFile(marker)
		if err != nil {
			return false
		}
		pid, err = strconv.Atoi(strings.TrimSpace(string(b)))
		return err == nil && pid > 0
	}) {
		t.Fatal("sleep did not start")
	}
	start := time.Now()
	cancel()
	if err := <-callDone; err == nil {
		t.Fatal("the cancelled call answered")
	}
	if !waitFor(10*time.Second, func() bool { return !processAlive(pid) }) {
		t.Fatalf("sleep (pid %d) still runs 10 s after the cancel", pid)
	}
	gone := time.Since(start)
	res := p.call("shoal_exec", map[string]any{"source": "echo hi"})
	answered := time.Since(start)
	ty.add(res)
	if m := structuredOf(t, res); m["stdout"] != "hi\n" {
		t.Fatalf("echo hi after the cancel: %v", m)
	}
	t.Logf("cancel: the process was gone after %v; the next echo hi answered %v after the cancel", gone.Round(time.Millisecond), answered.Round(time.Millisecond))
	ty.report()
}

// TestShoalCancel: shoal_cancel stops a task; its process is gone.
func TestShoalCancel(t *testing.T) {
	sd := newStateDir(t)
	p := startStdio(t, sd, "agent:test")
	marker := filepath.Join(t.TempDir(), "sleep.pid")
	m, _ := p.callOK("shoal_exec", map[string]any{"source": "sh -c 'echo $$ > " + marker + "; exec sleep 30'", "background": true})
	var pid int
	if !waitFor(waitLong, func() bool {
		b, err := os.ReadFile(marker)
		if err != nil {
			return false
		}
		pid, _ = strconv.Atoi(strings.TrimSpace(string(b)))
		return pid > 0
	}) {
		t.Fatal("sleep did not start")
	}
	got, text := p.callOK("shoal_cancel", map[string]any{"target": m["task"]})
	if got["state"] != "cancelled" || !strings.Contains(text, "cancelled") {
		t.Fatalf("shoal_cancel: %v %q", got, text)
	}
	if !waitFor(10*time.Second, func() bool { return !processAlive(pid) }) {
		t.Fatalf("sleep (pid %d) still runs after shoal_cancel", pid)
	}
	// Cancelling it again is a tool error saying why.
	res := p.call("shoal_cancel", map[string]any{"target": m["task"]})
	if !res.IsError || !strings.Contains(resultText(res), "TASK_STATE") {
		t.Fatalf("second cancel: %s", resultText(res))
	}
}

// TestScenarioNeedle: one FAIL line in 200,000 lines is found in two calls
// (the run, then a server-side grep of its stored output), under 8 kB,
// and the source ran once (it counts its runs in a file).
func TestScenarioNeedle(t *testing.T) {
	sd := newStateDir(t)
	p := startStdio(t, sd, "agent:test")
	ty := &tally{t: t, name: "needle"}
	counter := filepath.Join(t.TempDir(), "runs")
	src := "echo run >> " + counter + `; awk 'BEGIN { for (i = 1; i <= 200000; i++) if (i == 123457) print "FAIL: needle at line " i; else print "ok " i }'`
	res := p.call("shoal_exec", map[string]any{"source": src})
	ty.add(res)
	m := structuredOf(t, res)
	ref := m["ref"].(string)
	if next, _ := m["next"].(string); !strings.Contains(next, `"grep"`) {
		t.Errorf("the cut output does not say how to search it: %v", m)
	}
	res = p.call("shoal_get", map[string]any{"target": ref, "path": ".stdout", "grep": "FAIL"})
	ty.add(res)
	g := structuredOf(t, res)
	v := g["value"].(map[string]any)
	rows := v["matches"].(map[string]any)["rows"].([]any)
	if v["total"] != float64(1) || len(rows) != 1 || rows[0].([]any)[0] != float64(123457) || !strings.Contains(rows[0].([]any)[1].(string), "FAIL: needle") {
		t.Fatalf("grep: %v", v)
	}
	runs, _ := os.ReadFile(counter)
	if n := strings.Count(string(runs), "run"); n != 1 {
		t.Errorf("the source ran %d times", n)
	}
	ty.report()
	if ty.calls > 2 || ty.structured > 8000 || ty.text > 8000 {
		t.Errorf("needle: %d calls, %d bytes structured, %d text; want ≤ 2 calls and ≤ 8 kB", ty.calls, ty.structured, ty.text)
	}
}

// TestScenarioTail: the last 3 lines of stderr of a 5 MB output, in one
// call after the run.
func TestScenarioTail(t *testing.T) {
	sd := newStateDir(t)
	p := startStdio(t, sd, "agent:test")
	ty := &tally{t: t, name: "tail of 5 MB stderr"}
	src := `awk 'BEGIN { pad = sprintf("%40s", ""); for (i = 1; i <= 100000; i++) print "warning " i pad }' >&2; echo done`
	m := structuredOf(t, p.call("shoal_exec", map[string]any{"source": src}))
	ref := m["ref"].(string)
	res := p.call("shoal_get", map[string]any{"target": ref, "path": ".stderr", "grep": "^", "slice": "-3.."})
	ty.add(res)
	v := structuredOf(t, res)["value"].(map[string]any)
	rows := v["matches"].(map[string]any)["rows"].([]any)
	if len(rows) != 3 || v["total"] != float64(100000) {
		t.Fatalf("tail: %v", v)
	}
	for i, r := range rows {
		want := "warning " + itoa(int64(99998+i))
		if cells := r.([]any); cells[0] != float64(99998+i) || !strings.HasPrefix(cells[1].(string), want) {
			t.Fatalf("line %d: %v, want %s", i, cells, want)
		}
	}
	ty.report()
}

// TestScenarioRestart: after the kernel is killed and the facade starts a
// new one, the old out:N reads its old value, a run cut short says so, and
// new runs get new numbers.
func TestScenarioRestart(t *testing.T) {
	sd := newStateDir(t)
	p := startStdio(t, sd, "agent:test")
	ty := &tally{t: t, name: "refs after a restart"}
	first, _ := p.callOK("shoal_exec", map[string]any{"source": "echo before the restart"})
	ref := first["ref"].(string)
	probe := sd.dial(t, "human:test", nil)
	pid := sd.status(t, probe).PID
	probe.Close()
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	if !waitFor(waitLong, func() bool { return !processAlive(pid) }) {
		t.Fatal("the kernel did not die")
	}
	// The next call reconnects, starting a new kernel.
	var res *mcp.CallToolResult
	if !waitFor(waitLong, func() bool {
		res = p.call("shoal_get", map[string]any{"target": ref, "path": ".stdout"})
		return !res.IsError
	}) {
		t.Fatalf("%s after the restart: %s", ref, resultText(res))
	}
	ty.add(res)
	if v := structuredOf(t, res)["value"]; v != "before the restart\n" {
		t.Fatalf("%s after the restart = %v", ref, v)
	}
	res = p.call("shoal_exec", map[string]any{"source": "echo after"})
	ty.add(res)
	second := structuredOf(t, res)
	n1, _ := strconv.Atoi(strings.TrimPrefix(ref, "out:"))
	n2, _ := strconv.Atoi(strings.TrimPrefix(second["ref"].(string), "out:"))
	if n2 <= n1 {
		t.Fatalf("a new run after the restart got %s, not after %s", second["ref"], ref)
	}
	// A number never handed out is an error, not another value.
	res = p.call("shoal_get", map[string]any{"target": "out:" + itoa(int64(n2+5))})
	if !res.IsError || !strings.Contains(resultText(res), "NOT_FOUND") {
		t.Fatalf("unknown ref: %s", resultText(res))
	}
	ty.report()
}

// TestScenarioProgress: a call with a progressToken gets
// notifications/progress while its execution runs: growing progress, and
// a message with the output so far and its last line.
func TestScenarioProgress(t *testing.T) {
	sd := newStateDir(t)
	p := startStdio(t, sd, "agent:test")
	req := mcp.CallToolRequest{}
	req.Params.Name = "shoal_exec"
	req.Params.Arguments = map[string]any{"source": "for i in $(seq 1 10); do echo step $i; sleep 0.25; done"}
	req.Params.Meta = &mcp.Meta{ProgressToken: "tok-1"}
	ctx, cancel := p.ctx()
	defer cancel()
	res, err := p.c.CallTool(ctx, req)
	if err != nil || res.IsError {
		t.Fatalf("exec: %v %v", err, res)
	}
	var got []map[string]any
	for {
		select {
		case n := <-p.notes:
			if n.Method == string(mcp.MethodNotificationProgress) {
				b, _ := json.Marshal(n.Params)
				var m map[string]any
				json.Unmarshal(b, &m)
				got = append(got, m)
			}
			continue
		default:
		}
		break
	}
	if len(got) == 0 {
		t.Fatal("no notifications/progress for a 2.5 s execution")
	}
	last := 0.0
	for _, m := range got {
		pr, _ := m["progress"].(float64)
		if m["progressToken"] != "tok-1" || pr <= last {
			t.Fatalf("progress %v after %v", m, last)
		}
		last = pr
	}
	msg, _ := got[len(got)-1]["message"].(string)
	if !strings.Contains(msg, "last: step ") || !strings.Contains(msg, "lines") {
		t.Errorf("progress message %q", msg)
	}
	t.Logf("%d progress notifications over a 2.5 s run; last: %q", len(got), msg)
}
