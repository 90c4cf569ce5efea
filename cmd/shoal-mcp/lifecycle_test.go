package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// TestBackgroundKernel: the first facade starts a kernel in the
// background; it outlives that facade, so the next one finds the running
// task; with nothing left to do it exits after --idle-exit.
func TestBackgroundKernel(t *testing.T) {
	sd := newStateDir(t)
	gate := filepath.Join(sd.dir, "gate")
	t.Cleanup(func() { os.WriteFile(gate, nil, 0o600) })

	p1 := startStdio(t, sd, "agent:test", "--idle-exit", "1s")
	m, _ := p1.callOK("shoal_exec", map[string]any{"source": fmt.Sprintf("while [ ! -e %s ]; do sleep 0.02; done; echo survived", gate), "background": true})
	taskURI := m["task_uri"].(string)
	probe := sd.dial(t, "human:test", nil)
	pid := sd.status(t, probe).PID
	probe.Close()
	p1.close()

	p2 := startStdio(t, sd, "agent:test")
	env := p2.read(taskURI)
	if !strings.Contains(string(env.StructuredContent), `"running"`) {
		t.Errorf("the new facade sees the task as %s, want running", env.StructuredContent)
	}
	var uris []string
	for _, r := range listResources(t, p2) {
		uris = append(uris, r.URI)
	}
	if !slices.Contains(uris, taskURI) {
		t.Errorf("resources/list of the new facade lacks %s", taskURI)
	}
	probe = sd.dial(t, "human:test", nil)
	if got := sd.status(t, probe).PID; got != pid {
		t.Errorf("second facade reached kernel %d, want the first one's %d", got, pid)
	}
	probe.Close()

	os.WriteFile(gate, nil, 0o600)
	p2.callOK("shoal_wait", map[string]any{"target": taskURI, "timeout_ms": 60000})
	if out := p2.read(taskURI + "/out?path=.stdout"); !strings.Contains(string(out.StructuredContent), "survived") {
		t.Errorf("task output %s", out.StructuredContent)
	}
	p2.close()

	// No connection, task or PTY: the kernel leaves after its idle time.
	// (Polling the socket would be a connection and keep it alive.)
	if !waitFor(waitLong, func() bool { return !processAlive(pid) }) || socketAnswers(sd.socket()) {
		log, _ := os.ReadFile(filepath.Join(sd.dir, logName))
		t.Fatalf("kernel %d still running after idle exit; kernel.log:\n%s", pid, log)
	}
	log, _ := os.ReadFile(filepath.Join(sd.dir, logName))
	if !bytes.Contains(log, []byte("idle exit")) {
		t.Errorf("kernel.log does not record the idle exit:\n%s", log)
	}
}

// TestInProcess: the kernel runs inside the facade and ends with it.
func TestInProcess(t *testing.T) {
	sd := newStateDir(t)
	p := startStdio(t, sd, "agent:test", "--in-process")
	m, text := p.callOK("shoal_exec", map[string]any{"source": "echo inside"})
	if m["ok"] != true || !strings.Contains(text, "inside") {
		t.Fatalf("exec: %v %q", m, text)
	}
	probe := sd.dial(t, "human:test", nil)
	pid := sd.status(t, probe).PID
	probe.Close()
	cmdline, _ := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
	if !bytes.Contains(cmdline, []byte("--in-process")) || bytes.Contains(cmdline, []byte(kernelMode)) {
		t.Errorf("kernel pid %d runs %q, want the facade itself", pid, bytes.ReplaceAll(cmdline, []byte{0}, []byte{' '}))
	}
	p.close()
	if !waitFor(waitLong, func() bool { return !socketAnswers(sd.socket()) }) {
		t.Error("the in-process kernel outlived its facade")
	}
	if _, err := os.Stat(filepath.Join(sd.dir, logName)); err == nil {
		t.Error("--in-process started a background kernel too")
	}
}

// TestStartRace: two facades starting at once on a fresh state directory
// end up on one kernel.
func TestStartRace(t *testing.T) {
	sd := newStateDir(t)
	peers := make([]*mcpPeer, 2)
	var wg sync.WaitGroup
	var mu sync.Mutex
	var errs []string
	for i := range peers {
		wg.Go(func() {
			st := &syncBuffer{}
			p, err := connectStdio(sd, fmt.Sprintf("agent:racer%d", i), st)
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				errs = append(errs, fmt.Sprintf("facade %d: %v\n%s", i, err, st.String()))
				return
			}
			peers[i] = p
		})
	}
	wg.Wait()
	for _, p := range peers {
		if p != nil {
			p.adopt(t)
		}
	}
	if len(errs) > 0 {
		t.Fatal(strings.Join(errs, "\n"))
	}
	for i, p := range peers {
		if m, _ := p.callOK("shoal_exec", map[string]any{"source": fmt.Sprintf("echo racer%d", i)}); m["ok"] != true {
			t.Errorf("facade %d exec: %v", i, m)
		}
	}
	log, _ := os.ReadFile(filepath.Join(sd.dir, logName))
	if n := bytes.Count(log, []byte("kernel serving")); n != 1 {
		t.Errorf("%d kernels served, want 1:\n%s", n, log)
	}
}

