package render

import (
	"encoding/hex"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/charmbracelet/x/ansi"

	"github.com/shoal-sh/shoal/core/value"
)

// Render returns v as human text (format=render) of at most limit bytes.
// A str is its own text, other scalars their literal; lists put one item
// per line, records "name: value" lines, tables aligned columns under a
// header, bytes a hex dump of their head. Nested values indent in the
// manner of YAML. No terminal escape sequence is ever emitted: escapes in
// strings are dropped and other control characters shown as U+FFFD. When
// the text is cut, its last line says what was shown and which path and
// slice show the rest. Only what is shown is read.
func Render(v value.Value, limit int) string {
	return RenderAt(v, limit, Origin{})
}

// RenderAt is [Render] for a value reached through a path and slice; the
// last line's path and slice refer to the addressed value.
func RenderAt(v value.Value, limit int, o Origin) string {
	text, _ := renderText(v, limit, o, nil)
	return text
}

// renderText is RenderAt of v, which for the lengths in lens is a prefix
// of the value (see textWriter.lens); it also reports whether the text
// reached the end of such a prefix.
func renderText(v value.Value, limit int, o Origin, lens map[string]int) (string, bool) {
	limit = max(limit, 0)
	w := &textWriter{origin: o, lens: lens}
	// The last line needs room; a small limit gives it at most a quarter.
	w.max = limit - min(limit/4, 400+2*len(o.Path.String()))
	w.buf = make([]byte, 0, min(limit, 4096))
	w.block(v, "", "", 0)
	out := w.buf
	if footer := w.footer(); footer != "" {
		if len(out) > 0 && out[len(out)-1] != '\n' {
			out = append(out, '\n')
		}
		out = append(out, footer...)
	}
	out = trimTrailingNewline(out)
	if len(out) > limit {
		out = out[:runeStart(out, limit)]
	}
	return string(out), w.exhausted
}

func trimTrailingNewline(b []byte) []byte {
	if n := len(b); n > 0 && b[n-1] == '\n' {
		return b[:n-1]
	}
	return b
}

// runeStart backs i off to the start of a UTF-8 sequence in b.
func runeStart(b []byte, i int) int {
	for i > 0 && i < len(b) && !utf8.RuneStart(b[i]) {
		i--
	}
	return i
}

// Layout constants of the human form.
const (
	cellWidth  = 40  // characters of a table cell
	tableWidth = 200 // characters of a table line before columns are dropped
	inlineMax  = 120 // characters of a nested value shown on one line
	blockDepth = 6   // nesting shown as indented blocks; deeper is inline
	hexLine    = 79  // bytes of one hex.Dump line, newline included

	escapeWindow = 4096 // bytes looked at for the end of an escape sequence
)

type textWriter struct {
	buf     []byte
	max     int // bytes available before the last line
	stopped bool
	origin  Origin
	path    []seg

	// The first place output stopped, if any.
	cut *textCut
	// A value shortened to fit a line or cell, to give as an example.
	short    *value.Path
	colsCut  string // "showed c of C columns; …" for the first table that dropped columns
	colsPath value.Path

	// For a Sparse value rendered from a prefix of it ([RenderSparse]):
	// the real lengths of the lists, tables, records and strings that were
	// read only in part, by path, and whether the text came to the end of
	// one of those (so the value must be read further).
	lens      map[string]int
	exhausted bool
}

// length is n, the length of the container or string at the current
// path, or its real length when only a prefix of it was read.
func (w *textWriter) length(n int) int {
	if w.lens != nil {
		if l, ok := w.lens[segKey(w.path)]; ok {
			return l
		}
	}
	return n
}

// reachedEnd notes that the text came to the end of the container or
// string at the current path.
func (w *textWriter) reachedEnd() {
	if w.lens != nil {
		if _, ok := w.lens[segKey(w.path)]; ok {
			w.exhausted = true
		}
	}
}

// segKey names a path of segments, for textWriter.lens: the path it is
// from the rendered value, as the emitter writes paths.
func segKey(path []seg) string {
	e := emitter{path: path}
	return e.here().String()
}

type textCut struct {
	path  value.Path
	what  string // rows, items, characters, bytes
	shown int    // how many were shown (from the start of the container)
	total int    // -1 when unknown
	size  int    // for strings: the length in bytes
	page  int
	next  string // fields: the first field not shown
	atTop bool   // the cut container is the rendered root
}

func (w *textWriter) push(s seg) { w.path = append(w.path, s) }
func (w *textWriter) pop()       { w.path = w.path[:len(w.path)-1] }

