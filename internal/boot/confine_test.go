//go:build linux

package boot_test

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"testing"

	"github.com/shoal-sh/shoal/core/rpc"
	"github.com/shoal-sh/shoal/providers/session/sandbox"
	"github.com/shoal-sh/shoal/sdk/client"
)

// A PTY runs inside its session's confinement: an interactive shell's
// keystrokes cannot be analysed, so the OS is what holds there. Work in
// the workspace still works, in sh and in python3.
func TestPTYConfined(t *testing.T) {
	if sandbox.ABI() < 1 {
		t.Skip("no Landlock in this kernel")
	}
	dir := shortDir(t)
	startKernel(t, dir)
	ws := t.TempDir()
	c := attach(t, dir, client.Options{Principal: "agent:pty", Workspace: ws})
	ctx := context.Background()
	outside := shortDir(t) // neither the workspace nor the temp dir the test policy opens
	canary := filepath.Join(outside, "canary")
	os.WriteFile(canary, []byte("canary\n"), 0o644)
	token, _ := os.ReadFile(filepath.Join(dir, "token"))

	open := func(command string) string {
		var scr map[string]any
		if err := c.Call(ctx, "pty.open", map[string]any{"command": command, "cols": 100, "rows": 30}, &scr); err != nil {
			t.Fatalf("pty.open %s: %v", command, err)
		}
		return scr["pty"].(string)
	}
	until := func(id, input, pattern string) {
		t.Helper()
		if err := c.Call(ctx, "pty.write", map[string]any{"pty": id, "input": input}, nil); err != nil {
			t.Fatal(err)
		}
		var w map[string]any
		if err := c.Call(ctx, "wait", map[string]any{"target": id, "pattern": pattern, "timeout_ms": 20000}, &w); err != nil || w["satisfied"] != true {
			var scr map[string]any
			c.Call(ctx, "pty.read", map[string]any{"pty": id}, &scr)
			t.Fatalf("waiting for %q: %v %v; screen %v", pattern, w, err, scr["lines"])
		}
	}
	sh := open("sh")
	until(sh, "echo x > "+canary+"; echo rc-$?\r", "rc-[1-9]")
	until(sh, "cat "+filepath.Join(dir, "token")+" || echo denied-$?\r", "denied-1")
	until(sh, "echo made > in-ws && cat in-ws && echo ok-$?\r", "ok-0")
	until(sh, "rm -rf "+outside+"; echo gone-$?\r", "gone-[1-9]")
	py := open("python3")
	until(py, "open('py.txt','w').write('py'); print('w', open('py.txt').read())\r", "w py")
	until(py, "import os\r", ">>>")
	until(py, "try:\r open('"+canary+"','w')\rexcept OSError as e: print('refused', e.errno)\r\r", "refused (13|30)") // EACCES from Landlock, EROFS from read-only mounts
	if b, _ := os.ReadFile(canary); string(b) != "canary\n" {
		t.Fatalf("canary = %q", b)
	}
	if b, _ := os.ReadFile(filepath.Join(ws, "in-ws")); strings.TrimSpace(string(b)) != "made" {
		t.Fatalf("workspace file = %q", b)
	}
	if b, _ := os.ReadFile(filepath.Join(dir, "token")); string(b) != string(token) {
		t.Fatal("the token changed")
	}
	var scr map[string]any
	c.Call(ctx, "pty.read", map[string]any{"pty": sh}, &scr)
	if strings.Contains(strings.Join(toStrings(scr["lines"]), "\n"), strings.TrimSpace(string(token))) {
		t.Fatal("the token was shown on the PTY")
	}
}

func toStrings(v any) []string {
	l, _ := v.([]any)
	out := make([]string, 0, len(l))
	for _, x := range l {
		s, _ := x.(string)
		out = append(out, s)
	}
	return out
}

