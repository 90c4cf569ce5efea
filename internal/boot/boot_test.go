package boot_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/shoal-sh/shoal/core"
	"github.com/shoal-sh/shoal/core/kernel"
	"github.com/shoal-sh/shoal/core/rpc"
	"github.com/shoal-sh/shoal/internal/testkernel"
	"github.com/shoal-sh/shoal/sdk/client"
)

func shortDir(t testing.TB) string { return testkernel.ShortDir(t) }

// startKernel runs a full kernel (every built-in family) in process.
func startKernel(t testing.TB, dir string) *kernel.Kernel {
	t.Helper()
	return testkernel.Start(t, kernel.Options{StateDir: dir})
}

func attach(t testing.TB, dir string, o client.Options) *client.Client {
	t.Helper()
	return testkernel.Attach(t, dir, o)
}

func exec1(t *testing.T, c *client.Client, src string, o client.ExecOptions) *client.ExecReply {
	t.Helper()
	r, err := c.Exec(context.Background(), src, o)
	if err != nil {
		t.Fatalf("exec %q: %v", src, err)
	}
	return r
}

func structured(t *testing.T, c *client.Client, target string) string {
	t.Helper()
	r, err := c.Read(context.Background(), target)
	if err != nil {
		t.Fatalf("read %s: %v", target, err)
	}
	return string(r.StructuredContent)
}

func TestExecTranscriptAndViews(t *testing.T) {
	dir := shortDir(t)
	startKernel(t, dir)
	c := attach(t, dir, client.Options{Principal: "agent:e2e"})
	work := t.TempDir()
	os.WriteFile(filepath.Join(work, "data.json"), []byte(`{"rows":[{"name":"a","size":1},{"name":"b","size":2}]}`), 0o644)

	r := exec1(t, c, "cd "+work+" && X=41", client.ExecOptions{})
	if r.Ref != "out:1" || r.OK == nil || !*r.OK || r.State != "completed" {
		t.Fatalf("first exec: %+v", r)
	}
	// cwd and variables persist; the value of a builtin is typed.
	r = exec1(t, c, "open data.json", client.ExecOptions{})
	if got := structured(t, c, r.URI+"?path=.rows[1].name"); got != `{"$":"str","v":"b"}` {
		t.Errorf("path read = %s", got)
	}
	r = exec1(t, c, "echo $((X+1))", client.ExecOptions{})
	if got := structured(t, c, r.URI+"?path=.stdout"); !strings.Contains(got, `"42\n"`) {
		t.Errorf("stdout = %s", got)
	}
	if got := structured(t, c, "shoal://session/cwd"); !strings.Contains(got, work) {
		t.Errorf("live cwd = %s; want %s", got, work)
	}
	r = exec1(t, c, "exit 7", client.ExecOptions{})
	if r.OK == nil || *r.OK || *r.Exit != 7 {
		t.Errorf("exit 7: %+v", r)
	}
	// The session lives on after exit.
	r = exec1(t, c, "pwd", client.ExecOptions{})
	if !strings.Contains(r.PreviewText, work) {
		t.Errorf("after exit: %q", r.PreviewText)
	}
	// The six roots, in order.
	var list struct {
		Resources []struct{ URI string } `json:"resources"`
	}
	if err := c.Call(context.Background(), "resources.list", nil, &list); err != nil {
		t.Fatal(err)
	}
	want := []string{"shoal://session/cwd", "shoal://session/env", "shoal://session/reef", "shoal://jobs", "shoal://journal", "shoal://pty"}
	for i, w := range want {
		if i >= len(list.Resources) || list.Resources[i].URI != w {
			t.Fatalf("resources %v; want roots %v first", list.Resources, want)
		}
	}
	var tpl struct {
		ResourceTemplates []struct{ URITemplate string } `json:"resourceTemplates"`
	}
	if err := c.Call(context.Background(), "resources.templates", nil, &tpl); err != nil {
		t.Fatal(err)
	}
	wantT := []string{"shoal://out/{n}{?path,slice,grep,context,format}", "shoal://val/{hash}{?path,slice,grep,context,format}", "shoal://task/{id}",
		"shoal://task/{id}/out{?path,slice,grep,context,format}", "shoal://plan/{ref}", "shoal://pty/{id}", "shoal://session/{view}",
		"shoal://journal{?principal,ok,head,since,until,effects,limit}", "shoal://events/{channel}{?since,limit}"}
	if len(tpl.ResourceTemplates) != len(wantT) {
		t.Fatalf("templates %v", tpl.ResourceTemplates)
	}
	for i, w := range wantT {
		if tpl.ResourceTemplates[i].URITemplate != w {
			t.Errorf("template %d = %s; want %s", i, tpl.ResourceTemplates[i].URITemplate, w)
		}
	}
	if _, err := c.Read(context.Background(), "shoal://session/nope"); client.Code(err) != int(rpc.NotFound) || !strings.Contains(err.Error(), "cwd, env and reef") {
		t.Errorf("unknown view: %v", err)
	}
}

