package bus

import (
	"encoding/json"
	"errors"
	"math"
	"runtime"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/shoal-sh/shoal/core/wire"
)

// Subscription is one subscriber of one channel: a cursor into the
// channel's ring and a writer goroutine that hands events to the sink in
// seq order.
//
// Publishing never waits for it. The writer copies what is waiting in
// batches; whenever more than the queue size (256) is waiting it skips the
// oldest, keeps the newest 256, and hands the sink one drop marker before
// the next real event (see Marker).
type Subscription struct {
	bus   *Bus
	ch    *channel
	sink  func(Event) error
	batch func([]Event) error // instead of sink, for SubscribeBatches

	done      chan struct{} // closed when the writer has returned
	closeOnce sync.Once
	closed    atomic.Bool

	dropped   atomic.Uint64
	delivered atomic.Uint64
	err       error // the sink's error; written before done closes
}

// writerBatch bounds how many events a writer takes from the ring at once.
// Small enough that a sink which stalls mid-batch holds few stale events;
// large enough to amortise the load of next.
const writerBatch = 64

// A batch writer that just wrote at least burstBatch events is in a
// burst: before it takes fewer than a full batch, it waits until a full
// batch is there or coalesceDelay has passed, so that each wake-up and
// each system call carries up to writerBatch events instead of the
// handful that arrived during the last write. An event that follows a
// quiet spell goes out at once.
const (
	burstBatch    = 4
	coalesceDelay = time.Millisecond
)

// Subscribe starts delivering the events published on channel from now on
// to sink, creating the channel if needed. sink runs on the subscription's
// own goroutine, one call at a time, in seq order; an error from it ends
// the subscription (see Err). Close the subscription when done.
func (b *Bus) Subscribe(channel string, sink func(Event) error) (*Subscription, error) {
	return b.subscribe(channel, nil, sink)
}

// SubscribeFrom is Subscribe starting right after the cursor since, so a
// consumer that read up to since misses nothing in between. Events
// already out of the ring, and any beyond the newest queue-size ones, are
// reported by a drop marker first, never delivered. A nil since, or one at
// or past the latest seq, starts from now.
func (b *Bus) SubscribeFrom(channel string, since *uint64, sink func(Event) error) (*Subscription, error) {
	return b.subscribe(channel, since, sink)
}

// SubscribeBatches is Subscribe for a sink that takes the events waiting
// together, in seq order, up to 64 at a time (a drop marker first when
// there is one): a connection writes them in one system call instead of
// one per event. The sink must not keep the slice.
func (b *Bus) SubscribeBatches(channel string, sink func([]Event) error) (*Subscription, error) {
	if sink == nil {
		return nil, errors.New("subscribe: nil sink")
	}
	return b.subscribeWith(channel, nil, nil, sink)
}

func (b *Bus) subscribe(name string, since *uint64, sink func(Event) error) (*Subscription, error) {
	if sink == nil {
		return nil, errors.New("subscribe: nil sink")
	}
	return b.subscribeWith(name, since, sink, nil)
}

func (b *Bus) subscribeWith(name string, since *uint64, sink func(Event) error, batch func([]Event) error) (*Subscription, error) {
	c, err := b.channel(name)
	if err != nil {
		return nil, err
	}
	s := &Subscription{
		bus:   b,
		ch:    c,
		sink:  sink,
		batch: batch,
		done:  make(chan struct{}),
	}
	b.mu.Lock()
	if b.closed {
		b.mu.Unlock()
		return nil, ErrClosed
	}
	b.subs[s] = struct{}{}
	b.mu.Unlock()

	c.mu.Lock()
	c.subs++
	cursor := c.next.Load()
	c.mu.Unlock()
	if since != nil && *since != math.MaxUint64 && *since+1 < cursor {
		cursor = *since + 1
	}
	go s.run(cursor)
	return s, nil
}

// Channel is the subscribed channel's name.
func (s *Subscription) Channel() string { return s.ch.name }

// Dropped counts the events this subscriber skipped, in total.
func (s *Subscription) Dropped() uint64 { return s.dropped.Load() }

// Delivered counts the events the sink accepted, markers excluded.
func (s *Subscription) Delivered() uint64 { return s.delivered.Load() }

// Done is closed once the subscription has ended: by Close, by Bus.Close,
// or by a sink error.
func (s *Subscription) Done() <-chan struct{} { return s.done }

// Err is the sink error that ended the subscription, or nil; meaningful
// once Done is closed.
func (s *Subscription) Err() error {
	select {
	case <-s.done:
		return s.err
	default:
		return nil
	}
}

// Close ends the subscription. When it returns, the sink is not running and
// will not be called again: Close waits for a sink call in progress, so it
// must not be called from inside the sink (return an error there instead).
// Idempotent and safe from any other goroutine.
func (s *Subscription) Close() {
	s.closeOnce.Do(func() {
		s.closed.Store(true)
		// Wake the writer if it is parked. This wakes the channel's other
		// writers too; they find nothing new and park again.
		s.ch.mu.Lock()
		s.ch.wakeLocked()
		s.ch.wakeGatherersLocked()
		s.ch.mu.Unlock()
	})
	<-s.done
}

