package bus

import (
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"math"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/shoal-sh/shoal/core/rpc"
	"github.com/shoal-sh/shoal/core/wire"
)

// Defaults and limits. docs/events.md documents each.
const (
	DefaultRingSize  = 1024 // events kept in memory per channel (SPEC E4)
	DefaultQueueSize = 256  // undelivered events a subscriber may have waiting (SPEC E6)
	DefaultReadLimit = 100  // events a read returns when it names no limit
	MaxReadLimit     = 1024 // the most events one read returns
)

// Options configures a Bus. The zero value is the production setting.
type Options struct {
	// Epoch identifies this bus's lifetime for ring-only channels, whose
	// seqs restart from 0 when the kernel restarts. Empty: a random one.
	Epoch string
	// Now returns the event timestamp in ns since the Unix epoch. Nil:
	// the wall clock.
	Now func() int64
	// RingSize is how many events each channel keeps in memory (default
	// 1024).
	RingSize int
	// QueueSize is how many undelivered events a subscriber may have
	// waiting before the oldest are dropped (default 256). It is kept
	// below RingSize, so waiting events are always still in the ring.
	QueueSize int
	// RingBytes bounds the payload bytes each channel's ring keeps; the
	// oldest events leave first (default DefaultRingBytes).
	RingBytes int
	// MaxPayload bounds a client's payload (PublishClient), refused
	// beyond with TOO_LARGE (default DefaultMaxPayload).
	MaxPayload int
}

// Defaults of the byte bounds.
const (
	DefaultRingBytes  = 16 << 20
	DefaultMaxPayload = 1 << 20
)

// Bus is the kernel's event bus: channels created on first use, each with
// its own seq counter and ring, durable channels backed by a store, and
// subscribers that read from the rings at their own pace. All methods are
// safe for concurrent use.
type Bus struct {
	epoch string
	now   func() int64
	ring  int
	queue uint64
	// ringBytes and maxPayload: Options.RingBytes and MaxPayload.
	ringBytes, maxPayload int

	channels sync.Map // name → *channel
	policy   atomic.Pointer[userPolicy]
	shared   SharedStore // set once by SetShared, before use; nil: no shared channels

	mu     sync.Mutex
	closed bool
	subs   map[*Subscription]struct{}
}

// New returns a bus configured by opts.
func New(opts Options) *Bus {
	b := &Bus{
		epoch: opts.Epoch,
		now:   opts.Now,
		ring:  opts.RingSize,
		subs:  make(map[*Subscription]struct{}),
	}
	if b.epoch == "" {
		b.epoch = newEpoch()
	}
	if b.now == nil {
		b.now = monotonicWallClock()
	}
	if b.ring <= 0 {
		b.ring = DefaultRingSize
	}
	b.ringBytes, b.maxPayload = opts.RingBytes, opts.MaxPayload
	if b.ringBytes <= 0 {
		b.ringBytes = DefaultRingBytes
	}
	if b.maxPayload <= 0 {
		b.maxPayload = DefaultMaxPayload
	}
	q := opts.QueueSize
	if q <= 0 {
		q = DefaultQueueSize
	}
	if q >= b.ring {
		// A waiting event must still be in the ring when its writer gets
		// to it; otherwise drop counts could not be exact.
		q = max(1, b.ring/2)
	}
	b.queue = uint64(q)
	return b
}

func newEpoch() string {
	var id [8]byte
	_, _ = rand.Read(id[:]) // crypto/rand.Read never fails (Go 1.24+)
	return hex.EncodeToString(id[:])
}

// monotonicWallClock returns a clock of wall-clock ns that reads only the
// monotonic clock: half the cost of time.Now, which reads both. Event ts is
// for display only, so ignoring later steps of the wall clock is fine.
func monotonicWallClock() func() int64 {
	start := time.Now()
	wall := start.UnixNano()
	return func() int64 { return wall + int64(time.Since(start)) }
}

// Epoch is the epoch of ring-only channels: it changes whenever their seqs
// restart from 0 (a new kernel process).
func (b *Bus) Epoch() string { return b.epoch }