func (w *textWriter) here() value.Path {
	e := emitter{origin: w.origin, path: w.path}
	return e.here()
}

func (w *textWriter) room() int { return w.max - len(w.buf) }

// line writes one line if it fits and reports whether it did.
func (w *textWriter) line(parts ...string) bool {
	if w.stopped {
		return false
	}
	n := 1
	for _, p := range parts {
		n += len(p)
	}
	if n > w.room() {
		return false
	}
	for _, p := range parts {
		w.buf = append(w.buf, p...)
	}
	w.buf = append(w.buf, '\n')
	return true
}

func (w *textWriter) stop(c textCut) {
	if w.cut == nil {
		c.path = w.here()
		c.atTop = len(w.path) == 0
		w.cut = &c
	}
	w.stopped = true
}

func (w *textWriter) shortened() {
	if w.short == nil {
		p := w.here()
		w.short = &p
	}
}

func isComposite(v value.Value) bool {
	switch x := v.(type) {
	case value.List:
		return len(x) > 0
	case *value.Record:
		return len(x.Fields) > 0
	case *value.Table:
		return true
	}
	return false
}

// multiline reports whether a string needs a block of its own. Only the
// part that can be shown is looked at: a break further on is never reached.
func multiline(s string) bool {
	return strings.ContainsAny(s[:min(len(s), TextLimit)], "\n\r")
}

// block writes v as lines: the first line starts with first, the others
// with rest.
func (w *textWriter) block(v value.Value, first, rest string, depth int) {
	if w.stopped {
		return
	}
	if depth >= blockDepth && isComposite(v) {
		if !w.line(first, w.inline(v, inlineMax)) {
			w.stop(textCut{what: "items", total: -1})
		}
		return
	}
	switch x := v.(type) {
	case value.Str:
		w.text(first, rest, string(x))
	case value.Bytes:
		w.hexDump(first, rest, x)
	case value.List:
		w.list(x, first, rest, depth)
	case *value.Record:
		w.record(x, first, rest, depth)
	case *value.Table:
		w.table(x, first, rest)
	default:
		if !w.line(first, w.inline(v, inlineMax)) {
			w.stop(textCut{what: "value", total: -1})
		}
	}
}

func (w *textWriter) list(l value.List, first, rest string, depth int) {
	if len(l) == 0 {
		if !w.line(first, "[]") {
			w.stop(textCut{what: "items", total: 0})
		}
		return
	}
	for i, it := range l {
		p := rest
		if i == 0 {
			p = first
		}
		w.push(seg{index: i})
		switch s, isStr := it.(value.Str); {
		case isComposite(it):
			w.block(it, p+"- ", rest+"  ", depth+1)
		case isStr && multiline(string(s)):
			w.text(p+"- ", rest+"  ", string(s))
		case isStr && s != "":
			// An item that does not fit ends the list here: the reader
			// wants the next page of items, not the rest of one string.
			if i > 0 && len(p)+len(s)+1 > w.room() && len(s) < w.max/2 {
				w.pop()
				w.stop(textCut{what: "items", shown: i, total: w.length(len(l)), page: max(i, 1)})
				return
			}
			w.text(p, rest, string(s))
		default:
			if !w.line(p, w.inline(it, inlineMax)) {
				w.pop()
				w.stop(textCut{what: "items", shown: i, total: w.length(len(l)), page: max(i, 1)})
				return
			}
		}
		w.pop()
		if w.stopped {
			return
		}
	}
	w.reachedEnd()
}

func (w *textWriter) record(r *value.Record, first, rest string, depth int) {
	if len(r.Fields) == 0 {
		if !w.line(first, "{}") {
			w.stop(textCut{what: "fields", total: 0})
		}
		return
	}
	// Names line up when their values sit on the same line.
	pad := 0
	for _, f := range r.Fields[:min(len(r.Fields), 200)] {
		pad = max(pad, min(ansi.StringWidth(sanitizeLine(f.Name, 200)), 24))
	}
	for i, f := range r.Fields {
		p := rest
		if i == 0 {
			p = first
		}
		name := sanitizeLine(f.Name, 200)
		w.push(seg{name: f.Name, field: true})
		s, isStr := f.Value.(value.Str)
		switch {
		case isComposite(f.Value), isStr && multiline(string(s)):
			if !w.line(p, name, ":") {
				w.pop()
				w.stop(textCut{what: "fields", shown: i, total: w.length(len(r.Fields)), next: f.Name})
				return
			}
			w.block(f.Value, rest+"  ", rest+"  ", depth+1)
		default:
			label := p + name + ":" + strings.Repeat(" ", max(0, pad-ansi.StringWidth(name))+1)
			if isStr && s != "" {
				w.text(label, rest+"  ", string(s))
			} else if !w.line(label, w.inline(f.Value, inlineMax)) {
				w.pop()
				w.stop(textCut{what: "fields", shown: i, total: w.length(len(r.Fields)), next: f.Name})
				return
			}
		}
		w.pop()
		if w.stopped {
			return
		}
	}
	w.reachedEnd()
}

