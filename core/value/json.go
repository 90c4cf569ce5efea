package value

import (
	"bytes"
	"encoding/base64"
	"errors"
	"fmt"
	"math"
	"math/bits"
	"slices"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf16"
	"unicode/utf8"

	"github.com/shoal-sh/shoal/core/rpc"
)

// Marshal returns the compact typed-JSON wire form of v (see docs/values.md).
// It fails only for a nil Value inside a list or record, which no decoder
// or builder in Shoal produces.
func Marshal(v Value) ([]byte, error) {
	n, err := wireSize(v, 0)
	if err != nil {
		return nil, err
	}
	return AppendJSON(make([]byte, 0, n), v), nil
}

// wireSize checks v has no nil Value where Marshal cannot write one and
// returns about how long its wire form is: exact but for escapes in
// strings and the digits of floats, so Marshal allocates its output once
// instead of growing it through a series of copies.
func wireSize(v Value, depth int) (int, error) {
	if v == nil {
		return 0, errors.New("marshal value: nil Value")
	}
	if depth > MaxDepth {
		return 0, fmt.Errorf("marshal value: nested deeper than %d levels", MaxDepth)
	}
	switch x := v.(type) {
	case Null:
		return len(`{"$":"null"}`), nil
	case Bool:
		if x {
			return len(`{"$":"bool","v":true}`), nil
		}
		return len(`{"$":"bool","v":false}`), nil
	case Int:
		return len(`{"$":"int","v":}`) + intLen(int64(x)), nil
	case Float:
		return len(`{"$":"float","v":}`) + 20, nil
	case Str:
		if len(x) >= 64<<10 {
			// A big string (a command's output) is counted exactly: one
			// more scan is cheaper than growing a multi-megabyte buffer
			// for its escapes (each line's \n is two bytes on the wire).
			return len(`{"$":"str","v":}`) + QuotedLen(string(x)), nil
		}
		return len(`{"$":"str","v":""}`) + len(x), nil
	case Bytes:
		return len(`{"$":"bytes","b64":""}`) + base64.StdEncoding.EncodedLen(len(x)), nil
	case List:
		n := len(`{"$":"list","v":[]}`) + commas(len(x))
		for _, it := range x {
			m, err := wireSize(it, depth+1)
			if err != nil {
				return 0, err
			}
			n += m
		}
		return n, nil
	case *Record:
		n := len(`{"$":"record","v":{}}`) + commas(len(x.Fields))
		for _, f := range x.Fields {
			m, err := wireSize(f.Value, depth+1)
			if err != nil {
				return 0, err
			}
			n += len(f.Name) + len(`"":`) + m
		}
		return n, nil
	case *Table:
		n := len(`{"$":"table","cols":[],"rows":[]}`) + commas(len(x.Cols)) + commas(len(x.Rows))
		for _, c := range x.Cols {
			n += len(c) + len(`""`)
		}
		for _, row := range x.Rows {
			n += len(`[]`) + commas(len(x.Cols))
			// nil and missing cells are written as null: tables built by
			// hand may be sparse. Cells past the columns are not written,
			// but a nil inside one is refused all the same.
			if len(row) < len(x.Cols) {
				n += (len(x.Cols) - len(row)) * len(`{"$":"null"}`)
			}
			for j, c := range row {
				if c == nil {
					if j < len(x.Cols) {
						n += len(`{"$":"null"}`)
					}
					continue
				}
				m, err := wireSize(c, depth+1)
				if err != nil {
					return 0, err
				}
				if j < len(x.Cols) {
					n += m
				}
			}
		}
		return n, nil
	}
	return 0, fmt.Errorf("marshal value: unknown Value type %T", v)
}

// commas is how many separate n elements.
func commas(n int) int {
	return max(n-1, 0)
}

// intLen is the number of characters strconv writes for i.
func intLen(i int64) int {
	n := 1
	u := uint64(i)
	if i < 0 {
		n++
		u = -u
	}
	for ; u >= 10; u /= 10 {
		n++
	}
	return n
}

// AppendJSON appends the compact typed-JSON form of v to dst. A nil Value
// (and a missing or nil table cell) is written as null, so the output is
// always valid JSON. Strings that are not valid UTF-8 use the lossless form
// {"$":"str","b64":…}.
func AppendJSON(dst []byte, v Value) []byte {
	switch x := v.(type) {
	case nil, Null:
		return append(dst, `{"$":"null"}`...)
	case Bool:
		if x {
			return append(dst, `{"$":"bool","v":true}`...)
		}
		return append(dst, `{"$":"bool","v":false}`...)
	case Int:
		dst = append(dst, `{"$":"int","v":`...)
		dst = strconv.AppendInt(dst, int64(x), 10)
		return append(dst, '}')
	case Float:
		dst = append(dst, `{"$":"float","v":`...)
		dst = AppendFloat(dst, float64(x))
		return append(dst, '}')
	case Str:
		if !utf8.ValidString(string(x)) {
			dst = append(dst, `{"$":"str","b64":"`...)
			dst = base64.StdEncoding.AppendEncode(dst, []byte(x))
			return append(dst, `"}`...)
		}
		dst = append(dst, `{"$":"str","v":`...)
		dst = AppendQuoted(dst, string(x))
		return append(dst, '}')
	case Bytes:
		dst = append(dst, `{"$":"bytes","b64":"`...)
		dst = base64.StdEncoding.AppendEncode(dst, x)
		return append(dst, `"}`...)
	case List:
		dst = append(dst, `{"$":"list","v":[`...)
		for i, it := range x {
			if i > 0 {
				dst = append(dst, ',')
			}
			dst = AppendJSON(dst, it)
		}
		return append(dst, "]}"...)
	case *Record:
		dst = append(dst, `{"$":"record","v":{`...)
		for i, f := range x.Fields {
			if i > 0 {
				dst = append(dst, ',')
			}
			dst = AppendQuoted(dst, f.Name)
			dst = append(dst, ':')
			dst = AppendJSON(dst, f.Value)
		}
		return append(dst, "}}"...)
	case *Table:
		dst = append(dst, `{"$":"table","cols":[`...)
		for i, c := range x.Cols {
			if i > 0 {
				dst = append(dst, ',')
			}
			dst = AppendQuoted(dst, c)
		}
		dst = append(dst, `],"rows":[`...)
		for i, row := range x.Rows {
			if i > 0 {
				dst = append(dst, ',')
			}
			dst = append(dst, '[')
			for j := range x.Cols {
				if j > 0 {
					dst = append(dst, ',')
				}
				var c Value
				if j < len(row) {
					c = row[j]
				}
				dst = AppendJSON(dst, c)
			}
			dst = append(dst, ']')
		}
		return append(dst, "]}"...)
	}
	panic(fmt.Sprintf("value: unknown Value type %T", v))
}

