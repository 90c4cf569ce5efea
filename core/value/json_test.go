package value

import (
	"encoding/json"
	"errors"
	"math"
	"reflect"
	"strings"
	"testing"

	"github.com/shoal-sh/shoal/core/rpc"
)

// sample is a value using every kind, shared by several tests.
func sample() Value {
	return NewRecord(
		F("null", Null{}),
		F("yes", Bool(true)),
		F("n", Int(-42)),
		F("big", Int(math.MaxInt64)),
		F("pi", Float(3.25)),
		F("name", Str("shoal <&> \"q\"\n\t\u2028é")),
		F("raw", Bytes{0, 1, 2, 255}),
		F("items", List{Int(1), Str("two"), List{}}),
		F("a b", NewRecord()),
		F("rows", &Table{Cols: []string{"name", "size"}, Rows: [][]Value{
			{Str("a.txt"), Int(12)},
			{Str("b.txt"), Int(7)},
		}}),
	)
}

var wireCases = []struct {
	v    Value
	wire string
}{
	{Null{}, `{"$":"null"}`},
	{Bool(true), `{"$":"bool","v":true}`},
	{Bool(false), `{"$":"bool","v":false}`},
	{Int(42), `{"$":"int","v":42}`},
	{Int(math.MinInt64), `{"$":"int","v":-9223372036854775808}`},
	{Float(1.5), `{"$":"float","v":1.5}`},
	{Float(2), `{"$":"float","v":2}`},
	{Float(1e21), `{"$":"float","v":1e+21}`},
	{Float(1e-7), `{"$":"float","v":1e-7}`},
	{Float(math.Inf(1)), `{"$":"float","v":"+Inf"}`},
	{Float(math.Inf(-1)), `{"$":"float","v":"-Inf"}`},
	{Str("shoal"), `{"$":"str","v":"shoal"}`},
	{Str("<a & b>"), `{"$":"str","v":"<a & b>"}`},
	{Str("\x00\x1f\"\\\u2029"), `{"$":"str","v":"\u0000\u001f\"\\\u2029"}`},
	{Str("a\xffb"), `{"$":"str","b64":"Yf9i"}`},
	{Bytes("hi"), `{"$":"bytes","b64":"aGk="}`},
	{Bytes{}, `{"$":"bytes","b64":""}`},
	{List{}, `{"$":"list","v":[]}`},
	{List{Int(1), Null{}}, `{"$":"list","v":[{"$":"int","v":1},{"$":"null"}]}`},
	{NewRecord(), `{"$":"record","v":{}}`},
	{NewRecord(F("z", Int(1)), F("a", Int(2))), `{"$":"record","v":{"z":{"$":"int","v":1},"a":{"$":"int","v":2}}}`},
	{&Table{Cols: []string{"name", "size"}, Rows: [][]Value{{Str("x"), Int(1)}}},
		`{"$":"table","cols":["name","size"],"rows":[[{"$":"str","v":"x"},{"$":"int","v":1}]]}`},
	{&Table{Cols: []string{}, Rows: [][]Value{}}, `{"$":"table","cols":[],"rows":[]}`},
}

func TestWireForm(t *testing.T) {
	for _, tc := range wireCases {
		got, err := Marshal(tc.v)
		if err != nil {
			t.Fatalf("Marshal(%#v): %v", tc.v, err)
		}
		if string(got) != tc.wire {
			t.Errorf("Marshal(%#v)\n got %s\nwant %s", tc.v, got, tc.wire)
		}
		if !json.Valid(got) {
			t.Errorf("Marshal(%#v) is not valid JSON: %s", tc.v, got)
		}
		back, err := Unmarshal([]byte(tc.wire))
		if err != nil {
			t.Fatalf("Unmarshal(%s): %v", tc.wire, err)
		}
		if !Equal(back, tc.v) {
			t.Errorf("Unmarshal(%s) = %#v, want %#v", tc.wire, back, tc.v)
		}
	}
}

