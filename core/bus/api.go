// Package bus is Shoal's event bus: named channels with per-channel
// sequence numbers, a retention ring per channel, durable channels backed by
// a store, and subscribers that can never slow a publisher down.
package bus

import "encoding/json"

// Event is one event on one channel. Seq starts at 0 and grows by one per
// event per channel; it is the replay and dedupe key. TS is nanoseconds
// since the Unix epoch, for display only.
type Event struct {
	Channel string          `json:"channel"`
	Seq     uint64          `json:"seq"`
	TS      int64           `json:"ts"`
	Payload json.RawMessage `json:"payload"`

	// wire is shared by every copy of an event the ring stored while the
	// channel had subscribers: its encoding, made once (see Wire).
	wire *wireOnce
}

// DurableStore backs a durable channel (journal, session.transcript): it
// answers reads older than the ring and tells the next seq at start.
// The journal implements it.
type DurableStore interface {
	// NextSeq is the seq the channel's next event will get (0 when empty).
	NextSeq(channel string) (uint64, error)
	// OldestSeq is the oldest seq the store still holds; ok is false when it
	// holds none.
	OldestSeq(channel string) (seq uint64, ok bool, err error)
	// ReadRange returns the events with from <= seq < to, ascending, at most
	// limit of them, keeping the newest when there are more.
	ReadRange(channel string, from, to uint64, limit int) ([]Event, error)
	// Epoch identifies the store's lifetime: it stays the same across
	// kernel restarts while the store's data survives.
	Epoch() string
}

// Validator checks a user.* payload before it is published. A non-nil
// error rejects the event: nothing is published and no seq is used.
type Validator func(channel string, payload json.RawMessage) error

// SharedStore keeps the channels that live outside this kernel: the user.*
// channels a cluster shares between kernels (see [Bus.SetShared]). The bus
// asks it, when a channel is first used, whether it keeps that channel. A
// kept channel is durable with the store behind it; a client publish goes
// to the store's Publish (after strict mode and the validator, on this
// kernel); its events, from whichever kernel published them, reach the bus
// through [Bus.Deliver] in seq order.
type SharedStore interface {
	DurableStore
	// Shares reports whether channel lives in the store. It is asked once
	// per channel, before the channel exists on this bus; it must not
	// block.
	Shares(channel string) bool
	// Follow starts delivering the channel's events from seq next on (the
	// NextSeq the channel was attached with) through Deliver. The bus
	// calls it once, right after attaching the channel.
	Follow(channel string, next uint64) error
	// Publish stores payload as the channel's next event and returns it
	// with the seq and ts the store gave it. An error means it was not
	// stored, or not known to be: it must never be reported as published
	// and then lost.
	Publish(channel string, payload json.RawMessage) (Event, error)
}
