package value

import (
	"encoding/json"
	"slices"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/shoal-sh/shoal/core/rpc"
)

// Path is a compiled path selector (SPEC V2). The zero Path is the identity.
// A Path is immutable; [Path.Field] and [Path.Index] return extended copies.
//
// Grammar (no whitespace outside quotes):
//
//	path  = "." | step { step } | "." bracket { step }
//	step  = "." name | "." quoted | bracket
//	bracket = "[" quoted "]" | "[" ["-"] digits "]"
//	name  = (letter | "_") { letter | digit | "_" }
//	quoted = a JSON string literal
//
// The empty string is also the identity, so an absent path parameter needs
// no special case.
type Path struct {
	steps []step
}

type step struct {
	name  string
	index int
	field bool
}

// ParsePath compiles a path selector. A malformed selector is an
// *rpc.Error with code BAD_PATH saying where it went wrong.
func ParsePath(s string) (Path, error) {
	if s == "" || s == "." {
		return Path{}, nil
	}
	// One allocation: every step starts with "." or "[", so their count
	// bounds the number of steps.
	steps := make([]step, 0, strings.Count(s, ".")+strings.Count(s, "["))
	for i := 0; i < len(s); {
		st, next, err := nextStep(s, i)
		if err != nil {
			return Path{}, err
		}
		steps = append(steps, st)
		i = next
	}
	return Path{steps: steps}, nil
}

// nextStep parses the step starting at s[i] and returns it and the offset
// after it.
func nextStep(s string, i int) (step, int, error) {
	switch s[i] {
	case '.':
		i++
		if i == len(s) {
			return step{}, 0, badPathSyntax(s, i, `"." must be followed by a field name, a quoted name or "["`)
		}
		switch c := s[i]; {
		case c == '"':
			name, n, err := parseQuoted(s, i)
			if err != nil {
				return step{}, 0, err
			}
			return step{name: name, field: true}, i + n, nil
		case c == '[':
			// ".[0]" reads as "[0]", the way jq users write it.
			if i != 1 {
				return step{}, 0, badPathSyntax(s, i, `".[" is only allowed at the start; write [i] directly after a step`)
			}
			return bracketStep(s, i)
		}
		j := i
		for j < len(s) {
			if c := s[j]; c < utf8.RuneSelf {
				if c == '_' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' && j > i {
					j++
					continue
				}
				break
			}
			r, size := utf8.DecodeRuneInString(s[j:])
			if !isNameRune(r) || j == i && !isNameStart(r) {
				break
			}
			j += size
		}
		if j == i {
			if r, _ := utf8.DecodeRuneInString(s[i:]); unicode.IsDigit(r) {
				return step{}, 0, badPathSyntax(s, i, `a field name cannot start with a digit: use [N] for an index or ."N" for a field named N`)
			}
			return step{}, 0, badPathSyntax(s, i, `expected a field name after "."; quote names with other characters: ."a b" or ["a b"]`)
		}
		return step{name: s[i:j], field: true}, j, nil
	case '[':
		return bracketStep(s, i)
	}
	return step{}, 0, badPathSyntax(s, i, `expected "." or "[" (paths look like .rows[0].name; no operators, calls or spaces)`)
}

// bracketStep parses ["name"] or [N] starting at the "[" at s[i].
func bracketStep(s string, i int) (step, int, error) {
	i++
	if i == len(s) {
		return step{}, 0, badPathSyntax(s, i, `unclosed "["`)
	}
	if s[i] == '"' {
		name, n, err := parseQuoted(s, i)
		if err != nil {
			return step{}, 0, err
		}
		i += n
		if i == len(s) || s[i] != ']' {
			return step{}, 0, badPathSyntax(s, i, `expected "]" after the quoted name`)
		}
		return step{name: name, field: true}, i + 1, nil
	}
	j := i
	if s[j] == '-' {
		j++
	}
	k := j
	for k < len(s) && s[k] >= '0' && s[k] <= '9' {
		k++
	}
	if k == j {
		return step{}, 0, badPathSyntax(s, i, `expected an integer index or a quoted name inside [...]: [3], [-1], ["a b"]`)
	}
	if k == len(s) || s[k] != ']' {
		return step{}, 0, badPathSyntax(s, k, `expected "]" to close the index`)
	}
	n, err := strconv.Atoi(s[i:k])
	if err != nil {
		return step{}, 0, badPathSyntax(s, i, "index "+s[i:k]+" is out of range")
	}
	return step{index: n}, k + 1, nil
}

