package bus

import (
	"encoding/json"
	"fmt"
	"sync"
	"testing"
	"time"
)

// TestVisibleToShared: on a session-scoped channel every subscriber sees
// exactly the events naming its session (and none naming another, nor
// any that names none), whether the session is read from a ring event's
// shared encoding or from a copy without one.
func TestVisibleToShared(t *testing.T) {
	b := New(Options{})
	sessions := []string{"a", "b", "c"}
	var mu sync.Mutex
	seen := map[string][]string{}
	var subs []*Subscription
	for _, s := range sessions {
		sub, err := b.SubscribeBatches(ChannelRender, func(evs []Event) error {
			mu.Lock()
			defer mu.Unlock()
			for _, ev := range evs {
				if VisibleTo(ev, s) {
					seen[s] = append(seen[s], string(ev.Payload))
				}
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		subs = append(subs, sub)
	}
	var want = map[string][]string{}
	for i := range 30 {
		s := sessions[i%3]
		p := fmt.Sprintf(`{"session":%q,"n":%d}`, s, i)
		if i%7 == 0 {
			p = fmt.Sprintf(`{"n":%d}`, i) // names no session: shown to none
		} else {
			want[s] = append(want[s], p)
		}
		if _, err := b.Publish(ChannelRender, json.RawMessage(p)); err != nil {
			t.Fatal(err)
		}
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		mu.Lock()
		n := len(seen["a"]) + len(seen["b"]) + len(seen["c"])
		mu.Unlock()
		if n >= len(want["a"])+len(want["b"])+len(want["c"]) || time.Now().After(deadline) {
			break
		}
		time.Sleep(time.Millisecond)
	}
	for _, sub := range subs {
		sub.Close()
	}
	mu.Lock()
	defer mu.Unlock()
	for _, s := range sessions {
		if fmt.Sprint(seen[s]) != fmt.Sprint(want[s]) {
			t.Errorf("session %s saw %v, want %v", s, seen[s], want[s])
		}
	}
	// A copy without the shared encoding decides the same way.
	ev := Event{Channel: ChannelRender, Payload: json.RawMessage(`{"session":"a"}`)}
	if !VisibleTo(ev, "a") || VisibleTo(ev, "b") || VisibleTo(Event{Channel: ChannelRender, Payload: json.RawMessage(`{}`)}, "a") {
		t.Error("VisibleTo of an unshared event")
	}
	if !VisibleTo(Marker(ChannelRender, 2, 9, 0), "a") {
		t.Error("a drop marker is shown to every session")
	}
}
