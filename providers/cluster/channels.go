package cluster

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/shoal-sh/shoal/core"
	"github.com/shoal-sh/shoal/core/bus"
	"github.com/shoal-sh/shoal/core/wire"
)

// Shared channels. Each shared user.* channel is one JetStream stream
// with one subject, so the stream's sequence numbers are the channel's
// seqs plus one: the same on every kernel, from 0, without a gap (until
// retention drops old events, which then are simply older than
// oldest_seq). A kernel follows a channel from its first use with an
// ordered consumer and hands each event to its bus (Deliver), so the ring,
// subscribers, drop markers and reads work exactly as for local channels;
// reads older than the ring fetch from the stream.

// Message headers the kernel sets on what it publishes.
const (
	hdrTS     = "Shoal-Ts"     // the event's ts (ns), chosen by the publishing kernel
	hdrKernel = "Shoal-Kernel" // the publishing kernel's id
	hdrEntry  = "Shoal-Entry"  // a journal row's entry_id
)

// sharedEpoch is the epoch of every shared channel: their seqs are the
// streams', which never restart while a stream exists. Deleting a stream
// by hand restarts it from 0 without a new epoch (docs/cluster.md).
const sharedEpoch = "cluster"

// sharedSet is the shared = true declarations: exact names and patterns.
type sharedSet struct {
	exact    map[string]bool
	prefixes []string // "user.ci." for "user.ci.*"
	names    []string
}

func newSharedSet(decls []core.ChannelDecl) (*sharedSet, error) {
	s := &sharedSet{exact: map[string]bool{}}
	for _, d := range decls {
		if !d.Shared {
			continue
		}
		s.names = append(s.names, d.Name)
		if prefix, ok := strings.CutSuffix(d.Name, "*"); ok {
			if !strings.HasSuffix(prefix, ".") {
				return nil, fmt.Errorf("shared channel pattern %q: '*' may only follow a dot, as in user.ci.*", d.Name)
			}
			s.prefixes = append(s.prefixes, prefix)
			continue
		}
		if err := bus.CheckClientChannel(d.Name); err != nil {
			return nil, fmt.Errorf("shared channel %q: %w", d.Name, err)
		}
		s.exact[d.Name] = true
	}
	return s, nil
}

func (s *sharedSet) empty() bool { return len(s.names) == 0 }

func (s *sharedSet) has(channel string) bool {
	if s.exact[channel] {
		return true
	}
	for _, p := range s.prefixes {
		if strings.HasPrefix(channel, p) && len(channel) > len(p) {
			return true
		}
	}
	return false
}

// streamName maps a channel to its stream: '.' becomes "_d" and '_'
// becomes "_u", so distinct channels never share a stream.
func streamName(channel string) string {
	var b strings.Builder
	b.WriteString("SHOAL_CH_")
	for i := 0; i < len(channel); i++ {
		switch channel[i] {
		case '.':
			b.WriteString("_d")
		case '_':
			b.WriteString("_u")
		default:
			b.WriteByte(channel[i])
		}
	}
	return b.String()
}

// channels is the bus's SharedStore.
type channels struct {
	c      *Cluster
	bus    *bus.Bus
	shared *sharedSet
	maxAge time.Duration

	mu       sync.Mutex
	followed map[string]*followed
}

// followed is one channel this kernel follows.
type followed struct {
	name   string
	stream jetstream.Stream
	cc     jetstream.ConsumeContext
	// next is the seq the bus expects next; notify is closed (and
	// replaced) after each delivery, for publishers waiting to see their
	// own event.
	next   atomic.Uint64
	mu     sync.Mutex
	notify chan struct{}
	// oldest caches the stream's first seq for reads (see OldestSeq).
	oldestAt  time.Time
	oldestSeq uint64
	oldestOK  bool
}

var _ bus.SharedStore = (*channels)(nil)

func newChannels(c *Cluster, b *bus.Bus, shared *sharedSet, maxAge time.Duration) *channels {
	return &channels{c: c, bus: b, shared: shared, maxAge: maxAge, followed: map[string]*followed{}}
}

// Shares reports whether channel is declared shared.
func (s *channels) Shares(channel string) bool { return s.shared.has(channel) }

func (s *channels) streamConfig(channel string) jetstream.StreamConfig {
	return jetstream.StreamConfig{
		Name:        streamName(channel),
		Description: "Shoal shared channel " + channel,
		Subjects:    []string{channelSubjectPrefix + channel},
		Retention:   jetstream.LimitsPolicy,
		Discard:     jetstream.DiscardOld,
		MaxMsgs:     cmpOr(s.c.cfg.ChannelMaxMsgs, DefaultChannelMaxMsgs),
		MaxBytes:    cmpOr(s.c.cfg.ChannelMaxBytes, -1),
		MaxAge:      s.maxAge,
		Storage:     jetstream.FileStorage,
		Replicas:    s.c.cfg.Replicas,
		Duplicates:  2 * time.Minute,
		AllowDirect: true,
	}
}

func cmpOr(v, def int64) int64 {
	if v > 0 {
		return v
	}
	return def
}

