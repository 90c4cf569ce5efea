package render

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"math"
	"strconv"
	"unicode/utf8"

	"github.com/shoal-sh/shoal/core/rpc"
	"github.com/shoal-sh/shoal/core/value"
)

// Origin says where the rendered value sits inside the value the reader
// addressed, so that elision markers name paths and slices that work on
// that value directly. Path is the path selector that was applied; Offset
// is the start of the slice applied after it (0 without a slice).
type Origin struct {
	Path   value.Path
	Offset int
}

// JSON renders v as typed JSON that fits in limit bytes: structured is the
// compact form, text the pretty form (two-space indent), and neither is
// longer than limit. Parts of v beyond the budget b (or beyond what fits)
// are cut and each cut is described by an "elided" member in the typed
// object that lost something, giving the counts and the path/slice that
// shows the rest (see docs/values.md). elided reports whether anything was
// cut. The work done is proportional to the output, never to the size of
// v. limit must be at least [MinLimit].
func JSON(v value.Value, b Budget, limit int) (structured json.RawMessage, text string, elided bool, err error) {
	return JSONAt(v, b, limit, Origin{})
}

// JSONAt is [JSON] for a value reached through a path and slice: the
// markers' paths and slices are given relative to the addressed value.
func JSONAt(v value.Value, b Budget, limit int, o Origin) (structured json.RawMessage, text string, elided bool, err error) {
	compact, pretty, elided, err := fit(v, b, limit, o, false)
	if err != nil {
		return nil, "", false, err
	}
	return compact, string(pretty), elided, nil
}