func TestFloatNaNRoundTrip(t *testing.T) {
	got, _ := Marshal(Float(math.NaN()))
	if string(got) != `{"$":"float","v":"NaN"}` {
		t.Fatalf("NaN: %s", got)
	}
	v, err := Unmarshal(got)
	if err != nil || !math.IsNaN(float64(v.(Float))) {
		t.Fatalf("NaN back: %v %v", v, err)
	}
}

func TestFloatMatchesEncodingJSON(t *testing.T) {
	for _, f := range []float64{0, math.Copysign(0, -1), 1, -1.25, 1e20, 1e21, 123456789e-15, 1e-6, 9.999e-7, math.MaxFloat64, math.SmallestNonzeroFloat64, 0.1} {
		want, _ := json.Marshal(f)
		if got := AppendFloat(nil, f); string(got) != string(want) {
			t.Errorf("AppendFloat(%v) = %s, encoding/json says %s", f, got, want)
		}
	}
}

func TestQuotedLen(t *testing.T) {
	for _, s := range []string{"", "abc", "\x00\n\"é\u2028\xff", strings.Repeat("ü\t", 10)} {
		if got, want := QuotedLen(s), len(AppendQuoted(nil, s)); got != want {
			t.Errorf("QuotedLen(%q) = %d, want %d", s, got, want)
		}
	}
}

func TestRoundTripSample(t *testing.T) {
	v := sample()
	data, err := Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	back, err := Unmarshal(data)
	if err != nil {
		t.Fatal(err)
	}
	if !Equal(v, back) {
		t.Fatalf("round trip changed the value:\n%s", data)
	}
	// Field order survives.
	if got := back.(*Record).Names(); !reflect.DeepEqual(got, v.(*Record).Names()) {
		t.Fatalf("field order %v", got)
	}
}

func TestUnmarshalMemberOrder(t *testing.T) {
	v, err := Unmarshal([]byte(`{"v":[{"v":1,"$":"int"}],"$":"list"}`))
	if err != nil {
		t.Fatal(err)
	}
	if !Equal(v, List{Int(1)}) {
		t.Fatalf("got %#v", v)
	}
	v, err = Unmarshal([]byte(`{"rows":[[{"$":"int","v":1}]],"$":"table","cols":["a"]}`))
	if err != nil {
		t.Fatal(err)
	}
	if !Equal(v, &Table{Cols: []string{"a"}, Rows: [][]Value{{Int(1)}}}) {
		t.Fatalf("got %#v", v)
	}
}

var unmarshalErrors = []struct {
	in, want string
}{
	{``, "unexpected end of input"},
	{`42`, `expected a typed value`},
	{`{}`, `missing "$" kind tag`},
	{`{"$":"integer","v":1}`, `unknown kind "integer"`},
	{`{"$":1}`, `"$" must be a kind name string`},
	{`{"$":"int"}`, `an int needs "v"`},
	{`{"$":"int","v":1.5}`, `not an integer in the 64-bit range`},
	{`{"$":"int","v":9223372036854775808}`, `not an integer in the 64-bit range`},
	{`{"$":"int","v":"1"}`, `int v must be a number`},
	{`{"$":"int","v":1,"x":2}`, `unknown member "x" in an int value`},
	{`{"$":"int","v":1,"v":2}`, `duplicate member "v"`},
	{`{"$":"null","v":null}`, `unknown member "v" in a null value`},
	{`{"$":"float","v":"nan"}`, `float v must be a number or one of`},
	{`{"$":"float","v":1e999}`, `out of the 64-bit float range`},
	{`{"$":"bool","v":1}`, `bool v must be true or false`},
	{`{"$":"str","v":1}`, `str v must be a string`},
	{`{"$":"str","v":"a","b64":"YQ=="}`, `either "v" or "b64"`},
	{`{"$":"bytes","b64":"!!"}`, `not standard padded base64`},
	{`{"$":"bytes","v":"aGk="}`, `unknown member "v" in a bytes value`},
	{`{"$":"list","v":{}}`, `expected list v to be an array`},
	{`{"$":"list","v":[1]}`, `at [0] (byte 18): expected a typed value {"$":…}, found number 1`},
	{`{"$":"record","v":{"a":{"$":"int","v":1},"a":{"$":"int","v":2}}}`, `duplicate record field "a"`},
	{`{"$":"record","v":{"x":{"$":"list","v":[{"$":"nope"}]}}}`, `value at .x[0] (byte 51): unknown kind "nope"`},
	{`{"$":"table","cols":["a"]}`, `needs both "cols" and "rows"`},
	{`{"$":"table","cols":["a","a"],"rows":[]}`, `duplicate table column "a"`},
	{`{"$":"table","cols":[1],"rows":[]}`, `table column 0 must be a string`},
	{`{"$":"table","cols":["a"],"rows":[[]]}`, `table row 0 has 0 cells but there are 1 columns`},
	{`{"$":"table","cols":["a"],"rows":[[{"$":"int","v":"x"}]]}`, `value at [0].a `},
	{`{"$":"table","cols":["a"],"rows":[{}]}`, `expected a table row to be an array`},
	{`{"$":"null"} {"$":"null"}`, `unexpected data after the value`},
	{`{"$":"null"`, `unexpected end of input`},
	{`{"$":"list","v":[}`, `malformed JSON`},
}