// lookup returns the channel, or nil when nothing has created it yet.
func (b *Bus) lookup(name string) *channel {
	if c, ok := b.channels.Load(name); ok {
		return c.(*channel)
	}
	return nil
}

// channel returns the channel, creating it on first use: attached to the
// shared store when that keeps it, else ring-only.
func (b *Bus) channel(name string) (*channel, error) {
	if c := b.lookup(name); c != nil {
		return c, nil
	}
	if err := ValidateName(name); err != nil {
		return nil, err
	}
	if b.isShared(name) {
		return b.attachShared(name)
	}
	c, _ := b.channels.LoadOrStore(name, newChannel(name, 0, nil, b.ring, b.ringBytes))
	return c.(*channel), nil
}

// SetShared makes store the home of the channels it Shares. Call it once,
// at start, before anything publishes, reads or subscribes on them.
func (b *Bus) SetShared(store SharedStore) { b.shared = store }

func (b *Bus) isShared(name string) bool {
	return b.shared != nil && strings.HasPrefix(name, UserPrefix) && b.shared.Shares(name)
}

// attachShared attaches a shared channel at the store's next seq and has
// the store follow it from there. When the store cannot be reached the
// channel is not created, so a later use tries again.
func (b *Bus) attachShared(name string) (*channel, error) {
	next, err := b.shared.NextSeq(name)
	if err != nil {
		return nil, err
	}
	c := newChannel(name, next, b.shared, b.ring, b.ringBytes)
	c.shared = true
	if got, loaded := b.channels.LoadOrStore(name, c); loaded {
		return got.(*channel), nil
	}
	if err := b.shared.Follow(name, next); err != nil {
		b.channels.CompareAndDelete(name, c)
		return nil, err
	}
	return c, nil
}

var nullPayload = json.RawMessage("null")

// checkPayload turns an empty payload into null and refuses anything that
// is not exactly one JSON value.
func checkPayload(p json.RawMessage) (json.RawMessage, error) {
	if len(p) == 0 {
		return nullPayload, nil
	}
	if !validJSON(p) {
		return nil, rpc.Errorf(rpc.InvalidParams, "payload is not valid JSON: send exactly one JSON value (an object, array, string, number, true, false or null)")
	}
	return p, nil
}

// Publish appends an event to a ring-only channel, creating the channel on
// first use, and returns it with its seq and ts. It is the kernel's own
// publish: any well-formed channel name is allowed except durable ones,
// whose events arrive through Deliver. The bus keeps payload as given; the
// caller must not modify it afterwards.
func (b *Bus) Publish(channel string, payload json.RawMessage) (Event, error) {
	payload, err := checkPayload(payload)
	if err != nil {
		return Event{}, err
	}
	c, err := b.channel(channel)
	if err != nil {
		return Event{}, err
	}
	return b.publish(c, payload)
}

func (b *Bus) publish(c *channel, payload json.RawMessage) (Event, error) {
	if c.shared {
		return b.shared.Publish(c.name, payload)
	}
	if c.store != nil {
		return Event{}, fmt.Errorf("publish on %s: the channel is durable; its events come from its store through Deliver", c.name)
	}
	ts := b.now()
	c.mu.Lock()
	ev := *c.appendLocked(ts, payload)
	c.mu.Unlock()
	return ev, nil
}

// PublishClient is a publish on behalf of a client (events.publish, the
// evaluator's emit). It allows only user.* channels (CheckClientChannel),
// refuses payloads shaped like a drop marker, applies strict mode and runs
// the channel's validator, all before a seq is taken: a refusal publishes
// nothing and uses no seq. Errors are *rpc.Error: rpc.InvalidParams for a
// refused channel or payload, rpc.Rejected when the validator says no.
func (b *Bus) PublishClient(channel string, payload json.RawMessage) (Event, error) {
	if err := CheckClientChannel(channel); err != nil {
		return Event{}, err
	}
	if len(payload) > b.maxPayload {
		return Event{}, rpc.Errorf(rpc.TooLarge, "payload is %d bytes; events carry at most %d (limits.event_payload): put large data in a blob (blob.put) and publish its ref",
			len(payload), b.maxPayload)
	}
	payload, err := checkPayload(payload)
	if err != nil {
		return Event{}, err
	}
	if wire.DropShaped(payload) {
		return Event{}, rpc.Errorf(rpc.InvalidParams, "a payload whose only keys are dropped and latest_seq is reserved for the bus's drop markers; wrap it in another key, e.g. {\"report\": {...}}")
	}
	if err := b.admit(channel, payload); err != nil {
		return Event{}, err
	}
	c, err := b.channel(channel)
	if err != nil {
		return Event{}, err
	}
	return b.publish(c, payload)
}