// Record renders a kernel record (plain JSON: a task, a plan, a journal
// page, an event list) within limit bytes. x is marshalled with
// encoding/json (HTML characters unescaped); when its pretty form fits it is
// returned whole. Otherwise long arrays and strings are cut in place with
// the default budget, and the cuts are listed in a "$elided" member: added
// as the last member when x is a JSON object, or in a wrapping object
// {"value": x, "$elided": [...]} when it is not. The text is the pretty
// form of structured.
func Record(x any, limit int) (structured json.RawMessage, text string, err error) {
	if limit < MinLimit {
		return nil, "", limitError(limit)
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(x); err != nil {
		return nil, "", rpc.Errorf(rpc.Internal, "render record: %v", err)
	}
	compact := bytes.TrimSuffix(buf.Bytes(), []byte("\n"))
	if len(compact) <= limit {
		var pretty bytes.Buffer
		if err := json.Indent(&pretty, compact, "", "  "); err == nil && pretty.Len() <= limit {
			return compact, pretty.String(), nil
		}
	}
	v, err := value.FromPlainJSON(compact)
	if err != nil {
		return nil, "", rpc.Errorf(rpc.Internal, "render record: re-read own JSON: %v", err)
	}
	c, p, _, err := fit(v, DefaultBudget(), limit, Origin{}, true)
	if err != nil {
		return nil, "", err
	}
	return c, string(p), nil
}

func limitError(limit int) error {
	return rpc.Errorf(rpc.Internal, "render: limit %d is below the minimum of %d bytes", limit, MinLimit)
}

// fit renders v with budget b, tightening the budget until the pretty
// form fits in limit. Each attempt stops as soon as it passes the limit,
// so an attempt costs at most about limit bytes of output, and there are
// at most a few dozen attempts.
func fit(v value.Value, b Budget, limit int, o Origin, plain bool) (compact, pretty []byte, elided bool, err error) {
	return fitRoot(func(e *emitter) { e.value(v, 0) }, isRecord(v), b, limit, o, plain)
}

// fitRoot is fit for a root that root emits; record says whether it is a
// record (plain mode lists the cuts in it).
func fitRoot(root func(e *emitter), record bool, b Budget, limit int, o Origin, plain bool) (compact, pretty []byte, elided bool, err error) {
	if limit < MinLimit {
		return nil, nil, false, limitError(limit)
	}
	b = b.WithDefaults()
	wrap := false
	for {
		e := &emitter{limit: limit, b: b, plain: plain, origin: o, wrap: wrap}
		e.runRoot(root)
		if e.err != nil {
			return nil, nil, false, e.err
		}
		if !e.over {
			if plain && !wrap && e.cutCount() > 0 && !record {
				wrap = true // cuts need a place to be listed: wrap and redo
				continue
			}
			var out bytes.Buffer
			out.Grow(e.pretty)
			if err := json.Indent(&out, e.buf, "", "  "); err != nil {
				return nil, nil, false, rpc.Errorf(rpc.Internal, "render: produced invalid JSON: %v", err)
			}
			if out.Len() <= limit {
				return e.buf, out.Bytes(), e.elided, nil
			}
		}
		next, ok := tighten(b, e.st)
		if !ok {
			return nil, nil, false, rpc.Errorf(rpc.TooLarge, "render: even fully elided, the value does not fit in %d bytes (is the path very long?); read a smaller part with path", limit)
		}
		b = next
	}
}

func isRecord(v value.Value) bool {
	_, ok := v.(*value.Record)
	return ok
}

// Floors of the tightening: long strings and bytes are shortened first,
// then every count is halved, then strings and bytes again, then the depth.
const (
	strFloor       = 256
	bytesFloor     = 256
	hardStrFloor   = 32
	hardBytesFloor = 16
)

func tighten(b Budget, st stats) (Budget, bool) {
	switch {
	case st.longestStr > strFloor || st.longestBytes > bytesFloor:
		if st.longestStr > strFloor {
			b.MaxString = max(strFloor, min(b.MaxString, st.longestStr)/2)
		}
		if st.longestBytes > bytesFloor {
			b.MaxBytes = max(bytesFloor, min(b.MaxBytes, st.longestBytes)/2)
		}
	case b.MaxRows > 1 || b.MaxItems > 1 || b.MaxFields > 1:
		b.MaxRows = max(1, b.MaxRows/2)
		b.MaxItems = max(1, b.MaxItems/2)
		b.MaxFields = max(1, b.MaxFields/2)
	case b.MaxString > hardStrFloor || b.MaxBytes > hardBytesFloor:
		b.MaxString = max(hardStrFloor, min(b.MaxString, strFloor)/2)
		b.MaxBytes = max(hardBytesFloor, min(b.MaxBytes, bytesFloor)/2)
	case b.MaxDepth > 0:
		b.MaxDepth /= 2
	default:
		return b, false
	}
	return b, true
}

// stats are what one attempt learned, to tighten the next.
type stats struct {
	longestStr   int // most characters shown of one string
	longestBytes int // most octets shown of one bytes value
}

// seg is one step of the path from the rendered root to where the emitter is.
type seg struct {
	name  string
	index int
	field bool
}

// marker describes one cut (see docs/values.md for the wire form).
type marker struct {
	kind       value.Kind
	total      int // items, rows, octets or fields
	shown      int
	totalBytes int // strings
	totalChars int // strings; -1 when counting them would read too much
	colsTotal  int // tables whose columns were cut
	colsShown  int
	budget     string // the budget key (or "limit") that caused the cut
	path       value.Path
	slice      string // the slice that shows what comes next, if any
	elideKey   string // a budget to raise instead, if any
	elideVal   int
}

// plainKind names a cut value in JSON's own words: the plain form has no
// typed kinds, and a table is an array of objects there.
var plainKind = map[value.Kind]string{
	value.KindStr:    `"string"`,
	value.KindBytes:  `"string"`,
	value.KindList:   `"array"`,
	value.KindTable:  `"array"`,
	value.KindRecord: `"object"`,
}

// The plain form lists at most this many cuts and counts the rest.
const maxListedCuts = 20

// emitter writes one attempt. Every write checks the length the pretty
// (indented) form would have; past limit it sets over and all further
// writes are dropped, so callers only need to stop their loops.
type emitter struct {
	buf    []byte
	pretty int // length of the pretty form of buf
	limit  int
	over   bool
	b      Budget
	plain  bool // plain JSON (kernel records) instead of typed
	wrap   bool // plain: wrap a non-object root to list the cuts
	exact  bool // raw: no budget, no cuts, limit applies to the compact form
	origin Origin
	path   []seg
	frames []int // element counts of the open JSON containers
	elided bool
	cuts   []marker // plain mode: the cuts, listed in "$elided"
	more   int      // plain mode: cuts beyond maxListedCuts
	st     stats
	err    error // a sparse value failed to read
}

// fail ends the attempt with err (a part of a sparse value did not read).
func (e *emitter) fail(err error) {
	if e.err == nil {
		e.err = err
	}
	e.over = true
}

func (e *emitter) cutCount() int { return len(e.cuts) + e.more }

func (e *emitter) check() {
	n := e.pretty
	if e.exact {
		n = len(e.buf)
	}
	if n > e.limit {
		e.over = true
	}
}

func (e *emitter) write(s string) {
	if e.over {
		return
	}
	e.buf = append(e.buf, s...)
	e.pretty += len(s)
	e.check()
}

func (e *emitter) writeQuoted(s string) {
	if e.over {
		return
	}
	if len(s) > e.limit {
		// Its literal cannot fit: say so without copying all of it.
		e.over = true
		return
	}
	n := len(e.buf)
	e.buf = value.AppendQuoted(e.buf, s)
	e.pretty += len(e.buf) - n
	e.check()
}

func (e *emitter) writeInt(i int64) {
	if e.over {
		return
	}
	n := len(e.buf)
	e.buf = strconv.AppendInt(e.buf, i, 10)
	e.pretty += len(e.buf) - n
	e.check()
}

func (e *emitter) open(c byte) {
	e.write(string(c))
	e.frames = append(e.frames, 0)
}

// elem starts an element of the innermost container: a comma after the
// first, and in the pretty form a new line indented to the depth.
func (e *emitter) elem() {
	n := &e.frames[len(e.frames)-1]
	if *n > 0 {
		e.write(",")
	}
	*n++
	e.pretty += 1 + 2*len(e.frames)
	e.check()
}

func (e *emitter) key(name string) {
	e.elem()
	e.writeQuoted(name)
	e.write(":")
	e.pretty++ // the pretty form has ": "
	e.check()
}

func (e *emitter) close(c byte) {
	n := e.frames[len(e.frames)-1]
	e.frames = e.frames[:len(e.frames)-1]
	if n > 0 {
		e.pretty += 1 + 2*len(e.frames)
	}
	e.write(string(c))
}

// reserve is the room kept free when a string or bytes value is fitted to
// the space left: its own marker, and closing every open container.
func (e *emitter) reserve() int {
	r := 320 + len(e.origin.Path.String())
	for _, s := range e.path {
		r += 2*len(s.name) + 24
	}
	d := len(e.frames)
	return r + d*(2*d+4)
}

func (e *emitter) room() int {
	if e.exact {
		return e.limit - len(e.buf)
	}
	return e.limit - e.pretty - e.reserve()
}

func (e *emitter) push(s seg) { e.path = append(e.path, s) }
func (e *emitter) pop()       { e.path = e.path[:len(e.path)-1] }

// here is the path of the current position, relative to the addressed
// value (the origin's path, and the first index shifted by its slice).
func (e *emitter) here() value.Path {
	p := e.origin.Path
	for i, s := range e.path {
		if s.field {
			p = p.Field(s.name)
			continue
		}
		idx := s.index
		if i == 0 {
			idx += e.origin.Offset
		}
		p = p.Index(idx)
	}
	return p
}

// nextSlice is the slice showing the page after the first shown of total,
// as the reader must write it on the addressed value.
func (e *emitter) nextSlice(shown, total int) string {
	page := max(shown, 1)
	end := shown + page
	if total >= 0 {
		end = min(end, total)
	}
	if len(e.path) == 0 {
		shown += e.origin.Offset
		end += e.origin.Offset
	}
	return strconv.Itoa(shown) + ".." + strconv.Itoa(end)
}

func (e *emitter) cut(m marker) {
	e.elided = true
	m.path = e.here()
	if !e.plain {
		e.key("elided")
		e.marker(&m)
		return
	}
	if len(e.cuts) < maxListedCuts {
		e.cuts = append(e.cuts, m)
	} else {
		e.more++
	}
}

func (e *emitter) marker(m *marker) {
	e.open('{')
	if e.plain {
		e.key("kind")
		e.write(plainKind[m.kind])
	}
	switch m.kind {
	case value.KindStr:
		e.key("total_bytes")
		e.writeInt(int64(m.totalBytes))
		if m.totalChars >= 0 {
			e.key("total_chars")
			e.writeInt(int64(m.totalChars))
		}
		e.key("shown_chars")
		e.writeInt(int64(m.shown))
	case value.KindRecord:
		e.key("fields_total")
		e.writeInt(int64(m.total))
		e.key("fields_shown")
		e.writeInt(int64(m.shown))
	default:
		e.key("total")
		e.writeInt(int64(m.total))
		e.key("shown")
		e.writeInt(int64(m.shown))
		if m.colsTotal > 0 {
			e.key("cols_total")
			e.writeInt(int64(m.colsTotal))
			e.key("cols_shown")
			e.writeInt(int64(m.colsShown))
		}
	}
	e.key("budget")
	e.writeQuoted(m.budget)
	e.key("next")
	e.open('{')
	e.key("path")
	e.writeQuoted(m.path.String())
	if m.slice != "" {
		e.key("slice")
		e.writeQuoted(m.slice)
	}
	if m.elideKey != "" {
		e.key("elide")
		e.open('{')
		e.key(m.elideKey)
		e.writeInt(int64(m.elideVal))
		e.close('}')
	}
	e.close('}')
	e.close('}')
}

// run emits the root value (and in plain mode the list of cuts).
func (e *emitter) run(v value.Value) { e.runRoot(func(e *emitter) { e.value(v, 0) }) }

func (e *emitter) runRoot(root func(e *emitter)) {
	if e.exact {
		e.b = Budget{MaxRows: math.MaxInt, MaxItems: math.MaxInt, MaxString: math.MaxInt, MaxBytes: math.MaxInt, MaxDepth: math.MaxInt, MaxFields: math.MaxInt}
	}
	if e.plain && e.wrap {
		e.open('{')
		e.key("value")
		root(e)
		e.key("$elided")
		e.cutList()
		e.close('}')
		return
	}
	root(e)
}

func (e *emitter) cutList() {
	e.open('[')
	for i := range e.cuts {
		e.elem()
		e.marker(&e.cuts[i])
	}
	if e.more > 0 {
		e.elem()
		e.open('{')
		e.key("more")
		e.writeInt(int64(e.more))
		e.close('}')
	}
	e.close(']')
}

// typed opens a typed object and writes its tag.
func (e *emitter) typed(kind string) {
	e.open('{')
	e.key("$")
	e.write(kind)
}

func (e *emitter) value(v value.Value, depth int) {
	if e.over {
		return
	}
	switch x := v.(type) {
	case nil, value.Null:
		if e.plain {
			e.write("null")
			return
		}
		e.typed(`"null"`)
		e.close('}')
	case value.Bool:
		lit := "false"
		if x {
			lit = "true"
		}
		e.scalar(`"bool"`, lit)
	case value.Int:
		e.scalar(`"int"`, strconv.FormatInt(int64(x), 10))
	case value.Float:
		e.scalar(`"float"`, string(value.AppendFloat(nil, float64(x))))
	case value.Str:
		e.str(string(x))
	case value.Bytes:
		e.bytes(x)
	case value.List:
		e.list(x, depth)
	case *value.Record:
		e.record(x, depth)
	case *value.Table:
		e.table(x, depth)
	default:
		panic(fmt.Sprintf("render: unknown Value type %T", v))
	}
}

func (e *emitter) scalar(tag, lit string) {
	if e.plain {
		e.write(lit)
		return
	}
	e.typed(tag)
	e.key("v")
	e.write(lit)
	e.close('}')
}

func (e *emitter) str(s string) {
	e.strOf(s, len(s), func() int { return utf8.RuneCountInString(s) })
}

// strOf emits a string of total bytes (and count characters, asked only
// of strings of at most 64 KiB) of which s is the whole or a prefix of
// more than room bytes (all fitString can read).
func (e *emitter) strOf(s string, total int, count func() int) {
	room := e.room()
	end, chars, b64 := fitString(s, e.b.MaxString, room, e.plain)
	e.st.longestStr = max(e.st.longestStr, chars)
	cut := end < total
	if cut && e.exact {
		e.over = true // raw output is whole or nothing
		return
	}
	if !e.plain {
		e.typed(`"str"`)
		if b64 {
			e.key("b64")
		} else {
			e.key("v")
		}
	}
	if b64 {
		e.writeBase64(s[:end])
	} else {
		e.writeQuoted(s[:end])
	}
	if cut {
		m := marker{kind: value.KindStr, shown: chars, totalBytes: total, totalChars: -1, budget: "max_string"}
		if chars < e.b.MaxString {
			m.budget = "limit"
		}
		// Counting characters reads the whole string: only for short ones.
		if total <= maxCountedString {
			m.totalChars = count()
		}
		m.slice = e.nextSliceChars(chars, m.totalChars)
		e.cut(m)
	}
	if !e.plain {
		e.close('}')
	}
}

// maxCountedString is the longest string (in bytes) whose characters a
// marker counts.
const maxCountedString = 1 << 16

// nextSliceChars is nextSlice for strings, whose pages are at least a few
// hundred characters even when little was shown.
func (e *emitter) nextSliceChars(shown, total int) string {
	page := max(shown, strFloor)
	end := shown + page
	if total >= 0 {
		end = min(end, total)
	}
	if len(e.path) == 0 {
		shown += e.origin.Offset
		end += e.origin.Offset
	}
	return strconv.Itoa(shown) + ".." + strconv.Itoa(end)
}

func (e *emitter) writeBase64(s string) {
	if e.over {
		return
	}
	n := len(e.buf)
	e.buf = append(e.buf, '"')
	e.buf = base64.StdEncoding.AppendEncode(e.buf, []byte(s))
	e.buf = append(e.buf, '"')
	e.pretty += len(e.buf) - n
	e.check()
}

// fitString picks how much of s to show: at most maxChars characters whose
// JSON literal fits in room bytes. It reads s only that far. A prefix
// holding invalid UTF-8 travels as base64 in typed JSON (b64); plain JSON
// (lossy) writes U+FFFD for each bad byte instead.
func fitString(s string, maxChars, room int, lossy bool) (end, chars int, b64 bool) {
	size := 2 // the quotes
	i := 0
	for i < len(s) && chars < maxChars {
		c := s[i]
		w, n := 1, 1
		if c < utf8.RuneSelf {
			switch {
			case c == '"' || c == '\\' || c == '\n' || c == '\r' || c == '\t':
				w = 2
			case c < 0x20:
				w = 6
			}
		} else {
			var r rune
			r, n = utf8.DecodeRuneInString(s[i:])
			w = n
			switch {
			case r == utf8.RuneError && n == 1:
				if !lossy {
					b64 = true
				}
				w = 6
			case r == '\u2028' || r == '\u2029':
				w = 6
			}
			if b64 {
				break
			}
		}
		if size+w > room {
			break
		}
		size += w
		i += n
		chars++
	}
	if !b64 {
		return i, chars, false
	}
	// Base64 takes 4 bytes for every 3: fit the octets instead.
	i, chars = 0, 0
	for i < len(s) && chars < maxChars {
		n := 1
		if s[i] >= utf8.RuneSelf {
			_, n = utf8.DecodeRuneInString(s[i:])
		}
		if 2+base64.StdEncoding.EncodedLen(i+n) > room {
			break
		}
		i += n
		chars++
	}
	return i, chars, !utf8.ValidString(s[:i])
}

func (e *emitter) bytes(b value.Bytes) {
	k := min(len(b), e.b.MaxBytes)
	budget := "max_bytes"
	if fit := max(0, (e.room()-2)/4*3); fit < k {
		if e.exact {
			e.over = true // raw output is whole or nothing
			return
		}
		k, budget = fit, "limit"
	}
	e.st.longestBytes = max(e.st.longestBytes, k)
	if !e.plain {
		e.typed(`"bytes"`)
		e.key("b64")
	}
	e.writeBase64(string(b[:k]))
	if k < len(b) {
		e.cut(marker{kind: value.KindBytes, total: len(b), shown: k, budget: budget, slice: e.nextSlice(k, len(b))})
	}
	if !e.plain {
		e.close('}')
	}
}

func (e *emitter) list(l value.List, depth int) {
	e.listOf(len(l), func(i int) { e.value(l[i], depth+1) }, depth)
}

// listOf emits a list of n items, item i emitted by item.
func (e *emitter) listOf(n int, item func(i int), depth int) {
	if !e.plain {
		e.typed(`"list"`)
		e.key("v")
	}
	k, budget := min(n, e.b.MaxItems), "max_items"
	if depth >= e.b.MaxDepth {
		k, budget = 0, "max_depth"
	}
	e.open('[')
	for i := 0; i < k && !e.over; i++ {
		e.elem()
		e.push(seg{index: i})
		item(i)
		e.pop()
	}
	e.close(']')
	if k < n {
		m := marker{kind: value.KindList, total: n, shown: k, budget: budget}
		if budget != "max_depth" {
			m.slice = e.nextSlice(k, n)
		}
		e.cut(m)
	}
	if !e.plain {
		e.close('}')
	}
}

func (e *emitter) record(r *value.Record, depth int) {
	e.recordOf(len(r.Fields), func(i int) string { return r.Fields[i].Name },
		func(i int) { e.value(r.Fields[i].Value, depth+1) }, depth)
}

// recordOf emits a record of n fields, field i named name(i) and its
// value emitted by field.
func (e *emitter) recordOf(n int, name func(i int) string, field func(i int), depth int) {
	root := len(e.path) == 0
	if !e.plain {
		e.typed(`"record"`)
		e.key("v")
	}
	k, budget := min(n, e.b.MaxFields), "max_fields"
	if depth >= e.b.MaxDepth {
		k, budget = 0, "max_depth"
	}
	e.open('{')
	for i := 0; i < k && !e.over; i++ {
		f := name(i)
		e.key(f)
		e.push(seg{name: f, field: true})
		field(i)
		e.pop()
	}
	if k < n {
		m := marker{kind: value.KindRecord, total: n, shown: k, budget: budget}
		if budget != "max_depth" {
			m.elideKey, m.elideVal = "max_fields", n
		}
		if !e.plain {
			e.close('}')
		}
		e.cut(m)
		if !e.plain {
			e.close('}')
			return
		}
	}
	if e.plain {
		// The root object of a kernel record carries the list of cuts.
		if root && !e.wrap && e.cutCount() > 0 {
			e.key("$elided")
			e.cutList()
		}
		e.close('}')
		return
	}
	e.close('}')
	e.close('}')
}

func (e *emitter) table(t *value.Table, depth int) {
	e.tableOf(t.Cols, len(t.Rows), func(i int) []value.Value { return t.Rows[i] }, depth)
}

// tableOf emits a table of columns cols and n rows, row i given by row
// (nil after a failure, which ends the attempt).
func (e *emitter) tableOf(cols []string, n int, row func(i int) []value.Value, depth int) {
	k, budget := min(n, e.b.MaxRows), "max_rows"
	c := min(len(cols), e.b.MaxFields)
	if depth >= e.b.MaxDepth {
		k, c, budget = 0, 0, "max_depth"
	}
	if !e.plain {
		e.typed(`"table"`)
		e.key("cols")
		e.open('[')
		for j := 0; j < c && !e.over; j++ {
			e.elem()
			e.writeQuoted(cols[j])
		}
		e.close(']')
		e.key("rows")
	}
	e.open('[')
	for i := 0; i < k && !e.over; i++ {
		e.elem()
		e.push(seg{index: i})
		cells := row(i)
		if e.plain {
			e.open('{')
		} else {
			e.open('[')
		}
		for j := 0; j < c && !e.over; j++ {
			var cell value.Value
			if j < len(cells) {
				cell = cells[j]
			}
			if e.plain {
				e.key(cols[j])
			} else {
				e.elem()
			}
			e.push(seg{name: cols[j], field: true})
			e.value(cell, depth+1)
			e.pop()
		}
		if e.plain {
			e.close('}')
		} else {
			e.close(']')
		}
		e.pop()
	}
	e.close(']')
	if k < n || c < len(cols) {
		m := marker{kind: value.KindTable, total: n, shown: k, budget: budget}
		if c < len(cols) {
			m.colsTotal, m.colsShown = len(cols), c
		}
		switch {
		case budget == "max_depth":
		case k < n:
			m.slice = e.nextSlice(k, n)
		default:
			m.budget = "max_fields"
		}
		if c < len(cols) && budget != "max_depth" {
			m.elideKey, m.elideVal = "max_fields", len(cols)
		}
		e.cut(m)
	}
	if !e.plain {
		e.close('}')
	}
}
