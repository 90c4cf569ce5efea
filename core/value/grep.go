package value

import (
	"bytes"
	"encoding/json"
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
	count := 0

	// One pass finds the matches; with context, every unit is kept (as
	// an index) so the lines around a match can be shown.
	var all []unit
	var hits []int // indexes into all (with context) or the units themselves
	var hitUnits []unit
	for u := range units {
		if g.Context > 0 {
			all = append(all, u)
		}
		if g.re.MatchString(u.text) {
			if g.Context > 0 {
				hits = append(hits, count)
			} else {
				hitUnits = append(hitUnits, u)
			}
		}
		count++
	}
	total := len(hits) + len(hitUnits)
	page := Slice{Start: 0, End: DefaultGrepMatches}
	if sl != nil {
		page = *sl
	}
	a, b := page.Bounds(total)

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
	if g.Context == 0 {
		for _, u := range hitUnits[a:b] {
			row(u, true)
		}
	} else {
		last := -1 // the last unit shown
		for _, h := range hits[a:b] {
			from := max(h-g.Context, last+1)
			to := min(h+g.Context, len(all)-1)
			for i := from; i <= to; i++ {
				matched := i == h || (i > h && g.re.MatchString(all[i].text))
				row(all[i], matched)
			}
			last = max(last, to)
		}
	}
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
				parts := make([]string, len(row))
				for j, c := range row {
					parts[j] = searchText(c)
				}
				if !yield(unit{text: strings.Join(parts, "\t"), show: row, num: i}) {
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
func lineUnits(s string) func(yield func(unit) bool) {
	return func(yield func(unit) bool) {
		n := 0
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