// AppendFloat appends f as a JSON number in the shortest form that reads
// back to the same float (the format encoding/json uses), or as the strings
// "NaN", "+Inf", "-Inf", which have no JSON number form.
func AppendFloat(dst []byte, f float64) []byte {
	switch {
	case math.IsNaN(f):
		return append(dst, `"NaN"`...)
	case math.IsInf(f, 1):
		return append(dst, `"+Inf"`...)
	case math.IsInf(f, -1):
		return append(dst, `"-Inf"`...)
	}
	abs := math.Abs(f)
	format := byte('f')
	if abs != 0 && (abs < 1e-6 || abs >= 1e21) {
		format = 'e'
	}
	n := len(dst)
	dst = strconv.AppendFloat(dst, f, format, -1, 64)
	if format == 'e' {
		// Shorten e-09 to e-9, as encoding/json does.
		if m := len(dst) - n; m >= 4 && dst[len(dst)-4] == 'e' && dst[len(dst)-3] == '-' && dst[len(dst)-2] == '0' {
			dst[len(dst)-2] = dst[len(dst)-1]
			dst = dst[:len(dst)-1]
		}
	}
	return dst
}

const hexDigits = "0123456789abcdef"

// AppendQuoted appends s as a JSON string literal. Unlike encoding/json it
// does not escape <, > and &, which only matter inside HTML. Bytes that are
// not valid UTF-8 become U+FFFD; callers needing losslessness check
// [utf8.ValidString] first (as [AppendJSON] does).
func AppendQuoted(dst []byte, s string) []byte {
	dst = append(dst, '"')
	start := 0
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			if verbatim[c] {
				i = verbatimRun(s, i+1)
				continue
			}
			dst = append(dst, s[start:i]...)
			switch c {
			case '"', '\\':
				dst = append(dst, '\\', c)
			case '\n':
				dst = append(dst, '\\', 'n')
			case '\r':
				dst = append(dst, '\\', 'r')
			case '\t':
				dst = append(dst, '\\', 't')
			default:
				dst = append(dst, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xf])
			}
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 {
			dst = append(dst, s[start:i]...)
			dst = append(dst, `\ufffd`...)
			i++
			start = i
			continue
		}
		// U+2028 and U+2029 are valid JSON but end lines in JavaScript
		// source; escaping them keeps the text safe to embed anywhere.
		if r == '\u2028' || r == '\u2029' {
			dst = append(dst, s[start:i]...)
			dst = append(dst, '\\', 'u', '2', '0', '2', hexDigits[r&0xf])
			i += size
			start = i
			continue
		}
		i += size
	}
	dst = append(dst, s[start:]...)
	return append(dst, '"')
}

// QuotedLen returns len(AppendQuoted(nil, s)) without building it.
func QuotedLen(s string) int {
	n := 2
	for i := 0; i < len(s); {
		c := s[i]
		if verbatim[c] {
			j := verbatimRun(s, i+1)
			n += j - i
			i = j
			continue
		}
		if c < utf8.RuneSelf {
			n += asciiQuotedLen(c)
			i++
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && size == 1, r == '\u2028', r == '\u2029':
			n += 6
		default:
			n += size
		}
		i += size
	}
	return n
}

func asciiQuotedLen(c byte) int {
	switch {
	case c == '"' || c == '\\' || c == '\n' || c == '\r' || c == '\t':
		return 2
	case c < 0x20:
		return 6
	}
	return 1
}

// MaxDepth is how deeply typed values may nest on the wire. Decoding
// refuses deeper input so a hostile document cannot exhaust the stack.
const MaxDepth = 10000

// Unmarshal decodes one value in the typed-JSON wire form. It is strict:
// unknown `$` tags, unknown or missing members, ints that do not fit in 64
// bits, rows whose width differs from the columns, duplicate record fields
// and trailing data are all refused with an *rpc.Error (INVALID_PARAMS)
// whose message names the problem and where it is (a path into the value
// and a byte offset). Members of a typed object may come in any order.
//
// Strings decode as encoding/json decodes them: a byte that is not valid
// UTF-8, or an escaped surrogate that is not half of a pair, becomes
// U+FFFD (text that must survive byte for byte travels as "b64").
func Unmarshal(data []byte) (Value, error) {
	d := newScanner(data)
	v, err := d.value(0)
	if err != nil {
		return nil, err
	}
	d.space()
	if d.pos < len(d.data) {
		return nil, d.errorf("unexpected data after the value")
	}
	return v, nil
}

