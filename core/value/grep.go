package value

import (
	"bytes"
	"encoding/json"
	"math"
	"regexp"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/shoal-sh/shoal/core/rpc"
)

// Grep bounds.
const (
	// MaxGrepContext bounds the lines (items, rows) shown around a match.
	MaxGrepContext = 20
	// DefaultGrepMatches is how many matches a grep without a slice shows.
	DefaultGrepMatches = 50
	// MaxGrepLine bounds the characters of one line a grep result shows.
	MaxGrepLine = 1000
)

// Grep is a server-side search of a value: a regular expression (RE2, as
// Go's regexp) and how many lines of context to show around each match.
type Grep struct {
	Pattern string
	Context int
	re      *regexp.Regexp
}

// ParseGrep compiles pattern. A bad expression or context is an
// INVALID_PARAMS error that says what is wrong.
func ParseGrep(pattern string, context int) (Grep, error) {
	re, err := regexp.Compile(pattern)
	if err != nil {
		return Grep{}, rpc.Errorf(rpc.InvalidParams, "grep %q is not a regular expression (RE2 syntax): %v", pattern, err)
	}
	if context < 0 || context > MaxGrepContext {
		return Grep{}, rpc.Errorf(rpc.InvalidParams, "context must be 0..%d lines (got %d)", MaxGrepContext, context)
	}
	return Grep{Pattern: pattern, Context: context, re: re}, nil
}

// ParseContext reads a context= query value.
func ParseContext(s string) (int, error) {
	n, err := strconv.Atoi(s)
	if err != nil {
		return 0, rpc.Errorf(rpc.InvalidParams, "context must be a number of lines, e.g. context=2 (got %q)", s)
	}
	return n, nil
}

// unit is one searchable piece of a value: a line, an item or a row.
type unit struct {
	text string  // what the expression is matched against
	show []Value // the cells shown for it (after the number column)
	num  int     // its number: 1-based line, 0-based index or row
}

// Apply searches v and returns the result as a record:
//
//	{pattern, total, searched, shown, matches}
//
// total is the number of matching lines (items, rows), searched how many
// there were; matches is a table whose first column numbers the line
// (1-based, as grep -n) or the item or row (0-based, as a path index),
// with the line's text, the item, or the row's cells after it; with
// context, a last column match says whether the row matched or is
// context. sl pages the matches (nil: the first [DefaultGrepMatches]);
// a negative bound counts from the last match. shown is the slice of
// matches the table holds and, when more exist, next names the slice
// that follows.
//
// Strings and bytes are searched line by line, lists item by item (a
// string item as it is, another as its plain JSON), tables row by row
// (cells joined by a tab). A record or a scalar is INVALID_PARAMS: the
// message names the record's fields that can be searched.
func (g Grep) Apply(v Value, sl *Slice) (Value, error) {
	units, cols, err := grepUnits(v)
	if err != nil {
		return nil, err
	}
	return g.apply(units, cols, sl, func() error { return nil })
}

// ApplyPieces is Apply of the value made of the pieces pieces yields, in
// order: lists, tables (with the same columns) or strings, each the next
// part of one value (a string's pieces may cut a line anywhere), of the
// kind of like (an empty list, table or string will do). The
// value is never put together: memory stays within a piece, the context
// lines and the matches shown. pieces may be called twice (a page that
// counts from the last match needs the count first) and returns the
// error that stopped it, if any.
func (g Grep) ApplyPieces(like Value, pieces func(yield func(Value) bool) error, sl *Slice) (Value, error) {
	_, cols, err := grepUnits(like)
	if err != nil {
		return nil, err
	}
	var perr error
	units := func(yield func(unit) bool) {
		n := 0
		var carry []byte // the start of a line cut by the end of a piece
		more := true
		perr = pieces(func(p Value) bool {
			switch x := p.(type) {
			case List:
				for _, it := range x {
					if more = yield(unit{text: searchText(it), show: []Value{it}, num: n}); !more {
						return false
					}
					n++
				}
			case *Table:
				for _, row := range x.Rows {
					if more = yield(tableUnit(row, n)); !more {
						return false
					}
					n++
				}
			case Str:
				str := string(x)
				for {
					i := strings.IndexByte(str, '\n')
					if i < 0 {
						carry = append(carry, str...)
						return true
					}
					line := str[:i]
					if len(carry) > 0 {
						line = string(append(carry, line...))
						carry = carry[:0]
					}
					n++
					if more = yield(unit{text: line, show: []Value{Str(line)}, num: n}); !more {
						return false
					}
					str = str[i+1:]
				}
			}
			return true
		})
		if more && len(carry) > 0 {
			line := string(carry)
			yield(unit{text: line, show: []Value{Str(line)}, num: n + 1})
		}
	}
	return g.apply(units, cols, sl, func() error { return perr })
}

func tableUnit(row []Value, n int) unit {
	parts := make([]string, len(row))
	for j, c := range row {
		parts[j] = searchText(c)
	}
	return unit{text: strings.Join(parts, "\t"), show: row, num: n}
}