func (w *textWriter) table(t *value.Table, first, rest string) {
	// Columns: as many as fit a readable line.
	ncols, width := 0, 0
	for _, c := range t.Cols {
		cw := min(utf8.RuneCountInString(c[:min(len(c), utf8.UTFMax*cellWidth)]), cellWidth) + 2
		if ncols > 0 && width+cw > tableWidth {
			break
		}
		width += cw
		ncols++
	}
	if ncols < len(t.Cols) && w.colsCut == "" {
		w.colsCut = "showed " + strconv.Itoa(ncols) + " of " + strconv.Itoa(len(t.Cols)) + " columns"
		w.colsPath = w.here().Field(t.Cols[ncols])
	}
	// widths are in terminal cells (for alignment), extra the most bytes a
	// cell of the column has beyond its width (for the room).
	widths := make([]int, ncols)
	extra := make([]int, ncols)
	header := make([]string, ncols)
	measure := func(ws, ex []int, j int, c string) {
		n := ansi.StringWidth(c)
		ws[j] = max(ws[j], n)
		ex[j] = max(ex[j], len(c)-n)
	}
	for j := range ncols {
		header[j] = sanitizeLine(t.Cols[j], cellWidth)
		measure(widths, extra, j, header[j])
	}
	lineBytes := func(ws, ex []int) int {
		n := max(len(first), len(rest)) + 1
		for j := range ws {
			n += ws[j] + ex[j] + 2
		}
		return n
	}
	// Take rows while the aligned text still fits. Widths only grow, so
	// each row is checked against the widest layout so far.
	var cells [][]string
	for i := range t.Rows {
		row := t.Rows[i]
		cs := make([]string, ncols)
		ws, ex := slices.Clone(widths), slices.Clone(extra)
		w.push(seg{index: i})
		for j := range ncols {
			var c value.Value
			if j < len(row) {
				c = row[j]
			}
			w.push(seg{name: t.Cols[j], field: true})
			cs[j] = w.inline(c, cellWidth)
			w.pop()
			measure(ws, ex, j, cs[j])
		}
		w.pop()
		if (len(cells)+2)*lineBytes(ws, ex) > w.room() {
			w.writeTable(first, rest, header, cells, widths)
			w.stop(textCut{what: "rows", shown: len(cells), total: w.length(len(t.Rows)), page: max(len(cells), 1)})
			return
		}
		widths, extra = ws, ex
		cells = append(cells, cs)
	}
	w.reachedEnd()
	w.writeTable(first, rest, header, cells, widths)
}

func (w *textWriter) writeTable(first, rest string, header []string, rows [][]string, widths []int) {
	write := func(prefix string, cs []string) {
		var b strings.Builder
		b.WriteString(prefix)
		for j, c := range cs {
			b.WriteString(c)
			if j < len(cs)-1 {
				b.WriteString(strings.Repeat(" ", max(0, widths[j]-ansi.StringWidth(c))+2))
			}
		}
		w.line(strings.TrimRight(b.String(), " "))
	}
	write(first, header)
	for _, r := range rows {
		write(rest, r)
	}
}

func (w *textWriter) hexDump(first, rest string, b value.Bytes) {
	lines := max(0, (w.room()-len(first)-2)/(hexLine+len(rest)))
	n := min(len(b), lines*16)
	if len(b) == 0 {
		w.line(first, "(0 bytes)")
		return
	}
	dump := hex.Dump(b[:n])
	for i, l := range strings.SplitAfter(strings.TrimSuffix(dump, "\n"), "\n") {
		p := rest
		if i == 0 {
			p = first
		}
		w.line(p, strings.TrimSuffix(l, "\n"))
	}
	if n < len(b) {
		w.stop(textCut{what: "bytes", shown: n, total: len(b), page: max(n, 16)})
	}
}

