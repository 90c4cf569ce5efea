package bus

import (
	"encoding/json"
	"math"
	"sync"
	"sync/atomic"
	"time"
)

// channel is one named channel: its seq counter, its ring and the parking
// spot of its subscribers' writers.
//
// Writers of the channel (Publish, Deliver) serialise on mu; readers
// (Read, subscriber writers) never take it except to park. They load next,
// then the ring, and check each slot's Seq: an Event is immutable once
// stored, so a reader either sees the event it asked for or learns that
// the slot has been reused.
type channel struct {
	name   string
	store  DurableStore // nil for ring-only channels
	shared bool         // store is the SharedStore: publishes go to it
	limit  uint64       // ring capacity once fully grown

	// base is the seq of the first event this ring held: a durable
	// channel's next seq at attach, moved up only when a shared channel's
	// store skipped seqs it no longer has (see Bus.Deliver).
	base atomic.Uint64
	// budget bounds the payload bytes the ring holds (0: no bound); low
	// is the oldest seq the byte budget still keeps (the ring may hold
	// fewer by count).
	budget int
	low    atomic.Uint64

	next atomic.Uint64        // seq the next event gets
	ring atomic.Pointer[ring] // replaced only while growing, before any slot is reused

	mu    sync.Mutex // serialises appends; guards the fields below
	subs  int        // live subscriptions, for Channels
	chunk []Event    // events are carved from here, one allocation per chunk
	bytes int        // payload bytes of the events the ring holds

	gatherTimer *time.Timer   // ends a gathering period (see gather)
	gatherArmed bool          // gatherTimer is running
	gatherDelay time.Duration // a period's length: coalesceDelay

	// Parking, on its own cache line: writers touch it while publishers
	// write next and mu. A writer with nothing to do loads notify, raises
	// parked, re-checks next, then waits on notify; an append that sees
	// parked swaps in a fresh notify and closes the old one. Neither side
	// locks, so a parking writer never holds up a publisher.
	_      [64]byte
	parked atomic.Bool
	notify atomic.Pointer[chan struct{}]
	// Gathering (see gather): the lowest next a gathering writer waits
	// for (MaxUint64: none), and the channel closed when next reaches it.
	gatherAt atomic.Uint64
	gathered atomic.Pointer[chan struct{}]
	_        [64]byte
}

// ring holds a channel's newest events: slot i holds the event whose
// seq ≡ i (mod len(slots)).
type ring struct {
	slots []atomic.Pointer[Event]
}

// initialRing is the ring size of a new channel. Rings grow by doubling up
// to the configured size, so the many short-lived task.{id} channels stay
// small.
const initialRing = 16

func newChannel(name string, base uint64, store DurableStore, limit, budget int) *channel {
	c := &channel{name: name, store: store, limit: uint64(limit), budget: budget, gatherDelay: coalesceDelay}
	c.base.Store(base)
	c.next.Store(base)
	c.low.Store(base)
	wake, gathered := make(chan struct{}), make(chan struct{})
	c.notify.Store(&wake)
	c.gathered.Store(&gathered)
	c.gatherAt.Store(math.MaxUint64)
	c.ring.Store(&ring{slots: make([]atomic.Pointer[Event], min(initialRing, limit))})
	return c
}

// maxChunk bounds how many events share one allocation. Events are
// immutable once stored, so sharing a backing array with later events is
// safe; it only keeps up to maxChunk-1 expired events (and their
// payloads) alive until the rest of their chunk expires too.
const maxChunk = 64

// chunkPayload is the largest payload whose event is carved from a chunk;
// a larger one gets an allocation of its own, so the byte budget's
// evictions release it instead of its chunk keeping it alive.
const chunkPayload = 1 << 10

// appendLocked appends the event with the channel's next seq, advances
// next and wakes parked writers. The caller holds c.mu.
func (c *channel) appendLocked(ts int64, payload json.RawMessage) *Event {
	r := c.ring.Load()
	size := uint64(len(r.slots))
	seq := c.next.Load()
	if held := seq - c.base.Load(); held >= size && size < c.limit {
		// Full but not grown yet: no slot has been reused, so the held
		// events are exactly [seq-size, seq).
		grown := &ring{slots: make([]atomic.Pointer[Event], min(2*size, c.limit))}
		gsize := uint64(len(grown.slots))
		for s := seq - size; s < seq; s++ {
			grown.slots[s%gsize].Store(r.slots[s%size].Load())
		}
		c.ring.Store(grown)
		r, size = grown, gsize
	}
	if old := r.slots[seq%size].Load(); old != nil && old.Seq < seq {
		c.bytes -= len(old.Payload) // the slot is reused: its event leaves the ring
	}
	var ev *Event
	if len(payload) > chunkPayload {
		ev = new(Event)
	} else {
		if len(c.chunk) == 0 {
			// Chunks follow the ring's size, so a channel with a handful of
			// events does not hold a large one.
			c.chunk = make([]Event, min(size, maxChunk))
		}
		ev = &c.chunk[0]
		c.chunk = c.chunk[1:]
	}
	*ev = Event{Channel: c.name, Seq: seq, TS: ts, Payload: payload}
	if c.subs > 0 {
		// Its subscribers' writers share one encoding (Event.Wire).
		ev.wire = new(wireOnce)
	}
	r.slots[seq%size].Store(ev)
	c.bytes += len(payload)
	if c.budget > 0 && c.bytes > c.budget {
		c.evictLocked(r, seq)
	}
	c.next.Store(seq + 1)
	if c.parked.Load() {
		c.wakeLocked()
	}
	if seq+1 >= c.gatherAt.Load() {
		c.wakeGatherersLocked()
	}
	return ev
}