func TestTasks(t *testing.T) {
	dir := shortDir(t)
	startKernel(t, dir)
	c := attach(t, dir, client.Options{Principal: "agent:tasks"})
	ctx := context.Background()

	// timeout → task, not killed: it finishes and its value is captured.
	r := exec1(t, c, "sleep 0.3; echo done", client.ExecOptions{TimeoutMS: 50})
	if r.Task == "" || r.State != "running" || r.OK != nil {
		t.Fatalf("timeout did not make a task: %+v", r)
	}
	// While running, /out is the task record itself.
	if got := structured(t, c, r.TaskURI+"/out"); !strings.Contains(got, `"state"`) {
		t.Errorf("running /out = %s", got)
	}
	var wait map[string]any
	if err := c.Call(ctx, "wait", map[string]any{"target": r.Task, "timeout_ms": 20000}, &wait); err != nil || wait["satisfied"] != true {
		t.Fatalf("wait: %v %v", wait, err)
	}
	if got := structured(t, c, r.TaskURI+"/out?path=.stdout"); got != `{"$":"str","v":"done\n"}` {
		t.Errorf("finished /out = %s", got)
	}
	// State changes are on task.{id}, in order.
	page, err := c.Events(ctx, "task."+strings.TrimPrefix(r.Task, "task:"), nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	var states []string
	for _, ev := range page.Events {
		var p struct{ State string }
		json.Unmarshal(ev.Payload, &p)
		states = append(states, p.State)
	}
	if strings.Join(states, ",") != "running,completed" {
		t.Errorf("task events %v; want running then completed", states)
	}

	// background + cancel kills the whole process group.
	pidFile := filepath.Join(t.TempDir(), "pid")
	r = exec1(t, c, "sh -c 'echo $$ > "+pidFile+"; sleep 100' & sleep 100", client.ExecOptions{Background: true})
	if r.Task == "" {
		t.Fatalf("background: %+v", r)
	}
	var pid int
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		if b, err := os.ReadFile(pidFile); err == nil && len(b) > 1 {
			pid, _ = strconv.Atoi(strings.TrimSpace(string(b)))
			break
		}
	}
	if pid == 0 {
		t.Fatal("child never started")
	}
	var rec map[string]any
	if err := c.Call(ctx, "task.cancel", map[string]string{"task": r.Task}, &rec); err != nil || rec["state"] != "cancelled" || rec["exit"] != float64(130) {
		t.Fatalf("cancel: %v %v; want state cancelled, exit 130", rec, err)
	}
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		if !testkernel.Running(pid) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("child %d survived task.cancel", pid)
		}
	}
	if err := c.Call(ctx, "task.cancel", map[string]string{"task": r.Task}, nil); client.Code(err) != int(rpc.TaskState) {
		t.Errorf("cancel twice: %v", err)
	}
	var jobs struct {
		Tasks []map[string]any `json:"tasks"`
	}
	if err := json.Unmarshal([]byte(structured(t, c, "shoal://jobs")), &jobs); err != nil || len(jobs.Tasks) != 2 || jobs.Tasks[0]["task"] != r.Task {
		t.Errorf("jobs: %+v %v", jobs, err)
	}
}