// scanner decodes the typed wire form in a single pass over the input,
// without reflection or encoding/json's token stream: Unmarshal sits on the
// hot path of plugin reads and of reading large values back from the
// content store, where the token stream cost more than everything else.
type scanner struct {
	data []byte
	pos  int // the next byte to read; errors report it as their offset

	buf   []byte           // text of the last string literal that needed decoding
	chunk *strings.Builder // holds short strings (see text)
	path  []step           // where the value being read is, for messages

	// Lists, records, columns and rows are collected on these stacks
	// (innermost last) and copied out at their end, so a value of n items
	// costs one allocation of exactly n, not a series of doublings.
	items    []Value
	fields   []Field
	names    []string
	rowStack [][]Value

	cells []Value // table cells not yet handed out to a row
	slab  int     // size of the last cells allocation

	// First backing arrays of the stacks: enough for most documents, in
	// the scanner's one allocation.
	itemsArr  [16]Value
	fieldsArr [8]Field
	namesArr  [8]string
	rowsArr   [8][]Value
	pathArr   [8]step
}

func newScanner(data []byte) *scanner {
	d := &scanner{data: data}
	d.items = d.itemsArr[:0]
	d.fields = d.fieldsArr[:0]
	d.names = d.namesArr[:0]
	d.rowStack = d.rowsArr[:0]
	d.path = d.pathArr[:0]
	return d
}

// Strings up to shortText bytes are carved from shared chunks of
// textChunk bytes: one allocation serves many cells and field names, and a
// string kept alone keeps at most one chunk alive.
const (
	shortText = 64
	textChunk = 4096
)

// text returns b as a string that does not alias the input.
func (d *scanner) text(b []byte) string {
	if len(b) == 0 {
		return ""
	}
	if len(b) > shortText {
		return string(b)
	}
	// A Builder never rewrites the bytes behind a string it returned, so
	// strings cut from it stay valid as it fills; a full one is dropped.
	if d.chunk == nil || d.chunk.Cap()-d.chunk.Len() < len(b) {
		d.chunk = new(strings.Builder)
		// What is left of the input bounds the text still to come.
		d.chunk.Grow(min(textChunk, len(b)+len(d.data)-d.pos))
	}
	start := d.chunk.Len()
	d.chunk.Write(b)
	return d.chunk.String()[start:]
}

func (d *scanner) errorf(format string, args ...any) error {
	return d.errorAt(d.pos, format, args...)
}

func (d *scanner) errorAt(offset int, format string, args ...any) error {
	p := Path{steps: slices.Clone(d.path)}
	return rpc.Errorf(rpc.InvalidParams, "value at %s (byte %d): %s",
		p, offset, fmt.Sprintf(format, args...))
}

func (d *scanner) eof() error {
	d.pos = len(d.data)
	return d.errorf("unexpected end of input")
}

// syntax reports that the byte at d.pos does not fit the JSON grammar,
// in encoding/json's words.
func (d *scanner) syntax(context string) error {
	if d.pos >= len(d.data) {
		return d.eof()
	}
	return d.errorf("malformed JSON: invalid character %s %s", quoteChar(d.data[d.pos]), context)
}

func quoteChar(c byte) string {
	switch c {
	case '\'':
		return `'\''`
	case '"':
		return `'"'`
	}
	s := strconv.Quote(string(rune(c)))
	return "'" + s[1:len(s)-1] + "'"
}

func (d *scanner) space() {
	for d.pos < len(d.data) {
		switch d.data[d.pos] {
		case ' ', '\t', '\n', '\r':
			d.pos++
		default:
			return
		}
	}
}

// open consumes the delimiter c, or reports what is there instead.
func (d *scanner) open(c byte, what string) error {
	d.space()
	if d.pos < len(d.data) && d.data[d.pos] == c {
		d.pos++
		return nil
	}
	t, err := d.token()
	if err != nil {
		return err
	}
	return d.errorf("expected %s, found %s", what, t)
}

// close consumes the closing delimiter c if it comes next.
func (d *scanner) close(c byte) bool {
	d.space()
	if d.pos < len(d.data) && d.data[d.pos] == c {
		d.pos++
		return true
	}
	return false
}

// next consumes the separator after an element: true for a comma (another
// element follows), false for the closing delimiter.
func (d *scanner) next(closer byte, context string) (bool, error) {
	d.space()
	if d.pos < len(d.data) {
		switch d.data[d.pos] {
		case ',':
			d.pos++
			return true, nil
		case closer:
			d.pos++
			return false, nil
		}
	}
	return false, d.syntax(context)
}

// key reads an object member's name (the colon is left to colon).
func (d *scanner) key() ([]byte, error) {
	d.space()
	if d.pos >= len(d.data) || d.data[d.pos] != '"' {
		return nil, d.syntax("looking for beginning of object key string")
	}
	return d.str()
}

func (d *scanner) colon() error {
	d.space()
	if d.pos < len(d.data) && d.data[d.pos] == ':' {
		d.pos++
		return nil
	}
	return d.syntax("after object key")
}

// member names the members of a typed object.
type member uint8

const (
	memberOther member = iota // a name no kind has
	memberTag                 // "$"
	memberV
	memberB64
	memberCols
	memberRows
)

var memberNames = [...]string{memberTag: "$", memberV: "v", memberB64: "b64", memberCols: "cols", memberRows: "rows"}

func memberOf(name []byte) member {
	switch string(name) {
	case "$":
		return memberTag
	case "v":
		return memberV
	case "b64":
		return memberB64
	case "cols":
		return memberCols
	case "rows":
		return memberRows
	}
	return memberOther
}

func kindNamed(name []byte) (Kind, bool) {
	switch string(name) {
	case "null":
		return KindNull, true
	case "bool":
		return KindBool, true
	case "int":
		return KindInt, true
	case "float":
		return KindFloat, true
	case "str":
		return KindStr, true
	case "bytes":
		return KindBytes, true
	case "list":
		return KindList, true
	case "record":
		return KindRecord, true
	case "table":
		return KindTable, true
	}
	return 0, false
}

