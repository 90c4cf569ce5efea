package value

import (
	"bytes"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/shoal-sh/shoal/core/rpc"
)

// scanCases are inputs where the scanner's work is easy to get subtly
// wrong: escapes and surrogates, bytes that are not UTF-8, members before
// the tag, whitespace, numbers at the edges of their grammar.
var scanCases = []string{
	` {"$" : "int" , "v" : -0 } `,
	"\t{\"$\":\"null\"}\r\n",
	`{"$":"int","v":-9223372036854775808}`,
	`{"$":"int","v":9223372036854775807}`,
	`{"$":"int","v":-9223372036854775809}`,
	`{"$":"int","v":1e2}`,
	`{"$":"int","v":01}`,
	`{"$":"int","v":-}`,
	`{"$":"float","v":-0}`,
	`{"$":"float","v":1.5e-400}`,
	`{"$":"float","v":1.}`,
	`{"$":"float","v":.5}`,
	`{"$":"float","v":1e+}`,
	`{"$":"float","v":"\u004eaN"}`,
	`{"$":"str","v":"a\"b\\c\/d\be\ff\ng\rh\ti"}`,
	`{"$":"str","v":"\u00e9\u2028\uD83D\uDE00"}`,
	`{"$":"str","v":"\uD83D"}`,
	`{"$":"str","v":"\uDE00\uD83D"}`,
	`{"$":"str","v":"\uD83D\u0041"}`,
	`{"$":"str","v":"\uD83D\uD83D\uDE00"}`,
	`{"$":"str","v":"\uD83D\n"}`,
	`{"$":"str","v":"\uZZZZ"}`,
	`{"$":"str","v":"\u12"}`,
	`{"$":"str","v":"\x"}`,
	`{"$":"str","v":"\'"}`,
	"{\"$\":\"str\",\"v\":\"a\xffb\xc3\"}",
	"{\"$\":\"str\",\"v\":\"\xed\xa0\x80\"}",
	"{\"$\":\"str\",\"v\":\"tab\there\"}",
	"{\"$\":\"str\",\"v\":\"\xf0\x9f\x98\x80 é\"}",
	`{"$":"str","b64":"YQ==","v":"a"}`,
	`{"b64":"YQ==","$":"str"}`,
	`{"$":"str","b64":"Y\nQ=="}`,
	`{"\u0024":"\u0069nt","\u0076":1}`,
	`{"$":"bytes","b64":"aGk"}`,
	`{"$":"bool","v":tru}`,
	`{"$":"bool","v":nul}`,
	`{"$":"bool","v":null}`,
	`{"v":true,"$":"bool"}`,
	`{"v":[],"$":"int"}`,
	`{"v":{},"$":"list"}`,
	`{"v":[{"$":"null"}],"$":"record"}`,
	`{"v":{"a":{"$":"null"}},"$":"record"}`,
	`{"x":[[{"deep":[1,{"a":null}]}]],"$":"null"}`,
	`{"elided":{"total":3},"$":"list","v":[]}`,
	`{"$":"list","v":[],"elided":{"total":3}}`,
	`{"rows":[[{"$":"int","v":1}]],"cols":["a"],"$":"table"}`,
	`{"cols":["a","b"],"rows":[[{"$":"int","v":1},{"$":"int","v":"x"}]],"$":"table"}`,
	`{"cols":["a"],"rows":[[]],"$":"int"}`,
	`{"cols":[1],"$":"table","rows":[]}`,
	`{"$":"table","rows":[[{"$":"null"}],[]],"cols":["a"]}`,
	`{"$":"record","v":{"a":{"$":"null"},"b":{"$":"null"},}}`,
	`{"$":"list","v":[{"$":"null"},]}`,
	`{"$":"list","v":[{"$":"null"}{"$":"null"}]}`,
	`{"$":"null",}`,
	`{"$":"null"]`,
	`{"$":"null"}}`,
	`{"$":"null"}x`,
	`{"$" "null"}`,
	`{"$":}`,
	`{"$":"null","":1}`,
	`[]`,
	`"str"`,
	`{`,
	`{"`,
	`{"$":"str","v":"abc`,
	"{\"$\":\"str\",\"v\":\"a\\",
}

