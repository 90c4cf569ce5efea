package bus

import (
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"runtime"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/shoal-sh/shoal/core/rpc"
)

// collector records what a subscription delivers.
type collector struct {
	sub    *Subscription
	mu     sync.Mutex
	cond   sync.Cond
	events []Event
}

func collect(t *testing.T, b *Bus, channel string) *collector {
	t.Helper()
	return collectFrom(t, b, channel, nil)
}

func collectFrom(t *testing.T, b *Bus, channel string, since *uint64) *collector {
	t.Helper()
	c := &collector{}
	c.cond.L = &c.mu
	sub, err := b.SubscribeFrom(channel, since, func(ev Event) error {
		c.mu.Lock()
		c.events = append(c.events, ev)
		c.mu.Unlock()
		c.cond.Broadcast()
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	c.sub = sub
	t.Cleanup(sub.Close)
	return c
}

// wait blocks until n events (markers included) arrived and returns them.
func (c *collector) wait(n int) []Event {
	c.mu.Lock()
	defer c.mu.Unlock()
	for len(c.events) < n {
		c.cond.Wait()
	}
	return slices.Clone(c.events)
}

// E6: a fast subscriber gets every event, in order, without a marker.
func TestSubscribeDeliversInOrder(t *testing.T) {
	b := newTestBus(t, Options{})
	mustPublish(t, b, "user.s", nil) // before the subscription: not delivered
	c := collect(t, b, "user.s")
	for i := range 200 {
		mustPublish(t, b, "user.s", seqPayload(i))
	}
	got := c.wait(200)
	if !slices.Equal(seqs(got), seqRange(1, 201)) {
		t.Fatalf("seqs %v", seqs(got))
	}
	for i, ev := range got {
		if string(ev.Payload) != string(seqPayload(i)) || ev.Channel != "user.s" {
			t.Fatalf("event %+v", ev)
		}
	}
	if c.sub.Dropped() != 0 || c.sub.Delivered() != 200 || c.sub.Channel() != "user.s" {
		t.Fatalf("dropped %d delivered %d", c.sub.Dropped(), c.sub.Delivered())
	}
}

// checkStream verifies the exact-accounting contract of a subscriber that
// started at seq from and has seen everything up to total-1: real events
// ascend one by one, and each marker stands for exactly the seqs skipped
// right before the next real event. It returns the real-event count and
// the markers.
func checkStream(t *testing.T, evs []Event, from, total uint64) (real uint64, markers []Event) {
	t.Helper()
	want := from
	for _, ev := range evs {
		if dropped, latest, ok := IsMarker(ev); ok {
			if dropped == 0 || latest+1-dropped != want || ev.Seq != latest {
				t.Fatalf("marker %s (seq %d) does not start at the expected seq %d", ev.Payload, ev.Seq, want)
			}
			want = latest + 1
			markers = append(markers, ev)
			continue
		}
		if ev.Seq != want {
			t.Fatalf("real event seq %d, want %d (duplicate, reorder or silent gap)", ev.Seq, want)
		}
		want++
		real++
	}
	if want != total {
		t.Fatalf("stream accounts for seqs up to %d, want %d", want, total)
	}
	return real, markers
}

// E6: a stalled subscriber never holds up publishing; when it resumes it
// gets one exact marker, then the newest queue-size events.
func TestStalledSubscriberDropMarker(t *testing.T) {
	b := newTestBus(t, Options{})
	entered, release := make(chan struct{}), make(chan struct{})
	var stalledOnce sync.Once
	var mu sync.Mutex
	var got []Event
	finished := make(chan struct{})
	const total = 10_000
	sub, err := b.Subscribe("user.slow", func(ev Event) error {
		stalledOnce.Do(func() {
			close(entered)
			<-release
		})
		mu.Lock()
		got = append(got, ev)
		mu.Unlock()
		if _, _, marker := IsMarker(ev); !marker && ev.Seq == total-1 {
			close(finished)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Close()

	// With the sink blocked on the first event, publishing all the others
	// must complete: a publisher that waited on the subscriber would hang.
	mustPublish(t, b, "user.slow", seqPayload(0))
	<-entered
	for i := 1; i < total; i++ {
		mustPublish(t, b, "user.slow", seqPayload(i))
	}
	close(release)
	<-finished
	sub.Close() // settles the counters: the writer is gone

	mu.Lock()
	evs := slices.Clone(got)
	mu.Unlock()
	real, markers := checkStream(t, evs, 0, total)
	if len(markers) != 1 {
		t.Fatalf("%d markers, want exactly 1", len(markers))
	}
	dropped, latest, _ := IsMarker(markers[0])
	if real+dropped != total || sub.Dropped() != dropped || sub.Delivered() != real {
		t.Fatalf("real %d + dropped %d != %d (counters: dropped %d delivered %d)", real, dropped, total, sub.Dropped(), sub.Delivered())
	}
	// After the marker come exactly the newest queue-size events.
	idx := slices.IndexFunc(evs, func(ev Event) bool { _, _, m := IsMarker(ev); return m })
	if after := evs[idx+1:]; len(after) != DefaultQueueSize || after[0].Seq != latest+1 || latest != total-DefaultQueueSize-1 {
		t.Fatalf("%d events after the marker, first %d, marker latest_seq %d", len(after), after[0].Seq, latest)
	}
}

// E6 with several stalls while publishing goes on: every gap is reported
// by its own exact marker.
func TestRepeatedStalls(t *testing.T) {
	b := newTestBus(t, Options{RingSize: 64, QueueSize: 8})
	var stall atomic.Bool
	stalled, release := make(chan struct{}), make(chan struct{})
	var mu sync.Mutex
	var got []Event
	sub, err := b.Subscribe("user.stall", func(ev Event) error {
		if stall.CompareAndSwap(true, false) {
			stalled <- struct{}{}
			<-release
		}
		mu.Lock()
		got = append(got, ev)
		mu.Unlock()
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	const phases, burst = 10, 100
	var next uint64
	for range phases {
		// The subscriber is idle here, so the one event below is the one
		// it stalls on, and the whole burst waits behind it.
		stall.Store(true)
		mustPublish(t, b, "user.stall", nil)
		<-stalled
		for range burst {
			mustPublish(t, b, "user.stall", nil)
		}
		release <- struct{}{}
		next += burst + 1
		for sub.Delivered()+sub.Dropped() < next {
			runtime.Gosched()
		}
	}
	sub.Close()
	real, markers := checkStream(t, got, 0, next)
	if len(markers) != phases {
		t.Fatalf("%d markers, want %d", len(markers), phases)
	}
	for _, m := range markers {
		// Each burst keeps the newest 8 of its 100 events.
		if d, _, _ := IsMarker(m); d != burst-8 {
			t.Fatalf("marker %s, want dropped %d", m.Payload, burst-8)
		}
	}
	if real != next-phases*(burst-8) || sub.Dropped() != phases*(burst-8) {
		t.Fatalf("real %d, dropped counter %d", real, sub.Dropped())
	}
}

func TestUnsubscribeStopsDelivery(t *testing.T) {
	b := newTestBus(t, Options{})
	var calls atomic.Int64
	sub, err := b.Subscribe("user.u", func(Event) error {
		calls.Add(1)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	for range 5 {
		mustPublish(t, b, "user.u", nil)
	}
	for sub.Delivered() < 5 {
		runtime.Gosched()
	}
	sub.Close()
	sub.Close() // idempotent
	select {
	case <-sub.Done():
	default:
		t.Fatal("Done is open after Close")
	}
	for range 50 {
		mustPublish(t, b, "user.u", nil)
	}
	// The writer has returned (Close waited for it), so nothing can call
	// the sink any more; noWritersLeft double-checks at cleanup.
	if n := calls.Load(); n != 5 {
		t.Fatalf("sink called %d times, want 5", n)
	}
	if sub.Err() != nil {
		t.Fatalf("Err after Close: %v", sub.Err())
	}
}

func TestSinkErrorEndsSubscription(t *testing.T) {
	b := newTestBus(t, Options{})
	boom := errors.New("connection reset")
	var calls atomic.Int64
	sub, err := b.Subscribe("user.e", func(Event) error {
		if calls.Add(1) == 3 {
			return boom
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	for range 10 {
		mustPublish(t, b, "user.e", nil)
	}
	<-sub.Done()
	if !errors.Is(sub.Err(), boom) || sub.Delivered() != 2 || calls.Load() != 3 {
		t.Fatalf("err %v, delivered %d, calls %d", sub.Err(), sub.Delivered(), calls.Load())
	}
	sub.Close() // still fine after the writer ended by itself
	if got := b.Channels()[0].Subscribers; got != 0 {
		t.Fatalf("%d subscribers left", got)
	}
}

// Close waits for a sink call in progress, so after it returns the sink is
// quiet for good.
func TestCloseWaitsForSink(t *testing.T) {
	b := newTestBus(t, Options{})
	entered, release := make(chan struct{}), make(chan struct{})
	var inSink atomic.Bool
	sub, err := b.Subscribe("user.w", func(Event) error {
		inSink.Store(true)
		close(entered)
		<-release
		inSink.Store(false)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	mustPublish(t, b, "user.w", nil)
	<-entered
	closed := make(chan struct{})
	go func() {
		sub.Close()
		close(closed)
	}()
	close(release)
	<-closed
	if inSink.Load() {
		t.Fatal("Close returned while the sink was running")
	}
}

func TestBusClose(t *testing.T) {
	b := newTestBus(t, Options{})
	var subs []*Subscription
	for i := range 5 {
		s, err := b.Subscribe(fmt.Sprintf("user.c%d", i%2), func(Event) error { return nil })
		if err != nil {
			t.Fatal(err)
		}
		subs = append(subs, s)
	}
	b.Close()
	for _, s := range subs {
		select {
		case <-s.Done():
		default:
			t.Fatal("a subscription outlived Bus.Close")
		}
	}
	_, err := b.Subscribe("user.c0", func(Event) error { return nil })
	wantCode(t, err, rpc.Unavailable, "shut down")
	mustPublish(t, b, "user.c0", nil) // publishing still works
	b.Close()
	if _, err := b.Subscribe("no good", func(Event) error { return nil }); err == nil {
		t.Fatal("subscribe to a malformed name accepted")
	}
	if _, err := New(Options{}).Subscribe("user.x", nil); err == nil {
		t.Fatal("nil sink accepted")
	}
}

func TestSubscribeFrom(t *testing.T) {
	fresh := func(t *testing.T) *Bus {
		b := newTestBus(t, Options{RingSize: 32, QueueSize: 8})
		for range 100 {
			mustPublish(t, b, "user.f", nil)
		}
		return b
	}
	for _, tc := range []struct {
		name  string
		since *uint64
		want  string // seqs, with the marker as "m<dropped>/<latest>"
	}{
		{"backlog within the queue", u(94), "95 96 97 98 99 100"},
		{"backlog past the queue", u(10), "m81/91 92 93 94 95 96 97 98 99 100"},
		{"backlog past the ring", u(2), "m89/91 92 93 94 95 96 97 98 99 100"},
		{"nil starts now", nil, "100"},
		{"cursor in the future starts now", u(5000), "100"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := fresh(t)
			c := collectFrom(t, b, "user.f", tc.since)
			// Let the backlog drain first, so the drop count does not
			// depend on when the writer starts.
			backlog := uint64(0)
			if tc.since != nil && *tc.since < 100 {
				backlog = 99 - *tc.since
			}
			for c.sub.Delivered()+c.sub.Dropped() < backlog {
				runtime.Gosched()
			}
			mustPublish(t, b, "user.f", nil) // seq 100
			evs := c.wait(1)
			for evs[len(evs)-1].Seq != 100 {
				evs = c.wait(len(evs) + 1)
			}
			c.sub.Close()
			var got []string
			for _, ev := range evs {
				if d, l, ok := IsMarker(ev); ok {
					got = append(got, fmt.Sprintf("m%d/%d", d, l))
				} else {
					got = append(got, fmt.Sprint(ev.Seq))
				}
			}
			if fmt.Sprint(got) != "["+tc.want+"]" {
				t.Fatalf("got %v, want [%s]", got, tc.want)
			}
		})
	}

	b := newTestBus(t, Options{RingSize: 32, QueueSize: 8})
	// On a durable channel the events before the ring are in the store, not
	// replayed: the marker points the consumer there.
	store := newFakeStore("journal", 50)
	if err := b.AttachDurable("journal", store); err != nil {
		t.Fatal(err)
	}
	c := collectFrom(t, b, "journal", u(45))
	if err := b.Deliver(store.commit(nil)); err != nil {
		t.Fatal(err)
	}
	evs := c.wait(2)
	if d, l, ok := IsMarker(evs[0]); !ok || d != 4 || l != 49 || evs[1].Seq != 50 {
		t.Fatalf("durable SubscribeFrom got %v", evs)
	}
}

// E6 under -race: publishers on several channels, subscribers fast, slow
// and leaving early; every stream that stays must account exactly for
// every seq. A tiny ring and queue force drops and ring laps.
func TestHammer(t *testing.T) {
	b := newTestBus(t, Options{RingSize: 16, QueueSize: 4})
	channels := []string{"user.h0", "user.h1", "task.1", "render"}
	const publishers, perPublisher, subsPerChannel = 6, 1500, 5

	type stream struct {
		channel string
		sub     *Subscription
		mu      sync.Mutex
		evs     []Event
		leaves  bool
	}
	var streams []*stream
	for ci, ch := range channels {
		for k := range subsPerChannel {
			st := &stream{channel: ch, leaves: k == 4}
			rng := rand.New(rand.NewPCG(uint64(ci), uint64(k)))
			slow := k%2 == 1
			sub, err := b.Subscribe(ch, func(ev Event) error {
				st.mu.Lock()
				st.evs = append(st.evs, ev)
				st.mu.Unlock()
				if slow && rng.IntN(8) == 0 {
					time.Sleep(time.Duration(rng.IntN(50)) * time.Microsecond)
				}
				return nil
			})
			if err != nil {
				t.Fatal(err)
			}
			st.sub = sub
			streams = append(streams, st)
		}
	}

	var wg sync.WaitGroup
	for p := range publishers {
		wg.Go(func() {
			for i := range perPublisher {
				ch := channels[(p+i)%len(channels)]
				mustPublish(t, b, ch, json.RawMessage(fmt.Sprintf(`{"p":%d,"i":%d}`, p, i)))
				if i%97 == 0 {
					_ = mustRead(t, b, ch, u(uint64(i)), 8) // readers race the ring too
				}
			}
		})
	}
	for _, st := range streams {
		if st.leaves {
			wg.Go(func() {
				runtime.Gosched()
				st.sub.Close()
			})
		}
	}
	wg.Wait()

	totals := map[string]uint64{}
	for _, ci := range b.Channels() {
		totals[ci.Name] = ci.NextSeq
	}
	var sum uint64
	for _, ch := range channels {
		sum += totals[ch]
	}
	if sum != publishers*perPublisher {
		t.Fatalf("%d events published, want %d", sum, publishers*perPublisher)
	}
	for _, st := range streams {
		if st.leaves {
			continue
		}
		total := totals[st.channel]
		for st.sub.Delivered()+st.sub.Dropped() < total {
			runtime.Gosched()
		}
		st.sub.Close()
		real, markers := checkStream(t, st.evs, 0, total)
		var dropped uint64
		for _, m := range markers {
			d, _, _ := IsMarker(m)
			dropped += d
		}
		if real+dropped != total || st.sub.Dropped() != dropped || st.sub.Delivered() != real {
			t.Fatalf("%s: real %d dropped %d total %d", st.channel, real, dropped, total)
		}
	}
}

// TestSubscribeBatches: a batch sink stalled on its first batch gets the
// rest in order, one exact drop marker at the head of a batch, batches of
// at most writerBatch+1; two subscribers share each event's encoding,
// which is compact.
func TestSubscribeBatches(t *testing.T) {
	b := newTestBus(t, Options{})
	entered, release := make(chan struct{}), make(chan struct{})
	var stalledOnce sync.Once
	var mu sync.Mutex
	var got []Event
	var wires [][]byte
	finished, otherSawFirst := make(chan struct{}), make(chan struct{})
	const total = 5_000
	sub, err := b.SubscribeBatches("user.batch", func(evs []Event) error {
		stalledOnce.Do(func() {
			close(entered)
			<-release
		})
		if len(evs) == 0 || len(evs) > writerBatch+1 {
			t.Errorf("batch of %d", len(evs))
		}
		mu.Lock()
		defer mu.Unlock()
		for i, ev := range evs {
			if _, _, m := IsMarker(ev); m && i != 0 {
				t.Errorf("marker at %d of its batch", i)
			}
			got = append(got, ev)
			if ev.Seq == total-1 {
				close(finished)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Close()
	// The second subscriber is not stalled; it is handed seq 0 before
	// anything else is published, so it cannot fall behind past it.
	var sawFirst sync.Once
	other, err := b.SubscribeBatches("user.batch", func(evs []Event) error {
		mu.Lock()
		defer mu.Unlock()
		for i := range evs {
			if evs[i].Seq == 0 {
				wires = append(wires, evs[i].Wire())
				sawFirst.Do(func() { close(otherSawFirst) })
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	mustPublish(t, b, "user.batch", json.RawMessage("{ \"i\" :\n 0 }"))
	<-entered
	<-otherSawFirst
	for i := 1; i < total; i++ {
		mustPublish(t, b, "user.batch", seqPayload(i))
	}
	close(release)
	<-finished
	sub.Close()
	other.Close()
	mu.Lock()
	evs := slices.Clone(got)
	mu.Unlock()
	real, markers := checkStream(t, evs, 0, total)
	if len(markers) != 1 || real+sub.Dropped() != total || sub.Delivered() != real {
		t.Fatalf("%d markers, real %d, dropped %d, delivered %d", len(markers), real, sub.Dropped(), sub.Delivered())
	}
	w := evs[0].Wire()
	if want := `{"channel":"user.batch","seq":0,"ts":` + strconv.FormatInt(evs[0].TS, 10) + `,"payload":{"i":0}}`; string(w) != want {
		t.Fatalf("wire %s, want %s", w, want)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(wires) != 1 || &wires[0][0] != &w[0] {
		t.Fatalf("the two subscribers did not share one encoding")
	}
}

// TestGatherWakesAtTarget: a gathering writer is woken when its target
// seq is reached, not only when the period ends (here it never would),
// and a Close wakes one that is still waiting.
func TestGatherWakesAtTarget(t *testing.T) {
	b := newTestBus(t, Options{})
	c, err := b.channel("user.gather")
	if err != nil {
		t.Fatal(err)
	}
	c.gatherDelay = time.Hour
	var stop atomic.Bool
	returned := make(chan struct{})
	go func() {
		defer close(returned)
		c.gather(3, &stop)
	}()
	waitGathering(t, c)
	for i := range 3 {
		select {
		case <-returned:
			t.Fatalf("gather returned after %d of 3 events", i)
		default:
		}
		mustPublish(t, b, "user.gather", seqPayload(i))
	}
	waitClosed(t, returned, "gather at its target")

	sub, err := b.SubscribeBatches("user.gather", func([]Event) error { return nil })
	if err != nil {
		t.Fatal(err)
	}
	returned = make(chan struct{})
	go func() {
		defer close(returned)
		c.gather(1000, &sub.closed)
	}()
	waitGathering(t, c)
	sub.Close()
	waitClosed(t, returned, "gather after Close")
}

// waitClosed fails the test if ch is not closed within a generous bound
// (a hang guard, not a timing assertion).
func waitClosed(t *testing.T, ch <-chan struct{}, what string) {
	t.Helper()
	select {
	case <-ch:
	case <-time.After(30 * time.Second):
		t.Fatalf("%s: still waiting after 30 s", what)
	}
}

// waitGathering waits until a writer has registered in c.gather and armed
// its timer, so that what follows happens while it waits.
func waitGathering(t *testing.T, c *channel) {
	t.Helper()
	for range 30_000 {
		c.mu.Lock()
		armed := c.gatherArmed
		c.mu.Unlock()
		if armed {
			return
		}
		time.Sleep(time.Millisecond)
	}
	t.Fatal("no writer started gathering")
}
