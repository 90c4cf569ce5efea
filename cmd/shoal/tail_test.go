package main

import (
	"bytes"
	"context"
	"github.com/shoal-sh/shoal/internal/testkernel"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/shoal-sh/shoal/core/wire"
	"github.com/shoal-sh/shoal/sdk/client"
)

type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// eventually polls cond; the bound is a safety net against a hang, not a
// claim about speed.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(60 * time.Second); !cond(); time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("never: %s", what)
		}
	}
}

// TestTailReconnects: events tail outlives its kernel. When a new kernel
// comes up it reconnects, and goes on after the last seq it printed.
func TestTailReconnects(t *testing.T) {
	dir, err := os.MkdirTemp(testkernel.StateParent(), "sht")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	execIn := func(src string) {
		t.Helper()
		c, err := client.Dial(context.Background(), client.Options{StateDir: dir, Principal: "human:t"})
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		if _, err := c.Exec(context.Background(), src, client.ExecOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	const first = `"head":"true"`
	cmd, done := startKernelProc(t, dir)
	execIn("true")

	ctx, cancel := context.WithCancel(context.Background())
	var stdout, stderr lockedBuffer
	code := make(chan int, 1)
	go func() {
		code <- runCtx(ctx, []string{"events", "tail", "journal", "--state-dir", dir, "--cursor", filepath.Join(dir, "cur")}, &stdout, &stderr)
	}()
	t.Cleanup(func() {
		cancel()
		<-code
	})
	eventually(t, "the tail prints the first row", func() bool { return strings.Contains(stdout.String(), first) })

	_ = syscall.Kill(cmd.Process.Pid, syscall.SIGTERM)
	<-done
	eventually(t, "the tail notices the kernel went", func() bool { return strings.Contains(stderr.String(), "reconnecting") })

	startKernelProc(t, dir)
	execIn("pwd")
	eventually(t, "the tail prints the row of the new kernel", func() bool { return strings.Contains(stdout.String(), `"head":"pwd"`) })
	if n := strings.Count(stdout.String(), first); n != 1 {
		t.Errorf("the first row printed %d times; want once:\n%s", n, stdout.String())
	}
	if !strings.Contains(stderr.String(), "reconnected; resuming journal after seq") {
		t.Errorf("stderr: %s", stderr.String())
	}
	cancel()
	if c := <-code; c != 0 {
		t.Errorf("interrupted tail exit %d; want 0", c)
	}
	code <- 0
}

func TestCLIHint(t *testing.T) {
	for _, tc := range []struct{ msg, session, want string }{
		{`this source needs a plan: the policy says ask (x). Call plan.create {source} (MCP: shoal_plan) to see every effect, have a principal with the Approve grant approve it, then run it with plan.apply (MCP: shoal_apply)`, "main",
			"this source needs a plan: the policy says ask (x). Call `shoal plan create SOURCE` to see every effect, have a principal with the Approve grant approve it, then run it with `shoal plan apply REF`"},
		{`waiting for approval (e.g. ` + "`shoal plan approve --session w plan:ab`" + `); then apply it with plan.apply {ref: "plan:ab"} (MCP: shoal_apply)`, "w",
			"waiting for approval (e.g. `shoal plan approve --session w plan:ab`); then apply it with `shoal plan apply --session w plan:ab`"},
		{"writes /x, outside this session's writable paths: plan it with shoal_plan and have it approved", "w",
			"writes /x, outside this session's writable paths: plan it with `shoal plan create --session w SOURCE` and have it approved"},
		{"to go beyond, plan the command (shoal_plan) and have it approved", "main",
			"to go beyond, plan the command (`shoal plan create SOURCE`) and have it approved"},
		{"no plan plan:1 in this session; plan.list shows the plans you can see", "w",
			"no plan plan:1 in this session; `shoal plan list --session w` shows the plans you can see"},
		{"tasks live in kernel memory; task.list shows the session's tasks", "main",
			"tasks live in kernel memory; `shoal task list` shows the session's tasks"},
	} {
		if got := cliHint(tc.msg, tc.session); got != tc.want {
			t.Errorf("cliHint(%q)\n got %q\nwant %q", tc.msg, got, tc.want)
		}
		if strings.Contains(cliHint(tc.msg, tc.session), "shoal_") {
			t.Errorf("an MCP tool is left in %q", cliHint(tc.msg, tc.session))
		}
	}
}

func TestHumanDuration(t *testing.T) {
	for _, tc := range []struct {
		d    time.Duration
		want string
	}{
		{400 * time.Millisecond, "0s"},
		{45*time.Second + 600*time.Millisecond, "46s"},
		{3*time.Minute + 12*time.Second, "3m12s"},
		{2*time.Hour + 5*time.Minute + 40*time.Second, "2h6m"},
		{3396479 * time.Millisecond, "56m36s"},
		{39*24*time.Hour + 7*time.Hour + 5*time.Minute, "39d7h"},
	} {
		if got := humanDuration(tc.d); got != tc.want {
			t.Errorf("humanDuration(%v) = %q; want %q", tc.d, got, tc.want)
		}
	}
}

// TestPrintExecConfined: a run the confinement refused something says so
// under its status line, in CLI terms, with the refused paths.
func TestPrintExecConfined(t *testing.T) {
	exit := 1
	var b strings.Builder
	printExec(&b, &client.ExecReply{Ref: "out:3", Exit: &exit, Confined: &wire.ConfinedNote{Denied: []string{"/etc/x"},
		Hint: "to go beyond, plan the command (shoal_plan) and have it approved"}}, "w")
	want := "── out:3 exit 1\nconfined: to go beyond, plan the command (`shoal plan create --session w SOURCE`) and have it approved (refused: /etc/x)\n"
	if b.String() != want {
		t.Errorf("printExec:\n got %q\nwant %q", b.String(), want)
	}
}
