package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestSubscribeNotifyUnsubscribe(t *testing.T) {
	sd := newStateDir(t)
	p := startStdio(t, sd, "agent:test")
	// The facade attaches once its session is settled (after the
	// handshake); a call makes sure its request connection is up.
	p.callOK("shoal_exec", map[string]any{"source": "true"})
	pub := sd.dial(t, "human:test", nil)
	base := sd.status(t, pub).Connections // the facade's request connection and pub

	const uri = "shoal://events/user.x"
	if _, rerr := p.raw("resources/subscribe", map[string]any{"uri": uri}); rerr != nil {
		t.Fatalf("subscribe: %s", rerr.Message)
	}
	if n := sd.status(t, pub).Connections; n != base+1 {
		t.Errorf("connections after subscribe %d, want %d (one per subscription)", n, base+1)
	}
	ctx := context.Background()
	ev, err := pub.Publish(ctx, "user.x", map[string]any{"n": 1})
	if err != nil {
		t.Fatal(err)
	}
	up := p.nextUpdate(uri)
	if up.Seq != ev.Seq || string(up.Payload) != `{"n":1}` {
		t.Errorf("update %+v, want seq %d payload {\"n\":1}", up, ev.Seq)
	}
	// _meta mirrors them, for SDKs whose typed handler keeps only uri.
	if p, _ := json.Marshal(up.Meta[metaPrefix+"payload"]); up.Meta[metaPrefix+"seq"] != float64(ev.Seq) || string(p) != `{"n":1}` {
		t.Errorf("update _meta %v, want seq %d and the payload", up.Meta, ev.Seq)
	}

	// Subscribing again keeps the one forwarder: one notification per event.
	if _, rerr := p.raw("resources/subscribe", map[string]any{"uri": uri}); rerr != nil {
		t.Fatalf("subscribe again: %s", rerr.Message)
	}
	if n := sd.status(t, pub).Connections; n != base+1 {
		t.Errorf("connections after a second subscribe %d, want %d", n, base+1)
	}
	ev2, _ := pub.Publish(ctx, "user.x", map[string]any{"n": 2})
	if up := p.nextUpdate(uri); up.Seq != ev2.Seq {
		t.Errorf("second update seq %d, want %d", up.Seq, ev2.Seq)
	}

	// Unsubscribe ends the forwarder and its kernel connection.
	if _, rerr := p.raw("resources/unsubscribe", map[string]any{"uri": uri}); rerr != nil {
		t.Fatalf("unsubscribe: %s", rerr.Message)
	}
	if !waitFor(waitLong, func() bool { return sd.status(t, pub).Connections == base }) {
		t.Fatalf("connections stay %d after unsubscribe, want %d", sd.status(t, pub).Connections, base)
	}
	// Events after that do not arrive: publish on x, then on a channel
	// still subscribed, and see only the latter.
	const other = "shoal://events/user.y"
	if _, rerr := p.raw("resources/subscribe", map[string]any{"uri": other}); rerr != nil {
		t.Fatal(rerr.Message)
	}
	pub.Publish(ctx, "user.x", map[string]any{"n": 3})
	pub.Publish(ctx, "user.y", map[string]any{"n": 4})
	p.nextUpdate(other)
	for _, up := range p.drainUpdates() {
		if up.URI == uri {
			t.Errorf("update after unsubscribe: %+v", up)
		}
	}
	// Unsubscribing what is not subscribed is fine.
	if _, rerr := p.raw("resources/unsubscribe", map[string]any{"uri": "shoal://events/user.never"}); rerr != nil {
		t.Errorf("unsubscribe of nothing: %s", rerr.Message)
	}

	// The client going away ends every forwarder and connection.
	p.close()
	if !waitFor(waitLong, func() bool { return sd.status(t, pub).Connections == 1 }) {
		t.Errorf("connections %d after the facade ended, want 1 (this test's)", sd.status(t, pub).Connections)
	}
}

func TestSubscribeRefused(t *testing.T) {
	sd := newStateDir(t)
	p := startStdio(t, sd, "agent:test")
	for _, uri := range []string{"shoal://jobs", "shoal://session/cwd", "shoal://out/1", "shoal://pty/1", "not a uri"} {
		_, rerr := p.raw("resources/subscribe", map[string]any{"uri": uri})
		if rerr == nil {
			t.Errorf("subscribe %s: accepted", uri)
			continue
		}
		if !strings.HasPrefix(rerr.Message, "kernel error:") {
			t.Errorf("subscribe %s: message %q", uri, rerr.Message)
		}
	}
	if _, rerr := p.raw("resources/subscribe", map[string]any{}); rerr == nil || rerr.Code != -32602 {
		t.Errorf("subscribe without uri: %+v", rerr)
	}
}

func TestSubscribeTask(t *testing.T) {
	sd := newStateDir(t)
	p := startStdio(t, sd, "agent:test")
	gate := filepath.Join(sd.dir, "gate")
	t.Cleanup(func() { os.WriteFile(gate, nil, 0o600) })
	m, _ := p.callOK("shoal_exec", map[string]any{"source": fmt.Sprintf("while [ ! -e %s ]; do sleep 0.02; done; echo done", gate), "background": true})
	id := strings.TrimPrefix(m["task"].(string), "task:")
	record := "shoal://task/" + id
	out := record + "/out"
	for _, uri := range []string{record, out} {
		if _, rerr := p.raw("resources/subscribe", map[string]any{"uri": uri}); rerr != nil {
			t.Fatalf("subscribe %s: %s", uri, rerr.Message)
		}
	}
	os.WriteFile(gate, nil, 0o600)
	// Both forms follow task.{id}; each notification names its own URI.
	for _, uri := range []string{record, out} {
		for {
			up := p.nextUpdate(uri)
			var st struct {
				State string `json:"state"`
			}
			json.Unmarshal(up.Payload, &st)
			if st.State == "completed" {
				break
			}
		}
	}
	env := p.read(out + "?path=.stdout")
	if !strings.Contains(string(env.StructuredContent), "done") {
		t.Errorf("task out after completion: %s", env.StructuredContent)
	}
}

func TestTwoPrincipals(t *testing.T) {
	sd := newStateDir(t)
	a := startStdio(t, sd, "agent:alpha")
	b := startStdio(t, sd, "agent:beta")
	const uri = "shoal://events/user.shared"
	for _, p := range []*mcpPeer{a, b} {
		if _, rerr := p.raw("resources/subscribe", map[string]any{"uri": uri}); rerr != nil {
			t.Fatal(rerr.Message)
		}
	}
	a.callOK("shoal_exec", map[string]any{"source": `emit user.shared '{"from":"alpha"}'`})
	for _, p := range []*mcpPeer{a, b} {
		if up := p.nextUpdate(uri); string(up.Payload) != `{"from":"alpha"}` {
			t.Errorf("payload %s", up.Payload)
		}
	}
	b.callOK("shoal_exec", map[string]any{"source": "echo beta-was-here"})

	c := sd.dial(t, "human:test", nil)
	for _, who := range []string{"agent:alpha", "agent:beta"} {
		var r struct {
			Rows []struct {
				Principal string `json:"principal"`
				Source    string `json:"source"`
			} `json:"rows"`
		}
		if err := c.Call(context.Background(), "journal.query", map[string]any{"principal": who}, &r); err != nil {
			t.Fatal(err)
		}
		if len(r.Rows) == 0 {
			t.Errorf("journal has no row of %s", who)
		}
		for _, row := range r.Rows {
			if row.Principal != who {
				t.Errorf("journal.query principal=%s returned a row of %s", who, row.Principal)
			}
		}
	}
}
