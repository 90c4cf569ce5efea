package wire

import (
	"bytes"
	"encoding/json"
)

// Drop is the payload of a synthetic drop marker: a subscriber fell
// behind, Dropped events were skipped, and LatestSeq is the newest seq
// when it was sent (docs/events.md).
type Drop struct {
	Dropped   uint64 `json:"dropped"`
	LatestSeq uint64 `json:"latest_seq"`
}

// IsDrop reports whether ev is a synthetic drop marker and decodes it.
// Client publishes cannot carry this payload shape (the bus refuses it),
// so the answer is unambiguous on every channel.
func (ev Event) IsDrop() (Drop, bool) {
	if !DropShaped(ev.Payload) {
		return Drop{}, false
	}
	var d Drop
	if json.Unmarshal(ev.Payload, &d) != nil {
		return Drop{}, false
	}
	return d, true
}

// DropShaped reports whether p is an object whose only keys are dropped
// and latest_seq, the shape of a drop marker.
func DropShaped(p json.RawMessage) bool {
	if t := bytes.TrimLeft(p, " \t\r\n"); len(t) == 0 || t[0] != '{' {
		return false
	}
	// A marker spells latest_seq, literally or with \u escapes; most
	// payloads have neither and skip the decoding below.
	if !bytes.Contains(p, []byte("latest_seq")) && !bytes.Contains(p, []byte(`\u`)) {
		return false
	}
	// encoding/json matches keys case-insensitively and gives up at the
	// first unknown key, which keeps this cheap for ordinary payloads; the
	// map decode then confirms the exact spelling.
	dec := json.NewDecoder(bytes.NewReader(p))
	dec.DisallowUnknownFields()
	var m struct {
		Dropped   json.RawMessage `json:"dropped"`
		LatestSeq json.RawMessage `json:"latest_seq"`
	}
	if dec.Decode(&m) != nil || m.Dropped == nil || m.LatestSeq == nil {
		return false
	}
	var exact map[string]json.RawMessage
	if json.Unmarshal(p, &exact) != nil || len(exact) != 2 {
		return false
	}
	_, d := exact["dropped"]
	_, l := exact["latest_seq"]
	return d && l
}