// evictLocked drops the oldest events until the ring's payload bytes fit
// its budget again, keeping at least the newest event (seq). Readers see
// an evicted slot as one reused: a read reports the higher oldest seq, a
// subscriber that falls behind it gets its drop marker. The caller holds
// c.mu.
func (c *channel) evictLocked(r *ring, seq uint64) {
	size := uint64(len(r.slots))
	lo := max(c.low.Load(), seq+1-min(seq+1-c.base.Load(), size))
	for c.bytes > c.budget && lo < seq {
		slot := &r.slots[lo%size]
		if ev := slot.Load(); ev != nil && ev.Seq == lo {
			c.bytes -= len(ev.Payload)
			slot.Store(nil)
		}
		lo++
	}
	c.low.Store(lo)
}

// wakeLocked wakes every parked writer. The caller holds c.mu.
func (c *channel) wakeLocked() {
	// Lower parked before the swap: a writer parking in between either
	// loaded the old notify (closed just below) or the new one, and then
	// it sees the next stored before this call and does not wait.
	c.parked.Store(false)
	wake := make(chan struct{})
	close(*c.notify.Swap(&wake))
}

// wakeGatherersLocked wakes every gathering writer. The caller holds c.mu.
func (c *channel) wakeGatherersLocked() {
	if c.gatherArmed {
		c.gatherArmed = false
		c.gatherTimer.Stop() // false when it is this very call: harmless
	}
	// Reset the target before the swap: a writer registering in between
	// either waits on the old channel (closed just below) or registers
	// its target after the reset, where the next append finds it.
	c.gatherAt.Store(math.MaxUint64)
	wake := make(chan struct{})
	close(*c.gathered.Swap(&wake))
}

// gather blocks until the channel's next seq reaches target, coalesceDelay
// passes or stop is raised (the caller re-checks): a writer in a burst
// lets a batch build up without being woken by each publish, and its
// queue cannot overflow meanwhile, since target is one batch past its
// cursor. All the channel's gathering writers share one wake-up and one
// timer, whoever's target comes first.
func (c *channel) gather(target uint64, stop *atomic.Bool) {
	wake := *c.gathered.Load()
	for {
		at := c.gatherAt.Load()
		if at <= target || c.gatherAt.CompareAndSwap(at, target) {
			break
		}
	}
	// Registering and then loading next is ordered against the append's
	// store of next and its load of gatherAt, as in park.
	if c.next.Load() >= target || stop.Load() {
		return
	}
	c.mu.Lock()
	if !c.gatherArmed {
		c.gatherArmed = true
		if c.gatherTimer == nil {
			c.gatherTimer = time.AfterFunc(c.gatherDelay, func() {
				c.mu.Lock()
				c.wakeGatherersLocked()
				c.mu.Unlock()
			})
		} else {
			c.gatherTimer.Reset(c.gatherDelay)
		}
	}
	c.mu.Unlock()
	<-wake
}

// oldest is the oldest seq the ring still holds when next is n (n itself
// when the ring is empty).
func (c *channel) oldest(n uint64) uint64 {
	base := c.base.Load()
	if base >= n {
		return n // also when a reader's n predates a skip that moved base
	}
	return min(max(n-min(n-base, c.limit), c.low.Load()), n)
}

// load appends to dst the events [from, to) still in the ring, newest
// first when newestFirst is set (stopping at the first reused slot, so the
// result is always a contiguous run ending at to-1), else oldest first
// (stopping at the first reused slot, so it is a run starting at from).
func (c *channel) load(dst []*Event, from, to uint64, newestFirst bool) []*Event {
	r := c.ring.Load()
	size := uint64(len(r.slots))
	if newestFirst {
		for s := to; s > from; s-- {
			ev := r.slots[(s-1)%size].Load()
			if ev == nil || ev.Seq != s-1 {
				break
			}
			dst = append(dst, ev)
		}
		return dst
	}
	for s := from; s < to; s++ {
		ev := r.slots[s%size].Load()
		if ev == nil || ev.Seq != s {
			break
		}
		dst = append(dst, ev)
	}
	return dst
}

// park blocks until the channel's next seq passes cursor or the writer is
// woken to stop; the caller re-checks both.
func (c *channel) park(cursor uint64, stop *atomic.Bool) {
	wake := *c.notify.Load()
	// Raising parked (or finding it raised) and then loading next is
	// ordered against the append's store of next and its load of parked:
	// at least one side sees the other. Reading before writing keeps the
	// cache line shared while many writers park at once.
	if !c.parked.Load() {
		c.parked.Store(true)
	}
	if c.next.Load() != cursor || stop.Load() {
		// parked stays raised; the next append then swaps a notify nobody
		// waits on, which is harmless.
		return
	}
	<-wake
}