func TestUnmarshalErrors(t *testing.T) {
	for _, tc := range unmarshalErrors {
		_, err := Unmarshal([]byte(tc.in))
		var re *rpc.Error
		if !errors.As(err, &re) || re.Code != rpc.InvalidParams {
			t.Errorf("Unmarshal(%s): want an INVALID_PARAMS *rpc.Error, got %v", tc.in, err)
			continue
		}
		if !strings.Contains(re.Message, tc.want) {
			t.Errorf("Unmarshal(%s): message %q does not mention %q", tc.in, re.Message, tc.want)
		}
	}
}

func TestUnmarshalDepthLimit(t *testing.T) {
	deep := strings.Repeat(`{"$":"list","v":[`, MaxDepth+2) + strings.Repeat(`]}`, MaxDepth+2)
	_, err := Unmarshal([]byte(deep))
	if rpc.CodeOf(err) != rpc.InvalidParams || !strings.Contains(err.Error(), "deeper than") {
		t.Fatalf("deep input: %v", err)
	}
}

func TestMarshalNil(t *testing.T) {
	if _, err := Marshal(List{nil}); err == nil {
		t.Fatal("Marshal of a list holding a nil Value succeeded")
	}
	// AppendJSON writes it as null so streaming never emits broken JSON.
	if got := string(AppendJSON(nil, List{nil})); got != `{"$":"list","v":[{"$":"null"}]}` {
		t.Fatalf("AppendJSON: %s", got)
	}
}

func FuzzUnmarshal(f *testing.F) {
	for _, tc := range wireCases {
		f.Add([]byte(tc.wire))
	}
	for _, tc := range unmarshalErrors {
		f.Add([]byte(tc.in))
	}
	s, _ := Marshal(sample())
	f.Add(s)
	f.Fuzz(func(t *testing.T, data []byte) {
		v, err := Unmarshal(data)
		if err != nil {
			var re *rpc.Error
			if !errors.As(err, &re) || re.Code != rpc.InvalidParams {
				t.Fatalf("error is not INVALID_PARAMS: %v", err)
			}
			return
		}
		// Whatever decodes re-encodes to a form that decodes to the same value.
		enc, err := Marshal(v)
		if err != nil {
			t.Fatalf("Marshal after Unmarshal: %v", err)
		}
		back, err := Unmarshal(enc)
		if err != nil {
			t.Fatalf("re-decode %s: %v", enc, err)
		}
		if !Equal(v, back) {
			t.Fatalf("round trip differs for %s", enc)
		}
	})
}