func TestSecretsStayOut(t *testing.T) {
	dir := shortDir(t)
	startKernel(t, dir)
	var mu sync.Mutex
	var seen []string
	c := attach(t, dir, client.Options{Principal: "agent:sec", OnEvent: func(ev client.Event) {
		mu.Lock()
		seen = append(seen, string(ev.Payload))
		mu.Unlock()
	}})
	ctx := context.Background()
	for _, ch := range []string{"journal", "render", "session.transcript"} {
		if _, err := c.Subscribe(ctx, ch); err != nil {
			t.Fatal(err)
		}
	}
	const secret = "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY"
	exec1(t, c, "export AWS_SECRET_ACCESS_KEY="+secret, client.ExecOptions{})
	exec1(t, c, "env", client.ExecOptions{})
	exec1(t, c, "echo $AWS_SECRET_ACCESS_KEY", client.ExecOptions{})
	env := structured(t, c, "shoal://session/env")
	if strings.Contains(env, secret) || !strings.Contains(env, "AWS_SECRET_ACCESS_KEY") {
		t.Errorf("env view without grant: %s", env)
	}
	var rows json.RawMessage
	if err := c.Call(ctx, "journal.query", map[string]any{}, &rows); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(rows), secret) {
		t.Errorf("journal carries the secret: %s", rows)
	}
	time.Sleep(200 * time.Millisecond)
	mu.Lock()
	defer mu.Unlock()
	if len(seen) < 6 {
		t.Errorf("only %d events seen", len(seen))
	}
	for _, p := range seen {
		if strings.Contains(p, secret) {
			t.Errorf("event carries the secret: %s", p)
		}
	}
}

// TestNoOrphans checks that a session's background processes die with the
// session.
func TestNoOrphans(t *testing.T) {
	dir := shortDir(t)
	startKernel(t, dir)
	c := attach(t, dir, client.Options{Principal: "agent:o"})
	pidFile := filepath.Join(t.TempDir(), "pid")
	exec1(t, c, "sh -c 'echo $$ > "+pidFile+"; exec sleep 100' &", client.ExecOptions{})
	var b []byte
	for deadline := time.Now().Add(10 * time.Second); len(b) < 2 && time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		b, _ = os.ReadFile(pidFile)
	}
	pid, _ := strconv.Atoi(strings.TrimSpace(string(b)))
	if err := c.Call(context.Background(), "session.close", map[string]string{}, nil); err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(10 * time.Second); testkernel.Running(pid); time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			out, _ := exec.Command("ps", "-o", "pid,pgid,stat,cmd", "-p", strconv.Itoa(pid)).CombinedOutput()
			t.Fatalf("sleep %d outlived its session:\n%s", pid, out)
		}
	}
}

func TestPTYWaitAndCwd(t *testing.T) {
	dir := shortDir(t)
	startKernel(t, dir)
	c := attach(t, dir, client.Options{Principal: "agent:pty"})
	ctx := context.Background()
	work := t.TempDir()
	exec1(t, c, "cd "+work, client.ExecOptions{})
	var scr map[string]any
	if err := c.Call(ctx, "pty.open", map[string]any{"command": "sh", "cols": 80, "rows": 24}, &scr); err != nil {
		t.Fatal(err)
	}
	id := scr["pty"].(string)
	if err := c.Call(ctx, "pty.write", map[string]any{"pty": id, "input": "pwd; echo mark-$((6*7))\r"}, nil); err != nil {
		t.Fatal(err)
	}
	var w map[string]any
	if err := c.Call(ctx, "wait", map[string]any{"target": id, "pattern": "mark-42", "timeout_ms": 20000}, &w); err != nil || w["satisfied"] != true {
		t.Fatalf("wait: %v %v", w, err)
	}
	screen, _ := json.Marshal(w["state"])
	if !strings.Contains(string(screen), work) {
		t.Errorf("PTY did not start in the session's cwd %s: %s", work, screen)
	}
	if err := c.Call(ctx, "wait", map[string]any{"target": id, "pattern": "never-there", "timeout_ms": 100}, &w); err != nil || w["timed_out"] != true {
		t.Fatalf("wait timeout: %v %v", w, err)
	}
	if err := c.Call(ctx, "pty.close", map[string]any{"pty": id}, nil); err != nil {
		t.Fatal(err)
	}
	if err := c.Call(ctx, "pty.read", map[string]any{"pty": id}, nil); client.Code(err) != int(rpc.UnknownPTY) {
		t.Errorf("read closed pty: %v", err)
	}
}

