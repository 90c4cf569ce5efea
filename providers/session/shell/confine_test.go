//go:build linux

package shell

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/shoal-sh/shoal/providers/session/sandbox"
)

// confinedShell is an evaluator whose domain may write only ws and tmp,
// with a canary tree beside it and a denied "state" dir.
func confinedShell(t *testing.T) (e *Evaluator, ws, outside, state string) {
	t.Helper()
	if sandbox.ABI() < 1 {
		t.Skip("no Landlock in this kernel")
	}
	root := t.TempDir()
	ws, outside, state = filepath.Join(root, "ws"), filepath.Join(root, "outside"), filepath.Join(root, "state")
	tmp, fifo := filepath.Join(root, "tmp"), filepath.Join(root, "fifo")
	for _, d := range []string{ws, outside, state, tmp, fifo} {
		if err := os.Mkdir(d, 0o700); err != nil {
			t.Fatal(err)
		}
	}
	os.WriteFile(filepath.Join(outside, "canary"), []byte("canary\n"), 0o644)
	os.WriteFile(filepath.Join(state, "token"), []byte("secret\n"), 0o600)
	d := sandbox.NewDomain(sandbox.Rules{
		Writable: []string{ws, tmp}, Denied: []string{state}, FileRW: []string{fifo},
		Devices: sandbox.DefaultDevices, Required: true,
	})
	var err error
	e, err = New(Options{Dir: ws, Domain: d, FifoDir: fifo, TempDir: tmp})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		e.Close()
		d.Close()
	})
	return e, ws, outside, state
}

func TestConfinedWorkStillWorks(t *testing.T) {
	e, ws, _, _ := confinedShell(t)
	for _, tc := range []struct{ src, want string }{
		{"echo hi > a.txt && cat a.txt", "hi\n"},
		{"printf 'b\\na\\n' | sort | head -1", "a\n"},
		{"mkdir -p d/e && touch d/e/f && /bin/ls d/e", "f\n"},
		{"cat <<EOF\nhere\nEOF", "here\n"},
		{"cat <<< str", "str\n"},
		{"diff <(echo x) <(echo x) && echo same", "same\n"},
		{"echo one >> log; echo two >> log; wc -l < log", "2\n"},
		{"t=$(mktemp) && echo tmp > $t && cat $t && rm $t", "tmp\n"},
		{"echo g1 > g1.x; echo g2 > g2.x; echo *.x", "g1.x g2.x\n"},
		{"mv a.txt d/ && cat d/a.txt", "hi\n"},
	} {
		res, err := e.Run(context.Background(), tc.src)
		if err != nil {
			t.Fatalf("%q: %v", tc.src, err)
		}
		if res.Stdout != tc.want || res.Exit != 0 {
			t.Errorf("%q: stdout %q exit %d stderr %q, want %q", tc.src, res.Stdout, res.Exit, res.Stderr, tc.want)
		}
	}
	if _, err := os.Stat(filepath.Join(ws, "d", "a.txt")); err != nil {
		t.Fatal(err)
	}
}

func TestConfinedEscapesFail(t *testing.T) {
	e, _, outside, state := confinedShell(t)
	canary := filepath.Join(outside, "canary")
	for _, src := range []string{
		"echo x > " + canary,
		"echo x >> " + canary,
		"cd " + outside + " && echo x > canary",
		"cd " + outside + "; echo new > created",
		"ln -s " + canary + " l && echo x > l",
		"ln " + canary + " hard",
		"IFS=,; x=rm,-f," + canary + "; $x",
		"rm --for " + canary,
		"cp /etc/hostname " + canary,
		"sh -c 'echo x > " + canary + "'",
		"BASH_ENV=/dev/null bash -c 'echo x > " + canary + "'",
		"python3 -c 'open(\"" + canary + "\", \"w\").write(\"x\")'",
		"truncate -s0 " + canary,
		": > " + canary,
		"declare -n r=x; x=" + canary + "; echo pwned > $r",
		"mv " + canary + " moved",
		"cat " + state + "/token",
		"source " + state + "/token",
		"read -r line < " + state + "/token; echo $line",
		"open " + state + "/token",
		"ls " + state + "/token >/dev/null && cp " + state + "/token stolen && cat stolen",
		"echo x > " + state + "/policy.toml",
		// Sources that run under GNU bash (bash.go) are confined alike.
		"exec 3>" + canary + "; echo x >&3",
		"echo x >| " + canary,
		": $BASHPID; echo x > " + canary + "; cat " + state + "/token",
		"true | false; echo ${PIPESTATUS[@]} > " + canary,
	} {
		res, err := e.Run(context.Background(), src)
		if err != nil {
			t.Fatalf("%q: %v", src, err)
		}
		if strings.Contains(res.Stdout, "secret") || strings.Contains(res.Stderr, "secret") {
			t.Errorf("%q read the denied token: %q %q", src, res.Stdout, res.Stderr)
		}
		if b, _ := os.ReadFile(canary); string(b) != "canary\n" {
			t.Fatalf("%q changed the canary: %q", src, b)
		}
	}
	ents, _ := os.ReadDir(outside)
	if len(ents) != 1 {
		t.Fatalf("outside holds %d entries, want only the canary", len(ents))
	}
	if ents, _ := os.ReadDir(state); len(ents) != 1 {
		t.Fatalf("state holds %d entries", len(ents))
	}
	res, _ := e.Run(context.Background(), "echo x > "+canary)
	if !slices.Contains(res.Marks, MarkConfined) || !slices.Contains(res.Denied, canary) {
		t.Errorf("a refused redirection is not marked: marks %v denied %v", res.Marks, res.Denied)
	}
}

// A source that needs bash runs under bash inside the domain, and its
// state still comes back (the state files live in the FIFO directory).
func TestConfinedBashFallback(t *testing.T) {
	needBash(t)
	e, ws, outside, _ := confinedShell(t)
	res, err := e.Run(context.Background(), "exec 3>f.txt; echo via3 >&3; exec 3>&-; cat f.txt; v=$BASHPID; g() { echo g; }; echo x > "+filepath.Join(outside, "new"))
	if err != nil {
		t.Fatal(err)
	}
	if res.Stdout != "via3\n" || !slices.Contains(res.Marks, MarkBash) {
		t.Fatalf("stdout %q marks %v stderr %q", res.Stdout, res.Marks, res.Stderr)
	}
	if _, err := os.Stat(filepath.Join(outside, "new")); err == nil {
		t.Fatal("bash wrote outside the workspace")
	}
	if b, _ := os.ReadFile(filepath.Join(ws, "f.txt")); string(b) != "via3\n" {
		t.Fatalf("f.txt = %q", b)
	}
	res, err = e.Run(context.Background(), "g; [ -n \"$v\" ] && echo set")
	if err != nil || res.Stdout != "g\nset\n" {
		t.Fatalf("state did not come back: %q %q %v", res.Stdout, res.Stderr, err)
	}
}
