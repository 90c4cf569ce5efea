package shell

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"sync"
	"testing"

	"github.com/shoal-sh/shoal/core/value"
)

// fakeBus stands in for the kernel bus: per-channel seqs from 0, only
// user.* publishable, NextEvent with the documented since semantics.
type fakeBus struct {
	mu      sync.Mutex
	changed chan struct{} // closed and replaced at every publish
	events  map[string][]json.RawMessage
}

func newFakeBus() *fakeBus {
	return &fakeBus{changed: make(chan struct{}), events: map[string][]json.RawMessage{}}
}

func (b *fakeBus) publish(channel string, payload string) uint64 {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.events[channel] = append(b.events[channel], json.RawMessage(payload))
	close(b.changed)
	b.changed = make(chan struct{})
	return uint64(len(b.events[channel]) - 1)
}

func (b *fakeBus) Emit(ctx context.Context, channel string, payload json.RawMessage) (uint64, error) {
	if !strings.HasPrefix(channel, "user.") {
		return 0, errors.New("INVALID_PARAMS (-32602): only user.* channels can be published to")
	}
	return b.publish(channel, string(payload)), nil
}

func (b *fakeBus) NextEvent(ctx context.Context, channel string, since *uint64) (uint64, json.RawMessage, error) {
	b.mu.Lock()
	want := uint64(len(b.events[channel]))
	if since != nil {
		want = *since + 1
	}
	b.mu.Unlock()
	for {
		b.mu.Lock()
		evs := b.events[channel]
		changed := b.changed
		if uint64(len(evs)) > want {
			b.mu.Unlock()
			return want, evs[want], nil
		}
		b.mu.Unlock()
		select {
		case <-changed:
		case <-ctx.Done():
			return 0, nil, ctx.Err()
		}
	}
}

func (b *fakeBus) payloads(channel string) []string {
	b.mu.Lock()
	defer b.mu.Unlock()
	var out []string
	for _, p := range b.events[channel] {
		out = append(out, string(p))
	}
	return out
}

func TestEmit(t *testing.T) {
	bus := newFakeBus()
	e, _ := newTestEvaluator(t, testFiles, Options{Emit: bus.Emit, NextEvent: bus.NextEvent})
	tests := []struct {
		src   string
		exit  int
		value string
	}{
		{`emit user.a '{"n":1}'`, 0, `{"$":"record","v":{"channel":{"$":"str","v":"user.a"},"seq":{"$":"int","v":0}}}`},
		{`printf '{"n":2}\n{"n":3}\n' | emit user.a`, 0, `{"$":"table","cols":["channel","seq"],"rows":[[{"$":"str","v":"user.a"},{"$":"int","v":1}],[{"$":"str","v":"user.a"},{"$":"int","v":2}]]}`},
		{`open b.json | jq '{name}' | emit user.a`, 0, `{"$":"record","v":{"channel":{"$":"str","v":"user.a"},"seq":{"$":"int","v":3}}}`},
		{`emit journal '{}'`, 1, ""},
		{`emit user.a not-json`, 2, ""},
		{`emit user.a`, 2, ""},
	}
	for _, tt := range tests {
		res := runSrc(t, e, tt.src)
		if res.Exit != tt.exit {
			t.Errorf("%s: exit %d, want %d (stderr %q)", tt.src, res.Exit, tt.exit, res.Stderr)
		}
		if tt.value != "" && !value.Equal(res.Value, mustValue(t, tt.value)) {
			t.Errorf("%s: value %s", tt.src, typedJSON(res.Value))
		}
	}
	want := []string{`{"n":1}`, `{"n":2}`, `{"n":3}`, `{"name":"shoal"}`}
	if got := bus.payloads("user.a"); strings.Join(got, " ") != strings.Join(want, " ") {
		t.Errorf("published %v, want %v", got, want)
	}
	if res := runSrc(t, e, `emit journal '{}'`); !strings.Contains(res.Stderr, "only user.*") {
		t.Errorf("bus error not surfaced: %q", res.Stderr)
	}
}

