package boot_test

import (
	"context"
	"encoding/json"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/shoal-sh/shoal/core/kernel"
	"github.com/shoal-sh/shoal/core/rpc"
	"github.com/shoal-sh/shoal/internal/testkernel"
	"github.com/shoal-sh/shoal/sdk/client"
)

// TestSessionScopedEvents: render and task.{id} events are seen only by
// their own session, in reads (events.read, shoal://events/…) and in
// subscriptions.
func TestSessionScopedEvents(t *testing.T) {
	k := testkernel.Start(t, kernel.Options{})
	ctx := context.Background()
	var mu sync.Mutex
	seen := map[string][]string{} // session → render sessions pushed to it
	sub := func(session string) *client.Client {
		c := testkernel.Attach(t, k.StateDir(), client.Options{Session: session, OnEvent: func(ev client.Event) {
			var p struct {
				Session string `json:"session"`
			}
			json.Unmarshal(ev.Payload, &p)
			mu.Lock()
			seen[session] = append(seen[session], p.Session)
			mu.Unlock()
		}})
		if _, err := c.Subscribe(ctx, "render"); err != nil {
			t.Fatal(err)
		}
		return c
	}
	a, b := sub("alpha"), sub("beta")
	if _, err := a.Exec(ctx, "echo from-alpha", client.ExecOptions{}); err != nil {
		t.Fatal(err)
	}
	task, err := a.Exec(ctx, "sleep 0.05", client.ExecOptions{Background: true})
	if err != nil || task.Task == "" {
		t.Fatalf("background: %+v %v", task, err)
	}
	if _, err := b.Exec(ctx, "echo from-beta", client.ExecOptions{}); err != nil {
		t.Fatal(err)
	}
	// beta's own render event arrives after alpha's was published: once
	// beta has it, alpha's would have been pushed too.
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(5 * time.Millisecond) {
		mu.Lock()
		n := len(seen["beta"])
		mu.Unlock()
		if n > 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("beta never got its own render event")
		}
	}
	taskCh := "task." + strings.TrimPrefix(task.Task, "task:")
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(5 * time.Millisecond) {
		page, err := a.Events(ctx, taskCh, nil, 100)
		if err != nil {
			t.Fatal(err)
		}
		if len(page.Events) > 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the task never published")
		}
	}
	mu.Lock()
	if strings.Join(seen["beta"], ",") != "beta" {
		t.Errorf("beta's subscription got render events of %v", seen["beta"])
	}
	mu.Unlock()
	for _, tt := range []struct {
		c       *client.Client
		channel string
		want    string // the sessions of the events seen
	}{
		{a, "render", "alpha"},
		{b, "render", "beta"},
		{a, taskCh, "alpha"},
		{b, taskCh, ""},
	} {
		page, err := tt.c.Events(ctx, tt.channel, nil, 100)
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		for _, ev := range page.Events {
			var p struct {
				Session string `json:"session"`
			}
			json.Unmarshal(ev.Payload, &p)
			if !strings.Contains(strings.Join(got, ","), p.Session) {
				got = append(got, p.Session)
			}
		}
		if strings.Join(got, ",") != tt.want {
			t.Errorf("events.read %s: events of %v; want %q", tt.channel, got, tt.want)
		}
		// The same through the resource.
		r, err := tt.c.Read(ctx, "shoal://events/"+tt.channel)
		if err != nil {
			t.Fatal(err)
		}
		raw, _ := json.Marshal(r)
		other := map[string]string{"alpha": "beta", "beta": "alpha", "": "alpha"}[tt.want]
		if strings.Contains(string(raw), `\"session\":\"`+other+`\"`) || strings.Contains(string(raw), `"session":"`+other+`"`) {
			t.Errorf("shoal://events/%s read as %s shows %s's events", tt.channel, tt.want, other)
		}
	}
}

// TestNULSource: source with a NUL byte is refused, not cut.
func TestNULSource(t *testing.T) {
	k := testkernel.Start(t, kernel.Options{})
	c := testkernel.Attach(t, k.StateDir(), client.Options{})
	_, err := c.Exec(context.Background(), "echo a\x00b", client.ExecOptions{})
	if rpc.CodeOf(err) != rpc.InvalidParams || !strings.Contains(err.Error(), "NUL") {
		t.Fatalf("NUL in source: %v", err)
	}
}
