package bus

import (
	"encoding/json"
	"errors"
	"fmt"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/shoal-sh/shoal/core/rpc"
)

// E1: seq from 0, +1 per event, per channel, under concurrent publishers.
func TestSeqMonotonicConcurrent(t *testing.T) {
	b := newTestBus(t, Options{})
	const publishers, each = 8, 500
	got := make([][]uint64, publishers)
	var wg sync.WaitGroup
	for p := range publishers {
		wg.Go(func() {
			for i := range each {
				ev := mustPublish(t, b, "user.race", seqPayload(i))
				got[p] = append(got[p], ev.Seq)
				// A second channel must keep its own count.
				mustPublish(t, b, fmt.Sprintf("task.%d", p), nil)
			}
		})
	}
	wg.Wait()
	var all []uint64
	for p, s := range got {
		if !slices.IsSorted(s) {
			t.Errorf("publisher %d saw seqs out of order: %v", p, s)
		}
		all = append(all, s...)
	}
	slices.Sort(all)
	if !slices.Equal(all, seqRange(0, publishers*each)) {
		t.Fatalf("seqs are not exactly 0..%d", publishers*each-1)
	}
	for p := range publishers {
		res := mustRead(t, b, fmt.Sprintf("task.%d", p), nil, MaxReadLimit)
		if !slices.Equal(seqs(res.Events), seqRange(0, each)) {
			t.Errorf("task.%d seqs: %v", p, seqs(res.Events))
		}
	}
	res := mustRead(t, b, "user.race", nil, MaxReadLimit)
	if !slices.Equal(seqs(res.Events), seqRange(publishers*each-MaxReadLimit, publishers*each)) {
		t.Errorf("ring read: %v", seqs(res.Events))
	}
}

func TestPublishEvent(t *testing.T) {
	b := newTestBus(t, Options{})
	ev := mustPublish(t, b, "render", json.RawMessage(`{"ref":"out:1"}`))
	want := Event{Channel: "render", Seq: 0, TS: 1000, Payload: json.RawMessage(`{"ref":"out:1"}`)}
	if ev.Channel != want.Channel || ev.Seq != want.Seq || ev.TS != want.TS || string(ev.Payload) != string(want.Payload) {
		t.Fatalf("event %+v, want %+v", ev, want)
	}
	if ev := mustPublish(t, b, "render", nil); string(ev.Payload) != "null" || ev.Seq != 1 {
		t.Fatalf("nil payload: %+v", ev)
	}
	wire, err := json.Marshal(ev)
	if err != nil {
		t.Fatal(err)
	}
	if string(wire) != `{"channel":"render","seq":0,"ts":1000,"payload":{"ref":"out:1"}}` {
		t.Fatalf("wire form %s", wire)
	}

	_, err = b.Publish("render", json.RawMessage(`{"a":`))
	wantCode(t, err, rpc.InvalidParams, "not valid JSON")
	_, err = b.Publish("bad name", nil)
	wantCode(t, err, rpc.InvalidParams, "letters, digits")
	if next := mustRead(t, b, "render", nil, 0).NextSeq; next != 2 {
		t.Fatalf("a refused publish used a seq: next %d", next)
	}
}

// E2, E3: unknown channels answer an empty list, and reading does not
// create them.
func TestReadUnknownChannel(t *testing.T) {
	b := newTestBus(t, Options{})
	res := mustRead(t, b, "user.nobody", u(5), 10)
	wire, err := json.Marshal(res)
	if err != nil {
		t.Fatal(err)
	}
	want := `{"channel":"user.nobody","events":[],"oldest_seq":null,"latest_seq":null,"next_seq":0,"epoch":"test-epoch","truncated":false}`
	if string(wire) != want {
		t.Fatalf("read of an unknown channel:\n got %s\nwant %s", wire, want)
	}
	if chans := b.Channels(); len(chans) != 0 {
		t.Fatalf("a read created channels: %v", chans)
	}
}

