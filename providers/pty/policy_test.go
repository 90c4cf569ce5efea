package pty

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/shoal-sh/shoal/core"
	"github.com/shoal-sh/shoal/core/policy"
	"github.com/shoal-sh/shoal/core/rpc"
	"github.com/shoal-sh/shoal/providers/plan"
)

// pty.open goes through the policy with the same analysis as exec, and is
// refused the same way: a recursive delete needs a plan, and nothing
// starts.
func TestOpenChecksPolicy(t *testing.T) {
	m := newManager(t)
	h := &core.Host{StateDir: t.TempDir()}
	core.Offer(h, core.ServicePolicy, policy.Default())
	if err := core.Wire(h, plan.New(), m); err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(t.TempDir(), "victim")
	if err := os.MkdirAll(filepath.Join(dir, "sub"), 0o755); err != nil {
		t.Fatal(err)
	}
	for _, o := range []OpenOptions{
		{Command: "rm -rf " + dir},
		{Argv: []string{"rm", "-rf", dir}},
		{Command: "true", Env: map[string]string{"BASH_ENV": "evil.sh"}},
		{Command: "kill -9 -1"},
	} {
		_, err := m.Open(context.Background(), alice, o)
		if rpc.CodeOf(err) != rpc.PolicyRefused {
			t.Fatalf("pty.open %+v: %v; want POLICY_REFUSED as exec", o, err)
		}
	}
	if _, err := os.Stat(filepath.Join(dir, "sub")); err != nil {
		t.Fatalf("the refused PTY ran: %v", err)
	}
	if len(m.PTYs(alice.Session)) != 0 {
		t.Fatal("a refused PTY is listed")
	}
	// Interactive work on the terminal opens: a shell, an interpreter and
	// an editor read their commands from it later.
	for _, o := range []OpenOptions{{Argv: []string{"cat"}}, {Command: "sh"}, {Argv: []string{"python3"}}, {Command: "vi notes.txt"}} {
		if err := m.checkPolicy(context.Background(), alice, programText(t, m, o), dir, nil); err != nil {
			t.Fatalf("pty.open %+v refused: %v", o, err)
		}
	}
	s := open(t, m, alice, OpenOptions{Argv: []string{"cat"}, Settle: 0})
	if _, err := m.ClosePTY(alice.Session, s.PTY); err != nil {
		t.Fatal(err)
	}
}

// programText is what Open shows and checks of o.
func programText(t *testing.T, m *Manager, o OpenOptions) string {
	t.Helper()
	display, _, _, err := m.program(o)
	if err != nil {
		t.Fatal(err)
	}
	return display
}
