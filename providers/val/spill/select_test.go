package spill

import (
	"bytes"
	"fmt"
	"strings"
	"testing"

	"github.com/shoal-sh/shoal/core/render"
	"github.com/shoal-sh/shoal/core/rpc"
	"github.com/shoal-sh/shoal/core/value"
)

// shapes are values of many shapes whose encoding spans several parts
// at the part sizes selectParts tries.
func shapes() map[string]value.Value {
	tv := testValues()
	rowsOf := func(n, cols int) *value.Table {
		t := &value.Table{Rows: make([][]value.Value, n)}
		for j := range cols {
			t.Cols = append(t.Cols, fmt.Sprintf("c%d", j))
		}
		for i := range t.Rows {
			for j := range cols {
				if (i+j)%7 == 3 {
					break // a short row
				}
				t.Rows[i] = append(t.Rows[i], value.Str(fmt.Sprintf("r%d.%d", i, j)))
			}
		}
		return t
	}
	ints := func(n int) value.List {
		l := make(value.List, n)
		for i := range l {
			l[i] = value.Int(i * 1000003)
		}
		return l
	}
	mixed := value.List{}
	for i := range 400 {
		switch i % 9 {
		case 0:
			mixed = append(mixed, value.Null{})
		case 1:
			mixed = append(mixed, value.Bool(i%2 == 0))
		case 2:
			mixed = append(mixed, value.Float(float64(i)/7))
		case 3:
			mixed = append(mixed, value.Bytes(bytes.Repeat([]byte{byte(i), 0xff, 0}, i)))
		case 4:
			mixed = append(mixed, value.Str("ctl \x01\x1f \u2028\u2029 \"q\" \\ \t\r\n é 𝄞 "+strings.Repeat("x", i)))
		case 5:
			mixed = append(mixed, value.List{value.Int(i), value.List{value.Str("deep"), value.List{}}})
		case 6:
			mixed = append(mixed, value.NewRecord(value.F("a", value.Int(i)), value.F("b c", value.Str("✓")), value.F("", value.Null{})))
		case 7:
			mixed = append(mixed, rowsOf(i%13, 3))
		default:
			mixed = append(mixed, value.Str(strings.Repeat("ü", i*10)))
		}
	}
	deep := value.Value(value.Int(1))
	for range 30 {
		deep = value.List{deep, value.Str("level")}
	}
	deepList := make(value.List, 50)
	for i := range deepList {
		deepList[i] = deep
	}
	bigItems := make(value.List, 12)
	for i := range bigItems {
		bigItems[i] = value.Str(strings.Repeat(fmt.Sprintf("item %d ✓ ", i), 2000))
	}
	str := func(n int, unit string) value.Str {
		s := strings.Repeat(unit, n/len(unit)+1)
		for len(s) > n {
			s = s[:len(s)-1]
		}
		for !strings.HasSuffix(s, unit[len(unit)-1:]) && len(s) > 0 {
			s = s[:len(s)-1] // end on a whole character
		}
		return value.Str(s)
	}
	many := []value.Field{value.F("out", tv["str"])}
	for i := range 130 {
		many = append(many, value.F(fmt.Sprintf("f%03d", i), value.Int(i)))
	}
	return map[string]value.Value{
		"table":          tv["table"],
		"list":           tv["list"],
		"str":            tv["str"],
		"table-99":       rowsOf(99, 4),
		"table-100":      rowsOf(100, 4),
		"table-101":      rowsOf(101, 4),
		"table-wide":     rowsOf(300, 120),
		"list-100":       ints(100),
		"list-101":       ints(101),
		"list-5000":      ints(5000),
		"mixed":          mixed,
		"deep":           deepList,
		"big-items":      bigItems,
		"str-ascii-64k":  str(1<<16, "abcdefgh"),
		"str-64k+1":      str(1<<16+1, "abcdefgh"),
		"str-64k-1":      str(1<<16-1, "abcdefgh"),
		"str-multibyte":  str(1<<16+5, "é✓𝄞"),
		"str-escapes":    str(80000, "\"\\\n\t\x01\u2028 "),
		"str-limit-edge": str(render.TextLimit-420, "0123456789"),
		// Escape sequences take input and give no text: a render of this
		// reads past its first prefix.
		"str-ansi": value.Str(strings.Repeat("\x1b[31m\x1b[0m", 30000) + strings.Repeat("shown\r\n", 20000)),
		"str-crlf": str(150000, "ab\r\n"),
		"str-200k": str(200000, "line ünïcødé\n"),
		"record": value.NewRecord(
			value.F("exit", value.Int(0)),
			value.F("stdout", tv["str"]),
			value.F("stderr", value.Str("")),
			value.F("rows", tv["table"]),
			value.F("inner", value.NewRecord(value.F("items", tv["list"]), value.F("n", value.Int(3)))),
		),
		"record-many": value.NewRecord(many...),
		"record-first-small": value.NewRecord(
			value.F("note", value.Str(strings.Repeat("n", 3000))),
			value.F("big", str(300000, "abc ")),
		),
	}
}