// E3: since is exclusive, the newest tail wins, limits default and cap.
func TestReadSinceLimit(t *testing.T) {
	b := newTestBus(t, Options{})
	for i := range 10 {
		mustPublish(t, b, "user.r", seqPayload(i))
	}
	for _, tc := range []struct {
		name  string
		since *uint64
		limit int
		want  []uint64
	}{
		{"everything", nil, 0, seqRange(0, 10)},
		{"since is exclusive", u(3), 0, seqRange(4, 10)},
		{"limit keeps the newest tail", u(3), 2, []uint64{8, 9}},
		{"limit without since", nil, 3, []uint64{7, 8, 9}},
		{"since zero", u(0), 100, seqRange(1, 10)},
		{"since latest", u(9), 0, []uint64{}},
		{"since past latest", u(50), 0, []uint64{}},
		{"since max uint64", u(^uint64(0)), 0, []uint64{}},
		{"negative limit is the default", u(1), -5, seqRange(2, 10)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			res := mustRead(t, b, "user.r", tc.since, tc.limit)
			if !slices.Equal(seqs(res.Events), tc.want) {
				t.Fatalf("seqs %v, want %v", seqs(res.Events), tc.want)
			}
			if *res.OldestSeq != 0 || *res.LatestSeq != 9 || res.NextSeq != 10 || res.Epoch != "test-epoch" || res.Truncated {
				t.Fatalf("read metadata %+v", res)
			}
			for _, ev := range res.Events {
				if string(ev.Payload) != string(seqPayload(int(ev.Seq))) {
					t.Fatalf("event %d carries %s", ev.Seq, ev.Payload)
				}
			}
		})
	}
}

func TestReadLimitDefaultAndCap(t *testing.T) {
	b := newTestBus(t, Options{RingSize: 4096})
	for i := range 2000 {
		mustPublish(t, b, "user.big", seqPayload(i))
	}
	if n := len(mustRead(t, b, "user.big", nil, 0).Events); n != DefaultReadLimit {
		t.Errorf("default limit returned %d events, want %d", n, DefaultReadLimit)
	}
	res := mustRead(t, b, "user.big", nil, 5000)
	if !slices.Equal(seqs(res.Events), seqRange(2000-MaxReadLimit, 2000)) {
		t.Errorf("capped read returned %d events from %d", len(res.Events), res.Events[0].Seq)
	}
}

// E4: a ring of 1,024 per channel; the oldest retained moves and a cursor
// older than it is reported as truncated. The ring grows from small
// across the run, which the payload check also covers.
func TestRingRetention(t *testing.T) {
	b := newTestBus(t, Options{})
	const total = 1500
	for i := range total {
		mustPublish(t, b, "task.7", seqPayload(i))
	}
	oldest := uint64(total - DefaultRingSize)
	for _, tc := range []struct {
		name      string
		since     *uint64
		limit     int
		want      []uint64
		truncated bool
	}{
		{"whole ring", nil, MaxReadLimit, seqRange(oldest, total), false},
		{"cursor long gone", u(10), MaxReadLimit, seqRange(oldest, total), true},
		{"cursor just before oldest", u(oldest - 2), 5, seqRange(total-5, total), true},
		{"cursor right before oldest", u(oldest - 1), MaxReadLimit, seqRange(oldest, total), false},
		{"cursor inside the ring", u(1400), MaxReadLimit, seqRange(1401, total), false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			res := mustRead(t, b, "task.7", tc.since, tc.limit)
			if !slices.Equal(seqs(res.Events), tc.want) {
				t.Fatalf("got %d events %v…, want %d from %d", len(res.Events), seqs(res.Events[:min(3, len(res.Events))]), len(tc.want), tc.want[0])
			}
			if *res.OldestSeq != oldest || *res.LatestSeq != total-1 || res.NextSeq != total || res.Truncated != tc.truncated {
				t.Fatalf("oldest %d latest %d next %d truncated %v", *res.OldestSeq, *res.LatestSeq, res.NextSeq, res.Truncated)
			}
			for _, ev := range res.Events {
				if string(ev.Payload) != string(seqPayload(int(ev.Seq))) {
					t.Fatalf("event %d carries %s", ev.Seq, ev.Payload)
				}
			}
		})
	}
}