// run is the writer: it follows the ring from cursor until Close or a sink
// error.
func (s *Subscription) run(cursor uint64) {
	c, queue := s.ch, s.bus.queue
	defer func() {
		c.mu.Lock()
		c.subs--
		c.mu.Unlock()
		s.bus.mu.Lock()
		delete(s.bus.subs, s)
		s.bus.mu.Unlock()
		close(s.done)
	}()
	batch := make([]*Event, 0, writerBatch)
	var out []Event // what a batch sink gets
	if s.batch != nil {
		out = make([]Event, 0, writerBatch+1)
	}
	var unreported uint64 // skipped since the last marker
	lastBatch := 0        // events in the last batch written
	for !s.closed.Load() {
		n := c.next.Load()
		if s.batch != nil && lastBatch >= burstBatch && n-cursor < writerBatch {
			// In a burst: let a full batch build up (or coalesceDelay
			// pass) instead of writing what trickled in meanwhile. The
			// batch that follows decides whether the burst goes on.
			c.gather(cursor+writerBatch, &s.closed)
			lastBatch = 0
			n = c.next.Load()
		}
		if cursor == n {
			c.park(cursor, &s.closed)
			if s.batch != nil {
				s.yield(cursor)
			}
			continue
		}
		// Keep at most the newest queue-size waiting events, and only
		// events the ring still holds.
		keepFrom := max(c.oldest(n), n-min(n, queue))
		if cursor < keepFrom {
			skip := keepFrom - cursor
			unreported += skip
			s.dropped.Add(skip)
			cursor = keepFrom
		}
		batch = c.load(batch[:0], cursor, min(n, cursor+writerBatch), false)
		if len(batch) == 0 {
			// Publishers lapped us between the two loads; the next
			// round's keepFrom moves past the reused slots.
			continue
		}
		if s.batch != nil {
			out = out[:0]
			if unreported > 0 {
				out = append(out, Marker(c.name, unreported, cursor-1, s.bus.now()))
				unreported = 0
			}
			for _, ev := range batch {
				out = append(out, *ev)
			}
			if !s.deliverBatch(out) {
				return
			}
			s.delivered.Add(uint64(len(batch)))
			cursor += uint64(len(batch))
			lastBatch = len(batch)
			continue
		}
		if unreported > 0 {
			if !s.deliver(Marker(c.name, unreported, cursor-1, s.bus.now())) {
				return
			}
			unreported = 0
		}
		for i, ev := range batch {
			if !s.deliver(*ev) {
				s.delivered.Add(uint64(i))
				return
			}
		}
		s.delivered.Add(uint64(len(batch)))
		cursor += uint64(len(batch))
	}
}

// yield runs between a batch writer's wake-up from park and its load: it
// lets the publisher run on a few times while events keep coming, so that
// each wake-up and each write carries more than the one event that woke
// it.
func (s *Subscription) yield(cursor uint64) {
	c := s.ch
	for range 4 {
		before := c.next.Load()
		runtime.Gosched()
		if c.next.Load() == before || c.next.Load()-cursor >= writerBatch {
			return
		}
	}
}

// deliver hands ev to the sink unless the subscription is closing; false
// means stop.
func (s *Subscription) deliver(ev Event) bool {
	if s.closed.Load() {
		return false
	}
	if err := s.sink(ev); err != nil {
		s.err = err
		return false
	}
	return true
}

// deliverBatch is deliver for a batch sink.
func (s *Subscription) deliverBatch(evs []Event) bool {
	if s.closed.Load() {
		return false
	}
	if err := s.batch(evs); err != nil {
		s.err = err
		return false
	}
	return true
}

// Marker builds the synthetic event a subscriber receives after the bus
// skipped events for it: payload exactly {"dropped":N,"latest_seq":S},
// where the skipped events are the N seqs S-N+1 … S, and the next real
// event delivered is S+1. The marker's own Seq is S, so a consumer that
// tracks seqs sees a jump past its cursor; it is not an event of the
// channel and must never advance a cursor.
func Marker(channel string, dropped, latestSeq uint64, ts int64) Event {
	p := make([]byte, 0, 48)
	p = append(p, `{"dropped":`...)
	p = strconv.AppendUint(p, dropped, 10)
	p = append(p, `,"latest_seq":`...)
	p = strconv.AppendUint(p, latestSeq, 10)
	p = append(p, '}')
	return Event{Channel: channel, Seq: latestSeq, TS: ts, Payload: json.RawMessage(p)}
}

// IsMarker reports whether ev is a drop marker, and its numbers. Client
// publishes cannot carry this payload shape (PublishClient refuses it), so
// the answer is unambiguous on every channel.
func IsMarker(ev Event) (dropped, latestSeq uint64, ok bool) {
	d, ok := wire.Event{Payload: ev.Payload}.IsDrop()
	return d.Dropped, d.LatestSeq, ok
}
