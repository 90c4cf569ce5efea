package value

import (
	"strings"
	"testing"

	"github.com/shoal-sh/shoal/core/rpc"
)

var parseSliceCases = []struct {
	in   string
	want Slice
	err  string
}{
	{in: "0..50", want: Slice{0, 50}},
	{in: "20..40", want: Slice{20, 40}},
	{in: "3..3", want: Slice{3, 3}},
	{in: "7..", want: Slice{7, OpenEnd}},
	{in: "0..", want: Slice{0, OpenEnd}},
	{in: "4..2", err: "start 4 is after end 2"},
	{in: "-3..", want: Slice{-3, OpenEnd}},
	{in: "-20..-10", want: Slice{-20, -10}},
	{in: "-1..2", want: Slice{-1, 2}},
	{in: "1..-2", want: Slice{1, -2}},
	{in: "-1..-3", err: "start -1 is after end -3"},
	{in: "--1..2", err: `the start "--1" is not an integer`},
	{in: "-..2", err: `the start "-" is not an integer`},
	{in: "..5", err: "the start is missing"},
	{in: "..", err: "the start is missing"},
	{in: "1...5", err: `the end ".5" is not`},
	{in: "5", err: "expected a..b"},
	{in: "", err: "expected a..b"},
	{in: "[0, 50]", err: "not as a JSON array"},
	{in: "0,50", err: "expected a..b"},
	{in: " 1..2", err: "not an integer"},
	{in: "+1..2", err: "not an integer"},
	{in: "1..99999999999999999999", err: "is too large"},
}

func TestParseSlice(t *testing.T) {
	for _, tc := range parseSliceCases {
		got, err := ParseSlice(tc.in)
		if tc.err != "" {
			if rpc.CodeOf(err) != rpc.BadSlice || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("ParseSlice(%q): want BAD_SLICE mentioning %q, got %v", tc.in, tc.err, err)
			}
			continue
		}
		if err != nil || got != tc.want {
			t.Errorf("ParseSlice(%q) = %v, %v; want %v", tc.in, got, err, tc.want)
			continue
		}
		if back, _ := ParseSlice(got.String()); back != got {
			t.Errorf("String() %q does not parse back", got.String())
		}
	}
}

func TestApplySlice(t *testing.T) {
	tbl := &Table{Cols: []string{"a"}, Rows: [][]Value{{Int(0)}, {Int(1)}, {Int(2)}}}
	cases := []struct {
		v    Value
		s    string
		want Value
		err  string
	}{
		{v: List{Int(0), Int(1), Int(2), Int(3)}, s: "1..3", want: List{Int(1), Int(2)}},
		{v: List{Int(0), Int(1)}, s: "1..100", want: List{Int(1)}},
		{v: List{Int(0), Int(1)}, s: "5..9", want: List{}},
		{v: List{Int(0), Int(1)}, s: "1..", want: List{Int(1)}},
		{v: tbl, s: "1..2", want: &Table{Cols: []string{"a"}, Rows: [][]Value{{Int(1)}}}},
		{v: tbl, s: "0..0", want: &Table{Cols: []string{"a"}, Rows: [][]Value{}}},
		{v: Bytes("hello"), s: "1..3", want: Bytes("el")},
		{v: Bytes("hello"), s: "3..", want: Bytes("lo")},
		{v: Str("héllo wörld"), s: "1..5", want: Str("éllo")},
		{v: Str("héllo"), s: "4..99", want: Str("o")},
		{v: Str("a\xffbc"), s: "1..3", want: Str("\xffb")},
		{v: Str("日本語"), s: "2..", want: Str("語")},
		{v: Str("abc"), s: "9..10", want: Str("")},
		{v: List{Int(0), Int(1), Int(2), Int(3)}, s: "-3..", want: List{Int(1), Int(2), Int(3)}},
		{v: List{Int(0), Int(1), Int(2), Int(3)}, s: "-3..-1", want: List{Int(1), Int(2)}},
		{v: List{Int(0), Int(1), Int(2), Int(3)}, s: "0..-1", want: List{Int(0), Int(1), Int(2)}},
		{v: List{Int(0), Int(1)}, s: "-50..", want: List{Int(0), Int(1)}},
		{v: List{Int(0), Int(1)}, s: "3..-1", want: List{}},
		{v: tbl, s: "-1..", want: &Table{Cols: []string{"a"}, Rows: [][]Value{{Int(2)}}}},
		{v: Bytes("hello"), s: "-2..", want: Bytes("lo")},
		{v: Str("héllo wörld"), s: "-5..", want: Str("wörld")},
		{v: Str("日本語"), s: "-2..-1", want: Str("本")},
		{v: Str("a\xffbc"), s: "-3..-1", want: Str("\xffb")},
		{v: NewRecord(F("a", Int(1))), s: "0..1", err: "cannot slice a record"},
		{v: Int(4), s: "0..1", err: "cannot slice an int"},
		{v: Null{}, s: "0..1", err: "cannot slice a null"},
	}
	for _, tc := range cases {
		sl, err := ParseSlice(tc.s)
		if err != nil {
			t.Fatal(err)
		}
		got, err := ApplySlice(tc.v, sl)
		if tc.err != "" {
			if rpc.CodeOf(err) != rpc.BadSlice || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("ApplySlice(%v, %s): want BAD_SLICE %q, got %v", tc.v, tc.s, tc.err, err)
			}
			continue
		}
		if err != nil || !Equal(got, tc.want) {
			t.Errorf("ApplySlice(%#v, %s) = %#v, %v; want %#v", tc.v, tc.s, got, err, tc.want)
		}
	}
	if _, err := ApplySlice(List{}, Slice{3, 1}); rpc.CodeOf(err) != rpc.BadSlice {
		t.Errorf("a hand-built inverted slice: %v", err)
	}
}

// TestApplySliceNoAppendAliasing: appending to a slice result must not
// overwrite the original value, which other readers share.
func TestApplySliceNoAppendAliasing(t *testing.T) {
	orig := List{Int(0), Int(1), Int(2)}
	got, _ := ApplySlice(orig, Slice{0, 1})
	_ = append(got.(List), Int(99))
	if orig[1] != Int(1) {
		t.Fatal("append to a slice result overwrote the original")
	}
}

func TestStrRangeOffsets(t *testing.T) {
	s := strings.Repeat("é", 10)
	a, b := StrRange(s, Slice{2, 5})
	if a != 4 || b != 10 {
		t.Fatalf("StrRange = %d, %d", a, b)
	}
}

func FuzzParseSlice(f *testing.F) {
	for _, tc := range parseSliceCases {
		f.Add(tc.in)
	}
	f.Fuzz(func(t *testing.T, s string) {
		sl, err := ParseSlice(s)
		if err != nil {
			if rpc.CodeOf(err) != rpc.BadSlice {
				t.Fatalf("ParseSlice(%q): not BAD_SLICE: %v", s, err)
			}
			return
		}
		if sl.End != OpenEnd && (sl.Start < 0) == (sl.End < 0) && sl.End < sl.Start {
			t.Fatalf("ParseSlice(%q) accepted %v", s, sl)
		}
		for _, v := range []Value{Str("héllo"), List{Int(1)}, Bytes("ab")} {
			if _, err := ApplySlice(v, sl); err != nil {
				t.Fatalf("ApplySlice(%v, %v): %v", v, sl, err)
			}
		}
	})
}
