package sdk

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"math/bits"
	"strconv"
	"unicode/utf16"
	"unicode/utf8"
	"unsafe"

	"github.com/shoal-sh/shoal/sdk/abi"
)

// The kernel's requests are small JSON objects of a fixed shape. They are
// read here by a direct scanner instead of encoding/json: inside a wasm
// guest, encoding/json's reflection and indirect calls cost about 70 µs
// per request, most of a read's budget, while this scanner costs a few.
// Unknown members are skipped, so the kernel may add some.

type reader struct {
	b   []byte
	i   int
	err error
}

// private copies a request: decoded strings point into the copy, which
// nothing else holds or changes, instead of each being allocated (an
// allocation costs about a microsecond in a guest).
func private(data []byte) []byte {
	return append([]byte(nil), data...)
}

func (r *reader) fail(format string, args ...any) {
	if r.err == nil {
		r.err = fmt.Errorf("at byte %d: %s", r.i, fmt.Sprintf(format, args...))
	}
}

func (r *reader) ws() {
	for r.i < len(r.b) && isSpace(r.b[r.i]) {
		r.i++
	}
}

// next returns the next non-space byte without consuming it, or 0.
func (r *reader) next() byte {
	r.ws()
	if r.err != nil || r.i >= len(r.b) {
		return 0
	}
	return r.b[r.i]
}

func (r *reader) expect(c byte) {
	if r.next() != c {
		r.fail("want %q", c)
		return
	}
	r.i++
}

// str reads a string.
func (r *reader) str() string {
	if r.next() != '"' {
		r.fail("want a string")
		return ""
	}
	r.i++
	start := r.i
	r.i = plainRun(r.b, r.i)
	for r.i < len(r.b) {
		switch c := r.b[r.i]; {
		case c == '"':
			s := r.b[start:r.i]
			r.i++
			if len(s) == 0 {
				return ""
			}
			return unsafe.String(&s[0], len(s))
		case c == '\\':
			return r.escaped(start)
		case c < 0x20:
			r.fail("control character in a string")
			return ""
		default:
			r.i++
		}
	}
	r.fail("unterminated string")
	return ""
}

// Bytes of a string's body that end the plain run: a quote, a
// backslash or a control character. Inside a guest every jump back to a
// loop's head passes through the host's deadline check, so a loop that
// takes a byte a turn costs some 100 ns a byte; plainRun takes eight.
const (
	ones  = 0x0101010101010101
	highs = 0x8080808080808080
)

// plainRun returns the index of the first quote, backslash or control
// character from i, or where the tail shorter than a word starts (the
// byte loop reads that). In (w-ones)&^w&highs the lowest bit set marks
// the first zero byte of w exactly (a borrow only runs upward from a
// zero byte); with w-ones*0x20 it marks the first byte below 0x20.
func plainRun(b []byte, i int) int {
	for ; i+8 <= len(b); i += 8 {
		w := binary.LittleEndian.Uint64(b[i:])
		q, bs := w^(ones*'"'), w^(ones*'\\')
		if m := ((q-ones)&^q | (bs-ones)&^bs | (w-ones*0x20)&^w) & highs; m != 0 {
			return i + bits.TrailingZeros64(m)/8
		}
	}
	return i
}

// escaped finishes a string that holds escapes, from its first escape.
func (r *reader) escaped(start int) string {
	out := append([]byte(nil), r.b[start:r.i]...)
	for r.i < len(r.b) {
		c := r.b[r.i]
		switch {
		case c == '"':
			r.i++
			return string(out)
		case c < 0x20:
			r.fail("control character in a string")
			return ""
		case c != '\\':
			out = append(out, c)
			r.i++
			continue
		}
		if r.i+1 >= len(r.b) {
			break
		}
		e := r.b[r.i+1]
		r.i += 2
		switch e {
		case '"', '\\', '/':
			out = append(out, e)
		case 'b':
			out = append(out, '\b')
		case 'f':
			out = append(out, '\f')
		case 'n':
			out = append(out, '\n')
		case 'r':
			out = append(out, '\r')
		case 't':
			out = append(out, '\t')
		case 'u':
			ru := r.hex4()
			if utf16.IsSurrogate(ru) {
				lo := rune(-1)
				if r.i+1 < len(r.b) && r.b[r.i] == '\\' && r.b[r.i+1] == 'u' {
					save := r.i
					r.i += 2
					if lo = r.hex4(); utf16.DecodeRune(ru, lo) == utf8.RuneError {
						r.i, lo = save, -1 // not a pair: leave the escape for the next round
					}
				}
				ru = utf16.DecodeRune(ru, lo)
			}
			out = utf8.AppendRune(out, ru)
		default:
			r.fail("bad escape \\%c", e)
			return ""
		}
		if r.err != nil {
			return ""
		}
	}
	r.fail("unterminated string")
	return ""
}

