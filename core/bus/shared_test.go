package bus

import (
	"encoding/json"
	"errors"
	"slices"
	"sync"
	"testing"

	"github.com/shoal-sh/shoal/core/rpc"
)

// fakeShared is a SharedStore for user.shared.*: a fakeStore whose commits
// are delivered to every bus following it, as a cluster's would be.
type fakeShared struct {
	*fakeStore
	mu      sync.Mutex
	buses   []*Bus
	follows []uint64
	down    error // Publish and NextSeq fail with it when set
}

func (f *fakeShared) Shares(channel string) bool { return channel == f.channel }

func (f *fakeShared) NextSeq(channel string) (uint64, error) {
	if f.down != nil {
		return 0, f.down
	}
	return f.fakeStore.NextSeq(channel)
}

func (f *fakeShared) Follow(channel string, next uint64) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.follows = append(f.follows, next)
	return nil
}

func (f *fakeShared) Publish(channel string, payload json.RawMessage) (Event, error) {
	if f.down != nil {
		return Event{}, f.down
	}
	ev := f.commit(payload)
	f.fanOut(ev)
	return ev, nil
}

func (f *fakeShared) fanOut(ev Event) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, b := range f.buses {
		if b.lookup(ev.Channel) != nil {
			if err := b.Deliver(ev); err != nil {
				panic(err)
			}
		}
	}
}

func newSharedPair(t *testing.T) (*fakeShared, *Bus, *Bus) {
	f := &fakeShared{fakeStore: newFakeStore("user.shared.x", 0)}
	a, b := newTestBus(t, Options{}), newTestBus(t, Options{})
	a.SetShared(f)
	b.SetShared(f)
	f.buses = []*Bus{a, b}
	return f, a, b
}

// A publish on one bus is read and delivered on the other with the same
// seqs; a bus that attaches late reads the older events from the store.
func TestSharedChannel(t *testing.T) {
	f, a, b := newSharedPair(t)
	c := newTestBus(t, Options{})
	c.SetShared(f)
	sub := collect(t, b, "user.shared.x") // attaches b at seq 0
	for i := range 3 {
		ev, err := a.PublishClient("user.shared.x", seqPayload(i))
		if err != nil {
			t.Fatal(err)
		}
		if ev.Seq != uint64(i) {
			t.Fatalf("publish %d got seq %d", i, ev.Seq)
		}
	}
	if got := seqs(sub.wait(3)); !slices.Equal(got, seqRange(0, 3)) {
		t.Fatalf("subscriber on b got %v", got)
	}
	// a was attached by its first publish, at seq 0: all in its ring.
	if r := mustRead(t, a, "user.shared.x", nil, 0); !slices.Equal(seqs(r.Events), seqRange(0, 3)) || *r.LatestSeq != 2 || r.Epoch != f.epoch {
		t.Fatalf("read on a: %+v", r)
	}
	// A third bus attaches at seq 3; the read rebuilds 0..2 from the store.
	r := mustRead(t, c, "user.shared.x", u(0), 0)
	if !slices.Equal(seqs(r.Events), []uint64{1, 2}) || *r.OldestSeq != 0 || r.NextSeq != 3 {
		t.Fatalf("read on c: %+v", r)
	}
	if !slices.Equal(f.follows, []uint64{0, 0, 3}) {
		t.Fatalf("follows %v", f.follows)
	}
	// Another channel stays local.
	if ev := mustPublish(t, a, "user.local", nil); ev.Seq != 0 {
		t.Fatal(ev)
	}
}

// A store that skipped seqs (its retention dropped them) restarts the ring
// there, and a subscriber behind it gets an exact drop marker.
func TestSharedChannelSkip(t *testing.T) {
	f, a, _ := newSharedPair(t)
	sub := collect(t, a, "user.shared.x")
	f.fanOut(f.commit(seqPayload(0)))
	sub.wait(1)
	sub.sub.Close()
	f.commit(seqPayload(1))
	f.commit(seqPayload(2))
	f.collect(3)
	late := collectFrom(t, a, "user.shared.x", u(0))
	if err := a.Deliver(Event{Channel: "user.shared.x", Seq: 5, Payload: seqPayload(5)}); err != nil {
		t.Fatal(err)
	}
	evs := late.wait(2)
	if d, l, ok := IsMarker(evs[0]); !ok || d != 4 || l != 4 || evs[1].Seq != 5 {
		t.Fatalf("after a skip: %v", evs)
	}
	if r := mustRead(t, a, "user.shared.x", nil, 0); !slices.Equal(seqs(r.Events), []uint64{5}) {
		t.Fatalf("read after skip: %v", seqs(r.Events))
	}
	if err := a.Deliver(Event{Channel: "user.shared.x", Seq: 5}); err == nil {
		t.Fatal("a repeated seq was accepted")
	}
}

// An unreachable store refuses the publish with its error and creates no
// channel, so the next use tries again; the validator runs first.
func TestSharedChannelDown(t *testing.T) {
	f, a, _ := newSharedPair(t)
	f.down = rpc.Errorf(rpc.Unavailable, "down")
	if _, err := a.PublishClient("user.shared.x", nil); !errors.Is(err, f.down) {
		t.Fatalf("publish while down: %v", err)
	}
	if _, err := a.Read("user.shared.x", nil, 0); !errors.Is(err, f.down) {
		t.Fatalf("read while down: %v", err)
	}
	if a.lookup("user.shared.x") != nil {
		t.Fatal("a channel was created while the store was down")
	}
	f.down = nil
	calls := 0
	if err := a.SetUserChannels(false, []UserChannel{{Name: "user.shared.x", Validator: "v", Validate: func(string, json.RawMessage) error {
		calls++
		return errors.New("no")
	}}}); err != nil {
		t.Fatal(err)
	}
	if _, err := a.PublishClient("user.shared.x", nil); err == nil || calls != 1 || f.next != 0 {
		t.Fatalf("validator: err %v, calls %d, store next %d", err, calls, f.next)
	}
}