var kindMembers = [...]string{
	KindNull:   "no other members",
	KindBool:   `only "v"`,
	KindInt:    `only "v"`,
	KindFloat:  `only "v"`,
	KindStr:    `"v" (or "b64" for text that is not UTF-8)`,
	KindBytes:  `only "b64"`,
	KindList:   `only "v"`,
	KindRecord: `only "v"`,
	KindTable:  `"cols" and "rows"`,
}

// object is what is known of a typed object while its members are read.
type object struct {
	kind    Kind
	tagged  bool
	seen    uint8 // 1<<member for each member read, to refuse duplicates
	out     Value
	cols    []string
	rows    [][]Value
	hasCols bool
	hasRows bool
	// Members met before the "$" tag: their meaning depends on the kind.
	early []early
}

// early is a member that came before its object's "$" tag. Members that
// nest values (an array or object "v", "rows", and "cols") are decoded
// when met, as the only kind they can belong to would decode them, so no
// byte is read twice however deeply such objects nest; the rest are
// checked for syntax, skipped, and decoded from start once the kind is
// known.
type early struct {
	m      member
	name   string // the name of an unknown member, for the message
	keyEnd int    // offset just after the name
	start  int    // offset of the value
	done   bool   // decoded when met: into v, or into the object's cols or rows
	v      Value
}

// value decodes one typed object.
func (d *scanner) value(depth int) (Value, error) {
	if depth > MaxDepth {
		return nil, d.errorf("value nested deeper than %d levels", MaxDepth)
	}
	if err := d.open('{', `a typed value {"$":…}`); err != nil {
		return nil, err
	}
	var o object
	more := true
	if d.tagFirst(&o) {
		var err error
		if more, err = d.next('}', "after object key:value pair"); err != nil {
			return nil, err
		}
	} else if d.close('}') {
		return nil, d.errorf(`missing "$" kind tag`)
	}
	for more {
		name, err := d.key()
		if err != nil {
			return nil, err
		}
		m := memberOf(name)
		keyEnd := d.pos
		if m != memberOther {
			if o.seen&(1<<m) != 0 {
				return nil, d.errorf("duplicate member %q", name)
			}
			o.seen |= 1 << m
		}
		// Only an unknown member needs its name kept, for the message.
		var other string
		if m == memberOther {
			other = string(name)
		}
		if err := d.colon(); err != nil {
			return nil, err
		}
		switch {
		case m == memberTag:
			err = d.tag(depth, &o)
		case !o.tagged:
			err = d.early(depth, &o, m, other, keyEnd)
		default:
			err = d.member(depth, &o, m, other, keyEnd)
		}
		if err != nil {
			return nil, err
		}
		if more, err = d.next('}', "after object key:value pair"); err != nil {
			return nil, err
		}
	}
	if !o.tagged {
		return nil, d.errorf(`missing "$" kind tag`)
	}
	return d.finish(&o)
}

// tagFirst reads the tag the way Marshal writes it, first and without
// spaces or escapes ({"$":"int",…), which is how nearly every value comes.
// It reads nothing and returns false for any other form, left to the
// general path.
func (d *scanner) tagFirst(o *object) bool {
	const prefix = `"$":"`
	rest := d.data[d.pos:]
	if len(rest) < len(prefix) || string(rest[:len(prefix)]) != prefix {
		return false
	}
	rest = rest[len(prefix):]
	end := bytes.IndexByte(rest, '"')
	if end < 0 {
		return false
	}
	kind, ok := kindNamed(rest[:end])
	if !ok {
		return false // unknown or escaped: the general path says which
	}
	o.kind, o.tagged, o.seen = kind, true, 1<<memberTag
	d.pos += len(prefix) + end + 1
	return true
}

// tag reads the "$" member and decodes the members that came before it.
func (d *scanner) tag(depth int, o *object) error {
	t, err := d.token()
	if err != nil {
		return err
	}
	if t.kind != tokString {
		return d.errorf(`"$" must be a kind name string, found %s`, t)
	}
	kind, ok := kindNamed(t.text)
	if !ok {
		return d.errorf(`unknown kind %q; kinds are null, bool, int, float, str, bytes, list, record, table`, t.text)
	}
	o.kind, o.tagged = kind, true
	for _, e := range o.early {
		switch {
		case e.done && e.m == memberV && (kind == KindList && e.v.Kind() == KindList || kind == KindRecord && e.v.Kind() == KindRecord):
			o.out = e.v
		case e.done && e.m == memberCols && kind == KindTable:
			o.hasCols = true
		case e.done && e.m == memberRows && kind == KindTable:
			o.hasRows = true
		default:
			// Decode it now, where it is: either it was skipped, or the
			// kind refuses it at its first token.
			end := d.pos
			d.pos = e.start
			err := d.member(depth, o, e.m, e.name, e.keyEnd)
			d.pos = end
			if err != nil {
				return err
			}
		}
	}
	o.early = nil
	return nil
}

// early handles a member met before the "$" tag (see [early]).
func (d *scanner) early(depth int, o *object, m member, name string, keyEnd int) error {
	d.space()
	e := early{m: m, name: name, keyEnd: keyEnd, start: d.pos}
	var c byte
	if d.pos < len(d.data) {
		c = d.data[d.pos]
	}
	var err error
	switch {
	case m == memberV && c == '[':
		d.pos++
		e.v, err = d.list(depth)
		e.done = true
	case m == memberV && c == '{':
		d.pos++
		e.v, err = d.record(depth)
		e.done = true
	case m == memberCols && c == '[':
		d.pos++
		o.cols, err = d.cols()
		e.done = true
	case m == memberRows && c == '[':
		d.pos++
		o.rows, err = d.rows(depth, o.cols)
		e.done = true
	default:
		err = d.skip()
	}
	if err != nil {
		return err
	}
	o.early = append(o.early, e)
	return nil
}