func TestPolicyPlanApprove(t *testing.T) {
	dir := shortDir(t)
	startKernel(t, dir)
	agent := attach(t, dir, client.Options{Principal: "agent:worker"})
	other := attach(t, dir, client.Options{Principal: "agent:other"})
	human := attach(t, dir, client.Options{Principal: "human:owner"})
	ctx := context.Background()
	// A tree outside the session's writable paths (the test policy lets
	// sessions write the temp dir): only an approved plan, whose run gets
	// its targets added to the confinement, may delete it.
	work := shortDir(t)
	victim := filepath.Join(work, "tree")
	os.MkdirAll(filepath.Join(victim, "sub"), 0o755)
	os.WriteFile(filepath.Join(victim, "sub", "f"), []byte("12345"), 0o644)

	src := "rm -rf " + victim
	_, err := agent.Exec(ctx, src, client.ExecOptions{})
	if client.Code(err) != int(rpc.PolicyRefused) || !strings.Contains(err.Error(), "plan") {
		t.Fatalf("exec of a recursive delete: %v; want POLICY_REFUSED saying to plan", err)
	}
	var plan map[string]any
	if err := agent.Call(ctx, "plan.create", map[string]string{"source": src}, &plan); err != nil {
		t.Fatal(err)
	}
	ref, _ := plan["ref"].(string)
	if plan["verdict"] != "ask" || plan["approval"] != "pending" || plan["reversible"] != false || !strings.HasPrefix(ref, "plan:") {
		t.Fatalf("plan = %v", plan)
	}
	if err := other.Call(ctx, "plan.get", map[string]string{"ref": ref}, nil); client.Code(err) != int(rpc.NotFound) {
		t.Errorf("another principal sees the plan: %v", err)
	}
	if err := agent.Call(ctx, "plan.apply", map[string]string{"ref": ref}, nil); client.Code(err) != int(rpc.PlanNotApproved) {
		t.Errorf("apply before approval: %v", err)
	}
	if err := agent.Call(ctx, "plan.approve", map[string]string{"ref": ref}, nil); client.Code(err) != int(rpc.Forbidden) {
		t.Errorf("self-approval without the grant: %v", err)
	}
	if err := human.Call(ctx, "plan.approve", map[string]string{"ref": ref}, nil); err != nil {
		t.Fatal(err)
	}
	var reply client.ExecReply
	if err := agent.Call(ctx, "plan.apply", map[string]string{"ref": ref}, &reply); err != nil || reply.OK == nil || !*reply.OK {
		t.Fatalf("apply: %+v %v", reply, err)
	}
	if _, err := os.Stat(victim); !os.IsNotExist(err) {
		t.Errorf("the plan did not run: %v", err)
	}
	if err := agent.Call(ctx, "plan.apply", map[string]string{"ref": ref}, nil); client.Code(err) != int(rpc.PlanUsed) {
		t.Errorf("second apply: %v", err)
	}
	page, err := agent.Events(ctx, "approval", nil, 0)
	if err != nil || len(page.Events) == 0 {
		t.Errorf("approval channel: %+v %v", page, err)
	}
	var rows struct {
		Rows []map[string]any `json:"rows"`
	}
	if err := agent.Call(ctx, "journal.query", map[string]any{}, &rows); err != nil {
		t.Fatal(err)
	}
	kinds := map[any]bool{}
	for _, r := range rows.Rows {
		kinds[r["kind"]] = true
	}
	if !kinds["plan.apply"] || !kinds["approval"] {
		t.Errorf("journal kinds %v; want plan.apply and approval rows", kinds)
	}
}

