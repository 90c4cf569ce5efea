package shell

import (
	"bytes"
	"strings"
	"testing"

	"github.com/shoal-sh/shoal/core/value"
	"github.com/shoal-sh/shoal/providers/val/spill"
)

// TestCaptureKeepsWhatItHandedOut: the bytes a capture returns stay as
// they were while the run's background jobs go on writing, past the
// budget too.
func TestCaptureKeepsWhatItHandedOut(t *testing.T) {
	for _, limit := range []int{64, 1 << 20, 3 << 20} {
		c := newCapture(limit)
		want := bytes.Repeat([]byte("0123456789abcdef\n"), limit/17*3/4)
		for i := 0; i < len(want); i += 1000 {
			c.Write(want[i:min(len(want), i+1000)])
		}
		got, dropped, _ := c.bytes()
		if dropped != 0 || !bytes.Equal(got, want) {
			t.Fatalf("limit %d: kept %d bytes, dropped %d", limit, len(got), dropped)
		}
		held := bytes.Clone(got)
		for range 4 {
			c.Write(bytes.Repeat([]byte{'x'}, limit/2))
		}
		if !bytes.Equal(got, held) {
			t.Fatalf("limit %d: later output wrote over the bytes handed out", limit)
		}
		c.release()
	}
}

// TestCaptureAhead: a long output comes with the parts encoded while it
// was written, and encoding the run's value with them gives what
// encoding it alone gives.
func TestCaptureAhead(t *testing.T) {
	c := newCapture(DefaultMaxCapture)
	line := []byte(strings.Repeat("é", 20) + " line \"x\"\n")
	for c.total < 40*spill.PartSize {
		c.Write(line)
	}
	b, _, ahead := c.bytes()
	c.release()
	if ahead == nil {
		t.Fatal("no parts encoded ahead")
	}
	s, text := cleanOutput(b, false, c.plain())
	v := value.NewRecord(value.F("exit", value.Int(0)), value.F("stdout", textValue(s, text)))
	got, err := spill.EncodeAhead(v, spill.PartSize, ahead)
	if err != nil {
		t.Fatal(err)
	}
	want, _ := value.Marshal(v)
	if !bytes.Equal(got.Bytes(), want) {
		t.Fatal("the value encoded with the parts made ahead differs from Marshal")
	}
}