func (r *reader) hex4() rune {
	if r.i+4 > len(r.b) {
		r.fail("short \\u escape")
		return utf8.RuneError
	}
	n, err := strconv.ParseUint(string(r.b[r.i:r.i+4]), 16, 16)
	if err != nil {
		r.fail("bad \\u escape")
		return utf8.RuneError
	}
	r.i += 4
	return rune(n)
}

// more steps through a container closing with end: it reports whether
// another member or element follows, consuming the comma before it or
// the closing byte after the last. first must start true. Loops over
// more, unlike callbacks, allocate nothing: a closure that captures the
// reader would move it to the heap.
func (r *reader) more(end byte, first *bool) bool {
	c := r.next()
	if r.err != nil {
		return false
	}
	if *first {
		*first = false
		if c == end {
			r.i++
			return false
		}
		return true
	}
	switch c {
	case ',':
		r.i++
		return true
	case end:
		r.i++
		return false
	}
	r.fail("want ',' or %q", end)
	return false
}

// open starts an object or array; null reads as an empty one and
// answers false.
func (r *reader) open(begin byte) bool {
	if r.next() == 'n' {
		r.literal("null")
		return false
	}
	r.expect(begin)
	return r.err == nil
}

// key reads a member's key and its colon.
func (r *reader) key() string {
	k := r.str()
	r.expect(':')
	return k
}

func (r *reader) literal(word string) {
	r.ws()
	if len(r.b)-r.i < len(word) || string(r.b[r.i:r.i+len(word)]) != word {
		r.fail("want %s", word)
		return
	}
	r.i += len(word)
}

// skip reads any value and returns its raw bytes.
func (r *reader) skip() []byte {
	r.ws()
	start := r.i
	switch c := r.next(); {
	case c == '"':
		r.str()
	case c == '{':
		r.i++
		for first := true; r.more('}', &first); {
			r.key()
			r.skip()
		}
	case c == '[':
		r.i++
		for first := true; r.more(']', &first); {
			r.skip()
		}
	case c == 't':
		r.literal("true")
	case c == 'f':
		r.literal("false")
	case c == 'n':
		r.literal("null")
	case c == '-' || c >= '0' && c <= '9':
		r.number()
	default:
		r.fail("want a value")
	}
	return r.b[start:r.i]
}

// number reads a JSON number, checking its grammar.
func (r *reader) number() {
	start := r.i
	digits := func() int {
		n := 0
		for r.i < len(r.b) && r.b[r.i] >= '0' && r.b[r.i] <= '9' {
			r.i++
			n++
		}
		return n
	}
	if r.b[r.i] == '-' {
		r.i++
	}
	first := r.i
	if digits() == 0 || r.b[first] == '0' && r.i-first > 1 {
		r.fail("bad number %q", r.b[start:r.i])
		return
	}
	if r.i < len(r.b) && r.b[r.i] == '.' {
		r.i++
		if digits() == 0 {
			r.fail("bad number")
			return
		}
	}
	if r.i < len(r.b) && (r.b[r.i] == 'e' || r.b[r.i] == 'E') {
		r.i++
		if r.i < len(r.b) && (r.b[r.i] == '+' || r.b[r.i] == '-') {
			r.i++
		}
		if digits() == 0 {
			r.fail("bad number")
		}
	}
}

// end checks that nothing but space follows.
func (r *reader) end() error {
	if r.err == nil && r.next() != 0 {
		r.fail("unexpected data after the request")
	}
	return r.err
}

func (r *reader) caller(c *Caller) {
	if !r.open('{') {
		return
	}
	for first := true; r.more('}', &first); {
		switch r.key() {
		case "session":
			c.Session = r.str()
		case "principal":
			c.Principal = r.str()
		default:
			r.skip()
		}
	}
}

func (r *reader) params() []Param {
	var out []Param
	if !r.open('[') {
		return nil
	}
	for first := true; r.more(']', &first); {
		var p Param
		if r.open('{') {
			for first := true; r.more('}', &first); {
				switch r.key() {
				case "key":
					p.Key = r.str()
				case "value":
					p.Value = r.str()
				default:
					r.skip()
				}
			}
		}
		out = append(out, p)
	}
	return out
}

// strings reads a list of strings, appending to out; an empty list or
// null reads as nil.
func (r *reader) strings(out []string) []string {
	if !r.open('[') {
		return nil
	}
	for first := true; r.more(']', &first); {
		out = append(out, r.str())
	}
	if len(out) == 0 {
		return nil
	}
	return out
}

// lit consumes s when the input continues with it.
func (r *reader) lit(s string) bool {
	if r.err != nil || len(r.b)-r.i < len(s) || string(r.b[r.i:r.i+len(s)]) != s {
		return false
	}
	r.i += len(s)
	return true
}

