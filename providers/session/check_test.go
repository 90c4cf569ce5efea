package session

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"mvdan.cc/sh/v3/syntax"

	"github.com/shoal-sh/shoal/core"
	"github.com/shoal-sh/shoal/core/bus"
	"github.com/shoal-sh/shoal/core/policy"
	"github.com/shoal-sh/shoal/core/rpc"
	"github.com/shoal-sh/shoal/providers/out"
	"github.com/shoal-sh/shoal/providers/task"
)

// recordingCheck is a core.PolicyCheck that records where each source was
// judged and refuses any source that mentions "forbidden".
type recordingCheck struct {
	mu     sync.Mutex
	judged map[string]string // source → cwd it was judged in
}

func (r *recordingCheck) CheckExec(_ context.Context, _ *core.Caller, _ *syntax.File, source, cwd string,
	vars func(string) (string, bool), _ func(string) (*syntax.Stmt, bool)) error {
	r.mu.Lock()
	r.judged[source] = cwd
	r.mu.Unlock()
	if strings.Contains(source, "forbidden") {
		return rpc.Errorf(rpc.PolicyRefused, "refused by the test")
	}
	return nil
}

func (r *recordingCheck) CheckTerminal(ctx context.Context, c *core.Caller, source, cwd string) error {
	return r.CheckExec(ctx, c, nil, source, cwd, nil, nil)
}

func (r *recordingCheck) cwd(source string) string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.judged[source]
}

func newCheckedProvider(t *testing.T) (*Provider, *recordingCheck) {
	t.Helper()
	b := bus.New(bus.Options{})
	h := &core.Host{StateDir: t.TempDir(), Bus: b}
	core.Offer(h, out.ServiceTranscript, out.NewTranscript(nil, 1<<20))
	core.Offer(h, task.ServiceTasks, task.NewRegistry(b))
	rc := &recordingCheck{judged: map[string]string{}}
	core.Offer[core.PolicyCheck](h, core.ServicePolicyCheck, rc)
	// These tests write in their temp dirs, outside the workspace (the
	// package directory): the confinement lets them.
	pol, err := policy.Parse("[sandbox]\nwritable = [\""+os.TempDir()+"\"]\n", "test")
	if err != nil {
		t.Fatal(err)
	}
	core.Offer(h, core.ServicePolicy, pol)
	p := New()
	if err := core.Wire(h, p); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := p.Close(); err != nil {
			t.Error(err)
		}
		b.Close()
	})
	return p, rc
}

// The check of an execution that waits for its turn is made once it has
// the turn, on the state the run starts from: a cd by the execution ahead
// of it (another connection's) is seen by both the check and the run.
func TestCheckRunsInTheTurn(t *testing.T) {
	p, rc := newCheckedProvider(t)
	dir := t.TempDir()
	sub := filepath.Join(dir, "sub")
	fifo := filepath.Join(dir, "fifo")
	if err := os.Mkdir(sub, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	c1 := &core.Caller{Session: "main", Principal: "agent:one"}
	c2 := &core.Caller{Session: "main", Principal: "agent:two"}
	first := "cd " + sub + " && touch ../started && read l < ../fifo"
	done1 := make(chan error, 1)
	go func() {
		_, err := p.Exec(context.Background(), c1, core.ExecRequest{Source: first})
		done1 <- err
	}()
	for {
		if _, err := os.Stat(filepath.Join(dir, "started")); err == nil {
			break
		}
		time.Sleep(2 * time.Millisecond)
	}
	second := "pwd > " + filepath.Join(dir, "where")
	done2 := make(chan error, 1)
	go func() {
		_, err := p.Exec(context.Background(), c2, core.ExecRequest{Source: second})
		done2 <- err
	}()
	// Give the second execution time to reach its turn (a check made
	// before the turn would be made now, in the old directory).
	time.Sleep(30 * time.Millisecond)
	if err := os.WriteFile(fifo, []byte("go\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := <-done1; err != nil {
		t.Fatal(err)
	}
	if err := <-done2; err != nil {
		t.Fatal(err)
	}
	where, err := os.ReadFile(filepath.Join(dir, "where"))
	if err != nil {
		t.Fatal(err)
	}
	if got := rc.cwd(second); got != sub || strings.TrimSpace(string(where)) != sub {
		t.Fatalf("checked in %q, ran in %q; both must be %s", got, strings.TrimSpace(string(where)), sub)
	}
}

// A refused execution runs nothing, in the foreground or as a task from
// the start, and uses up no out:N.
func TestRefusedRunsNothing(t *testing.T) {
	p, _ := newCheckedProvider(t)
	dir := t.TempDir()
	c := &core.Caller{Session: "main", Principal: "agent:a"}
	for _, req := range []core.ExecRequest{
		{Source: "touch " + filepath.Join(dir, "forbidden")},
		{Source: "touch " + filepath.Join(dir, "forbidden-bg"), Background: true},
		{Source: "touch " + filepath.Join(dir, "forbidden-timeout"), TimeoutMS: 60_000},
	} {
		reply, err := p.Exec(context.Background(), c, req)
		if rpc.CodeOf(err) != rpc.PolicyRefused {
			t.Fatalf("%+v: reply %+v, err %v; want POLICY_REFUSED", req, reply, err)
		}
	}
	reply, err := p.Exec(context.Background(), c, core.ExecRequest{Source: "true"})
	if err != nil || reply.Ref != "out:1" {
		t.Fatalf("next execution: %+v %v; want out:1", reply, err)
	}
	ents, err := os.ReadDir(dir)
	if err != nil || len(ents) != 0 {
		t.Fatalf("refused sources ran: %v %v", ents, err)
	}
}