func FuzzUnmarshalMatchesReference(f *testing.F) {
	for _, tc := range wireCases {
		f.Add([]byte(tc.wire))
	}
	for _, tc := range unmarshalErrors {
		f.Add([]byte(tc.in))
	}
	for _, s := range scanCases {
		f.Add([]byte(s))
	}
	s, _ := Marshal(sample())
	f.Add(s)
	f.Fuzz(func(t *testing.T, data []byte) {
		got, err := Unmarshal(data)
		want, refErr := refUnmarshal(data)
		if (err == nil) != (refErr == nil) {
			t.Fatalf("Unmarshal(%q):\n scanner:   %v, %v\n reference: %v, %v", data, got, err, want, refErr)
		}
		if err != nil {
			if rpc.CodeOf(err) != rpc.InvalidParams {
				t.Fatalf("Unmarshal(%q): error is not INVALID_PARAMS: %v", data, err)
			}
			return
		}
		if !Equal(got, want) {
			t.Fatalf("Unmarshal(%q):\n scanner:   %#v\n reference: %#v", data, got, want)
		}
		// The wire form tells apart what Equal does not (-0 and 0); the
		// encoder as it was must write it byte for byte the same.
		g, _ := Marshal(got)
		w, _ := refMarshal(want)
		if !bytes.Equal(g, w) {
			t.Fatalf("Unmarshal(%q) re-encodes as\n scanner:   %s\n reference: %s", data, g, w)
		}
	})
}

// TestUnmarshalMatchesReference runs the differential check on the seeds,
// so it holds without fuzzing.
func TestUnmarshalMatchesReference(t *testing.T) {
	var inputs []string
	for _, tc := range wireCases {
		inputs = append(inputs, tc.wire)
	}
	for _, tc := range unmarshalErrors {
		inputs = append(inputs, tc.in)
	}
	inputs = append(inputs, scanCases...)
	for _, in := range inputs {
		got, err := Unmarshal([]byte(in))
		want, refErr := refUnmarshal([]byte(in))
		if (err == nil) != (refErr == nil) {
			t.Errorf("Unmarshal(%q):\n scanner:   %v, %v\n reference: %v, %v", in, got, err, want, refErr)
			continue
		}
		if err == nil && !Equal(got, want) {
			t.Errorf("Unmarshal(%q):\n scanner:   %#v\n reference: %#v", in, got, want)
		}
	}
}

// TestUnmarshalMessages pins whole messages: the path, the byte offset (the
// end of the token at fault, counted in the whole input even for members
// that come before the tag) and the wording.
func TestUnmarshalMessages(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{`{"$":"list","v":[1]}`, `value at [0] (byte 18): expected a typed value {"$":…}, found number 1`},
		{`{"$":"record","v":{"rows":{"$":"table","cols":["name","size"],"rows":[[{"$":"str","v":"a"},{"$":"int","v":1.5}]]}}}`,
			`value at .rows[0].size (byte 109): int v 1.5 is not an integer in the 64-bit range; use a float for it`},
		{`{"v":"x","$":"int"}`, `value at . (byte 8): int v must be a number, found string "x"`},
		{`{"v":[],"$":"int"}`, `value at . (byte 6): int v must be a number, found "["`},
		{`{"elided":{},"$":"list","v":[]}`, `value at . (byte 9): unknown member "elided" in a list value; a list has only "v"`},
		{`{"$":"str","v":"a","b64":"YQ=="}`, `value at . (byte 24): a str has either "v" or "b64", not both`},
		{`{"$":"int","v":1,"v":2}`, `value at . (byte 20): duplicate member "v"`},
		{`{"$":"list","v":[{"$":"null"} {"$":"null"}]}`, `value at . (byte 30): malformed JSON: invalid character '{' after array element`},
		{`{"$":"str","v":"a` + "\x01" + `"}`, `value at . (byte 17): malformed JSON: invalid character '\x01' in string literal`},
		{`{"$":"str","v":"\uD8x0"}`, `value at . (byte 20): malformed JSON: invalid character 'x' in \u hexadecimal character escape`},
		{`{"$":"bool","v":tru}`, `value at . (byte 19): malformed JSON: invalid character '}' in literal true (expecting 'e')`},
		{`{"$":"float","v":1.}`, `value at . (byte 19): malformed JSON: invalid character '}' after decimal point in numeric literal`},
		{`{"$":"table","cols":["a"],"rows":[[{"$":"null"}],[{"$":"nul"}]]}`, `value at [1].a (byte 60): unknown kind "nul"; kinds are null, bool, int, float, str, bytes, list, record, table`},
		{`{"$":"table","cols":["a"],"rows":[[{"$":"null"}],[]]}`, `value at . (byte 53): table row 1 has 0 cells but there are 1 columns`},
		{`{"$":"null"} x`, `value at . (byte 13): unexpected data after the value`},
		{`{"$":"list","v":[{"$":"null"}`, `value at . (byte 29): unexpected end of input`},
	} {
		_, err := Unmarshal([]byte(tc.in))
		var re *rpc.Error
		if !errors.As(err, &re) || re.Code != rpc.InvalidParams {
			t.Errorf("Unmarshal(%s): want an INVALID_PARAMS *rpc.Error, got %v", tc.in, err)
			continue
		}
		if re.Message != tc.want {
			t.Errorf("Unmarshal(%s):\n got %s\nwant %s", tc.in, re.Message, tc.want)
		}
	}
}

