package cas

import (
	"bytes"
	"errors"
	"io"
	"slices"
	"sync"
	"testing"

	"github.com/shoal-sh/shoal/core/rpc"
)

// mapRemote is a Remote holding blobs in memory.
type mapRemote struct {
	mu     sync.Mutex
	blobs  map[string][]byte
	stored []string
}

func (m *mapRemote) Fetch(hash string) (io.ReadCloser, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	b, ok := m.blobs[hash]
	if !ok {
		return nil, errors.New("no such object")
	}
	return io.NopCloser(bytes.NewReader(b)), nil
}

func (m *mapRemote) Stored(hash string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.stored = append(m.stored, hash)
}

func TestRemote(t *testing.T) {
	a, err := OpenWith(t.TempDir(), Options{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	b, err := OpenWith(t.TempDir(), Options{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	r := &mapRemote{blobs: map[string][]byte{}}
	a.SetRemote(r)
	b.SetRemote(r)

	data := []byte("made on a")
	h, err := a.Put(data)
	if err != nil {
		t.Fatal(err)
	}
	big := bytes.Repeat([]byte("x"), overlapMin+1)
	hb, _, err := a.PutReader(bytes.NewReader(big))
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(r.stored, []string{h, hb}) {
		t.Fatalf("remote was told %v", r.stored)
	}
	r.blobs[h], r.blobs[hb] = data, big

	// b lacks them: Size, Get and Open fetch, verify and keep them.
	if size, err := b.Size(h); err != nil || size != int64(len(data)) {
		t.Fatalf("Size on b: %d %v", size, err)
	}
	if got, err := b.Get(h); err != nil || !bytes.Equal(got, data) {
		t.Fatalf("Get on b: %q %v", got, err)
	}
	rc, size, err := b.Open(hb)
	if err != nil || size != int64(len(big)) {
		t.Fatalf("Open on b: %d %v", size, err)
	}
	got, err := io.ReadAll(rc)
	rc.Close()
	if err != nil || !bytes.Equal(got, big) {
		t.Fatalf("Open on b read %d bytes, %v", len(got), err)
	}
	b.SetRemote(nil)
	if !b.Has(h) || !b.Has(hb) {
		t.Fatal("fetched blobs were not kept")
	}
	if len(r.stored) != 2 {
		t.Fatalf("fetches were reported as puts: %v", r.stored)
	}

	// A remote copy with the wrong bytes is neither served nor kept.
	b.SetRemote(r)
	bad := Sum([]byte("the real bytes"))
	r.blobs[bad] = []byte("other bytes")
	if _, err := b.Get(bad); !isCode(err, rpc.Corrupt) {
		t.Fatalf("a wrong remote copy: %v", err)
	}
	if b.Has(bad) || b.Has(Sum([]byte("other bytes"))) {
		t.Fatal("a wrong remote copy was kept")
	}
	// Missing everywhere: NOT_FOUND.
	if _, err := b.Get(Sum([]byte("nowhere"))); !isCode(err, rpc.NotFound) {
		t.Fatalf("missing everywhere: %v", err)
	}
}

func isCode(err error, c rpc.Code) bool {
	var re *rpc.Error
	return errors.As(err, &re) && re.Code == c
}