// AttachDurable makes channel durable, backed by store: its next seq
// continues from store.NextSeq, reads older than the ring come from
// store.ReadRange, and events arrive only through Deliver. Attach before
// anything publishes, subscribes or attaches on the channel.
func (b *Bus) AttachDurable(channel string, store DurableStore) error {
	if err := ValidateName(channel); err != nil {
		return fmt.Errorf("attach durable channel: %w", err)
	}
	if store == nil {
		return fmt.Errorf("attach durable channel %s: no store", channel)
	}
	next, err := store.NextSeq(channel)
	if err != nil {
		return fmt.Errorf("attach durable channel %s: next seq: %w", channel, err)
	}
	if _, loaded := b.channels.LoadOrStore(channel, newChannel(channel, next, store, b.ring, b.ringBytes)); loaded {
		return fmt.Errorf("attach durable channel %s: the channel is already in use; attach durable channels at start, before any publish or subscribe", channel)
	}
	return nil
}

// Deliver appends an event of a durable channel after its store committed
// it, and fans it out. ev.Seq must be exactly the channel's next seq: the
// store's writer assigns seqs inside its transaction and delivers in
// commit order. A shared channel's store may skip ahead (seqs its
// retention dropped before this kernel received them): the ring then
// starts again at ev.Seq, and subscribers behind it get a drop marker
// for the skipped seqs. The bus keeps ev.Payload as given.
func (b *Bus) Deliver(ev Event) error {
	c := b.lookup(ev.Channel)
	if c == nil || c.store == nil {
		return fmt.Errorf("deliver on %s: not a durable channel; attach it with AttachDurable first", ev.Channel)
	}
	payload, err := checkPayload(ev.Payload)
	if err != nil {
		return fmt.Errorf("deliver on %s seq %d: %w", ev.Channel, ev.Seq, err)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if next := c.next.Load(); c.shared && ev.Seq > next {
		c.base.Store(ev.Seq)
		c.next.Store(ev.Seq)
	} else if ev.Seq != next {
		return fmt.Errorf("deliver on %s: seq %d is out of order, the channel expects seq %d next", ev.Channel, ev.Seq, next)
	}
	c.appendLocked(ev.TS, payload)
	return nil
}

// ReadResult is the answer of Read, and of events.read on the wire.
type ReadResult struct {
	Channel string `json:"channel"`
	// Events are ascending by seq; never nil, so the wire shows [].
	Events []Event `json:"events"`
	// OldestSeq is the oldest seq still retained (ring or store); null
	// when nothing is.
	OldestSeq *uint64 `json:"oldest_seq"`
	// LatestSeq is the newest seq ever published; null when none was.
	LatestSeq *uint64 `json:"latest_seq"`
	// NextSeq is the seq the next event will get.
	NextSeq uint64 `json:"next_seq"`
	// Epoch names the seq space: a cursor from another epoch is
	// meaningless here and must be dropped.
	Epoch string `json:"epoch"`
	// Truncated is set when some events after since are gone for good
	// (older than OldestSeq): the caller must reconcile from a snapshot.
	// Events a smaller limit left out are not gone and do not set it.
	Truncated bool `json:"truncated"`
}

// Read returns the retained events with seq > *since (every retained event
// when since is nil), at most limit of them and the newest when there are
// more. limit ≤ 0 means DefaultReadLimit; above MaxReadLimit it is capped.
// An unknown channel is an empty answer, not an error. The error is a
// durable store's failure.
func (b *Bus) Read(channel string, since *uint64, limit int) (ReadResult, error) {
	if limit <= 0 {
		limit = DefaultReadLimit
	}
	limit = min(limit, MaxReadLimit)
	res := ReadResult{Channel: channel, Events: []Event{}, Epoch: b.epoch}
	c := b.lookup(channel)
	if c == nil && ValidateName(channel) == nil && b.isShared(channel) {
		var err error
		if c, err = b.attachShared(channel); err != nil {
			return res, err
		}
	}
	if c == nil {
		return res, nil
	}
	if c.store != nil {
		res.Epoch = c.store.Epoch()
	}
	n := c.next.Load()
	res.NextSeq = n
	if n > 0 {
		res.LatestSeq = ptr(n - 1)
	}

	from := uint64(0)
	if since != nil {
		if *since == math.MaxUint64 || *since+1 >= n {
			from = n
		} else {
			from = *since + 1
		}
	}
	start := max(from, n-min(n, uint64(limit)))

	// The ring part, newest first so that a slot reused under us only
	// shortens the run at its old end.
	ringOldest := c.oldest(n)
	ringFrom := max(start, ringOldest)
	evs := c.load(make([]*Event, 0, n-ringFrom), ringFrom, n, true)
	inRing := n - uint64(len(evs)) // the oldest seq this read took from the ring
	if inRing > ringFrom {
		ringOldest = inRing // publishers reused slots while we read
	}
	oldest, retained := ringOldest, ringOldest < n

	var older []Event
	if c.store != nil {
		so, ok, err := c.store.OldestSeq(channel)
		if err != nil {
			return res, fmt.Errorf("read %s: oldest seq: %w", channel, err)
		}
		if ok && (!retained || so < oldest) {
			oldest, retained = so, true
		}
		if start < inRing {
			older, err = c.store.ReadRange(channel, start, inRing, int(inRing-start))
			if err != nil {
				return res, fmt.Errorf("read %s: seqs %d to %d from the store: %w", channel, start, inRing-1, err)
			}
		}
	}
	if retained {
		res.OldestSeq = ptr(oldest)
		res.Truncated = since != nil && from < oldest
	} else {
		res.Truncated = since != nil && from < n
	}

	res.Events = slices.Grow(res.Events, len(older)+len(evs))
	res.Events = append(res.Events, older...)
	for i := len(evs) - 1; i >= 0; i-- {
		res.Events = append(res.Events, *evs[i])
	}
	return res, nil
}

func ptr[T any](v T) *T { return &v }

// ChannelInfo describes one live channel, for status displays.
type ChannelInfo struct {
	Name        string `json:"name"`
	NextSeq     uint64 `json:"next_seq"`
	Durable     bool   `json:"durable"`
	Subscribers int    `json:"subscribers"`
}

// Channels lists the channels that exist (were published, delivered,
// subscribed or attached), sorted by name.
func (b *Bus) Channels() []ChannelInfo {
	var out []ChannelInfo
	b.channels.Range(func(_, v any) bool {
		c := v.(*channel)
		c.mu.Lock()
		subs := c.subs
		c.mu.Unlock()
		out = append(out, ChannelInfo{Name: c.name, NextSeq: c.next.Load(), Durable: c.store != nil, Subscribers: subs})
		return true
	})
	slices.SortFunc(out, func(a, b ChannelInfo) int { return strings.Compare(a.Name, b.Name) })
	return out
}

// ErrClosed is returned by Subscribe after Close.
var ErrClosed = rpc.Errorf(rpc.Unavailable, "the event bus is shut down: the kernel is stopping, reconnect when it is back")

// Close ends every subscription, waiting for each writer to finish its
// sink call in progress, and refuses new subscriptions. Publishing and
// reading keep working. Idempotent.
func (b *Bus) Close() {
	b.mu.Lock()
	b.closed = true
	subs := make([]*Subscription, 0, len(b.subs))
	for s := range b.subs {
		subs = append(subs, s)
	}
	b.mu.Unlock()
	for _, s := range subs {
		s.Close()
	}
}
