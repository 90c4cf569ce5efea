package value

import (
	"bytes"
	"math"
	"strings"
	"testing"
)

// encodeCases are values whose wire form takes every branch of the
// encoder, including hand-built tables with short, long and nil rows.
func encodeCases() []Value {
	return []Value{
		sample(),
		Str(strings.Repeat("plain ascii text ", 9) + "\x00\x1f\"\\\n\r\t<>&\u2028\u2029é😀"),
		Str("bad \xff utf-8 \xc3"),
		Str("\xed\xa0\x80"),
		List{Float(math.Copysign(0, -1)), Float(1e-7), Float(1e21), Float(123456789.125), Int(-1 << 63)},
		&Table{Cols: []string{"a", "b"}, Rows: [][]Value{{Int(1)}, {nil, Str("x")}, {Int(1), Int(2), Int(3)}}},
		&Table{Cols: []string{"a"}, Rows: [][]Value{{Int(1), List{List{}}}}},
		benchTable(50),
		benchDeep(20),
		Str(benchText(5000)),
	}
}

func TestMarshalMatchesReference(t *testing.T) {
	for _, v := range encodeCases() {
		got, err := Marshal(v)
		want, refErr := refMarshal(v)
		if (err == nil) != (refErr == nil) || !bytes.Equal(got, want) {
			t.Errorf("Marshal(%#v):\n got %s, %v\nwant %s, %v", v, got, err, want, refErr)
		}
	}
	// The nil checks are the same, inside cells past the columns too.
	for _, v := range []Value{
		List{nil},
		NewRecord(F("a", List{Int(1), nil})),
		&Table{Cols: []string{"a"}, Rows: [][]Value{{Int(1), List{nil}}}},
	} {
		_, err := Marshal(v)
		_, refErr := refMarshal(v)
		if err == nil || refErr == nil {
			t.Errorf("Marshal(%#v): %v, reference %v; want both to fail", v, err, refErr)
		}
	}
}

// TestWireSize checks the size estimate Marshal allocates by is exact for
// values without escapes or floats, so the output is allocated once.
func TestWireSize(t *testing.T) {
	for _, v := range []Value{
		Null{}, Bool(true), Bool(false), Int(0), Int(-1 << 63), Int(1<<63 - 1), Str("plain"), Bytes("abcd"),
		List{Int(1), Null{}}, NewRecord(F("name", Str("a")), F("n", Int(12))),
		&Table{Cols: []string{"a", "b"}, Rows: [][]Value{{Int(1), Str("x")}, {nil, Int(22)}}},
		&Table{Cols: []string{}, Rows: [][]Value{}},
	} {
		n, err := wireSize(v, 0)
		if err != nil {
			t.Fatal(err)
		}
		if want := len(AppendJSON(nil, v)); n != want {
			t.Errorf("wireSize(%#v) = %d, want %d", v, n, want)
		}
	}
}

func TestQuotedLenLong(t *testing.T) {
	for _, s := range []string{benchText(3000), strings.Repeat("abcdefgh", 40) + "\n", "\xff" + strings.Repeat("z", 17)} {
		if got, want := QuotedLen(s), len(AppendQuoted(nil, s)); got != want {
			t.Errorf("QuotedLen(%.20q…) = %d, want %d", s, got, want)
		}
	}
}

// FuzzAppendQuoted checks quoting any bytes gives the old encoder's output.
func FuzzAppendQuoted(f *testing.F) {
	for _, s := range []string{"", "plain", "a\"b\\c\n\x00\x7f", "\u2028é\xff\xc3", benchText(300)} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		got, want := AppendQuoted([]byte("x"), s), refAppendQuoted([]byte("x"), s)
		if !bytes.Equal(got, want) {
			t.Fatalf("AppendQuoted(%q):\n got %s\nwant %s", s, got, want)
		}
		if QuotedLen(s) != len(want)-1 {
			t.Fatalf("QuotedLen(%q) = %d, want %d", s, QuotedLen(s), len(want)-1)
		}
		got, _ = Marshal(Str(s))
		want, _ = refMarshal(Str(s))
		if !bytes.Equal(got, want) {
			t.Fatalf("Marshal(Str(%q)):\n got %s\nwant %s", s, got, want)
		}
	})
}

// BenchmarkMarshal compares Marshal with the encoder as it was
// (refMarshal); "speedup" is the reference's time per op over Marshal's.
func BenchmarkMarshal(b *testing.B) {
	for _, c := range benchInputs() {
		v, err := Unmarshal(c.wire())
		if err != nil {
			b.Fatal(err)
		}
		var refPerOp float64
		b.Run(c.name+"/reference", func(b *testing.B) {
			for b.Loop() {
				if _, err := refMarshal(v); err != nil {
					b.Fatal(err)
				}
			}
			refPerOp = float64(b.Elapsed().Nanoseconds()) / float64(b.N)
		})
		b.Run(c.name+"/marshal", func(b *testing.B) {
			for b.Loop() {
				if _, err := Marshal(v); err != nil {
					b.Fatal(err)
				}
			}
			if perOp := float64(b.Elapsed().Nanoseconds()) / float64(b.N); refPerOp > 0 && perOp > 0 {
				b.ReportMetric(refPerOp/perOp, "speedup")
			}
		})
	}
}
