package task

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/shoal-sh/shoal/core/bus"
	"github.com/shoal-sh/shoal/core/rpc"
)

func states(t *testing.T, b *bus.Bus, id int) []string {
	t.Helper()
	r, err := b.Read(Channel(id), nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, ev := range r.Events {
		var p struct{ State string }
		json.Unmarshal(ev.Payload, &p)
		out = append(out, p.State)
	}
	return out
}

func TestLifecycle(t *testing.T) {
	b := bus.New(bus.Options{})
	r := NewRegistry(b)
	ok := r.Begin("s", "agent:a", "make\nmore", func() {}, time.Now())
	r.Finish(ok, Outcome{Exit: 0, ResultRef: "out:4"})
	bad := r.Begin("s", "agent:a", "false", func() {}, time.Now())
	r.Finish(bad, Outcome{Exit: 1})
	broken := r.Begin("s", "agent:a", "x", func() {}, time.Now())
	r.Finish(broken, Outcome{Err: errors.New("capture failed")})
	if rec := ok.Record(); rec.State != Completed || rec.ResultRef != "out:4" || rec.Description != "make" || *rec.Exit != 0 {
		t.Errorf("completed: %+v", rec)
	}
	if rec := bad.Record(); rec.State != Failed || rec.Error != "exit status 1" {
		t.Errorf("failed: %+v", rec)
	}
	if rec := broken.Record(); rec.State != Failed || rec.Error != "capture failed" {
		t.Errorf("broken: %+v", rec)
	}
	if got := strings.Join(states(t, b, ok.Record().ID), ","); got != "running,completed" {
		t.Errorf("events %s", got)
	}
	r.Finish(ok, Outcome{Exit: 3}) // a second Finish changes nothing
	if got := strings.Join(states(t, b, ok.Record().ID), ","); got != "running,completed" {
		t.Errorf("events after a second finish %s", got)
	}
	list := r.List("s")
	if len(list) != 3 || list[0].ID != broken.Record().ID {
		t.Errorf("list newest first: %+v", list)
	}
	if len(r.List("other")) != 0 {
		t.Error("another session sees the tasks")
	}
	if _, err := r.Get("other", ok.Record().ID); rpc.CodeOf(err) != rpc.NotFound {
		t.Errorf("cross-session get: %v", err)
	}
	if r.Busy() {
		t.Error("busy with no running task")
	}
}

func TestCancel(t *testing.T) {
	b := bus.New(bus.Options{})
	r := NewRegistry(b)
	ctx, cancel := context.WithCancel(context.Background())
	tk := r.Begin("s", "agent:a", "sleep 100", cancel, time.Now())
	go func() {
		<-ctx.Done() // the run notices and reports back
		r.Finish(tk, Outcome{Exit: 130, Err: ctx.Err()})
	}()
	if !r.Busy() {
		t.Error("not busy while running")
	}
	rec, err := r.Cancel("s", tk.Record().ID)
	if err != nil || rec.State != Cancelled {
		t.Fatalf("cancel: %+v %v", rec, err)
	}
	if _, err := r.Cancel("s", tk.Record().ID); rpc.CodeOf(err) != rpc.TaskState {
		t.Errorf("second cancel: %v", err)
	}
	if got := strings.Join(states(t, b, tk.Record().ID), ","); got != "running,cancelled" {
		t.Errorf("events %s", got)
	}
}

func TestParseID(t *testing.T) {
	for in, want := range map[string]int{`9`: 9, `"9"`: 9, `"task:9"`: 9, `"shoal://task/9"`: 9} {
		if n, err := ParseID(json.RawMessage(in)); err != nil || n != want {
			t.Errorf("ParseID(%s) = %d %v", in, n, err)
		}
	}
	for _, bad := range []string{`0`, `"task:"`, `{}`, `"x"`} {
		if _, err := ParseID(json.RawMessage(bad)); rpc.CodeOf(err) != rpc.InvalidParams {
			t.Errorf("ParseID(%s) err %v", bad, err)
		}
	}
}
