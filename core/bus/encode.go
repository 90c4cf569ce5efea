package bus

import (
	"bytes"
	"encoding/json"
	"strconv"
	"sync"
)

type wireOnce struct {
	once sync.Once
	b    []byte

	// The session a session-scoped event names, read from its payload
	// once for every subscriber (see VisibleTo).
	scopeOnce sync.Once
	session   *string
	scopeOK   bool // the payload decoded
}

// Wire returns the event as compact JSON (AppendJSON with the payload's
// whitespace removed), ready to go into a frame as it is. An event the
// ring stored while its channel had subscribers is encoded once, by the
// first writer that asks, and every subscriber's writer shares those
// bytes: fan-out costs one encoding per event, not one per subscriber.
// The result must not be modified.
func (ev *Event) Wire() []byte {
	if ev.wire == nil {
		return ev.compactJSON()
	}
	ev.wire.once.Do(func() { ev.wire.b = ev.compactJSON() })
	return ev.wire.b
}

func (ev *Event) compactJSON() []byte {
	b := ev.AppendJSON(make([]byte, 0, 64+len(ev.Payload)))
	if !hasSpace(ev.Payload) {
		return b
	}
	var out bytes.Buffer
	out.Grow(len(b))
	if json.Compact(&out, b) != nil {
		return b // payloads were checked at publish; not reached
	}
	return out.Bytes()
}

// hasSpace reports whether p holds a JSON whitespace byte (inside a
// string too: then Compact keeps it, harmlessly).
func hasSpace(p []byte) bool {
	for _, c := range p {
		if c == ' ' || c == '\n' || c == '\t' || c == '\r' {
			return true
		}
	}
	return false
}

// AppendJSON appends the event as JSON. Payloads were checked at publish;
// a payload that still holds whitespace is copied as it is (the kernel's
// frame writer compacts the whole answer).
func (ev *Event) AppendJSON(b []byte) []byte {
	b = append(b, `{"channel":`...)
	b = appendString(b, ev.Channel)
	b = append(b, `,"seq":`...)
	b = strconv.AppendUint(b, ev.Seq, 10)
	b = append(b, `,"ts":`...)
	b = strconv.AppendInt(b, ev.TS, 10)
	b = append(b, `,"payload":`...)
	if len(ev.Payload) == 0 {
		b = append(b, "null"...)
	} else {
		b = append(b, ev.Payload...)
	}
	return append(b, '}')
}

// MarshalJSON encodes the read result without reflection: event reads are
// the hottest kernel answer.
func (r ReadResult) MarshalJSON() ([]byte, error) {
	b := make([]byte, 0, 128+len(r.Events)*96)
	b = append(b, `{"channel":`...)
	b = appendString(b, r.Channel)
	b = append(b, `,"events":[`...)
	for i := range r.Events {
		if i > 0 {
			b = append(b, ',')
		}
		b = r.Events[i].AppendJSON(b)
	}
	b = append(b, `],"oldest_seq":`...)
	b = appendSeq(b, r.OldestSeq)
	b = append(b, `,"latest_seq":`...)
	b = appendSeq(b, r.LatestSeq)
	b = append(b, `,"next_seq":`...)
	b = strconv.AppendUint(b, r.NextSeq, 10)
	b = append(b, `,"epoch":`...)
	b = appendString(b, r.Epoch)
	b = append(b, `,"truncated":`...)
	b = strconv.AppendBool(b, r.Truncated)
	return append(b, '}'), nil
}

func appendSeq(b []byte, s *uint64) []byte {
	if s == nil {
		return append(b, "null"...)
	}
	return strconv.AppendUint(b, *s, 10)
}

// appendString quotes names (channels, epochs): plain ASCII in practice,
// so the common case is a copy; anything else goes through encoding/json.
func appendString(b []byte, s string) []byte {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c >= 0x7f || c == '"' || c == '\\' || c == '<' || c == '>' || c == '&' {
			q, _ := json.Marshal(s)
			return append(b, q...)
		}
	}
	b = append(b, '"')
	b = append(b, s...)
	return append(b, '"')
}

// MarshalJSON encodes the event without reflection (event frames are the
// kernel's most frequent notification).
func (ev Event) MarshalJSON() ([]byte, error) {
	return ev.AppendJSON(make([]byte, 0, 64+len(ev.Payload))), nil
}
