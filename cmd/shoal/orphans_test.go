package main

import (
	"context"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/shoal-sh/shoal/internal/testkernel"
	"github.com/shoal-sh/shoal/sdk/client"
)

// TestKillNineLeavesNoProcess: after `kill -9` (or SIGTERM) of the kernel, nothing a
// session started is left — not a setsid'd or nohup'd child, not a
// background task, not a PTY's program. Each session's confined worker
// sees its socket end and ends its whole domain. Cycled a few times, with
// a restarted kernel each time.
func TestKillNineLeavesNoProcess(t *testing.T) {
	if testing.Short() {
		t.Skip("kills and restarts a kernel several times")
	}
	dir, err := os.MkdirTemp(testkernel.StateParent(), "sho")
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(dir)
	ws := t.TempDir()
	rounds := 6 // SHOAL_ORPHAN_ROUNDS=50 for the long run
	if n, err := strconv.Atoi(os.Getenv("SHOAL_ORPHAN_ROUNDS")); err == nil && n > 0 {
		rounds = n
	}
	for round := 0; round < rounds; round++ {
		cmd, done := startKernelProc(t, dir)
		c, err := client.Dial(context.Background(), client.Options{StateDir: dir, Principal: "agent:orphans", Workspace: ws})
		if err != nil {
			t.Fatal(err)
		}
		ctx := context.Background()
		for _, f := range []string{"a", "b", "c", "d"} {
			os.Remove(filepath.Join(ws, f))
		}
		src := `setsid sh -c 'echo $$ > a; exec sleep 300' >/dev/null 2>&1 &
nohup sh -c 'echo $$ > b; exec sleep 301' >/dev/null 2>&1 &
sh -c "sh -c 'echo \$\$ > c; exec sleep 302' >/dev/null 2>&1 &"`
		if _, err := c.Exec(ctx, src, client.ExecOptions{}); err != nil {
			t.Fatal(err)
		}
		if _, err := c.Exec(ctx, `echo $$ > d; exec sleep 303`, client.ExecOptions{Background: true}); err != nil {
			t.Fatal(err)
		}
		var scr map[string]any
		if err := c.Call(ctx, "pty.open", map[string]any{"command": "sleep 304"}, &scr); err != nil {
			t.Fatal(err)
		}
		var pids []int
		for _, f := range []string{"a", "b", "c", "d"} {
			var pid int
			for deadline := time.Now().Add(10 * time.Second); pid == 0 && time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
				b, _ := os.ReadFile(filepath.Join(ws, f))
				pid, _ = strconv.Atoi(strings.TrimSpace(string(b)))
			}
			if pid == 0 {
				t.Fatalf("round %d: child %s never started", round, f)
			}
			pids = append(pids, pid)
		}
		pids = append(pids, sleepers(t, "304")...)
		c.Close()
		// Every other round a clean stop (SIGTERM), else kill -9.
		sig := syscall.SIGKILL
		if round%2 == 1 {
			sig = syscall.SIGTERM
		}
		if err := syscall.Kill(cmd.Process.Pid, sig); err != nil {
			t.Fatal(err)
		}
		<-done
		deadline := time.Now().Add(15 * time.Second)
		for alive(pids) && time.Now().Before(deadline) {
			time.Sleep(20 * time.Millisecond)
		}
		if alive(pids) {
			for _, p := range pids {
				syscall.Kill(p, syscall.SIGKILL)
			}
			t.Fatalf("round %d: processes outlived the killed kernel: %v", round, pids)
		}
	}
	t.Logf("%d rounds (kill -9 and SIGTERM in turn): no process left", rounds)
}

func alive(pids []int) bool {
	for _, p := range pids {
		if syscall.Kill(p, 0) == nil {
			if b, err := os.ReadFile("/proc/" + strconv.Itoa(p) + "/stat"); err == nil && !strings.Contains(string(b), ") Z ") {
				return true
			}
		}
	}
	return false
}

// sleepers finds the pids of `sleep ARG` processes.
func sleepers(t *testing.T, arg string) []int {
	t.Helper()
	var out []int
	for deadline := time.Now().Add(10 * time.Second); len(out) == 0 && time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		ents, _ := os.ReadDir("/proc")
		for _, e := range ents {
			pid, err := strconv.Atoi(e.Name())
			if err != nil {
				continue
			}
			b, _ := os.ReadFile("/proc/" + e.Name() + "/cmdline")
			if string(b) == "sleep\x00"+arg+"\x00" {
				out = append(out, pid)
			}
		}
	}
	if len(out) == 0 {
		t.Fatalf("no sleep %s found", arg)
	}
	return out
}
