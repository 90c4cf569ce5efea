package spill

import (
	"encoding/hex"
	"reflect"
	"strings"
	"testing"
	"unsafe"

	"github.com/zeebo/blake3"

	"github.com/shoal-sh/shoal/core/value"
)

// feedGrowing feeds a the bytes of s the way a capture writes them: in
// steps of step bytes, into a buffer that moves when it grows. It
// returns the final string, in the buffer's memory.
func feedGrowing(a *Ahead, s string, step int) string {
	var buf []byte
	for i := 0; i < len(s); i += step {
		buf = append(buf, s[i:min(len(s), i+step)]...) // moves as it grows
		a.Feed(unsafe.String(unsafe.SliceData(buf), len(buf)))
	}
	a.settle()
	a.Stop()
	return unsafe.String(unsafe.SliceData(buf), len(buf))
}

// linesOf returns at least size bytes of lines: start, then pad repeated
// up to mod-1 times (a different length each line).
func linesOf(size int, start, pad string, mod int) string {
	var sb strings.Builder
	for i := 0; sb.Len() < size; i++ {
		sb.WriteString(start)
		sb.WriteString(strings.Repeat(pad, i%mod))
		sb.WriteByte('\n')
	}
	return sb.String()
}

// TestEncodeAheadIsEncode: a record whose string parts were encoded
// ahead (text with multibyte characters, some parts cut mid-character)
// encodes to exactly what Encode gives, index included, and the parts
// encoded ahead are the ones used.
func TestEncodeAheadIsEncode(t *testing.T) {
	text := linesOf(20*PartSize+123, "line ✓ \"q\" \\ 𝄞 é\t", "x", 37)
	for _, step := range []int{1000, 4096, 65536, len(text)} {
		a := NewAhead()
		s := feedGrowing(a, text, step)
		v := value.NewRecord(value.F("exit", value.Int(0)), value.F("stdout", value.Str(s)), value.F("stderr", value.Str("")))
		got, err := EncodeAhead(v, PartSize, a, nil)
		if err != nil {
			t.Fatal(err)
		}
		want, err := Encode(v, PartSize)
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(got.Bytes(), want.Bytes()) || !reflect.DeepEqual(got.Index, want.Index) || got.Size != want.Size {
			t.Fatalf("step %d: EncodeAhead differs from Encode", step)
		}
		if n, all := len(a.encoded()), len(want.Index.Fields[1].Sub.Parts); n != all-1 {
			t.Fatalf("step %d: %d parts of %d encoded ahead, want all but the last", step, n, all)
		}
	}
}

// TestEncodeAheadOtherString: parts encoded ahead of other bytes (a copy
// that was changed, a cleaned-up output) are not used.
func TestEncodeAheadOtherString(t *testing.T) {
	text := strings.Repeat("abcdefgh\n", 3*PartSize/9+100)
	a := NewAhead()
	s := feedGrowing(a, text, 8192)
	changed := []byte(s)
	changed[PartSize+5] = 'Z'
	for _, other := range []string{string(changed), s[1:], text} {
		got, err := EncodeAhead(value.Str(other), PartSize, a)
		if err != nil {
			t.Fatal(err)
		}
		want, _ := Encode(value.Str(other), PartSize)
		if !reflect.DeepEqual(got.Bytes(), want.Bytes()) || !reflect.DeepEqual(got.Index, want.Index) {
			t.Fatal("parts of other bytes were used")
		}
	}
	if len(use(text, []int{PartSize, 2 * PartSize}, []*Ahead{a})) != 0 || len(use(s, []int{PartSize, 2 * PartSize}, []*Ahead{a})) != 2 {
		t.Fatal("use matched the wrong string")
	}
}

// TestAheadStopsOnBinary: bytes that are not UTF-8 end the work early,
// and Stop may be called again, also before anything was fed.
func TestAheadStopsOnBinary(t *testing.T) {
	a := NewAhead()
	b := []byte(strings.Repeat("a", PartSize) + strings.Repeat("\x80", 3*PartSize))
	a.Feed(string(b))
	a.settle()
	a.Stop()
	a.Stop()
	if n := len(a.encoded()); n != 0 {
		t.Fatalf("%d parts of binary encoded", n)
	}
	NewAhead().Stop()
}