func TestSpillToContentStore(t *testing.T) {
	dir := shortDir(t)
	startKernel(t, dir)
	c := attach(t, dir, client.Options{Principal: "agent:big"})
	// About 2 MiB of output: past the 1 MiB spill threshold.
	r := exec1(t, c, "seq 1 300000", client.ExecOptions{})
	if !strings.HasPrefix(r.ValRef, "val:blake3:") {
		t.Fatalf("large value not spilled: %+v", r)
	}
	if len(r.PreviewText) > 64<<10 {
		t.Errorf("preview of %d bytes", len(r.PreviewText))
	}
	hash := strings.TrimPrefix(r.ValRef, "val:blake3:")
	// Puts become durable in the background; the reply that hands out the
	// ref waits for it, so the blob is in place (not a temp file) now.
	if _, err := os.Stat(filepath.Join(dir, "cas", hash[0:2], hash[2:4], hash)); err != nil {
		t.Fatalf("the reply named %s before the blob was durable: %v", r.ValRef, err)
	}
	for _, target := range []string{r.URI, r.ValRef, "shoal://val/" + hash, "shoal://val/blake3:" + hash} {
		got, err := c.Read(context.Background(), target+"?path=.stdout&slice=0..6")
		if err != nil {
			t.Fatalf("read %s: %v", target, err)
		}
		if string(got.StructuredContent) != `{"$":"str","v":"1\n2\n3\n"}` {
			t.Errorf("%s = %s", target, got.StructuredContent)
		}
	}
	full, err := c.Read(context.Background(), r.URI)
	if err != nil {
		t.Fatal(err)
	}
	if len(full.Contents[0].Text) > 64<<10 || !full.Elided {
		t.Errorf("full read text %d bytes, elided=%v", len(full.Contents[0].Text), full.Elided)
	}
}

func TestPlanResolvesSessionVariables(t *testing.T) {
	dir := shortDir(t)
	startKernel(t, dir)
	c := attach(t, dir, client.Options{Principal: "agent:vars"})
	work := t.TempDir()
	target := filepath.Join(work, "build")
	os.MkdirAll(target, 0o755)
	exec1(t, c, "DIR="+target, client.ExecOptions{})
	var plan struct {
		EffectDetails []struct {
			Kind, Target string
			Dynamic      bool
		} `json:"effect_details"`
	}
	if err := c.Call(context.Background(), "plan.create", map[string]string{"source": `rm -rf "$DIR"`}, &plan); err != nil {
		t.Fatal(err)
	}
	found := false
	for _, e := range plan.EffectDetails {
		if e.Kind == "fs.delete" && e.Target == target && !e.Dynamic {
			found = true
		}
	}
	if !found {
		t.Errorf("plan did not resolve $DIR to %s: %+v", target, plan.EffectDetails)
	}
}

func TestJournalHeadOfBackgroundJob(t *testing.T) {
	dir := shortDir(t)
	startKernel(t, dir)
	c := attach(t, dir, client.Options{Principal: "agent:bg"})
	exec1(t, c, "sleep 0.1 &", client.ExecOptions{})
	var rows struct {
		Rows []struct{ Head string } `json:"rows"`
	}
	if err := c.Call(context.Background(), "journal.query", map[string]any{"limit": 1}, &rows); err != nil {
		t.Fatal(err)
	}
	if len(rows.Rows) != 1 || rows.Rows[0].Head != "sleep" {
		t.Errorf("journal head of `sleep 0.1 &`: %+v", rows.Rows)
	}
}

// kernel.status carries the journal's counters; each execution adds one
// answered row.
func TestStatusJournalCounters(t *testing.T) {
	dir := shortDir(t)
	startKernel(t, dir)
	c := attach(t, dir, client.Options{Principal: "agent:stats"})
	status := func() core.JournalStats {
		var st struct {
			Journal *core.JournalStats `json:"journal"`
		}
		if err := c.Call(context.Background(), "kernel.status", struct{}{}, &st); err != nil {
			t.Fatal(err)
		}
		if st.Journal == nil {
			t.Fatal("kernel.status has no journal counters")
		}
		return *st.Journal
	}
	before := status()
	for range 3 {
		exec1(t, c, "echo hi", client.ExecOptions{})
	}
	after := status()
	if got := after.Rows - before.Rows; got != 3 {
		t.Fatalf("rows grew by %d over 3 executions (%+v then %+v)", got, before, after)
	}
	if after.WaitNS <= before.WaitNS || after.Commits <= before.Commits {
		t.Fatalf("counters did not move: %+v then %+v", before, after)
	}
}