// Work still works confined: a Go module builds and tests, git commits in
// the workspace, a tool cache outside it is written, pipes and
// redirections run; while the next directory over stays out of reach.
func TestWorkStillWorksConfined(t *testing.T) {
	if sandbox.ABI() < 1 {
		t.Skip("no Landlock in this kernel")
	}
	if _, err := exec.LookPath("go"); err != nil {
		t.Skip("no go on PATH")
	}
	dir := shortDir(t)
	root := t.TempDir()
	ws, cache, other := filepath.Join(root, "proj"), filepath.Join(root, "npm-cache"), filepath.Join(root, "other-proj")
	for _, d := range []string{ws, cache, other} {
		os.Mkdir(d, 0o755)
	}
	// The default rules, with this test's cache dir as the one tool cache.
	q, _ := json.Marshal(cache)
	os.WriteFile(filepath.Join(dir, "policy.toml"), []byte("[sandbox]\ncaches = ["+string(q)+"]\n"), 0o600)
	startKernel(t, dir)
	c := attach(t, dir, client.Options{Principal: "agent:work", Workspace: ws})
	run := func(src string) *client.ExecReply {
		t.Helper()
		r, err := c.Exec(context.Background(), src, client.ExecOptions{TimeoutMS: 120000})
		if err != nil {
			t.Fatalf("%s: %v", src, err)
		}
		return r
	}
	ok := func(src string) {
		t.Helper()
		if r := run(src); r.OK == nil || !*r.OK {
			var out any
			c.Call(context.Background(), "resources.read", map[string]any{"uri": r.URI}, &out)
			t.Fatalf("%s: %+v %v", src, r, out)
		}
	}
	// Go's build cache and temp files go to the session's temp dir
	// (TMPDIR), so the test writes nothing outside its own dirs.
	ok(`export GOCACHE=$TMPDIR/gocache GOFLAGS=-mod=mod GOTOOLCHAIN=local GOPROXY=off`)
	ok(`printf 'module example.com/w\n\ngo 1.22\n' > go.mod && printf 'package w\n\nfunc Add(a, b int) int { return a + b }\n' > w.go`)
	ok(`printf 'package w\n\nimport "testing"\n\nfunc TestAdd(t *testing.T) {\n\tif Add(2, 3) != 5 {\n\t\tt.Fatal("add")\n\t}\n}\n' > w_test.go`)
	ok(`go build ./... && go vet ./... && go test ./... | grep -q '^ok'`)
	ok(`git init -q && git add . && git -c user.name=a -c user.email=a@b commit -qm first && git log --oneline | wc -l | grep -q 1`)
	ok(`mkdir -p ` + cache + `/_cacache/index && echo entry > ` + cache + `/_cacache/index/x && cat ` + cache + `/_cacache/index/x | tr a-z A-Z | grep -q ENTRY`)
	ok(`seq 1 100 | sort -rn | head -3 > top.txt && [ "$(wc -l < top.txt)" = 3 ]`)
	// Seen by the analyzer: refused up front. Not seen (a program that
	// writes): stopped by the OS, and the reply says so.
	if _, err := c.Exec(context.Background(), `echo x > `+other+`/stolen`, client.ExecOptions{}); client.Code(err) != int(rpc.PolicyRefused) {
		t.Errorf("a write into another project: %v, want POLICY_REFUSED", err)
	}
	r := run(`python3 -c "open('` + other + `/' + 'stolen', 'w').write('x')"`)
	if r.OK == nil || *r.OK || r.Confined == nil {
		t.Errorf("an unseen write into another project: %+v", r)
	}
	if _, err := os.Stat(filepath.Join(other, "stolen")); err == nil {
		t.Fatal("a file appeared in another project")
	}
	if _, err := os.Stat(filepath.Join(ws, ".git", "HEAD")); err != nil {
		t.Fatal(err)
	}
}

// A root kernel's session cannot reboot the machine, even by a system
// call the analyzer cannot see; a plan with a whole-machine effect, once
// approved, runs with the capability. The probe passes reboot(2) wrong
// magic numbers, which it checks after the capability: EPERM without
// it, EINVAL with it, and nothing reboots either way.
func TestMachinePlanKeepsCapabilities(t *testing.T) {
	if sandbox.ABI() < 1 || os.Geteuid() != 0 || runtime.GOARCH != "amd64" {
		t.Skip("needs Landlock, root and amd64 (reboot is system call 169)")
	}
	if _, err := exec.LookPath("python3"); err != nil {
		t.Skip("no python3")
	}
	if !holdsCap(t, 22) {
		t.Skip("this process holds no CAP_SYS_BOOT (a container that drops it)")
	}
	dir := shortDir(t)
	startKernel(t, dir)
	agent := attach(t, dir, client.Options{Principal: "agent:worker", Workspace: t.TempDir()})
	human := attach(t, dir, client.Options{Principal: "human:owner"})
	ctx := context.Background()
	const probe = `python3 -c 'import ctypes; l = ctypes.CDLL(None, use_errno=True); l.syscall(169, 0xdead, 0xbeef, 0, 0); print("errno", ctypes.get_errno())'`
	r, err := agent.Exec(ctx, probe, client.ExecOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.TrimSpace(stdoutOf(t, agent, r)); got != "errno 1" {
		t.Fatalf("in the session: %q, want errno 1 (EPERM)", got)
	}
	var plan map[string]any
	if err := agent.Call(ctx, "plan.create", map[string]string{"source": probe + "; if false; then reboot --help; fi"}, &plan); err != nil {
		t.Fatal(err)
	}
	ref, _ := plan["ref"].(string)
	if err := human.Call(ctx, "plan.approve", map[string]string{"ref": ref}, nil); err != nil {
		t.Fatalf("approve %v: %v", plan, err)
	}
	var reply client.ExecReply
	if err := agent.Call(ctx, "plan.apply", map[string]string{"ref": ref}, &reply); err != nil {
		t.Fatal(err)
	}
	if got := strings.TrimSpace(stdoutOf(t, agent, &reply)); got != "errno 22" {
		t.Errorf("in the approved plan's run: %q, want errno 22 (EINVAL); plan %v", got, plan)
	}
}

// stdoutOf reads an execution's stdout back (a typed string).
func stdoutOf(t *testing.T, c *client.Client, r *client.ExecReply) string {
	t.Helper()
	res, err := c.Read(context.Background(), r.URI+"?path=.stdout")
	if err != nil {
		t.Fatal(err)
	}
	var s struct {
		V string `json:"v"`
	}
	if err := json.Unmarshal(res.StructuredContent, &s); err != nil {
		t.Fatalf("stdout of %s: %s: %v", r.URI, res.StructuredContent, err)
	}
	return s.V
}

// holdsCap reports whether this process has capability c in effect.
func holdsCap(t *testing.T, c uint) bool {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		t.Fatal(err)
	}
	for line := range strings.Lines(string(b)) {
		if v, ok := strings.CutPrefix(line, "CapEff:"); ok {
			n, err := strconv.ParseUint(strings.TrimSpace(v), 16, 64)
			return err == nil && n&(1<<c) != 0
		}
	}
	return false
}
