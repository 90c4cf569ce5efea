package out

import (
	"strings"
	"sync"
	"testing"

	"github.com/shoal-sh/shoal/core/rpc"
	"github.com/shoal-sh/shoal/core/value"
	"github.com/zeebo/blake3"
)

// memBlobs is an in-memory content store.
type memBlobs struct {
	mu sync.Mutex
	m  map[string][]byte
}

func (b *memBlobs) Put(data []byte) (string, error) {
	sum := blake3.Sum256(data)
	h := strings.ToLower(string(hexOf(sum[:])))
	b.mu.Lock()
	b.m[h] = append([]byte(nil), data...)
	b.mu.Unlock()
	return h, nil
}
func (b *memBlobs) Get(h string) ([]byte, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	d, ok := b.m[h]
	if !ok {
		return nil, rpc.Errorf(rpc.NotFound, "no blob")
	}
	return d, nil
}
func (b *memBlobs) Has(h string) bool      { _, err := b.Get(h); return err == nil }
func (b *memBlobs) Flush() error           { return nil }
func (b *memBlobs) FlushBlob(string) error { return nil }

func hexOf(b []byte) []byte {
	const digits = "0123456789abcdef"
	out := make([]byte, 2*len(b))
	for i, c := range b {
		out[2*i], out[2*i+1] = digits[c>>4], digits[c&15]
	}
	return out
}

func TestTranscriptNumbersAndSpill(t *testing.T) {
	blobs := &memBlobs{m: map[string][]byte{}}
	tr := NewTranscript(blobs, 100)
	small, err := tr.Add("a", value.Int(1), nil)
	if err != nil || small.Ref != "out:1" || small.ValRef != "" {
		t.Fatalf("small: %+v %v", small, err)
	}
	big := value.Str(strings.Repeat("x", 500))
	e, err := tr.Add("a", big, []string{"m"})
	if err != nil || e.Ref != "out:2" || !strings.HasPrefix(e.ValRef, "val:blake3:") {
		t.Fatalf("big: %+v %v", e, err)
	}
	if other, _ := tr.Add("b", value.Null{}, nil); other.Ref != "out:1" {
		t.Errorf("sessions number independently: %+v", other)
	}
	v, got, err := tr.Get("a", 2)
	if err != nil || !value.Equal(v, big) || got.Marks[0] != "m" {
		t.Fatalf("spilled read: %v %+v %v", v, got, err)
	}
	if len(tr.Hashes()) != 1 {
		t.Errorf("hashes %v", tr.Hashes())
	}
	if _, _, err := tr.Get("a", 9); rpc.CodeOf(err) != rpc.NotFound || !strings.Contains(err.Error(), "out:1 … out:2") {
		t.Errorf("missing: %v", err)
	}
	tr.Drop("a")
	if _, _, err := tr.Get("a", 1); rpc.CodeOf(err) != rpc.NotFound {
		t.Errorf("after drop: %v", err)
	}
}

func TestReservedBeforeFill(t *testing.T) {
	tr := NewTranscript(nil, 100)
	e, _ := tr.Reserve("s")
	if _, _, err := tr.Get("s", e.N); rpc.CodeOf(err) != rpc.NotFound || !strings.Contains(err.Error(), "still running") {
		t.Errorf("pending read: %v", err)
	}
	if _, err := tr.Fill("s", e.N, value.Str("done"), nil); err != nil {
		t.Fatal(err)
	}
	if v, _, err := tr.Get("s", e.N); err != nil || v.(value.Str) != "done" {
		t.Errorf("filled: %v %v", v, err)
	}
	tr.Drop("s")
	if _, err := tr.Fill("s", e.N, value.Null{}, nil); rpc.CodeOf(err) != rpc.NotFound {
		t.Errorf("fill after the session closed: %v", err)
	}
}

func TestParseRef(t *testing.T) {
	for in, want := range map[string]int{"out:3": 3, "3": 3, "shoal://out/12": 12} {
		if n, err := ParseRef(in); err != nil || n != want {
			t.Errorf("ParseRef(%q) = %d %v", in, n, err)
		}
	}
	for _, bad := range []string{"out:0", "out:-1", "out:x", ""} {
		if _, err := ParseRef(bad); rpc.CodeOf(err) != rpc.BadURI {
			t.Errorf("ParseRef(%q) err %v", bad, err)
		}
	}
}

// TestTranscriptMemoryBound: past the bound the oldest values move to the
// content store, and every value still reads back equal.
func TestTranscriptMemoryBound(t *testing.T) {
	blobs := &memBlobs{m: map[string][]byte{}}
	tr := NewTranscript(blobs, 1<<20)
	tr.SetMemory(200)
	var vals []value.Value
	for i := range 20 {
		v := value.NewRecord(value.F("i", value.Int(i)), value.F("s", value.Str(strings.Repeat("y", i))))
		vals = append(vals, v)
		if _, err := tr.Add("a", v, nil); err != nil {
			t.Fatal(err)
		}
	}
	if tr.inMemory > 200 || len(tr.Hashes()) < 10 {
		t.Fatalf("in memory %d bytes, %d values moved", tr.inMemory, len(tr.Hashes()))
	}
	for i, want := range vals {
		v, e, err := tr.Get("a", i+1)
		if err != nil || !value.Equal(v, want) {
			t.Fatalf("out:%d: %v %v", i+1, v, err)
		}
		if i == 0 && e.ValRef == "" {
			t.Errorf("the oldest value was not moved")
		}
	}
	tr.Drop("a")
	if tr.inMemory != 0 || len(tr.order) != 0 {
		t.Errorf("after drop: %d bytes, %d queued", tr.inMemory, len(tr.order))
	}
}