// TestTaskOutlivesConnection: an execution that became a task after its
// timeout runs on when the connection that started it closes, the closed
// connection is not held open by it, and the task's outcome is recorded.
func TestTaskOutlivesConnection(t *testing.T) {
	dir := shortDir(t)
	startKernel(t, dir)
	a := attach(t, dir, client.Options{Principal: "agent:short", Session: "s1"})
	b := attach(t, dir, client.Options{Principal: "agent:watch", Session: "s1"})
	ctx := context.Background()
	// The task runs until the test lets it end, so the connection count is
	// checked while it certainly runs.
	gate := filepath.Join(t.TempDir(), "go")
	t.Cleanup(func() { os.WriteFile(gate, nil, 0o600) }) // lets the task end if the test fails early
	r := exec1(t, a, "while [ ! -e "+gate+" ]; do sleep 0.01; done; echo late", client.ExecOptions{TimeoutMS: 50})
	if r.Task == "" || r.State != "running" {
		t.Fatalf("no task: %+v", r)
	}
	a.Close()
	connections := func() int {
		var st struct{ Connections int }
		if err := b.Call(ctx, "kernel.status", struct{}{}, &st); err != nil {
			t.Fatal(err)
		}
		return st.Connections
	}
	for deadline := time.Now().Add(10 * time.Second); connections() != 1; time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("%d connections: the closed one is still open", connections())
		}
	}
	var rec map[string]any
	if err := b.Call(ctx, "task.get", map[string]string{"task": r.Task}, &rec); err != nil || rec["state"] != "running" {
		t.Fatalf("task after its connection closed: %v %v", rec, err)
	}
	if err := os.WriteFile(gate, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	var wait map[string]any
	if err := b.Call(ctx, "wait", map[string]any{"target": r.Task, "timeout_ms": 20000}, &wait); err != nil || wait["satisfied"] != true {
		t.Fatalf("wait: %v %v", wait, err)
	}
	if got := structured(t, b, r.TaskURI+"/out?path=.stdout"); got != `{"$":"str","v":"late\n"}` {
		t.Errorf("task value %s", got)
	}
	var rows struct{ Rows []core.JournalRow }
	if err := b.Call(ctx, "journal.query", map[string]any{"principal": "agent:short"}, &rows); err != nil || len(rows.Rows) != 1 || rows.Rows[0].Ref != r.Ref {
		t.Fatalf("journal rows of the task: %+v %v", rows, err)
	}
}

// TestPlanApplyBecomesTask: a plan applied with a timeout it outlasts
// answers with the task, and the plan is applied (its ref recorded) at
// once, not when the task ends.
func TestPlanApplyBecomesTask(t *testing.T) {
	dir := shortDir(t)
	startKernel(t, dir)
	agent := attach(t, dir, client.Options{Principal: "agent:planner"})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var plan map[string]any
	if err := agent.Call(ctx, "plan.create", map[string]string{"source": "sleep 0.3; echo applied"}, &plan); err != nil || plan["verdict"] != "allow" {
		t.Fatalf("plan: %v %v", plan, err)
	}
	ref := plan["ref"].(string)
	var reply client.ExecReply
	if err := agent.Call(ctx, "plan.apply", map[string]any{"ref": ref, "timeout_ms": 20}, &reply); err != nil || reply.Task == "" || reply.State != "running" {
		t.Fatalf("apply: %+v %v", reply, err)
	}
	var got map[string]any
	if err := agent.Call(ctx, "plan.get", map[string]string{"ref": ref}, &got); err != nil || got["applied"] != true || got["applied_ref"] != reply.Ref {
		t.Fatalf("plan after an apply that became a task: %v %v (reply ref %s)", got, err, reply.Ref)
	}
	var list map[string]any
	if err := agent.Call(ctx, "plan.list", map[string]any{}, &list); err != nil {
		t.Fatalf("plan.list: %v", err)
	}
	var wait map[string]any
	if err := agent.Call(ctx, "wait", map[string]any{"target": reply.Task, "timeout_ms": 20000}, &wait); err != nil || wait["satisfied"] != true {
		t.Fatalf("wait: %v %v", wait, err)
	}
}

