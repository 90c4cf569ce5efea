package events

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/shoal-sh/shoal/core"
	"github.com/shoal-sh/shoal/core/bus"
	"github.com/shoal-sh/shoal/core/rpc"
	"github.com/shoal-sh/shoal/core/uri"
)

// newProvider is the events provider over a fresh bus with a ring of
// ring events, and the bus.
func newProvider(t *testing.T, ring int) (*Provider, *bus.Bus) {
	t.Helper()
	b := bus.New(bus.Options{RingSize: ring, Epoch: "ep"})
	t.Cleanup(b.Close)
	p := New()
	if err := p.Provision(&core.Host{Bus: b}); err != nil {
		t.Fatal(err)
	}
	return p, b
}

func publish(t *testing.T, b *bus.Bus, ch string, payloads ...string) {
	t.Helper()
	for _, pl := range payloads {
		if _, err := b.Publish(ch, json.RawMessage(pl)); err != nil {
			t.Fatal(err)
		}
	}
}

func parse(t *testing.T, s string) *uri.URI {
	t.Helper()
	u, err := uri.Parse(s)
	if err != nil {
		t.Fatal(err)
	}
	return u
}

func seqs(evs []bus.Event) string {
	var out []string
	for _, e := range evs {
		out = append(out, fmt.Sprint(e.Seq))
	}
	return strings.Join(out, ",")
}

// TestRead: the cursor is exclusive, limit keeps the newest tail, bad
// typed parameters fall back to their defaults, a cursor older than what
// is retained says truncated, and session-scoped channels show a caller
// only its own session's events.
func TestRead(t *testing.T) {
	p, b := newProvider(t, 8)
	for i := range 5 {
		publish(t, b, "user.build", fmt.Sprintf(`{"n":%d}`, i))
	}
	for i := range 12 { // more than the ring keeps
		publish(t, b, "user.busy", fmt.Sprintf(`{"n":%d}`, i))
	}
	publish(t, b, "task.3", `{"session":"s1","state":"running"}`, `{"session":"s2","state":"running"}`, `{"session":"s1","state":"completed"}`)

	for _, tc := range []struct {
		uri       string
		session   string
		seqs      string
		oldest    string // "" for null
		next      uint64
		truncated bool
	}{
		{"shoal://events/user.build", "s1", "0,1,2,3,4", "0", 5, false},
		{"shoal://events/user.build?since=1", "s1", "2,3,4", "0", 5, false},
		{"shoal://events/user.build?since=4", "s1", "", "0", 5, false},
		{"shoal://events/user.build?since=99", "s1", "", "0", 5, false},
		{"shoal://events/user.build?limit=2", "s1", "3,4", "0", 5, false},
		{"shoal://events/user.build?since=0&limit=2", "s1", "3,4", "0", 5, false},
		{"shoal://events/user.build?since=x", "s1", "0,1,2,3,4", "0", 5, false},  // bad since: from the oldest
		{"shoal://events/user.build?limit=-3", "s1", "0,1,2,3,4", "0", 5, false}, // bad limit: the default
		{"shoal://events/user.busy", "s1", "4,5,6,7,8,9,10,11", "4", 12, false},
		{"shoal://events/user.busy?since=1", "s1", "4,5,6,7,8,9,10,11", "4", 12, true}, // 2 and 3 are gone
		{"shoal://events/user.busy?since=3", "s1", "4,5,6,7,8,9,10,11", "4", 12, false},
		{"shoal://events/user.none", "s1", "", "", 0, false}, // an unknown channel is empty, not an error
		{"shoal://events/task.3", "s1", "0,2", "0", 3, false},
		{"shoal://events/task.3", "s2", "1", "0", 3, false},
		{"shoal://events/task.3", "s9", "", "0", 3, false},
	} {
		t.Run(tc.uri+"/"+tc.session, func(t *testing.T) {
			c, err := p.Read(context.Background(), &core.Caller{Session: tc.session}, parse(t, tc.uri))
			if err != nil {
				t.Fatal(err)
			}
			res, ok := c.Record.(bus.ReadResult)
			if !ok {
				t.Fatalf("record is %T", c.Record)
			}
			oldest := ""
			if res.OldestSeq != nil {
				oldest = fmt.Sprint(*res.OldestSeq)
			}
			if got := seqs(res.Events); got != tc.seqs || oldest != tc.oldest || res.NextSeq != tc.next || res.Truncated != tc.truncated || res.Epoch != "ep" {
				t.Errorf("seqs %q oldest %q next %d truncated %v epoch %q; want %q %q %d %v ep",
					got, oldest, res.NextSeq, res.Truncated, res.Epoch, tc.seqs, tc.oldest, tc.next, tc.truncated)
			}
		})
	}
}

