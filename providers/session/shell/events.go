package shell

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"mvdan.cc/sh/v3/interp"

	"github.com/shoal-sh/shoal/core/value"
)

// maxOwnEvents bounds, per channel, how many of its own events the
// evaluator remembers in order to skip them in recv.
const maxOwnEvents = 4096

// recvTimeoutStatus is recv's exit status when no event came in time, the
// status timeout(1) uses.
const recvTimeoutStatus = 124

// eventState is the evaluator's side of the language bridge: one read
// cursor per channel, shared by every run of the session so that each
// event is received once, and the seqs of the events the evaluator itself
// emitted, which recv skips so that a script reacting to a channel never
// hears its own voice (no echo loop).
type eventState struct {
	cursors map[string]uint64
	own     map[string]*ownSeqs
	locks   map[string]chan struct{}
}

// channelLock serialises recv calls on one channel, so two concurrent
// receivers (a task and a foreground run) get different events.
func (e *Evaluator) channelLock(ctx context.Context, channel string) (unlock func(), err error) {
	e.mu.Lock()
	if e.events.locks == nil {
		e.events.locks = make(map[string]chan struct{})
	}
	l, ok := e.events.locks[channel]
	if !ok {
		l = make(chan struct{}, 1)
		e.events.locks[channel] = l
	}
	e.mu.Unlock()
	select {
	case l <- struct{}{}:
		return func() { <-l }, nil
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// ownSeqs is one channel's remembered own events: a set to answer isOwn
// and a ring of the same seqs in the order they were emitted, so that
// forgetting the oldest past maxOwnEvents costs the same on the 10,000th
// emit as on the first.
type ownSeqs struct {
	set  map[uint64]struct{}
	ring []uint64 // grows to maxOwnEvents, then wraps at next
	next int
}

func (o *ownSeqs) add(seq uint64) {
	o.set[seq] = struct{}{}
	if len(o.ring) < maxOwnEvents {
		o.ring = append(o.ring, seq)
		return
	}
	// A seq isOwn already forgot is deleted again, harmlessly.
	delete(o.set, o.ring[o.next])
	o.ring[o.next] = seq
	o.next = (o.next + 1) % maxOwnEvents
}

func (e *Evaluator) rememberOwn(channel string, seq uint64) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.events.own == nil {
		e.events.own = make(map[string]*ownSeqs)
	}
	o := e.events.own[channel]
	if o == nil {
		o = &ownSeqs{set: make(map[uint64]struct{})}
		e.events.own[channel] = o
	}
	o.add(seq)
}

// isOwn reports (and forgets) whether the evaluator emitted this event.
func (e *Evaluator) isOwn(channel string, seq uint64) bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	o := e.events.own[channel]
	if o == nil {
		return false
	}
	if _, ok := o.set[seq]; ok {
		delete(o.set, seq)
		return true
	}
	return false
}

func (e *Evaluator) cursor(channel string) (uint64, bool) {
	e.mu.Lock()
	defer e.mu.Unlock()
	seq, ok := e.events.cursors[channel]
	return seq, ok
}

func (e *Evaluator) setCursor(channel string, seq uint64) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.events.cursors == nil {
		e.events.cursors = make(map[string]uint64)
	}
	e.events.cursors[channel] = seq
}

// ----- emit -----

// builtinEmit publishes on a user.* channel: emit CHANNEL [JSON]. Without
// a JSON argument it publishes each JSON document of its standard input.
// Its value is {channel, seq}, or a table of them for several events.
func builtinEmit(c *call) error {
	if len(c.args) < 2 || len(c.args) > 3 {
		return c.failf(2, "usage: emit CHANNEL [JSON] (without JSON, each JSON document on standard input is published)")
	}
	channel := c.args[1]
	if c.e.opts.Emit == nil {
		return c.failf(1, "this session is not connected to an event bus; nothing was published")
	}
	var payloads [][]byte
	if len(c.args) == 3 {
		arg := []byte(c.args[2])
		if !json.Valid(arg) {
			return c.failf(2, "payload is not JSON; quote text as a JSON string, e.g. emit %s '\"done\"'", channel)
		}
		payloads = append(payloads, arg)
	} else {
		vs, ok, err := c.stdinValues()
		if err := c.inputError(ok, err); err != nil {
			return err
		}
		for _, v := range vs {
			payloads = append(payloads, appendPlain(nil, v))
		}
		if len(payloads) == 0 {
			return c.failf(2, "no JSON document on standard input; nothing was published")
		}
	}
	c.ru.effect(EffectEventPublish, channel)
	var sent []value.Value
	for _, p := range payloads {
		seq, err := c.e.opts.Emit(c.ctx, channel, json.RawMessage(p))
		if err != nil {
			if c.ctx.Err() != nil {
				return c.ctx.Err()
			}
			if len(sent) > 0 {
				_ = c.deliver(listOf(sent), nil)
			}
			return c.failf(1, "%v", err)
		}
		c.e.rememberOwn(channel, seq)
		sent = append(sent, value.NewRecord(value.F("channel", value.Str(channel)), value.F("seq", value.Int(int64(seq)))))
	}
	if len(sent) == 1 {
		return c.deliver(sent[0], nil)
	}
	return c.deliver(listOf(sent), nil)
}