// TestBlobChunks: a blob larger than one chunk goes in through an upload
// and comes back in ranges, hash checked; chunks out of order and unknown
// uploads are refused with their codes.
func TestBlobChunks(t *testing.T) {
	dir := shortDir(t)
	startKernel(t, dir)
	c := attach(t, dir, client.Options{Principal: "agent:t"})
	ctx := context.Background()
	data := make([]byte, 2*client.BlobChunk+12345)
	for i := range data {
		data[i] = byte(i*7 + i>>9)
	}
	res, err := c.BlobPut(ctx, bytes.NewReader(data))
	if err != nil || res.Size != int64(len(data)) || !strings.HasPrefix(res.Ref, "val:blake3:") {
		t.Fatalf("put: %+v %v", res, err)
	}
	var got bytes.Buffer
	if n, err := c.BlobGet(ctx, res.Ref, &got); err != nil || n != int64(len(data)) || !bytes.Equal(got.Bytes(), data) {
		t.Fatalf("get: %d bytes, %v", n, err)
	}
	// An open file is handed over and read by the kernel from its offset:
	// the same blob.
	src := filepath.Join(t.TempDir(), "src")
	if err := os.WriteFile(src, append([]byte("skipped"), data...), 0o600); err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(src)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	f.Seek(int64(len("skipped")), io.SeekStart)
	if fres, err := c.BlobPut(ctx, f); err != nil || fres.Hash != res.Hash {
		t.Fatalf("put of a file: %+v %v, want %s", fres, err, res.Hash)
	}
	var first struct{ Upload string }
	if err := c.Call(ctx, "blob.put", map[string]any{"text": "ab", "more": true}, &first); err != nil || first.Upload == "" {
		t.Fatalf("first chunk: %+v %v", first, err)
	}
	err = c.Call(ctx, "blob.put", map[string]any{"text": "cd", "upload": first.Upload, "offset": 1}, nil)
	if client.Code(err) != int(rpc.InvalidParams) {
		t.Fatalf("chunk at the wrong offset: %v", err)
	}
	var done struct{ Hash string }
	if err := c.Call(ctx, "blob.put", map[string]any{"text": "cd", "upload": first.Upload, "offset": 2}, &done); err != nil {
		t.Fatal(err)
	}
	var whole struct{ Hash string }
	if err := c.Call(ctx, "blob.put", map[string]any{"text": "abcd"}, &whole); err != nil || whole.Hash != done.Hash {
		t.Fatalf("chunked hash %s, whole %s (%v)", done.Hash, whole.Hash, err)
	}
	if err := c.Call(ctx, "blob.put", map[string]any{"text": "x", "upload": first.Upload}, nil); client.Code(err) != int(rpc.NotFound) {
		t.Fatalf("finished upload: %v", err)
	}
	if err := c.Call(ctx, "blob.get", map[string]any{"hash": done.Hash, "offset": 9}, nil); client.Code(err) != int(rpc.InvalidParams) {
		t.Fatalf("range past the end: %v", err)
	}
	// A side-socket ticket is good once.
	var st struct {
		Stream struct{ Socket, Ticket string }
	}
	if err := c.Call(ctx, "blob.get", map[string]any{"hash": done.Hash, "stream": true}, &st); err != nil || st.Stream.Ticket == "" {
		t.Fatalf("stream ticket: %+v %v", st, err)
	}
	for i, want := range []string{"abcd", ""} {
		nc, err := net.Dial("unix", st.Stream.Socket)
		if err != nil {
			t.Fatal(err)
		}
		fmt.Fprintf(nc, "%s\n", st.Stream.Ticket)
		got, _ := io.ReadAll(nc)
		nc.Close()
		if string(got) != want {
			t.Fatalf("use %d of the ticket read %q, want %q", i+1, got, want)
		}
	}
	if err := c.Call(ctx, "blob.put", map[string]any{"stream": true, "text": "x"}, nil); client.Code(err) != int(rpc.InvalidParams) {
		t.Fatalf("stream with bytes: %v", err)
	}
}