func isNameStart(r rune) bool { return r == '_' || unicode.IsLetter(r) }
func isNameRune(r rune) bool  { return r == '_' || unicode.IsLetter(r) || unicode.IsDigit(r) }

// parseQuoted reads the JSON string literal starting at s[i] and returns it
// decoded and the number of bytes it spans.
func parseQuoted(s string, i int) (string, int, error) {
	j := i + 1
	for j < len(s) {
		switch s[j] {
		case '\\':
			j += 2
			continue
		case '"':
			var name string
			if err := json.Unmarshal([]byte(s[i:j+1]), &name); err != nil {
				return "", 0, badPathSyntax(s, i, "the quoted name is not a valid JSON string")
			}
			return name, j + 1 - i, nil
		}
		j++
	}
	return "", 0, badPathSyntax(s, i, "unterminated quoted name")
}

func badPathSyntax(s string, at int, msg string) error {
	return rpc.Errorf(rpc.BadPath, "malformed path %q at byte %d: %s", s, at, msg)
}

// MustParsePath is ParsePath for paths written in code; it panics on error.
func MustParsePath(s string) Path {
	p, err := ParsePath(s)
	if err != nil {
		panic(err)
	}
	return p
}

// Len is the number of steps; 0 for the identity.
func (p Path) Len() int { return len(p.steps) }

// IsIdentity reports whether p selects the whole value.
func (p Path) IsIdentity() bool { return len(p.steps) == 0 }

// Field returns p extended by a field step.
func (p Path) Field(name string) Path {
	return Path{steps: append(p.steps[:len(p.steps):len(p.steps)], step{name: name, field: true})}
}

// Index returns p extended by an index step (negative counts from the end).
func (p Path) Index(i int) Path {
	return Path{steps: append(p.steps[:len(p.steps):len(p.steps)], step{index: i})}
}

// Join returns p followed by q.
func (p Path) Join(q Path) Path {
	if len(q.steps) == 0 {
		return p
	}
	if len(p.steps) == 0 {
		return q
	}
	steps := make([]step, 0, len(p.steps)+len(q.steps))
	return Path{steps: append(append(steps, p.steps...), q.steps...)}
}

// FirstIndex reports the first step when it is an index.
func (p Path) FirstIndex() (int, bool) {
	if len(p.steps) == 0 || p.steps[0].field {
		return 0, false
	}
	return p.steps[0].index, true
}

// FirstField reports the first step when it is a field.
func (p Path) FirstField() (string, bool) {
	if len(p.steps) == 0 || !p.steps[0].field {
		return "", false
	}
	return p.steps[0].name, true
}

// Rest returns p without its first step (the identity stays itself).
func (p Path) Rest() Path {
	if len(p.steps) == 0 {
		return p
	}
	return Path{steps: p.steps[1:]}
}

// WithFirstIndex returns p with its first step, which must be an index,
// replaced by i. It lets a renderer rebase an index taken inside a slice.
func (p Path) WithFirstIndex(i int) Path {
	if len(p.steps) == 0 || p.steps[0].field {
		return p
	}
	steps := append([]step(nil), p.steps...)
	steps[0].index = i
	return Path{steps: steps}
}

// String returns the canonical text of p, which ParsePath reads back to an
// equal Path: "." for the identity, bare names where the grammar allows,
// JSON-quoted names elsewhere.
func (p Path) String() string {
	if len(p.steps) == 0 {
		return "."
	}
	return string(p.AppendText(nil))
}

// AppendText appends the canonical text of p (see [Path.String]).
func (p Path) AppendText(dst []byte) []byte {
	if len(p.steps) == 0 {
		return append(dst, '.')
	}
	for _, st := range p.steps {
		if !st.field {
			dst = append(dst, '[')
			dst = strconv.AppendInt(dst, int64(st.index), 10)
			dst = append(dst, ']')
			continue
		}
		dst = append(dst, '.')
		if isPlainName(st.name) {
			dst = append(dst, st.name...)
		} else {
			dst = AppendQuoted(dst, st.name)
		}
	}
	return dst
}