// member decodes one non-tag member of a typed object whose kind is known.
// name is the member's name when m is memberOther.
func (d *scanner) member(depth int, o *object, m member, name string, keyEnd int) error {
	kind := o.kind
	if m != memberOther {
		name = memberNames[m]
	}
	bad := func() error {
		return d.errorAt(keyEnd, "unknown member %q in %s value; %s has %s", name, kind.Article(), kind.Article(), kindMembers[kind])
	}
	switch kind {
	case KindNull:
		return bad()
	case KindBool:
		if m != memberV {
			return bad()
		}
		t, err := d.token()
		if err != nil {
			return err
		}
		if t.kind != tokTrue && t.kind != tokFalse {
			return d.errorf("bool v must be true or false, found %s", t)
		}
		o.out = Bool(t.kind == tokTrue)
	case KindInt:
		if m != memberV {
			return bad()
		}
		t, err := d.token()
		if err != nil {
			return err
		}
		if t.kind != tokNumber {
			return d.errorf("int v must be a number, found %s", t)
		}
		i, ok := parseInt(t.text)
		if !ok {
			return d.errorf("int v %s is not an integer in the 64-bit range; use a float for it", t.text)
		}
		o.out = Int(i)
	case KindFloat:
		if m != memberV {
			return bad()
		}
		f, err := d.floatV()
		if err != nil {
			return err
		}
		o.out = f
	case KindStr:
		if m != memberV && m != memberB64 {
			return bad()
		}
		if o.out != nil {
			return d.errorAt(keyEnd, `a str has either "v" or "b64", not both`)
		}
		t, err := d.token()
		if err != nil {
			return err
		}
		if t.kind != tokString {
			return d.errorf("str %s must be a string, found %s", name, t)
		}
		if m == memberV {
			o.out = Str(d.text(t.text))
			return nil
		}
		b, err := decodeBase64(t.text)
		if err != nil {
			return d.errorf("str b64 is not standard padded base64: %v", err)
		}
		o.out = Str(b)
	case KindBytes:
		if m != memberB64 {
			return bad()
		}
		t, err := d.token()
		if err != nil {
			return err
		}
		if t.kind != tokString {
			return d.errorf("bytes b64 must be a string, found %s", t)
		}
		b, err := decodeBase64(t.text)
		if err != nil {
			return d.errorf("bytes b64 is not standard padded base64: %v", err)
		}
		o.out = Bytes(b)
	case KindList:
		if m != memberV {
			return bad()
		}
		if err := d.open('[', "list v to be an array"); err != nil {
			return err
		}
		v, err := d.list(depth)
		if err != nil {
			return err
		}
		o.out = v
	case KindRecord:
		if m != memberV {
			return bad()
		}
		if err := d.open('{', "record v to be an object"); err != nil {
			return err
		}
		v, err := d.record(depth)
		if err != nil {
			return err
		}
		o.out = v
	case KindTable:
		if m != memberCols && m != memberRows {
			return bad()
		}
		return d.tableMember(depth, o, m)
	}
	return nil
}

// floatV decodes a float's v: a number, or "NaN", "+Inf" or "-Inf".
func (d *scanner) floatV() (Value, error) {
	t, err := d.token()
	if err != nil {
		return nil, err
	}
	switch t.kind {
	case tokNumber:
		f, err := strconv.ParseFloat(string(t.text), 64)
		if err != nil {
			return nil, d.errorf("float v %s is out of the 64-bit float range", t.text)
		}
		return Float(f), nil
	case tokString:
		switch string(t.text) {
		case "NaN":
			return Float(math.NaN()), nil
		case "+Inf":
			return Float(math.Inf(1)), nil
		case "-Inf":
			return Float(math.Inf(-1)), nil
		}
		return nil, d.errorf(`float v must be a number or one of "NaN", "+Inf", "-Inf", found %s`, t)
	default:
		return nil, d.errorf("float v must be a number, found %s", t)
	}
}

// tableMember decodes a table's cols or rows member (m).
func (d *scanner) tableMember(depth int, o *object, m member) error {
	if m == memberCols {
		if err := d.open('[', "table cols to be an array of strings"); err != nil {
			return err
		}
		cols, err := d.cols()
		if err != nil {
			return err
		}
		o.cols, o.hasCols = cols, true
		return nil
	}
	if err := d.open('[', "table rows to be an array of arrays"); err != nil {
		return err
	}
	rows, err := d.rows(depth, o.cols)
	if err != nil {
		return err
	}
	o.rows, o.hasRows = rows, true
	return nil
}

func (d *scanner) finish(o *object) (Value, error) {
	switch o.kind {
	case KindNull:
		return Null{}, nil
	case KindTable:
		if !o.hasCols || !o.hasRows {
			return nil, d.errorf(`a table needs both "cols" and "rows"`)
		}
		for i, row := range o.rows {
			if len(row) != len(o.cols) {
				return nil, d.errorf("table row %d has %d cells but there are %d columns", i, len(row), len(o.cols))
			}
		}
		return &Table{Cols: o.cols, Rows: o.rows}, nil
	}
	if o.out == nil {
		want := `"v"`
		if o.kind == KindBytes {
			want = `"b64"`
		}
		return nil, d.errorf("%s needs %s", o.kind.Article(), want)
	}
	return o.out, nil
}

// list reads the items of a list; the '[' is consumed.
func (d *scanner) list(depth int) (Value, error) {
	if d.close(']') {
		return List{}, nil
	}
	base := len(d.items)
	for {
		d.path = append(d.path, step{index: len(d.items) - base})
		it, err := d.value(depth + 1)
		if err != nil {
			return nil, err
		}
		d.path = d.path[:len(d.path)-1]
		d.items = append(d.items, it)
		more, err := d.next(']', "after array element")
		if err != nil {
			return nil, err
		}
		if !more {
			break
		}
	}
	l := make(List, len(d.items)-base)
	copy(l, d.items[base:])
	d.items = d.items[:base]
	return l, nil
}

