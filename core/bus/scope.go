package bus

import (
	"encoding/json"
	"strings"
)

// SessionScoped reports whether channel's events belong to one session
// each: render (one preview per execution) and task.{id}. Their payloads
// carry a "session" member, and a caller sees only its own session's
// events there (reads and subscriptions); the seqs of the others are
// skipped.
func SessionScoped(channel string) bool {
	return channel == ChannelRender || strings.HasPrefix(channel, TaskPrefix)
}

// VisibleTo reports whether ev may be shown to a caller of session. On a
// session-scoped channel that is an event whose payload names session
// (drop markers, which name none, are shown to everyone); any other
// channel's events are visible to all.
func VisibleTo(ev Event, session string) bool {
	if !SessionScoped(ev.Channel) {
		return true
	}
	var named *string
	var ok bool
	if w := ev.wire; w != nil {
		// Shared by every subscriber's copy: decoded once per event.
		w.scopeOnce.Do(func() { w.session, w.scopeOK = payloadSession(ev.Payload) })
		named, ok = w.session, w.scopeOK
	} else {
		named, ok = payloadSession(ev.Payload)
	}
	if !ok {
		return false
	}
	if named == nil {
		_, _, marker := IsMarker(ev)
		return marker
	}
	return *named == session
}

// payloadSession reads the session a payload names (nil: none); ok is
// false when it does not decode.
func payloadSession(payload []byte) (*string, bool) {
	var p struct {
		Session *string `json:"session"`
	}
	if json.Unmarshal(payload, &p) != nil {
		return nil, false
	}
	return p.Session, true
}

// ForSession keeps the events of res that session may see.
func (res ReadResult) ForSession(session string) ReadResult {
	if !SessionScoped(res.Channel) {
		return res
	}
	kept := res.Events[:0:0]
	for _, ev := range res.Events {
		if VisibleTo(ev, session) {
			kept = append(kept, ev)
		}
	}
	res.Events = kept
	return res
}
