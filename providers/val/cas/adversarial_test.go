package cas

import (
	"bytes"
	"io"
	"os"
	"testing"

	"github.com/shoal-sh/shoal/core/rpc"
)

// TestQuarantineSparesRepairedBlob: a reader that opened a damaged blob
// and reaches its end after the right bytes were stored again and synced
// into place must not quarantine the repaired blob.
func TestQuarantineSparesRepairedBlob(t *testing.T) {
	s := openStore(t)
	data := []byte("the value as it should be")
	h, _ := s.Put(data)
	flush(t, s)
	if err := os.Truncate(s.path(h), 4); err != nil {
		t.Fatal(err)
	}
	rc, _, err := s.Open(h) // opens the damaged file
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	// The bytes are stored again (the wrong size makes the put write them)
	// and made durable in place while the reader still holds the old file.
	if _, err := s.Put(data); err != nil {
		t.Fatal(err)
	}
	flush(t, s)
	_, err = io.ReadAll(rc)
	wantCode(t, err, rpc.Corrupt)
	got, err := s.Get(h)
	if err != nil || !bytes.Equal(got, data) {
		t.Fatalf("the repaired blob was quarantined by a stale reader: %v", err)
	}
}