// record reads the fields of a record; the '{' is consumed.
func (d *scanner) record(depth int) (Value, error) {
	if d.close('}') {
		return &Record{Fields: []Field{}}, nil
	}
	base := len(d.fields)
	var names map[string]struct{} // for large records only
	for {
		nb, err := d.key()
		if err != nil {
			return nil, err
		}
		if n := len(d.fields) - base; n >= recordIndexThreshold && names == nil {
			names = make(map[string]struct{}, 2*n)
			for _, f := range d.fields[base:] {
				names[f.Name] = struct{}{}
			}
		}
		if names != nil {
			_, dup := names[string(nb)]
			if dup {
				return nil, d.errorf("duplicate record field %q", nb)
			}
		} else {
			for _, f := range d.fields[base:] {
				if f.Name == string(nb) {
					return nil, d.errorf("duplicate record field %q", nb)
				}
			}
		}
		name := d.text(nb)
		if names != nil {
			names[name] = struct{}{}
		}
		if err := d.colon(); err != nil {
			return nil, err
		}
		d.path = append(d.path, step{name: name, field: true})
		fv, err := d.value(depth + 1)
		if err != nil {
			return nil, err
		}
		d.path = d.path[:len(d.path)-1]
		d.fields = append(d.fields, Field{Name: name, Value: fv})
		more, err := d.next('}', "after object key:value pair")
		if err != nil {
			return nil, err
		}
		if !more {
			break
		}
	}
	fs := make([]Field, len(d.fields)-base)
	copy(fs, d.fields[base:])
	d.fields = d.fields[:base]
	return &Record{Fields: fs}, nil
}

// cols reads a table's column names; the '[' is consumed.
func (d *scanner) cols() ([]string, error) {
	if d.close(']') {
		return []string{}, nil
	}
	base := len(d.names)
	var seen map[string]struct{} // for wide tables only
	for {
		t, err := d.token()
		if err != nil {
			return nil, err
		}
		n := len(d.names) - base
		if t.kind != tokString {
			return nil, d.errorf("table column %d must be a string, found %s", n, t)
		}
		if n >= recordIndexThreshold && seen == nil {
			seen = make(map[string]struct{}, 2*n)
			for _, c := range d.names[base:] {
				seen[c] = struct{}{}
			}
		}
		dup := false
		if seen != nil {
			_, dup = seen[string(t.text)]
		} else {
			for _, c := range d.names[base:] {
				if c == string(t.text) {
					dup = true
					break
				}
			}
		}
		if dup {
			return nil, d.errorf("duplicate table column %q", t.text)
		}
		c := d.text(t.text)
		if seen != nil {
			seen[c] = struct{}{}
		}
		d.names = append(d.names, c)
		more, err := d.next(']', "after array element")
		if err != nil {
			return nil, err
		}
		if !more {
			break
		}
	}
	cols := make([]string, len(d.names)-base)
	copy(cols, d.names[base:])
	d.names = d.names[:base]
	return cols, nil
}

// rows reads a table's rows; the '[' is consumed. cols, when already
// known, name the cells in error messages. Row widths are checked once
// both members are in (see finish).
func (d *scanner) rows(depth int, cols []string) ([][]Value, error) {
	if d.close(']') {
		return [][]Value{}, nil
	}
	first := len(d.rowStack)
	for {
		d.path = append(d.path, step{index: len(d.rowStack) - first}) // the row
		if err := d.open('[', "a table row to be an array"); err != nil {
			return nil, err
		}
		base := len(d.items)
		if !d.close(']') {
			for {
				cell := step{index: len(d.items) - base}
				if cell.index < len(cols) {
					cell = step{name: cols[cell.index], field: true}
				}
				d.path = append(d.path, cell)
				c, err := d.value(depth + 1)
				if err != nil {
					return nil, err
				}
				d.path = d.path[:len(d.path)-1]
				d.items = append(d.items, c)
				more, err := d.next(']', "after array element")
				if err != nil {
					return nil, err
				}
				if !more {
					break
				}
			}
		}
		d.path = d.path[:len(d.path)-1]
		row := d.row(len(d.items) - base)
		copy(row, d.items[base:])
		d.items = d.items[:base]
		d.rowStack = append(d.rowStack, row)
		more, err := d.next(']', "after array element")
		if err != nil {
			return nil, err
		}
		if !more {
			break
		}
	}
	rows := make([][]Value, len(d.rowStack)-first)
	copy(rows, d.rowStack[first:])
	d.rowStack = d.rowStack[:first]
	return rows, nil
}

// row hands out room for n cells. Rows are carved from shared allocations
// that grow with the table, so a table costs a few allocations, not one per
// row; a row kept alone keeps at most one (64 KiB) alive.
func (d *scanner) row(n int) []Value {
	if n == 0 {
		return []Value{}
	}
	if len(d.cells) < n {
		d.slab = min(max(2*d.slab, 64), 4096)
		// Every cell takes at least len(`{"$":"null"}`) bytes of input.
		left := (len(d.data) - d.pos) / len(`{"$":"null"}`)
		d.cells = make([]Value, n+min(d.slab, left))
	}
	r := d.cells[:n:n]
	d.cells = d.cells[n:]
	return r
}

