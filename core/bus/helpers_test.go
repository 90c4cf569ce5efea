package bus

import (
	"encoding/json"
	"errors"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/shoal-sh/shoal/core/rpc"
)

// counter is a deterministic clock for tests: 1000, 1001, …
func counter() func() int64 {
	var mu sync.Mutex
	var t int64 = 999
	return func() int64 {
		mu.Lock()
		defer mu.Unlock()
		t++
		return t
	}
}

func newTestBus(t *testing.T, opts Options) *Bus {
	t.Helper()
	if opts.Epoch == "" {
		opts.Epoch = "test-epoch"
	}
	if opts.Now == nil {
		opts.Now = counter()
	}
	b := New(opts)
	noWritersLeft(t)
	t.Cleanup(b.Close)
	return b
}

// noWritersLeft fails the test when a subscription writer goroutine is
// still alive once the test (and its Close calls) finished: a stdlib-only
// take on goleak, limited to this package's goroutines so that other
// tests' helpers do not count.
func noWritersLeft(t *testing.T) {
	t.Helper()
	t.Cleanup(func() {
		var stacks string
		// A writer closes done as its last act and then returns; give the
		// scheduler a moment to retire it.
		for range 500 {
			stacks = writerStacks()
			if stacks == "" {
				return
			}
			runtime.Gosched()
			time.Sleep(time.Millisecond)
		}
		t.Errorf("subscription writers still running after the test:\n%s", stacks)
	})
}

func writerStacks() string {
	buf := make([]byte, 1<<20)
	buf = buf[:runtime.Stack(buf, true)]
	var leaked []string
	for g := range strings.SplitSeq(string(buf), "\n\n") {
		if strings.Contains(g, "core/bus.(*Subscription).run") {
			leaked = append(leaked, g)
		}
	}
	return strings.Join(leaked, "\n\n")
}

func seqPayload(i int) json.RawMessage {
	return json.RawMessage(`{"i":` + strconv.Itoa(i) + `}`)
}

func mustPublish(t testing.TB, b *Bus, channel string, payload json.RawMessage) Event {
	t.Helper()
	ev, err := b.Publish(channel, payload)
	if err != nil {
		t.Fatalf("publish on %s: %v", channel, err)
	}
	return ev
}

func mustRead(t testing.TB, b *Bus, channel string, since *uint64, limit int) ReadResult {
	t.Helper()
	res, err := b.Read(channel, since, limit)
	if err != nil {
		t.Fatalf("read %s: %v", channel, err)
	}
	return res
}

func seqs(evs []Event) []uint64 {
	out := make([]uint64, len(evs))
	for i, ev := range evs {
		out[i] = ev.Seq
	}
	return out
}

func seqRange(from, to uint64) []uint64 {
	out := []uint64{}
	for s := from; s < to; s++ {
		out = append(out, s)
	}
	return out
}

func u(v uint64) *uint64 { return &v }

// wantCode checks that err is an *rpc.Error with code and a message
// containing every hint.
func wantCode(t *testing.T, err error, code rpc.Code, hints ...string) {
	t.Helper()
	var re *rpc.Error
	if !errors.As(err, &re) {
		t.Fatalf("error %v: want *rpc.Error %s", err, code.Name())
	}
	if re.Code != code {
		t.Fatalf("error %v: want code %s", err, code.Name())
	}
	for _, h := range hints {
		if !strings.Contains(re.Message, h) {
			t.Errorf("error message %q lacks %q", re.Message, h)
		}
	}
}

// fakeStore is a DurableStore holding one channel's events in memory, with
// an oldest seq that moves when the test "collects garbage".
type fakeStore struct {
	mu      sync.Mutex
	channel string
	events  map[uint64]Event
	next    uint64
	oldest  uint64
	epoch   string
	failErr error
	reads   int // ReadRange calls
}

func newFakeStore(channel string, n int) *fakeStore {
	f := &fakeStore{channel: channel, events: map[uint64]Event{}, epoch: "store-epoch"}
	for i := range n {
		f.commit(seqPayload(i))
	}
	return f
}

// commit is the store writer: it assigns the seq inside its "transaction".
func (f *fakeStore) commit(payload json.RawMessage) Event {
	f.mu.Lock()
	defer f.mu.Unlock()
	ev := Event{Channel: f.channel, Seq: f.next, TS: int64(f.next), Payload: payload}
	f.events[f.next] = ev
	f.next++
	return ev
}

func (f *fakeStore) collect(below uint64) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for s := f.oldest; s < below; s++ {
		delete(f.events, s)
	}
	f.oldest = below
}

func (f *fakeStore) check(channel string) error {
	if channel != f.channel {
		return errors.New("fake store: wrong channel " + channel)
	}
	return f.failErr
}

func (f *fakeStore) NextSeq(channel string) (uint64, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.next, f.check(channel)
}

func (f *fakeStore) OldestSeq(channel string) (uint64, bool, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.oldest, f.oldest < f.next, f.check(channel)
}

func (f *fakeStore) ReadRange(channel string, from, to uint64, limit int) ([]Event, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.reads++
	if err := f.check(channel); err != nil {
		return nil, err
	}
	var out []Event
	for s := max(from, f.oldest); s < min(to, f.next); s++ {
		out = append(out, f.events[s])
	}
	if len(out) > limit {
		out = out[len(out)-limit:]
	}
	return out, nil
}

func (f *fakeStore) Epoch() string { return f.epoch }
