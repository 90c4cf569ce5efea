package sdk

import (
	"encoding/json"
	"strconv"
)

// Object is a JSON object read for its top-level members. It is what a
// validator reaches for when the payload's shape is settled (its schema
// was checked before Validate runs) and only a few members matter:
// encoding/json costs tens of microseconds per payload inside a wasm
// guest, this a few.
type Object struct {
	members []member
}

type member struct {
	name string
	raw  json.RawMessage
}

// ParseObject reads data, which must be a JSON object. A repeated name
// keeps its last value.
func ParseObject(data []byte) (Object, error) {
	// One allocation for the members of a typical payload: each costs
	// about a microsecond in a guest.
	o := Object{members: make([]member, 0, 8)}
	r := reader{b: private(data)}
	if r.next() != '{' {
		r.fail("want an object")
	} else if r.open('{') {
		for first := true; r.more('}', &first); {
			name := r.key()
			raw := r.skip()
			if r.err != nil {
				break
			}
			o.members = append(o.members, member{name, raw})
		}
	}
	if err := r.end(); err != nil {
		return Object{}, err
	}
	return o, nil
}

// Raw returns a member's raw JSON.
func (o Object) Raw(name string) (json.RawMessage, bool) {
	for i := len(o.members) - 1; i >= 0; i-- {
		if o.members[i].name == name {
			return o.members[i].raw, true
		}
	}
	return nil, false
}

// Has reports whether the member is present (null included).
func (o Object) Has(name string) bool {
	_, ok := o.Raw(name)
	return ok
}

// Str returns a string member; ok is false when it is missing or not a
// string.
func (o Object) Str(name string) (s string, ok bool) {
	raw, ok := o.Raw(name)
	if !ok || len(raw) == 0 || raw[0] != '"' {
		return "", false
	}
	r := reader{b: raw}
	s = r.str()
	return s, r.err == nil
}

// Int returns an integer member; ok is false when it is missing, not a
// number, has a fraction or exponent, or does not fit 64 bits.
func (o Object) Int(name string) (n int64, ok bool) {
	raw, ok := o.Raw(name)
	if !ok {
		return 0, false
	}
	n, err := strconv.ParseInt(string(raw), 10, 64)
	return n, err == nil
}

// Float returns a number member; ok is false when it is missing or not a
// number.
func (o Object) Float(name string) (f float64, ok bool) {
	raw, ok := o.Raw(name)
	if !ok || len(raw) == 0 || !(raw[0] == '-' || raw[0] >= '0' && raw[0] <= '9') {
		return 0, false
	}
	f, err := strconv.ParseFloat(string(raw), 64)
	return f, err == nil
}

// Bool returns a boolean member; ok is false when it is missing or not a
// boolean.
func (o Object) Bool(name string) (b, ok bool) {
	raw, _ := o.Raw(name)
	switch string(raw) {
	case "true":
		return true, true
	case "false":
		return false, true
	}
	return false, false
}
