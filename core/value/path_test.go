package value

import (
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/shoal-sh/shoal/core/rpc"
)

var pathCases = []struct {
	path string
	want Value  // nil when an error is expected
	err  string // substring of the BAD_PATH message
	text string // canonical String(), when it differs from path
}{
	{path: ".", want: sample()},
	{path: "", want: sample(), text: "."},
	{path: ".n", want: Int(-42)},
	{path: ".name", want: Str("shoal <&> \"q\"\n\t\u2028é")},
	{path: `."a b"`, want: NewRecord()},
	{path: `["a b"]`, want: NewRecord(), text: `."a b"`},
	{path: `["n"]`, want: Int(-42), text: `.n`},
	{path: `."n"`, want: Int(-42), text: `.n`},
	{path: ".items[0]", want: Int(1)},
	{path: ".items[-1]", want: List{}},
	{path: ".items[-3]", want: Int(1)},
	{path: ".rows[0].name", want: Str("a.txt")},
	{path: ".rows[-1].size", want: Int(7)},
	{path: `.rows[1]["size"]`, want: Int(7), text: ".rows[1].size"},
	{path: ".rows[0]", want: NewRecord(F("name", Str("a.txt")), F("size", Int(12)))},
	{path: ".rows.size", want: List{Int(12), Int(7)}},
	{path: ".rows.name[1]", want: Str("b.txt")},
	{path: ".items[1]", want: Str("two")},

	{path: ".nme", err: `field "nme" not found at .; fields: null, yes, n, big, pi, name, raw, items, "a b", rows`},
	{path: ".rows[0].nme", err: `field "nme" not found at .rows[0]; fields: name, size`},
	{path: ".rows.nme", err: `column "nme" not found at .rows; columns: name, size`},
	{path: ".rows[2]", err: `row index 2 out of range at .rows: the table has 2 rows (valid: 0..1 or -2..-1)`},
	{path: ".items[3]", err: `index 3 out of range at .items: the list has 3 items (valid: 0..2 or -3..-1)`},
	{path: ".items[-4]", err: `index -4 out of range at .items: the list has 3 items`},
	{path: ".items[2][0]", err: `index 0 out of range at .items[2]: the list has 0 items`},
	{path: ".items.x", err: `cannot select field "x" at .items: it is a list of 3 items; use [i]`},
	{path: ".n.x", err: `cannot take field "x" at .n: it is an int, a scalar`},
	{path: ".name[0]", err: `cannot take index [0] at .name: it is a str, a scalar; use slice=a..b`},
	{path: "[0]", err: `cannot index a record with [0] at .: use .name`},
	{path: ".rows[0][1]", err: `cannot index a record with [1] at .rows[0]: use .name; fields: name, size`},

	{path: "name", err: `malformed path "name" at byte 0: expected "." or "["`},
	{path: "..", err: `at byte 1: expected a field name after "."`},
	{path: ".a.", err: `at byte 3: "." must be followed by`},
	{path: ".0", err: `a field name cannot start with a digit`},
	{path: ".a-b", err: `at byte 2: expected "." or "["`},
	{path: ".a b", err: `at byte 2`},
	{path: "[", err: `unclosed "["`},
	{path: "[x]", err: `expected an integer index or a quoted name`},
	{path: "[1", err: `expected "]" to close the index`},
	{path: "[1.5]", err: `expected "]" to close the index`},
	{path: `["a"`, err: `expected "]" after the quoted name`},
	{path: `."a`, err: `unterminated quoted name`},
	{path: `."\q"`, err: `not a valid JSON string`},
	{path: "[99999999999999999999]", err: `out of range`},
	{path: ".a.[0]", err: `".[" is only allowed at the start`},
	{path: ".a|.b", err: `expected "." or "["`},
	{path: ".a()", err: `expected "." or "["`},
	{path: "$x", err: `expected "." or "["`},
}