// skip reads past one JSON value of any shape, checking its syntax.
func (d *scanner) skip() error {
	var open []byte // closing delimiters of the arrays and objects entered
	for {
		// A value starts here.
		d.space()
		if d.pos >= len(d.data) {
			return d.eof()
		}
		switch c := d.data[d.pos]; c {
		case '[', '{':
			d.pos++
			closer := byte(']')
			if c == '{' {
				closer = '}'
			}
			if d.close(closer) {
				break
			}
			open = append(open, closer)
			if closer == '}' {
				if _, err := d.key(); err != nil {
					return err
				}
				if err := d.colon(); err != nil {
					return err
				}
			}
			continue
		default:
			if _, err := d.token(); err != nil {
				return err
			}
		}
		// A value ended: close what it completes, then step to the next.
		for {
			if len(open) == 0 {
				return nil
			}
			closer := open[len(open)-1]
			context := "after array element"
			if closer == '}' {
				context = "after object key:value pair"
			}
			more, err := d.next(closer, context)
			if err != nil {
				return err
			}
			if !more {
				open = open[:len(open)-1]
				continue
			}
			if closer == '}' {
				if _, err := d.key(); err != nil {
					return err
				}
				if err := d.colon(); err != nil {
					return err
				}
			}
			break
		}
	}
}

type tokKind uint8

const (
	tokDelim tokKind = iota // '[' or '{'
	tokString
	tokNumber
	tokTrue
	tokFalse
	tokNull
)

// token is one JSON token at a value position.
type token struct {
	kind tokKind
	text []byte // a string's decoded text, a number's literal, the delimiter
}

// String describes the token for messages ("found string \"x\"").
func (t token) String() string {
	switch t.kind {
	case tokDelim:
		return strconv.Quote(string(t.text))
	case tokString:
		s := string(t.text)
		if len(s) > 40 {
			s = s[:40] + "…"
		}
		return "string " + strconv.Quote(s)
	case tokNumber:
		return "number " + string(t.text)
	case tokTrue:
		return "true"
	case tokFalse:
		return "false"
	}
	return "null"
}

// token reads the token at a value position. For an array or object it
// consumes only the opening delimiter.
func (d *scanner) token() (token, error) {
	d.space()
	if d.pos >= len(d.data) {
		return token{}, d.eof()
	}
	switch c := d.data[d.pos]; {
	case c == '"':
		s, err := d.str()
		return token{kind: tokString, text: s}, err
	case c == '[' || c == '{':
		d.pos++
		return token{kind: tokDelim, text: d.data[d.pos-1 : d.pos]}, nil
	case c == '-' || '0' <= c && c <= '9':
		n, err := d.number()
		return token{kind: tokNumber, text: n}, err
	case c == 't':
		return token{kind: tokTrue}, d.literal("true")
	case c == 'f':
		return token{kind: tokFalse}, d.literal("false")
	case c == 'n':
		return token{kind: tokNull}, d.literal("null")
	}
	return token{}, d.syntax("looking for beginning of value")
}

func (d *scanner) literal(word string) error {
	for i := 1; i < len(word); i++ {
		if d.pos+i >= len(d.data) {
			return d.eof()
		}
		if d.data[d.pos+i] != word[i] {
			d.pos += i
			return d.syntax(fmt.Sprintf("in literal %s (expecting %s)", word, quoteChar(word[i])))
		}
	}
	d.pos += len(word)
	return nil
}

// number reads a JSON number and returns its literal text.
func (d *scanner) number() ([]byte, error) {
	data, start, i := d.data, d.pos, d.pos
	digits := func() {
		for i < len(data) && '0' <= data[i] && data[i] <= '9' {
			i++
		}
	}
	// need checks that a digit comes next.
	need := func(context string) error {
		if i < len(data) && '0' <= data[i] && data[i] <= '9' {
			return nil
		}
		d.pos = i
		return d.syntax(context)
	}
	if data[i] == '-' {
		i++
	}
	if err := need("in numeric literal"); err != nil {
		return nil, err
	}
	if data[i] == '0' {
		i++
	} else {
		digits()
	}
	if i < len(data) && data[i] == '.' {
		i++
		if err := need("after decimal point in numeric literal"); err != nil {
			return nil, err
		}
		digits()
	}
	if i < len(data) && (data[i] == 'e' || data[i] == 'E') {
		i++
		if i < len(data) && (data[i] == '+' || data[i] == '-') {
			i++
		}
		if err := need("in exponent of numeric literal"); err != nil {
			return nil, err
		}
		digits()
	}
	d.pos = i
	return data[start:i], nil
}

// parseInt reads a JSON number as an int64, refusing fractions, exponents
// and anything past the 64-bit range.
func parseInt(s []byte) (int64, bool) {
	neg := s[0] == '-'
	if neg {
		s = s[1:]
	}
	limit := uint64(math.MaxInt64)
	if neg {
		limit++
	}
	var u uint64
	for _, c := range s {
		if c < '0' || c > '9' {
			return 0, false
		}
		dv := uint64(c - '0')
		if u > (limit-dv)/10 {
			return 0, false
		}
		u = u*10 + dv
	}
	if neg {
		return -int64(u), true
	}
	return int64(u), true
}

func decodeBase64(s []byte) ([]byte, error) {
	b := make([]byte, base64.StdEncoding.DecodedLen(len(s)))
	n, err := base64.StdEncoding.Decode(b, s)
	return b[:n], err
}

// verbatim marks the bytes a string literal holds as they are: printable
// ASCII other than the quote and the backslash.
var verbatim = func() (t [256]bool) {
	for c := 0x20; c < 0x80; c++ {
		t[c] = c != '"' && c != '\\'
	}
	return t
}()