var (
	selectBudgets = []render.Budget{
		{},
		{MaxRows: 5, MaxItems: 3, MaxString: 10, MaxBytes: 4},
		{MaxDepth: 1},
		{MaxDepth: 3, MaxFields: 1},
		{MaxRows: 1 << 30, MaxItems: 1 << 30, MaxString: 1 << 30, MaxBytes: 1 << 30, MaxFields: 1 << 30},
		{MaxRows: 1, MaxItems: 1, MaxString: 1, MaxBytes: 1, MaxFields: 1, MaxDepth: 1},
	}
	selectLimits = []int{render.MinLimit, 20000, render.TextLimit}
)

// TestSparseElisionIsWholeElision: the elided preview of a spilled value
// read part by part (Select, then render.JSONSparse) is byte for byte the
// preview of the whole value decoded (render.JSONAt), its human text
// (render.RenderSparse) the whole value's (render.RenderAt), and its raw
// form (render.RawSparse) the whole value's (render.Raw), for many shapes,
// part sizes, budgets and limits, and for what paths and slices select
// in them; a selection that fails gives the whole value's error.
func TestSparseElisionIsWholeElision(t *testing.T) {
	old := maxSpan
	maxSpan = 3000 // slices wider than this are given Sparse
	defer func() { maxSpan = old }()
	s := testStore(t)
	paths := []string{"", ".stdout", ".stderr", ".rows", ".rows.name", ".rows.name[7]", ".rows[3].name", ".inner", ".inner.items",
		".inner.items[2].tag", "[0]", "[-1]", "[5].name", ".name", ".name[4]", ".c1", ".c1[50]", "[99].c2", ".nope", "[999999]",
		"[0][0]", "[3].tag.x", ".out", ".big", ".note", ".f129", "[4]", "[7].c0"}
	slices := []string{"", "0..10", "-5..", "-7..-3", "3..-2", "5..", "2990..", "100000..", "-100000..-99990", "17..4000"}
	for name, v := range shapes() {
		for i, partSize := range []int{256, 1500, PartSize} {
			e, err := Encode(v, partSize)
			if err != nil {
				t.Fatal(err)
			}
			if e.Index == nil {
				continue
			}
			cache := int64(4 << 20)
			if i == 1 {
				cache = 40 << 10 // small: parts are evicted and read again
			}
			r := NewReader(s, cache)
			hash, _, err := r.PutEncoded(e)
			if err != nil {
				t.Fatal(err)
			}
			for _, ps := range paths {
				for _, ss := range slices {
					checkSelect(t, r, hash, v, fmt.Sprintf("%s/%d", name, partSize), ps, ss)
				}
			}
		}
	}
	if sparseChecks < 100 {
		t.Fatalf("only %d selections were Sparse", sparseChecks)
	}
	t.Logf("%d Sparse selections compared", sparseChecks)
}

var sparseChecks int