// text writes a string as lines, cleaned of control characters, and stops
// where the room ends, recording how many characters were shown.
func (w *textWriter) text(first, rest string, s string) {
	if w.stopped {
		return
	}
	line := []byte(first)
	plen := len(first) // the prefix part of line
	chars := 0
	flush := func() bool {
		if len(line)+1 > w.room() {
			return false
		}
		w.buf = append(w.buf, line...)
		w.buf = append(w.buf, '\n')
		line = append(line[:0], rest...)
		plen = len(rest)
		return true
	}
	for i := 0; i < len(s); {
		c := s[i]
		n := 1
		switch {
		case c == '\n' || c == '\r':
			if c == '\r' && i+1 < len(s) && s[i+1] == '\n' {
				n = 2 // CRLF is one line break
			}
			if !flush() {
				w.stopText(chars, i, len(s))
				return
			}
			i += n
			chars += n
			continue
		case c == 0x1b:
			// Escape sequences are dropped whole.
			// A sequence is looked for in a bounded window, so an escape
			// that never ends cannot make this read the whole string.
			_, _, n, _ = ansi.DecodeSequence(s[i:min(len(s), i+escapeWindow)], ansi.NormalState, nil)
			n = max(n, 1)
			chars += utf8.RuneCountInString(s[i : i+n])
			i += n
			continue
		}
		if c >= 0x20 && c < 0x7f {
			// A run of printable ASCII is copied at once, as far as it fits.
			avail := w.room() - len(line) - 1
			j := i
			for j < len(s) && j-i < avail && s[j] >= 0x20 && s[j] < 0x7f {
				j++
			}
			if j > i {
				line = append(line, s[i:j]...)
				chars += j - i
				i = j
				continue
			}
		}
		var piece string
		if c < utf8.RuneSelf {
			piece = s[i : i+1]
			if c < 0x20 && c != '\t' || c == 0x7f {
				piece = "\uFFFD"
			}
		} else {
			r, size := utf8.DecodeRuneInString(s[i:])
			n = size
			piece = s[i : i+size]
			if r == utf8.RuneError && size == 1 || r >= 0x80 && r <= 0x9f {
				piece = "\uFFFD"
			}
		}
		if len(line)+len(piece)+1 > w.room() {
			// Out of room in the middle of a line: keep what fits of it.
			if len(line) > plen {
				w.buf = append(w.buf, line...)
				w.buf = append(w.buf, '\n')
			}
			w.stopText(chars, i, len(s))
			return
		}
		line = append(line, piece...)
		i += n
		chars++
	}
	w.reachedEnd()
	// The last line, unless the text ended with a line break.
	if len(s) == 0 || s[len(s)-1] != '\n' && s[len(s)-1] != '\r' {
		if !flush() {
			w.stopText(chars, len(s), len(s))
		}
	}
}

// stopText ends the text at byte at of a string of size bytes, having
// shown chars characters. A stop this near the end of a prefix read of a
// longer string may have looked at too little of it (a line break or
// escape sequence cut by the prefix's end), so the string is read further.
func (w *textWriter) stopText(chars, at, size int) {
	if at+escapeWindow+1 > size {
		w.reachedEnd()
	}
	w.stop(textCut{what: "characters", shown: chars, total: -1, size: w.length(size), page: max(chars, strFloor)})
}

// inline renders v on one line of at most width characters, shortening it
// (and noting so) when it is longer.
func (w *textWriter) inline(v value.Value, width int) string {
	var b strings.Builder
	full := appendInline(&b, v, width)
	if !full {
		w.shortened()
	}
	return b.String()
}

