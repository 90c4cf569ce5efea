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

// TestTranscriptRestart: with the durable index, numbering continues after
// a restart (a new Transcript on the same directory and store), earlier
// values are read back, and refs whose value is not there say why.
func TestTranscriptRestart(t *testing.T) {
	dir := t.TempDir()
	blobs := &memBlobs{m: map[string][]byte{}}
	t1 := NewTranscript(blobs, 1<<20)
	if err := t1.Persist(dir); err != nil {
		t.Fatal(err)
	}
	a, _ := t1.Add("s", value.Str("first"), nil)
	b, _ := t1.Add("s", value.NewRecord(value.F("exit", value.Int(0))), []string{"secret-source"})
	cut, _ := t1.Reserve("s") // its run is cut short by the restart
	refused, _ := t1.Reserve("s")
	t1.Unreserve("s", refused.N)
	other, _ := t1.Add("other session", value.Int(7), nil)
	big, _ := t1.Add("other session", value.Str(strings.Repeat("x", InlineMax)), nil) // in the content store

	t2 := NewTranscript(blobs, 1<<20)
	if err := t2.Persist(dir); err != nil {
		t.Fatal(err)
	}
	next, _ := t2.Reserve("s")
	if next.N != refused.N+1 {
		t.Fatalf("after the restart the next ref is out:%d; want out:%d (no number handed out twice)", next.N, refused.N+1)
	}
	v, e, err := t2.Get("s", a.N)
	if err != nil || !value.Equal(v, value.Str("first")) {
		t.Fatalf("out:%d after restart: %v %v", a.N, v, err)
	}
	if _, e, _ = t2.Get("s", b.N); strings.Join(e.Marks, ",") != "secret-source" {
		t.Fatalf("marks lost: %v", e.Marks)
	}
	if _, _, err := t2.Get("s", cut.N); rpc.CodeOf(err) != rpc.NotFound || !strings.Contains(err.Error(), "cut short") {
		t.Fatalf("out:%d whose run was cut short: %v", cut.N, err)
	}
	if v, _, err := t2.Get("other session", other.N); err != nil || !value.Equal(v, value.Int(7)) {
		t.Fatalf("another session's value: %v %v", v, err)
	}
	if v, _, err := t2.Get("other session", big.N); err != nil || !value.Equal(v, value.Str(strings.Repeat("x", InlineMax))) {
		t.Fatalf("a stored value after the restart: %v", err)
	}
	// A collected value says so.
	blobs.mu.Lock()
	blobs.m = map[string][]byte{}
	blobs.mu.Unlock()
	t2.mu.Lock()
	t2.cacheHash, t2.cacheVal = "", nil
	t2.mu.Unlock()
	if _, _, err := t2.Get("other session", big.N); !strings.Contains(errText(err), "garbage-collected") {
		t.Fatalf("collected: %v", err)
	}
	// A closed session's values are gone; its numbering goes on, also after a restart.
	t2.Drop("s")
	if _, _, err := t2.Get("s", a.N); !strings.Contains(errText(err), "closed") {
		t.Fatalf("after close: %v", err)
	}
	t3 := NewTranscript(blobs, 1<<20)
	t3.Persist(dir)
	if n, _ := t3.Reserve("s"); n.N != next.N+1 {
		t.Fatalf("after close and restart: out:%d, want out:%d", n.N, next.N+1)
	}
	if _, _, err := t3.Get("s", a.N); !strings.Contains(errText(err), "closed") {
		t.Fatalf("after close and restart: %v", err)
	}
}

func errText(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}
