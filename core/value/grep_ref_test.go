package value

import (
	"math/rand/v2"
	"strings"
	"testing"
)

// referenceApply is the grep as it was before it streamed: every unit
// kept, then the page picked. The streaming one must answer the same.
func (g Grep) referenceApply(v Value, sl *Slice) (Value, error) {
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

// TestGrepStreamsAsBefore: for random strings, lists and tables, patterns,
// contexts and pages (from the start and from the end), Apply and
// ApplyPieces over random cuts of the value answer what the grep that
// kept every unit answered.
func TestGrepStreamsAsBefore(t *testing.T) {
	rnd := rand.New(rand.NewPCG(7, 8))
	words := []string{"ok", "FAIL", "", "x", "fail ok", "é✓"}
	for round := range 400 {
		n := rnd.IntN(40)
		var sb strings.Builder
		items := List{}
		tbl := &Table{Cols: []string{"a", "b"}, Rows: [][]Value{}}
		for i := range n {
			w := words[rnd.IntN(len(words))]
			sb.WriteString(w)
			if i < n-1 || rnd.IntN(2) == 0 {
				sb.WriteByte('\n')
			}
			items = append(items, Str(w))
			tbl.Rows = append(tbl.Rows, []Value{Int(i), Str(w)})
		}
		pattern := []string{"ok", "FAIL", "^", "^$", "zzz", "(?i)fail"}[rnd.IntN(6)]
		g, err := ParseGrep(pattern, rnd.IntN(4))
		if err != nil {
			t.Fatal(err)
		}
		var sl *Slice
		switch rnd.IntN(4) {
		case 1:
			a := rnd.IntN(6)
			sl = &Slice{Start: a, End: a + rnd.IntN(6)}
		case 2:
			sl = &Slice{Start: -1 - rnd.IntN(6), End: OpenEnd}
		case 3:
			sl = &Slice{Start: rnd.IntN(4), End: OpenEnd}
		}
		for _, v := range []Value{Str(sb.String()), items, tbl} {
			want, err := g.referenceApply(v, sl)
			if err != nil {
				t.Fatal(err)
			}
			got, err := g.Apply(v, sl)
			if err != nil || !Equal(got, want) {
				t.Fatalf("round %d %T %q ctx %d page %v: Apply differs: %v", round, v, pattern, g.Context, sl, err)
			}
			pieces := func(yield func(Value) bool) error {
				switch x := v.(type) {
				case Str:
					for s := string(x); len(s) > 0; {
						k := min(len(s), 1+rnd.IntN(8))
						if !yield(Str(s[:k])) {
							return nil
						}
						s = s[k:]
					}
				case List:
					for l := x; len(l) > 0; {
						k := min(len(l), 1+rnd.IntN(5))
						if !yield(l[:k]) {
							return nil
						}
						l = l[k:]
					}
				case *Table:
					for r := x.Rows; len(r) > 0; {
						k := min(len(r), 1+rnd.IntN(5))
						if !yield(&Table{Cols: x.Cols, Rows: r[:k]}) {
							return nil
						}
						r = r[k:]
					}
				}
				return nil
			}
			got, err = g.ApplyPieces(v, pieces, sl)
			if err != nil || !Equal(got, want) {
				t.Fatalf("round %d %T %q ctx %d page %v: ApplyPieces differs: %v\n got %s\nwant %s", round, v, pattern, g.Context, sl, err, show(got), show(want))
			}
		}
	}
}

func show(v Value) string {
	b, _ := Marshal(v)
	return string(b)
}