// ----- recv -----

const recvUsage = "usage: recv [-t DURATION] [--since SEQ] CHANNEL"

// builtinRecv waits for the next event on a channel and returns it as
// {channel, seq, payload}. The first recv on a channel waits for an event
// published after it started (or after --since SEQ); later ones continue
// from the last event received, so none is missed or seen twice. Events
// this evaluator emitted are skipped. With -t it gives up after DURATION
// with exit status 124.
func builtinRecv(c *call) error {
	var (
		channel string
		timeout time.Duration
		since   *uint64
	)
	args := c.args[1:]
	for i := 0; i < len(args); i++ {
		a := args[i]
		switch {
		case a == "-t" || a == "--timeout":
			if i+1 >= len(args) {
				return c.failf(2, "%s needs a duration; %s", a, recvUsage)
			}
			i++
			d, err := parseDuration(args[i])
			if err != nil {
				return c.failf(2, "%v; %s", err, recvUsage)
			}
			timeout = d
		case a == "--since":
			if i+1 >= len(args) {
				return c.failf(2, "--since needs a seq; %s", recvUsage)
			}
			i++
			n, err := strconv.ParseUint(args[i], 10, 64)
			if err != nil {
				return c.failf(2, "--since %q is not a seq (a non-negative integer); %s", args[i], recvUsage)
			}
			since = &n
		case strings.HasPrefix(a, "-") && len(a) > 1:
			return c.failf(2, "unknown option %s; %s", a, recvUsage)
		case channel == "":
			channel = a
		default:
			return c.failf(2, "%s", recvUsage)
		}
	}
	if channel == "" {
		return c.failf(2, "%s", recvUsage)
	}
	if c.e.opts.NextEvent == nil {
		return c.failf(1, "this session is not connected to an event bus; there is nothing to receive")
	}

	ctx := c.ctx
	if timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, timeout)
		defer cancel()
	}
	unlock, err := c.e.channelLock(ctx, channel)
	if err != nil {
		return c.recvStopped(channel, timeout)
	}
	defer unlock()
	if since == nil {
		if cur, ok := c.e.cursor(channel); ok {
			since = &cur
		}
	}
	for {
		seq, payload, err := c.e.opts.NextEvent(ctx, channel, since)
		if err != nil {
			if ctx.Err() != nil {
				return c.recvStopped(channel, timeout)
			}
			return c.failf(1, "%v", err)
		}
		if since != nil && seq > *since+1 {
			fmt.Fprintf(c.hc.Stderr, "recv: %d events on %s were no longer retained (wanted seq %d, got %d)\n", seq-*since-1, channel, *since+1, seq)
		}
		c.e.setCursor(channel, seq)
		s := seq
		since = &s
		if c.e.isOwn(channel, seq) {
			continue
		}
		var pv value.Value
		if v, err := value.FromPlainJSON(payload); err == nil {
			pv = v
		} else {
			pv = value.Str(payload)
		}
		ev := value.NewRecord(
			value.F("channel", value.Str(channel)),
			value.F("seq", value.Int(int64(seq))),
			value.F("payload", pv),
		)
		return c.deliver(ev, nil)
	}
}

func (c *call) recvStopped(channel string, timeout time.Duration) error {
	if c.ctx.Err() != nil {
		return c.ctx.Err()
	}
	fmt.Fprintf(c.hc.Stderr, "recv: no event on %s within %v\n", channel, timeout)
	return interp.ExitStatus(recvTimeoutStatus)
}

// parseDuration reads a Go duration (1m30s, 500ms) or a number of seconds
// (5, 0.5).
func parseDuration(s string) (time.Duration, error) {
	if f, err := strconv.ParseFloat(s, 64); err == nil {
		if f < 0 {
			return 0, errors.New("the duration must not be negative")
		}
		return time.Duration(f * float64(time.Second)), nil
	}
	d, err := time.ParseDuration(s)
	if err != nil || d < 0 {
		return 0, fmt.Errorf("%q is not a duration (e.g. 5s, 500ms, 2)", s)
	}
	return d, nil
}
