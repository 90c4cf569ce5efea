package shell

import (
	"bytes"
	"context"
	"encoding/hex"
	"strings"
	"testing"

	"github.com/zeebo/blake3"

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

// TestCaptureLongProcessOutput: a process's long output read straight
// into the capture comes out whole, and cut to the budget past it.
func TestCaptureLongProcessOutput(t *testing.T) {
	const line = "0123456789abcdef\n"
	for _, limit := range []int{0, 1 << 20} {
		e, _ := newTestEvaluator(t, nil, Options{MaxCapture: limit})
		res, err := e.Run(context.Background(), "yes 0123456789abcdef | head -c 3000000")
		if err != nil {
			t.Fatal(err)
		}
		want := strings.Repeat(line, 3000000/len(line)+1)[:3000000]
		if limit == 0 {
			if res.Stdout != want || res.StdoutDropped != 0 {
				t.Fatalf("got %d bytes (%d dropped), want the 3000000 written", len(res.Stdout), res.StdoutDropped)
			}
			continue
		}
		head, tail := want[:limit/2], want[len(want)-limit/2:]
		if !strings.HasPrefix(res.Stdout, head) || !strings.HasSuffix(res.Stdout, tail) || res.StdoutDropped != int64(len(want)-limit) {
			t.Fatalf("cut output: %d bytes, %d dropped", len(res.Stdout), res.StdoutDropped)
		}
	}
}

// TestRunHashesAhead: a run that exits 0 with a long output comes with its
// record's blob hashed while the output arrived, and that hash is the
// blob's; one that fails has no hash ahead (its record starts otherwise).
func TestRunHashesAhead(t *testing.T) {
	e, _ := newTestEvaluator(t, nil, Options{})
	for _, tc := range []struct {
		src  string
		want bool
	}{
		{"yes 0123456789abcdef | head -c 3000000", true},
		{"yes 0123456789abcdef | head -c 3000000; false", false},
	} {
		res, err := e.Run(context.Background(), tc.src)
		if err != nil {
			t.Fatal(err)
		}
		got, err := spill.EncodeAhead(res.Value, spill.PartSize, res.Ahead...)
		if err != nil {
			t.Fatal(err)
		}
		want, _ := value.Marshal(res.Value)
		sum := blake3.Sum256(want)
		if !bytes.Equal(got.Bytes(), want) {
			t.Fatalf("%s: the encoding differs from Marshal", tc.src)
		}
		if (got.Sum != "") != tc.want || got.Sum != "" && got.Sum != hex.EncodeToString(sum[:]) {
			t.Fatalf("%s: hash ahead %q, the blob's %x (want one: %v)", tc.src, got.Sum, sum, tc.want)
		}
	}
}
