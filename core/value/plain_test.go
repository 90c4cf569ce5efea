package value

import (
	"encoding/json"
	"math"
	"math/big"
	"reflect"
	"testing"

	"github.com/shoal-sh/shoal/core/rpc"
)

func TestFromPlainJSON(t *testing.T) {
	cases := []struct {
		in   string
		want Value
	}{
		{`null`, Null{}},
		{`true`, Bool(true)},
		{`42`, Int(42)},
		{`-7`, Int(-7)},
		{`2.0`, Float(2)},
		{`1e3`, Float(1000)},
		{`9223372036854775808`, Float(9223372036854775808)},
		{`"x"`, Str("x")},
		{`[]`, List{}},
		{`[1,"a"]`, List{Int(1), Str("a")}},
		{`{"z":1,"a":{"b":[]}}`, NewRecord(F("z", Int(1)), F("a", NewRecord(F("b", List{}))))},
		{`{"a":1,"b":2,"a":3}`, NewRecord(F("a", Int(3)), F("b", Int(2)))},
		{`[{"name":"a","size":1},{"name":"b","size":2}]`,
			&Table{Cols: []string{"name", "size"}, Rows: [][]Value{{Str("a"), Int(1)}, {Str("b"), Int(2)}}}},
		{`[{"name":"a"}]`, &Table{Cols: []string{"name"}, Rows: [][]Value{{Str("a")}}}},
		// Different keys, different order, an empty object or a non-object: a list.
		{`[{"a":1},{"b":2}]`, List{NewRecord(F("a", Int(1))), NewRecord(F("b", Int(2)))}},
		{`[{"a":1,"b":2},{"b":2,"a":1}]`, List{NewRecord(F("a", Int(1)), F("b", Int(2))), NewRecord(F("b", Int(2)), F("a", Int(1)))}},
		{`[{},{}]`, List{NewRecord(), NewRecord()}},
		{`[{"a":1},2]`, List{NewRecord(F("a", Int(1))), Int(2)}},
	}
	for _, tc := range cases {
		got, err := FromPlainJSON([]byte(tc.in))
		if err != nil {
			t.Fatalf("FromPlainJSON(%s): %v", tc.in, err)
		}
		if !Equal(got, tc.want) {
			t.Errorf("FromPlainJSON(%s) = %s, want %s", tc.in, AppendJSON(nil, got), AppendJSON(nil, tc.want))
		}
	}
	for _, bad := range []string{``, `{`, `[1,]`, `{"a"}`, `1 2`, `nul`} {
		if _, err := FromPlainJSON([]byte(bad)); rpc.CodeOf(err) != rpc.InvalidParams {
			t.Errorf("FromPlainJSON(%q): want INVALID_PARAMS, got %v", bad, err)
		}
	}
}

func TestFromPlainJSONManyKeys(t *testing.T) {
	// Past the indexing threshold, repeated keys still keep their first place.
	in := `{"k0":0,"k1":1,"k2":2,"k3":3,"k4":4,"k5":5,"k6":6,"k7":7,"k8":8,"k9":9,"k10":10,"k11":11,"k12":12,"k13":13,"k14":14,"k15":15,"k16":16,"k3":33,"k17":17}`
	v, err := FromPlainJSON([]byte(in))
	if err != nil {
		t.Fatal(err)
	}
	r := v.(*Record)
	if len(r.Fields) != 18 || r.Fields[3].Value != Int(33) || r.Fields[17].Name != "k17" {
		t.Fatalf("got %s", AppendJSON(nil, v))
	}
}

type point struct {
	Y int    `json:"y"`
	X int    `json:"x"`
	L string `json:"label,omitempty"`
}

func TestFromAny(t *testing.T) {
	huge, _ := new(big.Int).SetString("100000000000000000000", 10)
	cases := []struct {
		in   any
		want Value
	}{
		{nil, Null{}},
		{true, Bool(true)},
		{7, Int(7)},
		{int8(-3), Int(-3)},
		{uint64(math.MaxUint64), Float(math.MaxUint64)},
		{uint32(5), Int(5)},
		{float32(0.5), Float(0.5)},
		{big.NewInt(12), Int(12)},
		{huge, Float(1e20)},
		{"s", Str("s")},
		{[]byte{1}, Bytes{1}},
		{json.Number("12"), Int(12)},
		{json.Number("1.5"), Float(1.5)},
		{json.RawMessage(`{"b":1,"a":2}`), NewRecord(F("b", Int(1)), F("a", Int(2)))},
		{[]any{1, "x"}, List{Int(1), Str("x")}},
		{map[string]any{"b": 1, "a": []any{}}, NewRecord(F("a", List{}), F("b", Int(1)))},
		{[]any{map[string]any{"n": 1}, map[string]any{"n": 2}}, &Table{Cols: []string{"n"}, Rows: [][]Value{{Int(1)}, {Int(2)}}}},
		{point{Y: 1, X: 2}, NewRecord(F("y", Int(1)), F("x", Int(2)))},
		{&point{Y: 1}, NewRecord(F("y", Int(1)), F("x", Int(0)))},
		{(*point)(nil), Null{}},
		{[]int{1, 2}, List{Int(1), Int(2)}},
		{Str("already"), Str("already")},
		{make(chan int), nil}, // checked below: becomes its %v text
	}
	for _, tc := range cases {
		got := FromAny(tc.in)
		if tc.want == nil {
			if got.Kind() != KindStr {
				t.Errorf("FromAny(%T) = %#v, want its text", tc.in, got)
			}
			continue
		}
		if !Equal(got, tc.want) {
			t.Errorf("FromAny(%#v) = %s, want %s", tc.in, AppendJSON(nil, got), AppendJSON(nil, tc.want))
		}
	}
}

func TestToPlain(t *testing.T) {
	got := ToPlain(sample())
	want := map[string]any{
		"null":  nil,
		"yes":   true,
		"n":     -42,
		"big":   math.MaxInt64,
		"pi":    3.25,
		"name":  "shoal <&> \"q\"\n\t\u2028é",
		"raw":   "AAEC/w==",
		"items": []any{1, "two", []any{}},
		"a b":   map[string]any{},
		"rows": []any{
			map[string]any{"name": "a.txt", "size": 12},
			map[string]any{"name": "b.txt", "size": 7},
		},
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("ToPlain:\n got %#v\nwant %#v", got, want)
	}
	// Plain JSON survives ToPlain → encoding/json → FromPlainJSON for the
	// kinds JSON has (records come back with sorted keys).
	data, err := json.Marshal(ToPlain(List{Int(1), Float(1.5), Str("x"), NewRecord(F("a", Null{}))}))
	if err != nil {
		t.Fatal(err)
	}
	back, err := FromPlainJSON(data)
	if err != nil || !Equal(back, List{Int(1), Float(1.5), Str("x"), NewRecord(F("a", Null{}))}) {
		t.Fatalf("plain round trip: %s %v", data, err)
	}
}