func (s *channels) stream(ctx context.Context, channel string) (jetstream.Stream, error) {
	return s.c.ensureStream(ctx, s.streamConfig(channel))
}

// NextSeq is the stream's last sequence: the next event's seq.
func (s *channels) NextSeq(channel string) (uint64, error) {
	if err := s.c.down("shared channel " + channel); err != nil {
		return 0, err
	}
	ctx, cancel := s.c.ctx()
	defer cancel()
	st, err := s.stream(ctx, channel)
	if err != nil {
		return 0, s.c.unavailable("shared channel "+channel, err)
	}
	info, err := st.Info(ctx)
	if err != nil {
		return 0, s.c.unavailable("shared channel "+channel, err)
	}
	return info.State.LastSeq, nil
}

// Follow starts the channel's ordered consumer at seq next (stream
// sequence next+1). nats.go recreates it after a reconnect from the last
// sequence it delivered, so an outage only delays events.
func (s *channels) Follow(channel string, next uint64) error {
	ctx, cancel := s.c.ctx()
	defer cancel()
	st, err := s.stream(ctx, channel)
	if err != nil {
		return s.c.unavailable("shared channel "+channel, err)
	}
	f := &followed{name: channel, stream: st, notify: make(chan struct{})}
	f.next.Store(next)
	cons, err := st.OrderedConsumer(ctx, jetstream.OrderedConsumerConfig{
		DeliverPolicy: jetstream.DeliverByStartSequencePolicy,
		OptStartSeq:   next + 1,
	})
	if err != nil {
		return s.c.unavailable("follow shared channel "+channel, err)
	}
	f.cc, err = cons.Consume(func(m jetstream.Msg) { s.deliver(f, m) },
		jetstream.ConsumeErrHandler(func(_ jetstream.ConsumeContext, err error) {
			if !errors.Is(err, jetstream.ErrNoHeartbeat) {
				s.c.log.Debug("shared channel consumer", "channel", channel, "err", err)
			}
		}))
	if err != nil {
		return s.c.unavailable("follow shared channel "+channel, err)
	}
	s.mu.Lock()
	s.followed[channel] = f
	s.mu.Unlock()
	return nil
}

// deliver hands one stream message to the bus as the channel's event.
func (s *channels) deliver(f *followed, m jetstream.Msg) {
	meta, err := m.Metadata()
	if err != nil {
		return
	}
	seq := meta.Sequence.Stream - 1
	if seq < f.next.Load() {
		return // a consumer reset replayed what the bus has
	}
	ts, err := strconv.ParseInt(m.Headers().Get(hdrTS), 10, 64)
	if err != nil {
		ts = meta.Timestamp.UnixNano()
	}
	payload := m.Data()
	if len(payload) == 0 {
		payload = json.RawMessage("null")
	}
	if err := s.bus.Deliver(bus.Event{Channel: f.name, Seq: seq, TS: ts, Payload: payload}); err != nil {
		s.c.log.Warn("shared channel delivery", "channel", f.name, "seq", seq, "err", err)
		return
	}
	f.next.Store(seq + 1)
	f.mu.Lock()
	close(f.notify)
	f.notify = make(chan struct{})
	f.mu.Unlock()
}

// Publish stores the event in the channel's stream and returns it once
// the stream acknowledged it and this kernel's bus has it, so a read right
// after the publish sees it. While NATS is unreachable it fails at once
// with CLUSTER_UNAVAILABLE: nothing is buffered to be lost later.
func (s *channels) Publish(channel string, payload json.RawMessage) (bus.Event, error) {
	what := "publish on shared channel " + channel + ": nothing was published"
	if err := s.c.down(what); err != nil {
		return bus.Event{}, err
	}
	s.mu.Lock()
	f := s.followed[channel] // nil for a moment while another call attaches it
	s.mu.Unlock()
	ts := time.Now().UnixNano()
	msg := &nats.Msg{Subject: channelSubjectPrefix + channel, Data: payload, Header: nats.Header{}}
	msg.Header.Set(hdrTS, strconv.FormatInt(ts, 10))
	msg.Header.Set(hdrKernel, s.c.id)
	ctx, cancel := s.c.ctx()
	defer cancel()
	ack, err := s.c.js.PublishMsg(ctx, msg, jetstream.WithExpectStream(streamName(channel)))
	if err != nil {
		if errors.Is(err, nats.ErrNoResponders) || errors.Is(err, context.DeadlineExceeded) || errors.Is(err, nats.ErrConnectionClosed) ||
			errors.Is(err, nats.ErrDisconnected) || errors.Is(err, nats.ErrConnectionReconnecting) || errors.Is(err, nats.ErrTimeout) {
			return bus.Event{}, s.c.unavailable(what+" (or not known to be)", err)
		}
		return bus.Event{}, fmt.Errorf("%s: %w", what, err)
	}
	ev := bus.Event{Channel: channel, Seq: ack.Sequence - 1, TS: ts, Payload: payload}
	if f != nil {
		s.awaitLocal(f, ev.Seq)
	}
	return ev, nil
}