// appendInline writes v in one-line form to b until b holds width
// characters; it reports whether all of v was written.
func appendInline(b *strings.Builder, v value.Value, width int) bool {
	left := func() int { return width - utf8.RuneCountInString(b.String()) }
	put := func(s string) bool {
		l := left()
		if l <= 0 {
			return false
		}
		if utf8.RuneCountInString(s) <= l {
			b.WriteString(s)
			return true
		}
		i := 0
		for k := 0; k < l-1; k++ {
			_, size := utf8.DecodeRuneInString(s[i:])
			i += size
		}
		b.WriteString(s[:i])
		b.WriteString("…")
		return false
	}
	switch x := v.(type) {
	case nil, value.Null:
		return put("null")
	case value.Bool:
		return put(strconv.FormatBool(bool(x)))
	case value.Int:
		return put(strconv.FormatInt(int64(x), 10))
	case value.Float:
		return put(strconv.FormatFloat(float64(x), 'g', -1, 64))
	case value.Str:
		s := string(x)
		// Read no more of a long string than can be shown.
		_, end := value.StrRange(s, value.Slice{Start: 0, End: max(left(), 0) + 1})
		part := s[:end]
		if strings.IndexByte(part, 0x1b) >= 0 {
			part = ansi.Strip(part)
		}
		if part == "" || strings.ContainsFunc(part, isControl) || strings.TrimSpace(part) != part {
			q := string(value.AppendQuoted(nil, part))
			if end < len(s) {
				q = strings.TrimSuffix(q, `"`)
			}
			ok := put(q)
			return ok && end == len(s)
		}
		return put(part) && end == len(s)
	case value.Bytes:
		n := min(len(x), max(left(), 0)/2+1)
		return put("<"+strconv.Itoa(len(x))+" bytes "+hex.EncodeToString(x[:n])+">") && n == len(x)
	case value.List:
		if !put("[") {
			return false
		}
		for i, it := range x {
			if i > 0 && !put(", ") {
				return false
			}
			if !appendInline(b, it, width) {
				return false
			}
		}
		return put("]")
	case *value.Record:
		if !put("{") {
			return false
		}
		for i, f := range x.Fields {
			if i > 0 && !put(", ") {
				return false
			}
			if !put(sanitizeLine(f.Name, width)+": ") || !appendInline(b, f.Value, width) {
				return false
			}
		}
		return put("}")
	case *value.Table:
		names := make([]string, min(len(x.Cols), 5))
		for i := range names {
			names[i] = sanitizeLine(x.Cols[i], 20)
		}
		return put("<table: " + strconv.Itoa(len(x.Rows)) + " rows × " + strconv.Itoa(len(x.Cols)) + " columns (" + strings.Join(names, ", ") + ")>")
	}
	return false
}

func isControl(r rune) bool {
	return r < 0x20 || r == 0x7f || r >= 0x80 && r <= 0x9f || r == utf8.RuneError
}

// sanitizeLine makes a name safe for one line: control characters become
// U+FFFD and the result has at most max characters.
func sanitizeLine(s string, max int) string {
	var b strings.Builder
	n := 0
	for _, r := range s {
		if n == max {
			b.WriteString("…")
			break
		}
		if isControl(r) {
			r = '\uFFFD'
		}
		b.WriteRune(r)
		n++
	}
	return b.String()
}

// footer is the last line: what was cut and how to read the rest.
func (w *textWriter) footer() string {
	var parts []string
	if c := w.cut; c != nil {
		where := ""
		if !c.path.IsIdentity() {
			where = " at " + c.path.String()
		}
		start, shown := 0, c.shown
		if c.atTop {
			start, shown = w.origin.Offset, c.shown+w.origin.Offset
		}
		switch {
		case c.what == "characters":
			of := " of a " + strconv.Itoa(c.size) + "-byte string"
			if start > 0 {
				of = " of the " + strconv.Itoa(c.size) + " bytes read"
			}
			parts = append(parts, "showed characters "+strconv.Itoa(start)+".."+strconv.Itoa(shown)+of+where+
				"; next: "+pathArg(c.path)+"slice="+strconv.Itoa(shown)+".."+strconv.Itoa(shown+c.page))
		case c.total >= 0 && c.page > 0:
			end := min(shown+c.page, start+c.total)
			parts = append(parts, "showed "+c.what+" "+strconv.Itoa(start)+".."+strconv.Itoa(shown)+" of "+strconv.Itoa(c.total)+where+
				"; next: "+pathArg(c.path)+"slice="+strconv.Itoa(shown)+".."+strconv.Itoa(end))
		case c.next != "":
			parts = append(parts, "showed "+strconv.Itoa(c.shown)+" of "+strconv.Itoa(c.total)+" "+c.what+where+
				"; read the others one by one, e.g. path="+c.path.Field(c.next).String())
		default:
			parts = append(parts, "output stopped"+where+"; read that part with "+pathArg(c.path))
		}
	}
	if w.colsCut != "" {
		parts = append(parts, w.colsCut+"; read a column with path="+w.colsPath.String())
	}
	if w.short != nil {
		parts = append(parts, "long values were shortened; read one whole with its path, e.g. path="+w.short.String())
	}
	if len(parts) == 0 {
		return ""
	}
	return "[cut: " + strings.Join(parts, "; ") + "]"
}

func pathArg(p value.Path) string {
	if p.IsIdentity() {
		return ""
	}
	return "path=" + p.String() + " "
}