// A small ring shows the same rules on odd sizes (no power of two).
func TestRingOddSize(t *testing.T) {
	b := newTestBus(t, Options{RingSize: 37})
	for i := range 100 {
		mustPublish(t, b, "user.odd", seqPayload(i))
		res := mustRead(t, b, "user.odd", nil, MaxReadLimit)
		lo := uint64(max(0, i+1-37))
		if !slices.Equal(seqs(res.Events), seqRange(lo, uint64(i+1))) || *res.OldestSeq != lo {
			t.Fatalf("after %d publishes: oldest %d, seqs %v", i+1, *res.OldestSeq, seqs(res.Events))
		}
		for _, ev := range res.Events {
			if string(ev.Payload) != string(seqPayload(int(ev.Seq))) {
				t.Fatalf("event %d carries %s", ev.Seq, ev.Payload)
			}
		}
	}
}

func TestEpoch(t *testing.T) {
	a, b := New(Options{}), New(Options{})
	if a.Epoch() == "" || a.Epoch() == b.Epoch() {
		t.Fatalf("random epochs %q and %q", a.Epoch(), b.Epoch())
	}
	if New(Options{Epoch: "e7"}).Epoch() != "e7" {
		t.Fatal("the given epoch is not kept")
	}
}

func TestChannels(t *testing.T) {
	b := newTestBus(t, Options{})
	mustPublish(t, b, "user.b", nil)
	mustPublish(t, b, "user.b", nil)
	s, err := b.Subscribe("user.a", func(Event) error { return nil })
	if err != nil {
		t.Fatal(err)
	}
	if err := b.AttachDurable("journal", newFakeStore("journal", 3)); err != nil {
		t.Fatal(err)
	}
	want := []ChannelInfo{
		{Name: "journal", NextSeq: 3, Durable: true},
		{Name: "user.a", Subscribers: 1},
		{Name: "user.b", NextSeq: 2},
	}
	if got := b.Channels(); !slices.Equal(got, want) {
		t.Fatalf("channels %+v, want %+v", got, want)
	}
	s.Close()
	if got := b.Channels()[1].Subscribers; got != 0 {
		t.Fatalf("after close: %d subscribers", got)
	}
	if got := StaticChannels(); strings.Join(got, " ") != "journal approval render session.transcript" {
		t.Fatalf("static channels %v", got)
	}
}

