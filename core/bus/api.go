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
