package shell

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestFilterSeesDirectReads: the bash fallback's messages lose bash's
// "bash: line N: " even after a long output that is read straight into
// the capture.
func TestFilterSeesDirectReads(t *testing.T) {
	needBash(t)
	e, _ := newTestEvaluator(t, nil, Options{})
	src := `true | false; echo "${PIPESTATUS[@]}"; head -c 300000 /dev/zero | tr '\0' x >&2; echo >&2; no_such_command_here`
	res, err := e.Run(context.Background(), src)
	if err != nil {
		t.Fatal(err)
	}
	want := strings.Repeat("x", 300000) + "\nno_such_command_here: command not found\n"
	if res.Stdout != "0 1\n" || res.Stderr != want {
		t.Fatalf("stdout %q, stderr ending %q", res.Stdout, tail(res.Stderr))
	}
}

// TestOutputsWithoutPidfd: when no pidfd can be opened for a process,
// its output is copied by goroutines instead, with the same results.
func TestOutputsWithoutPidfd(t *testing.T) {
	saved := pidfdOpen
	pidfdOpen = func(int, int) (int, error) { return -1, errors.New("no pidfd in this test") }
	defer func() { pidfdOpen = saved }()
	e, dir := newTestEvaluator(t, nil, Options{})
	if res := runSrc(t, e, `sh -c 'echo a; echo b >&2; echo c' 2>&1`); res.Stdout != "a\nb\nc\n" {
		t.Errorf("2>&1: %q", res.Stdout)
	}
	res := runSrc(t, e, `sh -c 'seq 1 100000; seq 1 100000 >&2; echo end'`)
	if !strings.HasSuffix(res.Stdout, "\n100000\nend\n") || !strings.HasSuffix(res.Stderr, "\n100000\n") {
		t.Errorf("large output: stdout …%q stderr …%q", tail(res.Stdout), tail(res.Stderr))
	}
	res = runSrc(t, e, `sh -c '(sleep 5; touch late.txt) & echo early'`)
	if res.Stdout != "early\n" {
		t.Errorf("daemonised grandchild: stdout %q", res.Stdout)
	}
	if _, err := os.Stat(filepath.Join(dir, "late.txt")); err == nil {
		t.Errorf("the run waited for the grandchild")
	}
}

// TestPanicAfterStart: a panic while a started process's output is read
// fails the command, and the process is still ended and reaped: nothing
// of it is left for Close to wait for.
func TestPanicAfterStart(t *testing.T) {
	saved := pidfdOpen
	pidfdOpen = func(int, int) (int, error) { panic("boom after start") }
	defer func() { pidfdOpen = saved }()
	e, _ := newTestEvaluator(t, nil, Options{})
	res := runSrc(t, e, `sleep 1000; echo "after $?"`)
	if res.Stdout != "after 70\n" || !strings.Contains(res.Stderr, "boom after start") {
		t.Fatalf("stdout %q stderr %q", res.Stdout, res.Stderr)
	}
	if ps := e.Processes(); len(ps) != 0 {
		t.Errorf("processes left after the run: %+v", ps)
	}
	pidfdOpen = saved
	if err := e.Close(); err != nil {
		t.Errorf("Close: %v", err)
	}
}