// TestUnmarshalStrings checks string decoding against what encoding/json
// makes of the same literals.
func TestUnmarshalStrings(t *testing.T) {
	for _, tc := range []struct{ lit, want string }{
		{`"plain"`, "plain"},
		{`"\u00e9\u00E9é"`, "ééé"},
		{`"\uD83D\uDE00"`, "😀"},
		{`"\uD83D"`, "\uFFFD"},
		{`"\uDE00"`, "\uFFFD"},
		{`"\uDE00\uD83D\uDE00"`, "\uFFFD😀"},
		{`"\uD83Dx"`, "\uFFFDx"},
		{`"\uD83D\u0041"`, "\uFFFDA"},
		{`"\uD83D\n"`, "\uFFFD\n"},
		{"\"a\xffb\"", "a\uFFFDb"},
		{"\"\xe2\x82\"", "\uFFFD\uFFFD"},
		{"\"\xed\xa0\x80\"", "\uFFFD\uFFFD\uFFFD"},
		{`"\"\\\/\b\f\n\r\t"`, "\"\\/\b\f\n\r\t"},
	} {
		v, err := Unmarshal([]byte(`{"$":"str","v":` + tc.lit + `}`))
		if err != nil {
			t.Errorf("%s: %v", tc.lit, err)
			continue
		}
		if v != Str(tc.want) {
			t.Errorf("%s decoded to %q, want %q", tc.lit, v, tc.want)
		}
	}
}

// TestUnmarshalDepthAnyOrder checks the depth limit does not depend on the
// order of members: a list whose "v" comes before its tag nests as deeply
// as one whose tag comes first. (The encoding/json decoder this replaced
// also refused JSON nested past 10,000 brackets inside a member that came
// before its tag, i.e. such values 5,000 levels deep.)
func TestUnmarshalDepthAnyOrder(t *testing.T) {
	tagFirst := func(n int) string {
		return strings.Repeat(`{"$":"list","v":[`, n) + `{"$":"null"}` + strings.Repeat(`]}`, n)
	}
	tagLast := func(n int) string {
		return strings.Repeat(`{"v":[`, n) + `{"$":"null"}` + strings.Repeat(`],"$":"list"}`, n)
	}
	for name, build := range map[string]func(int) string{"tag first": tagFirst, "tag last": tagLast} {
		if _, err := Unmarshal([]byte(build(MaxDepth))); err != nil {
			t.Errorf("%s, %d levels: %v", name, MaxDepth+1, err)
		}
		_, err := Unmarshal([]byte(build(MaxDepth + 1)))
		if rpc.CodeOf(err) != rpc.InvalidParams || !strings.Contains(err.Error(), "deeper than") {
			t.Errorf("%s, %d levels: %v", name, MaxDepth+2, err)
		}
	}
}

// TestUnmarshalTableCells checks rows carved from shared allocations stay
// independent: each row has exactly its own cells and no room to grow into
// its neighbour's.
func TestUnmarshalTableCells(t *testing.T) {
	tbl := benchTable(300)
	data, _ := Marshal(tbl)
	v, err := Unmarshal(data)
	if err != nil {
		t.Fatal(err)
	}
	got := v.(*Table)
	if !Equal(got, tbl) {
		t.Fatal("table changed in a round trip")
	}
	for i, row := range got.Rows {
		if len(row) != 3 || cap(row) != 3 {
			t.Fatalf("row %d: len %d cap %d, want 3 and 3", i, len(row), cap(row))
		}
	}
}