// hostReadLayout reads a read request in the kernel's layout: its
// members in order, without spaces (the order of the kernel's struct,
// plugins/provider.go readRequest). Matching the keys as literals saves
// the general reader's per-key switch, which costs a few microseconds a
// member in a guest. Anything else answers false and is read again by
// the general reader.
func hostReadLayout(data []byte) (*ReadRequest, bool) {
	const head = `{"uri":`
	if len(data) < len(head) || string(data[:len(head)]) != head {
		return nil, false // before the copy: another caller's request pays little
	}
	// One allocation for the request and its first segments.
	box := &struct {
		req ReadRequest
		seg [2]string
	}{}
	req := &box.req
	r := reader{b: private(data), i: len(head)}
	req.URI = r.str()
	if !r.lit(`,"family":`) {
		return nil, false
	}
	req.Family = r.str()
	if !r.lit(`,"segments":`) {
		return nil, false
	}
	req.Segments = r.strings(box.seg[:0])
	if !r.lit(`,"query":`) {
		return nil, false
	}
	req.Query = r.params()
	if !r.lit(`,"caller":{"session":`) {
		return nil, false
	}
	req.Caller.Session = r.str()
	if !r.lit(`,"principal":`) {
		return nil, false
	}
	req.Caller.Principal = r.str()
	if !r.lit(`}}`) || r.i != len(r.b) {
		return nil, false
	}
	return req, true
}

func decodeRead(data []byte) (*ReadRequest, error) {
	if req, ok := hostReadLayout(data); ok {
		return req, nil
	}
	req := &ReadRequest{}
	r := reader{b: private(data)}
	if r.open('{') {
		for first := true; r.more('}', &first); {
			switch r.key() {
			case "uri":
				req.URI = r.str()
			case "family":
				req.Family = r.str()
			case "segments": // a repeated member replaces, as in encoding/json
				req.Segments = r.strings(nil)
			case "query":
				req.Query = r.params()
			case "caller":
				r.caller(&req.Caller)
			default:
				r.skip()
			}
		}
	}
	return req, r.end()
}

func decodeList(data []byte) (*ListRequest, error) {
	req := &ListRequest{}
	r := reader{b: private(data)}
	if r.open('{') {
		for first := true; r.more('}', &first); {
			if r.key() == "caller" {
				r.caller(&req.Caller)
			} else {
				r.skip()
			}
		}
	}
	return req, r.end()
}

// Guest code runs far slower than native code, byte loops most of all
// (wazero checks for a deadline at every loop head), so a validation must
// not scan its payload twice. The kernel always sends exactly
// {"channel":"NAME","payload":PAYLOAD} with a payload it has already
// checked to be JSON; that layout is taken apart without scanning the
// payload, and the validator's own parse is the one pass over it. Any
// other form goes through the reader.
const (
	validateHead    = abi.ValidateHead
	validatePayload = abi.ValidatePayload
)

func decodeValidate(data []byte) (channel string, payload json.RawMessage, err error) {
	if ch, p, ok := hostValidateLayout(data); ok {
		return ch, p, nil
	}
	r := reader{b: private(data)}
	if r.open('{') {
		for first := true; r.more('}', &first); {
			switch r.key() {
			case "channel":
				channel = r.str()
			case "payload":
				payload = r.skip()
			default:
				r.skip()
			}
		}
	}
	if err := r.end(); err != nil {
		return "", nil, err
	}
	if payload == nil {
		return "", nil, errors.New("no payload")
	}
	return channel, payload, nil
}

// hostValidateLayout splits a validate request in the kernel's layout: a
// channel name without escapes, then the payload up to the closing brace.
// It trusts the kernel for the rest: nothing follows the payload.
func hostValidateLayout(data []byte) (channel string, payload json.RawMessage, ok bool) {
	if len(data) < len(validateHead) || string(data[:len(validateHead)]) != validateHead || data[len(data)-1] != '}' {
		return "", nil, false
	}
	rest := data[len(validateHead):]
	end := plainRun(rest, 0)
	for end < len(rest) && rest[end] != '"' {
		if c := rest[end]; c == '\\' || c < 0x20 {
			return "", nil, false
		}
		end++
	}
	if end == len(rest) {
		return "", nil, false
	}
	tail := rest[end+1:]
	if len(tail) <= len(validatePayload)+1 || string(tail[:len(validatePayload)]) != validatePayload {
		return "", nil, false
	}
	if p := tail[len(validatePayload) : len(tail)-1]; isSpace(p[0]) || isSpace(p[len(p)-1]) {
		return "", nil, false
	}
	// The request buffer is reused by the next call: keep a copy.
	rest = private(data)[len(validateHead):]
	if end > 0 {
		channel = unsafe.String(&rest[0], end)
	}
	return channel, json.RawMessage(rest[end+1+len(validatePayload) : len(rest)-1]), true
}

// appendErrorEnvelope builds an error answer without encoding/json, for
// the same reason as the reader: a NOT_FOUND should cost little.
func appendErrorEnvelope(b []byte, code Code, msg string) []byte {
	b = append(b, `{"ok":false,"error":{"code":`...)
	b = appendJSONString(b, string(code))
	b = append(b, `,"message":`...)
	b = appendJSONString(b, msg)
	return append(b, "}}"...)
}

func isSpace(c byte) bool { return c == ' ' || c == '\t' || c == '\n' || c == '\r' }
