package cas

import (
	"bytes"
	"errors"
	"io"
	"os"
	"sync"
	"testing"
	"testing/iotest"
)

// TestPutReaderDurable: the blob is in its place when the put returns,
// whatever the source's shape; writeback was asked for along the way in
// ranges that follow one another from the start of the file; a plain
// PutReader asks for none; a source that fails stores nothing.
func TestPutReaderDurable(t *testing.T) {
	var mu sync.Mutex
	var ranges [][2]int64
	saved := startWriteback
	startWriteback = func(f *os.File, off, n int64) {
		mu.Lock()
		ranges = append(ranges, [2]int64{off, n})
		mu.Unlock()
	}
	t.Cleanup(func() { startWriteback = saved })

	s := openStore(t)
	data := randBytes(t, 3*writebackStep+5*chunkSize+17)
	want := Sum(data)
	for name, src := range map[string]io.Reader{
		"in memory":   bytes.NewReader(data),
		"short reads": iotest.HalfReader(bytes.NewReader(data)),
	} {
		ranges = nil
		h, size, err := s.PutReaderDurable(src)
		if err != nil || h != want || size != int64(len(data)) {
			t.Fatalf("%s: %s %d %v", name, h, size, err)
		}
		if !inPlace(s, h) || s.isPending(h) {
			t.Fatalf("%s: not durable when the put returned", name)
		}
		if got, err := os.ReadFile(s.path(h)); err != nil || !bytes.Equal(got, data) {
			t.Fatalf("%s: stored bytes differ (%v)", name, err)
		}
		mu.Lock()
		var next int64
		for _, r := range ranges {
			if r[0] != next || r[1] < writebackStep {
				t.Fatalf("%s: writeback asked for %v, after %d bytes", name, ranges, next)
			}
			next = r[0] + r[1]
		}
		// Requests start where the goroutine wakes, which is timing: what
		// is certain is that less than a step is left without one at the
		// end (stop hands it the last count).
		if next <= int64(len(data))-writebackStep || next > int64(len(data)) {
			t.Fatalf("%s: writeback asked for %d of %d bytes: %v", name, next, len(data), ranges)
		}
		mu.Unlock()
		if err := s.Delete(h); err != nil {
			t.Fatal(err)
		}
	}

	ranges = nil
	other := randBytes(t, 2*writebackStep)
	h, _, err := s.PutReader(bytes.NewReader(other))
	if err != nil {
		t.Fatal(err)
	}
	flush(t, s)
	if len(ranges) != 0 {
		t.Fatalf("a put flushed later asked for writeback: %v", ranges)
	}
	// Bytes already stored: durable, nothing more written.
	if h2, _, err := s.PutReaderDurable(bytes.NewReader(other)); err != nil || h2 != h || !inPlace(s, h) {
		t.Fatalf("put of stored bytes: %s %v", h2, err)
	}

	broken := errors.New("source broke")
	src := io.MultiReader(bytes.NewReader(data[:writebackStep+chunkSize]), iotest.ErrReader(broken))
	if _, _, err := s.PutReaderDurable(src); !errors.Is(err, broken) {
		t.Fatalf("failed source: %v", err)
	}
	flush(t, s)
	if n := len(tempFiles(t, s)); n != 0 {
		t.Fatalf("a failed put left %d temp files", n)
	}
}