// benchTable is a table shaped like a directory listing.
func benchTable(n int) *Table {
	rows := make([][]Value, n)
	for i := range rows {
		rows[i] = []Value{Str(fmt.Sprintf("file-%06d.txt", i)), Int(int64(i) * 1031), Float(float64(i) / 7)}
	}
	return &Table{Cols: []string{"name", "size", "score"}, Rows: rows}
}

// benchDeep is a record nested n levels, each level with a few scalars.
func benchDeep(n int) Value {
	var v Value = Null{}
	for i := range n {
		v = NewRecord(F("depth", Int(int64(i))), F("label", Str("level")), F("ok", Bool(i%2 == 0)), F("child", v))
	}
	return v
}

// BenchmarkUnmarshal compares the scanner with the encoding/json token
// decoder it replaced (refUnmarshal) on the same inputs; "speedup" is the
// reference's time per op over the scanner's.
func BenchmarkUnmarshal(b *testing.B) {
	for _, c := range benchInputs() {
		data := c.wire()
		var refPerOp float64
		b.Run(c.name+"/reference", func(b *testing.B) {
			b.SetBytes(int64(len(data)))
			for b.Loop() {
				if _, err := refUnmarshal(data); err != nil {
					b.Fatal(err)
				}
			}
			refPerOp = float64(b.Elapsed().Nanoseconds()) / float64(b.N)
		})
		b.Run(c.name+"/scanner", func(b *testing.B) {
			b.SetBytes(int64(len(data)))
			for b.Loop() {
				if _, err := Unmarshal(data); err != nil {
					b.Fatal(err)
				}
			}
			if perOp := float64(b.Elapsed().Nanoseconds()) / float64(b.N); refPerOp > 0 && perOp > 0 {
				b.ReportMetric(refPerOp/perOp, "speedup")
			}
		})
	}
}

type benchInput struct {
	name string
	wire func() []byte
}

// benchInputs are the benchmark documents. They are built on demand so no
// benchmark pays for the garbage collector scanning another's value.
func benchInputs() []benchInput {
	wire := func(v func() Value) func() []byte {
		return func() []byte {
			data, err := Marshal(v())
			if err != nil {
				panic(err)
			}
			return data
		}
	}
	return []benchInput{
		{"table-4-rows", wire(func() Value { return benchTable(4) })},
		{"table-100k-rows", wire(func() Value { return benchTable(100_000) })},
		{"record-500-deep", wire(func() Value { return benchDeep(500) })},
		{"str-1MiB", wire(func() Value { return Str(benchText(1 << 20)) })},
		{"str-1MiB-ascii", wire(func() Value { return Str(strings.Repeat("lorem ipsum dolor sit amet ", 1<<20/27)) })},
	}
}

// benchText is n bytes of source-like text: lines with quotes, a tab and
// a few non-ASCII characters, the kind of file a read returns as a str.
func benchText(n int) string {
	var sb strings.Builder
	for i := 0; sb.Len() < n; i++ {
		fmt.Fprintf(&sb, "\tfmt.Println(\"line %d: café → naïve\", x[%d]) // ok\n", i, i%7)
	}
	return sb.String()[:n]
}

// TestVerbatimRun checks the eight-bytes-at-a-time scan against the byte
// table for every byte value at every offset of a word, alone and after
// another special byte (a borrow from one could hide or fake another).
func TestVerbatimRun(t *testing.T) {
	naive := func(data []byte, i int) int {
		for i < len(data) && verbatim[data[i]] {
			i++
		}
		return i
	}
	buf := make([]byte, 24)
	for c := range 256 {
		for p := range 17 {
			for q := -1; q < p; q++ {
				for k := range buf {
					buf[k] = 'a'
				}
				if q >= 0 {
					buf[q] = 0x1f
				}
				buf[p] = byte(c)
				for start := range 3 {
					if got, want := verbatimRun(buf, start), naive(buf, start); got != want {
						t.Fatalf("byte %#x at %d, 0x1f at %d, from %d: got %d, want %d", c, p, q, start, got, want)
					}
				}
			}
		}
	}
}