// E4: durable channels continue their seq from the store, read older
// events from it, and accept events only through Deliver, in order.
func TestDurableChannel(t *testing.T) {
	b := newTestBus(t, Options{RingSize: 16})
	store := newFakeStore("journal", 3000) // as left by a previous kernel
	store.collect(500)
	if err := b.AttachDurable("journal", store); err != nil {
		t.Fatal(err)
	}

	res := mustRead(t, b, "journal", u(2990), 0)
	if !slices.Equal(seqs(res.Events), seqRange(2991, 3000)) || *res.OldestSeq != 500 || *res.LatestSeq != 2999 ||
		res.NextSeq != 3000 || res.Epoch != "store-epoch" || res.Truncated {
		t.Fatalf("read after attach: seqs %v, %+v", seqs(res.Events), res)
	}

	var got []Event
	sub, err := b.Subscribe("journal", func(ev Event) error {
		got = append(got, ev) // read only after Close
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	for range 40 { // wraps the ring of 16 twice
		if err := b.Deliver(store.commit(json.RawMessage(`{"row":1}`))); err != nil {
			t.Fatal(err)
		}
	}

	// Stitching: 3021..3023 come from the store, 3024..3039 from the ring.
	store.reads = 0
	res = mustRead(t, b, "journal", u(3020), 0)
	if !slices.Equal(seqs(res.Events), seqRange(3021, 3040)) || store.reads != 1 {
		t.Fatalf("stitched read: seqs %v, %d store reads", seqs(res.Events), store.reads)
	}
	// The newest tail of a long range still comes out in order.
	res = mustRead(t, b, "journal", u(100), 1024)
	if !slices.Equal(seqs(res.Events), seqRange(3040-1024, 3040)) || !res.Truncated || *res.OldestSeq != 500 {
		t.Fatalf("long read: %d events from %d, truncated %v", len(res.Events), res.Events[0].Seq, res.Truncated)
	}
	// Within the ring the store is not asked.
	store.reads = 0
	if res = mustRead(t, b, "journal", u(3030), 0); !slices.Equal(seqs(res.Events), seqRange(3031, 3040)) || store.reads != 0 {
		t.Fatalf("ring read: seqs %v, %d store reads", seqs(res.Events), store.reads)
	}

	// Out of order, duplicated, foreign: refused, nothing changes.
	next := store.commit(nil)
	for _, ev := range []Event{
		{Channel: "journal", Seq: next.Seq + 1},
		{Channel: "journal", Seq: next.Seq - 1},
		{Channel: "user.x", Seq: 0},
		{Channel: "journal", Seq: next.Seq, Payload: json.RawMessage(`{`)},
	} {
		if err := b.Deliver(ev); err == nil {
			t.Errorf("deliver %+v was accepted", ev)
		}
	}
	if err := b.Deliver(next); err != nil {
		t.Fatal(err)
	}
	if _, err := b.Publish("journal", nil); err == nil || !strings.Contains(err.Error(), "durable") {
		t.Fatalf("publish on a durable channel: %v", err)
	}
	_, err = b.PublishClient("journal", nil)
	wantCode(t, err, rpc.InvalidParams, "kernel")

	for sub.Delivered()+sub.Dropped() < 41 {
		runtime.Gosched()
	}
	sub.Close()
	// The ring of 16 caps the queue at 8, so a burst may drop; either way
	// the stream accounts for every delivered seq exactly.
	checkStream(t, got, 3000, 3041)

	// Attaching twice, or after use, is a wiring bug.
	if err := b.AttachDurable("journal", store); err == nil {
		t.Error("second attach accepted")
	}
	mustPublish(t, b, "session.transcript", nil)
	if err := b.AttachDurable("session.transcript", newFakeStore("session.transcript", 0)); err == nil {
		t.Error("attach after publish accepted")
	}
	if err := b.AttachDurable("user.x", nil); err == nil {
		t.Error("attach without a store accepted")
	}

	store.failErr = errors.New("disk on fire")
	if _, err := b.Read("journal", u(0), 0); err == nil || !strings.Contains(err.Error(), "disk on fire") {
		t.Fatalf("store failure on read: %v", err)
	}
}

// A durable channel whose store lost everything (or never had anything)
// reports no oldest seq; a cursor behind next is then truncated.
func TestDurableEmptyStore(t *testing.T) {
	b := newTestBus(t, Options{})
	store := newFakeStore("session.transcript", 20)
	store.collect(20)
	if err := b.AttachDurable("session.transcript", store); err != nil {
		t.Fatal(err)
	}
	res := mustRead(t, b, "session.transcript", u(5), 0)
	if len(res.Events) != 0 || res.OldestSeq != nil || *res.LatestSeq != 19 || res.NextSeq != 20 || !res.Truncated {
		t.Fatalf("read %+v", res)
	}
	if res = mustRead(t, b, "session.transcript", u(19), 0); res.Truncated {
		t.Fatal("an up-to-date cursor is reported truncated")
	}
	if err := b.Deliver(store.commit(nil)); err != nil {
		t.Fatal(err)
	}
	if res = mustRead(t, b, "session.transcript", nil, 0); *res.OldestSeq != 20 || !slices.Equal(seqs(res.Events), []uint64{20}) {
		t.Fatalf("read %+v", res)
	}
}