func checkSelect(t *testing.T, r *Reader, hash string, v value.Value, name, ps, ss string) {
	t.Helper()
	var p value.Path
	var sl value.Slice
	var err error
	if ps != "" {
		if p, err = value.ParsePath(ps); err != nil {
			t.Fatal(err)
		}
	}
	if ss != "" {
		if sl, err = value.ParseSlice(ss); err != nil {
			t.Fatal(err)
		}
	}
	what := fmt.Sprintf("%s path %q slice %q", name, ps, ss)
	want, wantErr := p.Eval(v)
	wantOff := 0
	if wantErr == nil && ss != "" {
		want, wantOff, wantErr = value.ApplySliceAt(want, sl)
	}
	got, ok, err := r.Select(hash, p, ps != "", sl, ss != "")
	if wantErr != nil {
		if err == nil || rpc.AsError(err).Message != rpc.AsError(wantErr).Message {
			t.Fatalf("%s: error %v, want %v", what, err, wantErr)
		}
		return
	}
	if err != nil || !ok {
		t.Fatalf("%s: ok %v err %v", what, ok, err)
	}
	if got.Offset != wantOff {
		t.Fatalf("%s: offset %d, want %d", what, got.Offset, wantOff)
	}
	if got.Sparse == nil {
		if !value.Equal(got.Value, want) {
			t.Fatalf("%s: value differs from the whole value's", what)
		}
		return
	}
	sparseChecks++
	// Rendered first: the raw reads below would fill the cache with every
	// part, and a Sparse string gives more than it was asked for of what
	// is cached.
	o := render.Origin{Path: p, Offset: wantOff}
	for _, limit := range selectLimits {
		wt := render.RenderAt(want, limit, o)
		gt, err := render.RenderSparse(got.Sparse, limit, o)
		if err != nil || gt != wt {
			t.Fatalf("%s render limit %d: differs from the whole value's (%v)\n got %.600q\nwant %.600q", what, limit, err, gt, wt)
		}
	}
	for _, ceiling := range []int64{1 << 10, 50_000, 1 << 22} {
		wt, wd, wi, werr := render.Raw(want, ceiling)
		gt, gd, gi, gerr := render.RawSparse(got.Sparse, ceiling)
		if (werr == nil) != (gerr == nil) || (werr != nil && werr.Error() != gerr.Error()) || gt != wt || !bytes.Equal(gd, wd) || gi != wi {
			t.Fatalf("%s raw ceiling %d: differs from the whole value's (error %v, want %v)", what, ceiling, gerr, werr)
		}
	}
	for _, b := range selectBudgets {
		for _, limit := range selectLimits {
			ws, wt, we, werr := render.JSONAt(want, b, limit, o)
			gs, gt, ge, gerr := render.JSONSparse(got.Sparse, b, limit, o)
			if (werr == nil) != (gerr == nil) || (werr != nil && werr.Error() != gerr.Error()) {
				t.Fatalf("%s budget %+v limit %d: error %v, want %v", what, b, limit, gerr, werr)
			}
			if !bytes.Equal(gs, ws) || gt != wt || ge != we {
				t.Fatalf("%s budget %+v limit %d: preview differs (elided %v, want %v)\n got %.600s\nwant %.600s", what, b, limit, ge, we, gs, ws)
			}
		}
	}
}

// TestSelectIndexFormat1: an index written before string parts kept
// their decoded size still answers paths and slices from parts; a whole
// string of one is left to the whole value.
func TestSelectIndexFormat1(t *testing.T) {
	v := value.NewRecord(value.F("stdout", testValues()["str"]), value.F("rows", testValues()["table"]))
	e, err := Encode(v, 4096)
	if err != nil {
		t.Fatal(err)
	}
	s := testStore(t)
	r := NewReader(s, 0)
	hash, _, err := r.PutEncoded(e)
	if err != nil {
		t.Fatal(err)
	}
	b, err := e.Index.marshal(true)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.PutIndex(hash, b); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		path, slice string
		ok, sparse  bool
	}{
		{".stdout", "10..20", true, false},
		{".rows[7].name", "", true, false},
		{".rows", "", true, true},
		{".stdout", "", false, false},
		{"", "", false, false},
	} {
		p, _ := value.ParsePath(tc.path)
		var sl value.Slice
		if tc.slice != "" {
			sl, _ = value.ParseSlice(tc.slice)
		}
		got, ok, err := r.Select(hash, p, tc.path != "", sl, tc.slice != "")
		if err != nil || ok != tc.ok || (got.Sparse != nil) != tc.sparse {
			t.Fatalf("%s %s: ok %v sparse %v err %v", tc.path, tc.slice, ok, got.Sparse != nil, err)
		}
		if ok && !tc.sparse {
			want, _ := selectWhole(v, p, sl, tc.slice != "")
			if !value.Equal(got.Value, want) {
				t.Fatalf("%s %s: differs from the whole value's", tc.path, tc.slice)
			}
		}
	}
}