// verbatimRun returns the index of the first byte at or after i that is
// not verbatim. It tests eight bytes at a time: long text is mostly
// verbatim, and this loop is most of the cost of reading and writing it.
func verbatimRun[T string | []byte](s T, i int) int {
	const ones, highs = 0x0101010101010101, 0x8080808080808080
	for ; i+8 <= len(s); i += 8 {
		// The compiler makes one load of these eight, with one bounds check.
		b := s[i : i+8]
		w := uint64(b[0]) | uint64(b[1])<<8 | uint64(b[2])<<16 | uint64(b[3])<<24 |
			uint64(b[4])<<32 | uint64(b[5])<<40 | uint64(b[6])<<48 | uint64(b[7])<<56
		// Each term is non-zero when some byte is, in turn, below 0x20,
		// a quote, a backslash, or not ASCII (the classic "has a zero
		// byte" test: (x - ones) &^ x & highs).
		quote := w ^ ones*'"'
		backslash := w ^ ones*'\\'
		special := (w-ones*0x20)&^w | (quote-ones)&^quote | (backslash-ones)&^backslash | w
		if special &= highs; special != 0 {
			// Borrows only carry upwards, so the lowest flag is exact:
			// it marks the first byte that is not verbatim.
			return i + bits.TrailingZeros64(special)/8
		}
	}
	for i < len(s) && verbatim[s[i]] {
		i++
	}
	return i
}

// str reads the string literal at d.pos and returns its text, decoded as
// encoding/json decodes it. The result aliases the input when the literal
// needed no decoding, else d.buf, which the next call overwrites.
func (d *scanner) str() ([]byte, error) {
	data := d.data
	start := d.pos + 1
	i := verbatimRun(data, start)
	if i < len(data) && data[i] == '"' {
		d.pos = i + 1
		return data[start:i], nil
	}
	return d.strSlow(start, i)
}

// strSlow finishes a literal that holds escapes, non-ASCII text or an
// error, starting at i. Like encoding/json it turns each byte that is not
// part of valid UTF-8 into U+FFFD, and a \u escape of a surrogate that does
// not pair with the escape after it into U+FFFD.
func (d *scanner) strSlow(start, i int) ([]byte, error) {
	data := d.data
	var buf []byte
	decoded := false // buf holds the text up to mark; the rest is verbatim
	mark := start
	for {
		if i >= len(data) {
			return nil, d.eof()
		}
		c := data[i]
		switch {
		case verbatim[c]:
			i = verbatimRun(data, i+1)
		case c == '"':
			d.pos = i + 1
			if !decoded {
				return data[start:i], nil
			}
			buf = append(buf, data[mark:i]...)
			d.buf = buf
			return buf, nil
		case c == '\\':
			if !decoded {
				buf = d.decodeBuf(start, i)
				decoded = true
			}
			buf = append(buf, data[mark:i]...)
			i++
			if i >= len(data) {
				return nil, d.eof()
			}
			switch e := data[i]; e {
			case '"', '\\', '/':
				buf = append(buf, e)
			case 'b':
				buf = append(buf, '\b')
			case 'f':
				buf = append(buf, '\f')
			case 'n':
				buf = append(buf, '\n')
			case 'r':
				buf = append(buf, '\r')
			case 't':
				buf = append(buf, '\t')
			case 'u':
				r, ok := hex4(data[i+1:])
				if !ok {
					d.pos = i + 1
					for d.pos < len(data) && d.pos < i+5 && isHex(data[d.pos]) {
						d.pos++
					}
					return nil, d.syntax(`in \u hexadecimal character escape`)
				}
				i += 4
				if utf16.IsSurrogate(r) {
					lo := rune(-1)
					if i+2 < len(data) && data[i+1] == '\\' && data[i+2] == 'u' {
						if x, ok := hex4(data[i+3:]); ok {
							lo = x
						}
					}
					if pair := utf16.DecodeRune(r, lo); pair != unicode.ReplacementChar {
						r = pair
						i += 6
					} else {
						r = unicode.ReplacementChar
					}
				}
				buf = utf8.AppendRune(buf, r)
			default:
				d.pos = i
				return nil, d.syntax("in string escape code")
			}
			i++
			mark = i
		case c < 0x20:
			d.pos = i
			return nil, d.syntax("in string literal")
		default:
			r, size := utf8.DecodeRune(data[i:])
			if r == utf8.RuneError && size == 1 {
				if !decoded {
					buf = d.decodeBuf(start, i)
					decoded = true
				}
				buf = append(buf, data[mark:i]...)
				buf = append(buf, "\uFFFD"...)
				mark = i + 1
			}
			i += size
		}
	}
}

// decodeBuf returns d.buf emptied, with room for the decoded text of the
// literal whose text starts at start and that needs decoding from i on. The
// decoded text is rarely longer than the literal (only bytes that are not
// UTF-8 grow, to U+FFFD), so finding the closing quote first spares a long
// string the copies of growing its buffer.
func (d *scanner) decodeBuf(start, i int) []byte {
	n := i - start + 16
	for j := i; j < len(d.data); {
		k := bytes.IndexByte(d.data[j:], '"')
		if k < 0 {
			break
		}
		j += k
		// The quote ends the literal unless an odd run of backslashes
		// escapes it.
		bs := 0
		for j-1-bs >= i && d.data[j-1-bs] == '\\' {
			bs++
		}
		if bs%2 == 0 {
			n = j - start + 16
			break
		}
		j++
	}
	if cap(d.buf) < n {
		d.buf = make([]byte, 0, n)
	}
	return d.buf[:0]
}

func isHex(c byte) bool {
	return '0' <= c && c <= '9' || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F'
}

// hex4 reads the four hex digits of a \u escape.
func hex4(b []byte) (rune, bool) {
	if len(b) < 4 {
		return 0, false
	}
	var r rune
	for _, c := range b[:4] {
		switch {
		case '0' <= c && c <= '9':
			c -= '0'
		case 'a' <= c && c <= 'f':
			c -= 'a' - 10
		case 'A' <= c && c <= 'F':
			c -= 'A' - 10
		default:
			return 0, false
		}
		r = r<<4 | rune(c)
	}
	return r, true
}