// TestRecv covers the wire→language half of the bridge: cursors, skipping
// the evaluator's own events, timeouts, and a reaction loop that cannot
// feed on itself.
func TestRecv(t *testing.T) {
	bus := newFakeBus()
	e, _ := newTestEvaluator(t, nil, Options{Emit: bus.Emit, NextEvent: bus.NextEvent})

	bus.publish("user.c", `"first"`)               // seq 0, from the wire
	runSrc(t, e, `emit user.c '"mine"'`)           // seq 1, the evaluator's own
	bus.publish("user.c", `{"from":"wire","n":2}`) // seq 2
	res := runSrc(t, e, `recv --since 0 user.c`)
	want := `{"$":"record","v":{"channel":{"$":"str","v":"user.c"},"seq":{"$":"int","v":2},"payload":{"$":"record","v":{"from":{"$":"str","v":"wire"},"n":{"$":"int","v":2}}}}}`
	if !value.Equal(res.Value, mustValue(t, want)) {
		t.Fatalf("recv value %s (stderr %q)", typedJSON(res.Value), res.Stderr)
	}

	// The cursor continues after seq 2: nothing new yet, so a timeout.
	if res := runSrc(t, e, `recv -t 0.05 user.c`); res.Exit != recvTimeoutStatus || !strings.Contains(res.Stderr, "no event on user.c") {
		t.Errorf("timeout: exit %d stderr %q", res.Exit, res.Stderr)
	}

	// Events published before the next recv are not lost: the cursor
	// remembers where the session stopped reading.
	bus.publish("user.c", `3`)
	bus.publish("user.c", `4`)
	if res := runSrc(t, e, `recv user.c | jq .payload; recv user.c | jq .payload`); res.Stdout != "3\n4\n" || !value.Equal(res.Value, value.Int(4)) {
		t.Errorf("cursor: %q %q", res.Stdout, res.Stderr)
	}

	// A wait in progress is woken by a wire event.
	done := make(chan *Result, 1)
	go func() {
		res, err := e.Run(context.Background(), `recv user.c | jq -r .payload.msg`)
		if err != nil {
			t.Error(err)
		}
		done <- res
	}()
	bus.publish("user.c", `{"msg":"wake"}`)
	if res := <-done; !value.Equal(res.Value, value.Str("wake")) {
		t.Errorf("woken recv: %s %q", typedJSON(res.Value), res.Stderr)
	}

	// A loop that re-emits what it receives hears each wire event once and
	// never its own echo: with one wire event it runs once, then times out.
	bus.publish("user.loop", `"start"`)   // seq 0
	bus.publish("user.loop", `{"hop":0}`) // seq 1
	res = runSrc(t, e, `
		n=0
		since="--since 0"
		while ev=$(recv -t 0.2 $since user.loop); do
			since=
			n=$((n+1))
			echo "$ev" | jq '.payload.hop += 1 | .payload' | emit user.loop >/dev/null
			[ $n -gt 5 ] && break
		done
		echo "reactions=$n"`)
	if !strings.HasSuffix(res.Stdout, "reactions=1\n") {
		t.Errorf("echo loop: %q %q", res.Stdout, res.Stderr)
	}
	if got := bus.payloads("user.loop"); len(got) != 3 || got[2] != `{"hop":1}` {
		t.Errorf("loop published %v", got)
	}

	if res := runSrc(t, e, `recv`); res.Exit != 2 {
		t.Errorf("usage: exit %d", res.Exit)
	}
}

// TestRecvCancel: a run blocked in recv ends when its context does.
func TestRecvCancel(t *testing.T) {
	bus := newFakeBus()
	e, _ := newTestEvaluator(t, nil, Options{NextEvent: bus.NextEvent})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		_, err := e.Run(ctx, `recv user.never`)
		done <- err
	}()
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Errorf("err %v", err)
	}
}

// TestOwnSeqsBound: past maxOwnEvents the oldest remembered seq is
// forgotten first, one per emit, and a seq isOwn consumed is not counted.
func TestOwnSeqsBound(t *testing.T) {
	o := &ownSeqs{set: map[uint64]struct{}{}}
	for s := range uint64(maxOwnEvents) {
		o.add(s)
	}
	delete(o.set, 7) // isOwn consumed it
	o.add(maxOwnEvents)
	o.add(maxOwnEvents + 1)
	for _, s := range []uint64{0, 1, 7} {
		if _, ok := o.set[s]; ok {
			t.Errorf("seq %d still remembered", s)
		}
	}
	for _, s := range []uint64{2, 8, maxOwnEvents, maxOwnEvents + 1} {
		if _, ok := o.set[s]; !ok {
			t.Errorf("seq %d forgotten", s)
		}
	}
	if len(o.set) != maxOwnEvents-1 || len(o.ring) != maxOwnEvents {
		t.Errorf("set %d, ring %d", len(o.set), len(o.ring))
	}
}
