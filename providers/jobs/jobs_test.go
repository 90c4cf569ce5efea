package jobs

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/shoal-sh/shoal/core"
	"github.com/shoal-sh/shoal/core/bus"
	"github.com/shoal-sh/shoal/core/rpc"
	"github.com/shoal-sh/shoal/core/uri"
	"github.com/shoal-sh/shoal/providers/task"
)

// jobsOf reads shoal://jobs as session and returns its tasks as the
// wire shows them.
func jobsOf(t *testing.T, p *Provider, session string) []task.Record {
	t.Helper()
	u, err := uri.Parse("shoal://jobs")
	if err != nil {
		t.Fatal(err)
	}
	c, err := p.Read(context.Background(), &core.Caller{Session: session}, u)
	if err != nil {
		t.Fatal(err)
	}
	raw, err := json.Marshal(c.Record)
	if err != nil {
		t.Fatal(err)
	}
	var out struct {
		Tasks []task.Record `json:"tasks"`
	}
	if err := json.Unmarshal(raw, &out); err != nil {
		t.Fatal(err)
	}
	if out.Tasks == nil {
		t.Fatalf("%s: tasks is %s, want a list", session, raw)
	}
	return out.Tasks
}

// TestJobs: shoal://jobs lists the caller's own tasks, newest first, in
// every state a task reaches; another session's are not there, and a
// session without tasks reads an empty list.
func TestJobs(t *testing.T) {
	b := bus.New(bus.Options{})
	defer b.Close()
	reg := task.NewRegistry(b)
	p := &Provider{tasks: reg}
	start := time.Now()
	noop := func() {}
	running := reg.Begin("s1", "agent:a", "sleep 100", noop, start)
	done := reg.Begin("s1", "agent:a", "make build\nmake test", noop, start)
	failed := reg.Begin("s1", "agent:a", "false", noop, start)
	errored := reg.Begin("s1", "agent:a", "cat x", noop, start)
	// A cancelled run reports back through Finish, as a session's does.
	var cancelled *task.Task
	cancelled = reg.Begin("s1", "agent:a", "yes", func() { go reg.Finish(cancelled, task.Outcome{Exit: 130}) }, start)
	other := reg.Begin("s2", "agent:b", "ls", noop, start)
	reg.Finish(done, task.Outcome{Exit: 0, ResultRef: "out:4"})
	reg.Finish(failed, task.Outcome{Exit: 1})
	reg.Finish(errored, task.Outcome{Exit: 1, Err: errors.New("capture failed")})
	if _, err := reg.Cancel("s1", cancelled.Record().ID); err != nil {
		t.Fatal(err)
	}
	reg.Finish(other, task.Outcome{})

	got := jobsOf(t, p, "s1")
	want := []struct {
		id                 int
		state, desc, error string
	}{
		{cancelled.Record().ID, task.Cancelled, "yes", ""},
		{errored.Record().ID, task.Failed, "cat x", "capture failed"},
		{failed.Record().ID, task.Failed, "false", "exit status 1"},
		{done.Record().ID, task.Completed, "make build", ""},
		{running.Record().ID, task.Running, "sleep 100", ""},
	}
	if len(got) != len(want) {
		t.Fatalf("s1 sees %d tasks, want %d: %+v", len(got), len(want), got)
	}
	for i, w := range want {
		g := got[i]
		if g.ID != w.id || g.State != w.state || g.Description != w.desc || g.Error != w.error || g.Session != "s1" {
			t.Errorf("task %d: %+v, want id %d %s %q error %q", i, g, w.id, w.state, w.desc, w.error)
		}
		if (g.State == task.Running) != (g.Exit == nil) {
			t.Errorf("task %d (%s): exit %v", g.ID, g.State, g.Exit)
		}
	}
	if got[3].ResultRef != "out:4" || got[3].URI != "shoal://task/"+itoa(done.Record().ID) {
		t.Errorf("completed task %+v", got[3])
	}
	if s2 := jobsOf(t, p, "s2"); len(s2) != 1 || s2[0].ID != other.Record().ID || s2[0].State != task.Completed {
		t.Errorf("s2 sees %+v", s2)
	}
	if none := jobsOf(t, p, "s3"); len(none) != 0 {
		t.Errorf("s3 sees %+v", none)
	}
}

func itoa(n int) string { b, _ := json.Marshal(n); return string(b) }

// TestRefusals: jobs has no sub-resources (BAD_URI naming where a task
// is read), and a provider without the task registry does not start.
func TestRefusals(t *testing.T) {
	p := &Provider{tasks: task.NewRegistry(nil)}
	u, err := uri.Parse("shoal://jobs/3")
	if err != nil {
		t.Fatal(err)
	}
	_, err = p.Read(context.Background(), &core.Caller{Session: "s"}, u)
	var re *rpc.Error
	if !errors.As(err, &re) || re.Code != rpc.BadURI || !strings.Contains(re.Message, "shoal://task/{id}") {
		t.Errorf("read of shoal://jobs/3: %v, want BAD_URI pointing at shoal://task/{id}", err)
	}
	if err := core.Wire(&core.Host{}, New()); err == nil || !strings.Contains(err.Error(), `service "tasks" (*task.Registry), needed by jobs, is offered by no provider`) {
		t.Errorf("start without the task registry: %v", err)
	}
}

// TestList: one root, shoal://jobs, whatever the tasks.
func TestList(t *testing.T) {
	p := New()
	res, err := p.List(context.Background(), &core.Caller{Session: "s"})
	if err != nil {
		t.Fatal(err)
	}
	if len(res) != 1 || res[0].URI != "shoal://jobs" || !res[0].Root || res[0].MimeType != "application/json" {
		t.Errorf("List = %+v", res)
	}
	if p.Family() != "jobs" || len(p.Templates()) != 0 {
		t.Errorf("family %q templates %v", p.Family(), p.Templates())
	}
}