// TestEncodeInvalidString: a long string that is not UTF-8 in one of its
// parts is read whole, as Marshal encodes it, with or without an Ahead.
func TestEncodeInvalidString(t *testing.T) {
	b := []byte(strings.Repeat("abc✓\n", 5*PartSize/7))
	b[3*PartSize+1] = 0xff
	a := NewAhead()
	s := feedGrowing(a, string(b), 5000)
	for _, aheads := range [][]*Ahead{nil, {a}} {
		e, err := EncodeAhead(value.Str(s), PartSize, aheads...)
		if err != nil {
			t.Fatal(err)
		}
		want, _ := value.Marshal(value.Str(s))
		if e.Index != nil || !reflect.DeepEqual(e.Bytes(), want) {
			t.Fatal("a string that is not UTF-8 was indexed")
		}
	}
}

// TestAheadSum: an Ahead given the right guess of how the blob starts
// hashes it as the parts arrive, and the hash EncodeAhead then gives is
// the blob's; with a wrong guess, or parts of other bytes, it gives none.
func TestAheadSum(t *testing.T) {
	text := linesOf(12*PartSize+77, "row ✓ \"q\" \\ é\t", "y", 41)
	after, err := StrFieldAfter(value.NewRecord(value.F("exit", value.Int(0))), "stdout")
	if err != nil {
		t.Fatal(err)
	}
	record := func(exit int, stdout string) value.Value {
		return value.NewRecord(value.F("exit", value.Int(exit)), value.F("stdout", value.Str(stdout)), value.F("stderr", value.Str("e")))
	}
	for _, tc := range []struct {
		name  string
		after []byte
		exit  int
		other bool // the value holds a copy of the bytes fed
		want  bool // a hash comes out
	}{
		{"right guess", after, 0, false, true},
		{"another exit", after, 1, false, false},
		{"guess one byte short", after[:len(after)-1], 0, false, false},
		{"guess of another field", []byte(`{"$":"record","v":{"stdout":{"$":"str","v":"`), 0, false, false},
		{"other bytes", after, 0, true, false},
	} {
		for _, step := range []int{3000, PartSize, 100000, len(text)} {
			a := NewAheadAfter(tc.after)
			s := feedGrowing(a, text, step)
			if tc.other {
				s = strings.Clone(s)
			}
			v := record(tc.exit, s)
			got, err := EncodeAhead(v, PartSize, a)
			if err != nil {
				t.Fatal(err)
			}
			want, err := Encode(v, PartSize)
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got.Bytes(), want.Bytes()) {
				t.Fatalf("%s, step %d: the encoding differs from Encode's", tc.name, step)
			}
			sum := blake3.Sum256(want.Bytes())
			switch {
			case got.Sum != "" && got.Sum != hex.EncodeToString(sum[:]):
				t.Fatalf("%s, step %d: hash ahead %s, the blob's is %x", tc.name, step, got.Sum, sum)
			case (got.Sum != "") != tc.want:
				t.Fatalf("%s, step %d: hash ahead %q, want one: %v", tc.name, step, got.Sum, tc.want)
			case want.Sum != "":
				t.Fatalf("Encode gave a hash ahead")
			}
		}
	}
}

// TestAheadSumMissedPart: when the queue was full for a part, the parts
// hashed after it would not follow on from the ones before: the hash is
// not used.
func TestAheadSumMissedPart(t *testing.T) {
	text := strings.Repeat("0123456789abcdef\n", 8*PartSize/17)
	after, err := StrFieldAfter(value.NewRecord(value.F("exit", value.Int(0))), "stdout")
	if err != nil {
		t.Fatal(err)
	}
	a := newAhead(after, 1)
	buf := make([]byte, 0, len(text))
	buf = append(buf, text[:4*PartSize+10]...)
	a.Feed(unsafe.String(unsafe.SliceData(buf), len(buf))) // part 0 queued, 1 to 3 missed
	a.start().settle()
	buf = append(buf, text[len(buf):]...)
	a.Feed(unsafe.String(unsafe.SliceData(buf), len(buf))) // 4 queued, maybe more
	a.settle()
	v := value.NewRecord(value.F("exit", value.Int(0)), value.F("stdout", value.Str(unsafe.String(unsafe.SliceData(buf), len(buf)))))
	got, err := EncodeAhead(v, PartSize, a)
	if err != nil {
		t.Fatal(err)
	}
	if ks := len(a.encoded()); ks < 2 || a.encoded()[1].k != 4 {
		t.Fatalf("parts encoded ahead: %d, the second %+v; want 0 then 4", ks, a.encoded()[1].k)
	}
	if got.Sum != "" {
		t.Fatalf("a hash ahead %s past a missed part", got.Sum)
	}
}