func TestPath(t *testing.T) {
	v := sample()
	for _, tc := range pathCases {
		t.Run(tc.path, func(t *testing.T) {
			got, err := Select(v, tc.path)
			if tc.want == nil {
				var re *rpc.Error
				if !errors.As(err, &re) || re.Code != rpc.BadPath {
					t.Fatalf("want BAD_PATH, got %v (value %#v)", err, got)
				}
				if !strings.Contains(re.Message, tc.err) {
					t.Fatalf("message %q\ndoes not contain %q", re.Message, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !Equal(got, tc.want) {
				t.Fatalf("got %s want %s", AppendJSON(nil, got), AppendJSON(nil, tc.want))
			}
			p := MustParsePath(tc.path)
			text := tc.text
			if text == "" {
				text = tc.path
			}
			if p.String() != text {
				t.Fatalf("String() = %q, want %q", p.String(), text)
			}
			q, err := ParsePath(p.String())
			if err != nil || q.String() != p.String() {
				t.Fatalf("canonical text does not parse back: %v", err)
			}
		})
	}
}

func TestPathJQStyleIndex(t *testing.T) {
	got, err := Select(List{Int(5), Int(6)}, ".[1]")
	if err != nil || !Equal(got, Int(6)) {
		t.Fatalf(".[1]: %v %v", got, err)
	}
}

func TestPathBuilders(t *testing.T) {
	p := Path{}.Field("rows").Index(-1).Field("a b")
	if p.String() != `.rows[-1]."a b"` {
		t.Fatalf("built %s", p)
	}
	// Extending must not alias: two children of one parent stay distinct.
	parent := Path{}.Field("x")
	a, b := parent.Index(1), parent.Index(2)
	if a.String() != ".x[1]" || b.String() != ".x[2]" {
		t.Fatalf("aliasing: %s %s", a, b)
	}
	if got := MustParsePath("[3].x").WithFirstIndex(10).String(); got != "[10].x" {
		t.Fatalf("WithFirstIndex: %s", got)
	}
	if got := MustParsePath(".a").Join(MustParsePath("[0]")).String(); got != ".a[0]" {
		t.Fatalf("Join: %s", got)
	}
}

func FuzzParsePath(f *testing.F) {
	for _, tc := range pathCases {
		f.Add(tc.path)
	}
	v := sample()
	f.Fuzz(func(t *testing.T, s string) {
		p, err := ParsePath(s)
		if err != nil {
			if rpc.CodeOf(err) != rpc.BadPath {
				t.Fatalf("ParsePath(%q): not BAD_PATH: %v", s, err)
			}
			return
		}
		q, err := ParsePath(p.String())
		if err != nil || q.String() != p.String() {
			t.Fatalf("canonical %q of %q does not parse back: %v", p.String(), s, err)
		}
		if _, err := p.Eval(v); err != nil && rpc.CodeOf(err) != rpc.BadPath {
			t.Fatalf("Eval(%q): not BAD_PATH: %v", s, err)
		}
	})
}

// bigTable is a 1M-row table and the same rows as Go maps, built once.
var bigTable = sync.OnceValues(func() (*Table, []map[string]Value) {
	const n = 1_000_000
	t := &Table{Cols: []string{"id", "name", "size"}, Rows: make([][]Value, n)}
	maps := make([]map[string]Value, n)
	cells := make([]Value, 3*n)
	for i := range n {
		row := cells[3*i : 3*i+3 : 3*i+3]
		row[0], row[1], row[2] = Int(i), Str(fmt.Sprintf("file-%d", i)), Int(i*7)
		t.Rows[i] = row
		maps[i] = map[string]Value{"id": row[0], "name": row[1], "size": row[2]}
	}
	return t, maps
})

// BenchmarkRowField compares [i].name on a 1M-row table with a plain Go
// slice index and map lookup (the target is within 3x). All three visit the
// same 4096 rows spread over the table, so caches favour none of them.
func BenchmarkRowField(b *testing.B) {
	tbl, maps := bigTable()
	const n = 4096
	rows := make([]int, n)
	texts := make([]string, n)
	paths := make([]Path, n)
	for k := range n {
		rows[k] = k * 7919 % len(maps) // a prime stride visits rows all over
		texts[k] = fmt.Sprintf("[%d].name", rows[k])
		paths[k] = MustParsePath(texts[k])
	}
	perOp := func(b *testing.B) float64 { return float64(b.Elapsed().Nanoseconds()) / float64(b.N) }
	var baseline float64
	ratio := func(b *testing.B) {
		if baseline > 0 {
			b.ReportMetric(perOp(b)/baseline, "x-baseline")
		}
	}
	b.Run("baseline-map", func(b *testing.B) {
		var sink Value
		k := 0
		for b.Loop() {
			sink = maps[rows[k%n]]["name"]
			k++
		}
		_ = sink
		baseline = perOp(b)
	})
	b.Run("compiled", func(b *testing.B) {
		var sink Value
		k := 0
		for b.Loop() {
			v, err := paths[k%n].Eval(tbl)
			if err != nil {
				b.Fatal(err)
			}
			sink = v
			k++
		}
		_ = sink
		ratio(b)
	})
	b.Run("parse+eval", func(b *testing.B) {
		var sink Value
		k := 0
		for b.Loop() {
			v, err := Select(tbl, texts[k%n])
			if err != nil {
				b.Fatal(err)
			}
			sink = v
			k++
		}
		_ = sink
		ratio(b)
	})
}