func isPlainName(s string) bool {
	if s == "" || !utf8.ValidString(s) {
		return false
	}
	for i, r := range s {
		if i == 0 && !isNameStart(r) || !isNameRune(r) {
			return false
		}
	}
	return true
}

// Select parses path and evaluates it on v. It allocates nothing for
// plain selectors like [i].name: the text is checked once, then evaluated
// step by step without building a [Path].
func Select(v Value, path string) (Value, error) {
	if path == "" || path == "." {
		return v, nil
	}
	// The whole selector is checked first, so a malformed one is reported
	// as such even when an earlier step would not resolve.
	for i := 0; i < len(path); {
		_, next, err := nextStep(path, i)
		if err != nil {
			return nil, err
		}
		i = next
	}
	c := cursor{cur: v, row: -1}
	for i := 0; i < len(path); {
		st, next, _ := nextStep(path, i)
		if err := c.step(st, where{text: path, end: i}); err != nil {
			return nil, err
		}
		i = next
	}
	return c.result(), nil
}

// Eval applies p to v. Errors are *rpc.Error with code BAD_PATH naming the
// failing step, where it was taken, and what was there instead.
func (p Path) Eval(v Value) (Value, error) {
	c := cursor{cur: v, row: -1}
	for n, st := range p.steps {
		if err := c.step(st, where{steps: p.steps, end: n}); err != nil {
			return nil, err
		}
	}
	return c.result(), nil
}

// where locates a step for an error message: the steps before it, either
// of a compiled path or of selector text. It is only rendered on error.
type where struct {
	steps []step
	text  string
	end   int // steps of path, or bytes of text
}

func (w where) String() string {
	if w.steps != nil {
		return Path{steps: w.steps[:w.end]}.String()
	}
	p, err := ParsePath(w.text[:w.end])
	if err != nil { // cannot happen: end is a step boundary of checked text
		return w.text[:w.end]
	}
	return p.String()
}

// cursor walks a value one step at a time. A table row is kept as (table,
// row) until a step needs the whole record, so [i].name costs one cell
// lookup, not a row copy.
type cursor struct {
	cur Value
	tbl *Table
	row int
}

func (c *cursor) result() Value {
	if c.row >= 0 {
		return c.tbl.Row(c.row)
	}
	return c.cur
}

func (c *cursor) step(st step, at where) error {
	if c.row >= 0 {
		tbl := c.tbl
		j := -1
		if st.field {
			j = tbl.Col(st.name)
		}
		if j < 0 {
			return stepError(st, at, Shape{Kind: KindRecord, Names: tbl.Cols})
		}
		c.cur = cell(tbl.Rows[c.row], j)
		if c.cur == nil {
			c.cur = Null{}
		}
		c.tbl, c.row = nil, -1
		return nil
	}
	switch x := c.cur.(type) {
	case *Record:
		fv, ok := Value(nil), false
		if st.field {
			fv, ok = x.Get(st.name)
		}
		if !ok {
			return stepError(st, at, Shape{Kind: KindRecord, Names: x.Names()})
		}
		c.cur = fv
	case List:
		i, ok := resolveIndex(st.index, len(x))
		if st.field || !ok {
			return stepError(st, at, Shape{Kind: KindList, Len: len(x)})
		}
		c.cur = x[i]
		if c.cur == nil {
			c.cur = Null{}
		}
	case *Table:
		if st.field {
			j := x.Col(st.name)
			if j < 0 {
				return stepError(st, at, Shape{Kind: KindTable, Len: len(x.Rows), Names: x.Cols})
			}
			c.cur = x.column(j)
			return nil
		}
		i, ok := resolveIndex(st.index, len(x.Rows))
		if !ok {
			return stepError(st, at, Shape{Kind: KindTable, Len: len(x.Rows), Names: x.Cols})
		}
		c.tbl, c.row = x, i
	default:
		k := KindNull
		if c.cur != nil {
			k = c.cur.Kind()
		}
		return stepError(st, at, Shape{Kind: k})
	}
	return nil
}