// apply searches units in one pass (two when the page counts from the
// last match: the first counts), keeping only the matches of the page,
// the context lines around them and the last Context units. failed
// reports an error that cut units short.
func (g Grep) apply(units func(yield func(unit) bool), cols []string, sl *Slice, failed func() error) (Value, error) {
	page := Slice{Start: 0, End: DefaultGrepMatches}
	if sl != nil {
		page = *sl
	}
	a, b := page.Bounds(math.MaxInt)
	if page.FromEnd() {
		total := 0
		for u := range units {
			if g.re.MatchString(u.text) {
				total++
			}
		}
		if err := failed(); err != nil {
			return nil, err
		}
		a, b = page.Bounds(total)
	}
	if g.Context > 0 {
		cols = append(cols, "match")
	}
	t := &Table{Cols: cols, Rows: [][]Value{}}
	row := func(u unit, match bool) {
		r := make([]Value, 0, len(cols))
		r = append(r, Int(u.num))
		for _, c := range u.show {
			if s, ok := c.(Str); ok && len(u.show) == 1 {
				c = clipLine(string(s))
			}
			r = append(r, c)
		}
		if g.Context > 0 {
			r = append(r, Bool(match))
		}
		t.Rows = append(t.Rows, r)
	}
	type held struct {
		u   unit
		ord int
	}
	ring := make([]held, 0, g.Context) // the last Context units, oldest first
	count, total, shown, after := 0, 0, -1, 0
	for u := range units {
		i := count
		count++
		m := g.re.MatchString(u.text)
		inPage := m && total >= a && total < b
		if m {
			total++
		}
		if g.Context == 0 {
			if inPage {
				row(u, true)
			}
			continue
		}
		switch {
		case inPage:
			// The lines before it not shown yet, then the match.
			for _, h := range ring {
				if h.ord > shown && h.ord >= i-g.Context {
					row(h.u, false)
				}
			}
			row(u, true)
			shown, after = i, g.Context
		case after > 0:
			row(u, m)
			shown = i
			after--
		}
		if len(ring) == g.Context {
			copy(ring, ring[1:])
			ring = ring[:len(ring)-1]
		}
		ring = append(ring, held{u, i})
	}
	if err := failed(); err != nil {
		return nil, err
	}
	a, b = min(a, total), min(b, total)
	fields := []Field{
		F("pattern", Str(g.Pattern)),
		F("total", Int(total)),
		F("searched", Int(count)),
		F("shown", Str(Slice{Start: a, End: b}.String())),
	}
	if b < total {
		next := Slice{Start: b, End: b + (b - a)}
		if b == a {
			next.End = b + DefaultGrepMatches
		}
		fields = append(fields, F("next", Str("slice="+next.String())))
	}
	fields = append(fields, F("matches", t))
	return &Record{Fields: fields}, nil
}

// grepUnits is what a grep of v searches, one unit at a time (a line, an
// item, a row), and the columns of its matches table.
func grepUnits(v Value) (units func(yield func(unit) bool), cols []string, err error) {
	switch x := v.(type) {
	case Str:
		cols = []string{"line", "text"}
		units = lineUnits(string(x))
	case Bytes:
		cols = []string{"line", "text"}
		units = lineUnits(string(x))
	case List:
		cols = []string{"index", "item"}
		units = func(yield func(unit) bool) {
			for i, it := range x {
				if !yield(unit{text: searchText(it), show: []Value{it}, num: i}) {
					return
				}
			}
		}
	case *Table:
		cols = append([]string{"row"}, x.Cols...)
		units = func(yield func(unit) bool) {
			for i, row := range x.Rows {
				if !yield(tableUnit(row, i)) {
					return
				}
			}
		}
	case *Record:
		var names []string
		for _, f := range x.Fields {
			switch f.Value.(type) {
			case Str, Bytes, List, *Table:
				names = append(names, "."+f.Name)
			}
		}
		hint := "it has no field that can be searched"
		if len(names) > 0 {
			hint = "add a path to one of its fields: " + strings.Join(names, ", ")
		}
		return nil, nil, rpc.Errorf(rpc.InvalidParams, "grep searches a string, bytes, a list or a table, not a record; %s", hint)
	default:
		return nil, nil, rpc.Errorf(rpc.InvalidParams, "grep searches a string, bytes, a list or a table, not %s", articleOf(v))
	}
	return units, cols, nil
}

// lineUnits yields the lines of s (a final newline ends the last line,
// it does not start an empty one), numbered from 1.
func lineUnits(all string) func(yield func(unit) bool) {
	return func(yield func(unit) bool) {
		s, n := all, 0
		for len(s) > 0 {
			n++
			line, rest, found := strings.Cut(s, "\n")
			if !found {
				rest = ""
			}
			if !yield(unit{text: line, show: []Value{Str(line)}, num: n}) {
				return
			}
			s = rest
		}
	}
}

// clipLine bounds one shown line at MaxGrepLine characters.
func clipLine(s string) Str {
	if len(s) <= MaxGrepLine {
		return Str(s)
	}
	_, end := StrRange(s, Slice{Start: 0, End: MaxGrepLine})
	if end == len(s) {
		return Str(s)
	}
	return Str(s[:end] + "… (+" + strconv.Itoa(utf8.RuneCountInString(s[end:])) + " chars)")
}

// searchText is what grep matches an item or cell against: a string as
// it is, anything else as its plain JSON.
func searchText(v Value) string {
	switch x := v.(type) {
	case Str:
		return string(x)
	case Bytes:
		return string(x)
	}
	raw, err := json.Marshal(ToPlain(v))
	if err != nil {
		return ""
	}
	return string(bytes.TrimSpace(raw))
}