// TestUsageErrors: bad flags exit 2 without starting anything.
func TestUsageErrors(t *testing.T) {
	sd := newStateDir(t)
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--http", "0.0.0.0:0"}, "--allow-remote"},
		{[]string{"--http", "nonsense"}, "HOST:PORT"},
		{[]string{"--allow-remote"}, "--http"},
		{[]string{"--bogus"}, "bogus"},
		{[]string{"extra"}, "flags only"},
	} {
		cmd := exec.Command(facadeBin, append([]string{"--state-dir", sd.dir}, tc.args...)...)
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		err := cmd.Run()
		ee, ok := err.(*exec.ExitError)
		if !ok || ee.ExitCode() != 2 || !strings.Contains(stderr.String(), tc.want) {
			t.Errorf("%v: %v, stderr %q; want exit 2 mentioning %q", tc.args, err, stderr.String(), tc.want)
		}
	}
	if socketAnswers(sd.socket()) {
		t.Error("a usage error started a kernel")
	}
}

// TestKernelStartFailure: when the background kernel cannot start, the
// facade says why, with the kernel log's tail.
func TestKernelStartFailure(t *testing.T) {
	sd := newStateDir(t)
	// A broken config makes the kernel refuse to start.
	if err := os.WriteFile(filepath.Join(sd.dir, "config.toml"), []byte("this is [not toml"), 0o600); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(facadeBin, "--state-dir", sd.dir)
	cmd.Stdin = strings.NewReader("")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	done := make(chan error, 1)
	go func() { done <- cmd.Run() }()
	select {
	case err := <-done:
		if err == nil || !strings.Contains(stderr.String(), "did not come up") || !strings.Contains(stderr.String(), "kernel.log") {
			t.Errorf("exit %v, stderr %q; want a failure quoting the kernel log", err, stderr.String())
		}
	case <-time.After(2 * waitLong):
		cmd.Process.Kill()
		t.Fatal("facade hung on a kernel that cannot start")
	}
}

// TestKernelRestart: when the kernel goes away under a running facade,
// the next call starts a new one, and a subscription can be made again.
func TestKernelRestart(t *testing.T) {
	sd := newStateDir(t)
	p := startStdio(t, sd, "agent:test")
	const uri = "shoal://events/user.again"
	if _, rerr := p.raw("resources/subscribe", map[string]any{"uri": uri}); rerr != nil {
		t.Fatal(rerr.Message)
	}
	probe := sd.dial(t, "human:test", nil)
	old := sd.status(t, probe).PID
	probe.Close()
	if err := syscall.Kill(old, syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if !waitFor(waitLong, func() bool { return !processAlive(old) }) {
		t.Fatalf("kernel %d did not stop", old)
	}

	// The call that finds the connection gone reconnects, starting a
	// kernel; a call may fail only while the loss is being noticed.
	var m map[string]any
	waitFor(waitLong, func() bool {
		res := p.call("shoal_exec", map[string]any{"source": "echo again"})
		if res.IsError {
			return false
		}
		json.Unmarshal(res.RawStructuredContent, &m)
		return true
	})
	if m["ok"] != true {
		t.Fatalf("exec after the kernel restarted: %v", m)
	}
	probe = sd.dial(t, "human:test", nil)
	if pid := sd.status(t, probe).PID; pid == old {
		t.Fatalf("still kernel %d", pid)
	}
	if _, rerr := p.raw("resources/subscribe", map[string]any{"uri": uri}); rerr != nil {
		t.Fatal(rerr.Message)
	}
	ev, err := probe.Publish(context.Background(), "user.again", map[string]any{"n": 1})
	if err != nil {
		t.Fatal(err)
	}
	if up := p.nextUpdate(uri); up.Seq != ev.Seq {
		t.Errorf("update after resubscribe: %+v, want seq %d", up, ev.Seq)
	}
}

// TestPipedRequests: requests piped in with stdin closed right after them
// still get their answers before the facade exits.
func TestPipedRequests(t *testing.T) {
	sd := newStateDir(t)
	in := strings.Join([]string{
		`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"pipe","version":"1"}}}`,
		`{"jsonrpc":"2.0","method":"notifications/initialized"}`,
		`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"shoal_exec","arguments":{"source":"sleep 0.2; echo piped-ok"}}}`,
	}, "\n") + "\n"
	cmd := exec.Command(facadeBin, sd.facadeArgs("agent:pipe")...)
	cmd.Stdin = strings.NewReader(in)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	done := make(chan error, 1)
	go func() { done <- cmd.Run() }()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("facade: %v\n%s", err, stderr.String())
		}
	case <-time.After(2 * waitLong):
		cmd.Process.Kill()
		t.Fatal("facade did not exit after stdin ended")
	}
	var answered bool
	for line := range strings.SplitSeq(stdout.String(), "\n") {
		var m struct {
			ID     int             `json:"id"`
			Result json.RawMessage `json:"result"`
		}
		if json.Unmarshal([]byte(line), &m) == nil && m.ID == 2 {
			answered = strings.Contains(string(m.Result), "piped-ok") && !strings.Contains(string(m.Result), "isError\":true")
		}
	}
	if !answered {
		t.Fatalf("the piped exec was not answered with its output:\n%s\nstderr:\n%s", stdout.String(), stderr.String())
	}
}