// Shape is what Eval's errors tell of a value a step could not be taken
// on: its kind, a list's items or a table's rows, a record's fields or a
// table's columns. Readers that walk a value without holding it (a
// spilled value's index) give the same errors with it ([Path.StepError]).
type Shape struct {
	Kind  Kind
	Len   int
	Names []string
}

// StepError is the error Eval gives when it cannot take step n of p on a
// value of shape s, or nil when the step can be taken.
func (p Path) StepError(n int, s Shape) error {
	return stepError(p.steps[n], where{steps: p.steps, end: n}, s)
}

// EvalFrom applies the steps of p from the n-th on to v, which the first
// n steps reached; errors name the failing step in p, as Eval's do.
func (p Path) EvalFrom(v Value, n int) (Value, error) {
	c := cursor{cur: v, row: -1}
	for i := n; i < len(p.steps); i++ {
		if err := c.step(p.steps[i], where{steps: p.steps, end: i}); err != nil {
			return nil, err
		}
	}
	return c.result(), nil
}

func stepError(st step, at where, s Shape) error {
	switch s.Kind {
	case KindRecord:
		if !st.field {
			return badPath("cannot index a record with [%d] at %s: use .name; fields: %s", st.index, at, nameList(s.Names))
		}
		if slices.Contains(s.Names, st.name) {
			return nil
		}
		return badPath("field %q not found at %s; fields: %s", st.name, at, nameList(s.Names))
	case KindList:
		if st.field {
			return badPath("cannot select field %q at %s: it is a list of %d items; use [i] to pick one", st.name, at, s.Len)
		}
		if _, ok := resolveIndex(st.index, s.Len); !ok {
			return badPath("index %d out of range at %s: the list has %d items%s", st.index, at, s.Len, validRange(s.Len))
		}
		return nil
	case KindTable:
		if st.field {
			if slices.Contains(s.Names, st.name) {
				return nil
			}
			return badPath("column %q not found at %s; columns: %s", st.name, at, nameList(s.Names))
		}
		if _, ok := resolveIndex(st.index, s.Len); !ok {
			return badPath("row index %d out of range at %s: the table has %d rows%s", st.index, at, s.Len, validRange(s.Len))
		}
		return nil
	}
	what := "field " + strconv.Quote(st.name)
	if !st.field {
		what = "index [" + strconv.Itoa(st.index) + "]"
	}
	hint := "paths step into records, lists and tables only"
	if k := s.Kind.String(); k == "str" || k == "bytes" {
		hint = "use slice=a..b to take part of a " + k
	}
	return badPath("cannot take %s at %s: it is %s, a scalar; %s", what, at, s.Kind.Article(), hint)
}

func articleOf(v Value) string {
	if v == nil {
		return "a null"
	}
	return v.Kind().Article()
}

// column returns column j as a list (the .col step on a table).
func (t *Table) column(j int) List {
	out := make(List, len(t.Rows))
	for i, r := range t.Rows {
		if j < len(r) && r[j] != nil {
			out[i] = r[j]
		} else {
			out[i] = Null{}
		}
	}
	return out
}

func resolveIndex(i, n int) (int, bool) {
	if i < 0 {
		i += n
	}
	return i, i >= 0 && i < n
}

func validRange(n int) string {
	if n == 0 {
		return ""
	}
	return " (valid: 0.." + strconv.Itoa(n-1) + " or -" + strconv.Itoa(n) + "..-1)"
}

func badPath(format string, args ...any) error {
	return rpc.Errorf(rpc.BadPath, format, args...)
}

// nameList lists names for an error message, shortened when there are many.
func nameList(names []string) string {
	const show = 20
	if len(names) == 0 {
		return "(none)"
	}
	var b strings.Builder
	for i, n := range names {
		if i == show {
			b.WriteString(", … (" + strconv.Itoa(len(names)-show) + " more)")
			break
		}
		if i > 0 {
			b.WriteString(", ")
		}
		if isPlainName(n) {
			b.WriteString(n)
		} else {
			b.Write(AppendQuoted(nil, n))
		}
	}
	return b.String()
}