// TestReadRefused: a URI that names no single channel is BAD_URI.
func TestReadRefused(t *testing.T) {
	p, _ := newProvider(t, 8)
	for _, s := range []string{"shoal://events", "shoal://events/user.a/extra"} {
		_, err := p.Read(context.Background(), &core.Caller{Session: "s"}, parse(t, s))
		var re *rpc.Error
		if !errors.As(err, &re) || re.Code != rpc.BadURI || !strings.Contains(re.Message, "shoal://events/{channel}") {
			t.Errorf("%s: error %v, want BAD_URI naming the form", s, err)
		}
	}
}

// TestChannel: the subscribable form is shoal://events/{channel} with a
// valid channel name; anything else is not subscribable.
func TestChannel(t *testing.T) {
	p, _ := newProvider(t, 8)
	for _, tc := range []struct {
		uri, channel string
		ok           bool
	}{
		{"shoal://events/journal", "journal", true},
		{"shoal://events/user.ci.build?since=4", "user.ci.build", true},
		{"shoal://events/task.12", "task.12", true},
		{"shoal://events", "", false},
		{"shoal://events/a/b", "", false},
		{"shoal://events/user..x", "", false},
		{"shoal://events/" + strings.Repeat("x", 65), "", false},
	} {
		ch, ok := p.Channel(parse(t, tc.uri))
		if ch != tc.channel || ok != tc.ok {
			t.Errorf("Channel(%s) = %q, %v; want %q, %v", tc.uri, ch, ok, tc.channel, tc.ok)
		}
	}
}

// TestListAndTemplates: channels are discovered, not listed; the one
// template names the cursor parameters.
func TestListAndTemplates(t *testing.T) {
	p, _ := newProvider(t, 8)
	res, err := p.List(context.Background(), &core.Caller{Session: "s"})
	if err != nil || len(res) != 0 {
		t.Errorf("List = %v, %v; want nothing", res, err)
	}
	tpl := p.Templates()
	if len(tpl) != 1 || tpl[0].URITemplate != "shoal://events/{channel}{?since,limit}" {
		t.Errorf("templates %+v", tpl)
	}
	if p.Family() != "events" {
		t.Errorf("family %q", p.Family())
	}
}

// TestWait: a wait for a seq already published answers at once; one for
// a later seq answers once it is published; one whose context ends
// answers the context's error with the position at that moment.
func TestWait(t *testing.T) {
	p, b := newProvider(t, 8)
	c := &core.Caller{Session: "s"}
	publish(t, b, "user.w", `{}`, `{}`) // seqs 0 and 1
	u := parse(t, "shoal://events/user.w")
	until := func(n uint64) core.WaitCond { return core.WaitCond{Until: &n} }

	got, err := p.Wait(context.Background(), c, u, until(1))
	if err != nil {
		t.Fatal(err)
	}
	if m := got.(map[string]any); m["latest_seq"] != uint64(1) || m["next_seq"] != uint64(2) || m["channel"] != "user.w" {
		t.Errorf("wait for a passed seq: %v", m)
	}

	done := make(chan error, 1)
	var state any
	go func() {
		var err error
		state, err = p.Wait(context.Background(), c, u, until(3))
		done <- err
	}()
	publish(t, b, "user.w", `{}`, `{}`) // seqs 2 and 3
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if m := state.(map[string]any); m["latest_seq"] != uint64(3) {
		t.Errorf("wait for seq 3: %v", m)
	}

	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	got, err = p.Wait(ctx, c, u, until(10))
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled wait: %v", err)
	}
	if m := got.(map[string]any); *(m["latest_seq"].(*uint64)) != 3 || m["next_seq"] != uint64(4) {
		t.Errorf("cancelled wait state: %v", m)
	}

	if _, err := p.Wait(context.Background(), c, parse(t, "shoal://events"), core.WaitCond{}); err == nil {
		t.Error("a wait on shoal://events succeeded")
	}
}
