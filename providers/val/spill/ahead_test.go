package spill

import (
	"reflect"
	"strings"
	"testing"
	"unsafe"

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

// TestEncodeAheadIsEncode: a record whose string parts were encoded
// ahead (text with multibyte characters, some parts cut mid-character)
// encodes to exactly what Encode gives, index included, and the parts
// encoded ahead are the ones used.
func TestEncodeAheadIsEncode(t *testing.T) {
	var sb strings.Builder
	for i := 0; sb.Len() < 20*PartSize+123; i++ {
		sb.WriteString("line ✓ \"q\" \\ 𝄞 é\t")
		sb.WriteString(strings.Repeat("x", i%37))
		sb.WriteByte('\n')
	}
	text := sb.String()
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