// awaitLocal waits, briefly, until the bus has seq. The event is stored
// either way; the wait only spares the publisher a read that lags its own
// publish.
func (s *channels) awaitLocal(f *followed, seq uint64) {
	timer := time.NewTimer(opTimeout)
	defer timer.Stop()
	for {
		f.mu.Lock()
		wait := f.notify
		f.mu.Unlock()
		if f.next.Load() > seq {
			return
		}
		select {
		case <-wait:
		case <-timer.C:
			return
		case <-s.c.stop:
			return
		}
	}
}

// OldestSeq is the stream's first sequence minus one. It is cached for a
// moment (reads call it every time) and the last known answer stands in
// while NATS is unreachable.
func (s *channels) OldestSeq(channel string) (uint64, bool, error) {
	s.mu.Lock()
	f := s.followed[channel]
	s.mu.Unlock()
	if f == nil {
		return 0, false, nil
	}
	f.mu.Lock()
	fresh := time.Since(f.oldestAt) < 250*time.Millisecond
	seq, ok := f.oldestSeq, f.oldestOK
	f.mu.Unlock()
	if fresh || !s.c.connected() {
		return seq, ok, nil
	}
	ctx, cancel := s.c.ctx()
	defer cancel()
	info, err := f.stream.Info(ctx)
	if err != nil {
		return seq, ok, nil
	}
	seq, ok = 0, info.State.Msgs > 0
	if ok {
		seq = info.State.FirstSeq - 1
	}
	f.mu.Lock()
	f.oldestAt, f.oldestSeq, f.oldestOK = time.Now(), seq, ok
	f.mu.Unlock()
	return seq, ok, nil
}

// ReadRange fetches the events from <= seq < to from the stream, keeping
// the newest limit.
func (s *channels) ReadRange(channel string, from, to uint64, limit int) ([]bus.Event, error) {
	if limit > 0 && to-from > uint64(limit) {
		from = to - uint64(limit)
	}
	if from >= to {
		return nil, nil
	}
	what := "read shared channel " + channel + " older than this kernel's ring"
	if err := s.c.down(what); err != nil {
		return nil, err
	}
	ctx, cancel := s.c.ctx()
	defer cancel()
	st, err := s.stream(ctx, channel)
	if err != nil {
		return nil, s.c.unavailable(what, err)
	}
	msgs, err := fetchRange(ctx, st, from+1, to)
	if err != nil {
		return nil, s.c.unavailable(what, err)
	}
	out := make([]bus.Event, 0, len(msgs))
	for _, m := range msgs {
		ts, err := strconv.ParseInt(m.header.Get(hdrTS), 10, 64)
		if err != nil {
			ts = m.time.UnixNano()
		}
		out = append(out, bus.Event{Channel: channel, Seq: m.seq - 1, TS: ts, Payload: m.data})
	}
	return out, nil
}

// Epoch is the epoch of shared channels.
func (s *channels) Epoch() string { return sharedEpoch }

func (s *channels) status() wire.ClusterChannels {
	s.mu.Lock()
	defer s.mu.Unlock()
	names := make([]string, 0, len(s.followed))
	for n := range s.followed {
		names = append(names, n)
	}
	slices.Sort(names)
	return wire.ClusterChannels{Declared: s.shared.names, Followed: names}
}

func (s *channels) close() {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, f := range s.followed {
		f.cc.Stop()
	}
}

// streamMsg is one message fetched from a stream.
type streamMsg struct {
	seq    uint64
	time   time.Time
	header nats.Header
	data   []byte
}

// fetchRange reads the stream's messages with first <= sequence <= last
// (fewer when retention removed some), ascending, through an ephemeral
// ordered consumer.
func fetchRange(ctx context.Context, st jetstream.Stream, first, last uint64) ([]streamMsg, error) {
	if first > last {
		return nil, nil
	}
	cons, err := st.OrderedConsumer(ctx, jetstream.OrderedConsumerConfig{
		DeliverPolicy:     jetstream.DeliverByStartSequencePolicy,
		OptStartSeq:       first,
		InactiveThreshold: 5 * time.Second,
	})
	if err != nil {
		return nil, err
	}
	out := make([]streamMsg, 0, min(last-first+1, 4096))
	for {
		want := int(min(last-first+1-uint64(len(out)), 4096))
		batch, err := cons.Fetch(want, jetstream.FetchMaxWait(time.Second))
		if err != nil {
			return nil, err
		}
		got := 0
		for m := range batch.Messages() {
			got++
			meta, err := m.Metadata()
			if err != nil {
				continue
			}
			if meta.Sequence.Stream > last {
				return out, nil
			}
			out = append(out, streamMsg{seq: meta.Sequence.Stream, time: meta.Timestamp, header: m.Headers(), data: m.Data()})
			if meta.Sequence.Stream == last {
				return out, nil
			}
		}
		if err := batch.Error(); err != nil && !errors.Is(err, nats.ErrTimeout) {
			return nil, err
		}
		if got == 0 {
			return out, nil // nothing more before last: removed by retention
		}
	}
}
