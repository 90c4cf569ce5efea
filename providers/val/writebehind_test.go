package val

import (
	"os"
	"path/filepath"
	"sync"
	"testing"

	"github.com/shoal-sh/shoal/core/rpc"
	"github.com/shoal-sh/shoal/providers/val/cas"
)

// blockFanOut makes every put of hash fail in the background: a plain file
// where its first fan-out directory belongs cannot be made a directory.
func blockFanOut(t *testing.T, p *Provider, hash string) func() {
	t.Helper()
	block := filepath.Join(p.Store().Dir(), hash[:2])
	if err := os.WriteFile(block, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	return func() {
		if err := os.Remove(block); err != nil {
			t.Fatal(err)
		}
	}
}

// TestBlobPutNeverAnswersALostBlob: blob.put hands out a ref only for a
// blob that is durable. Several uploads of the same bytes whose background
// sync fails must all fail, whichever of their flushes the failure reaches
// first; once the store can write again, the upload succeeds.
func TestBlobPutNeverAnswersALostBlob(t *testing.T) {
	p, _ := provision(t, nil)
	text := "doomed upload"
	hash := cas.Sum([]byte(text))
	unblock := blockFanOut(t, p, hash)
	var wg sync.WaitGroup
	var mu sync.Mutex
	var answered []string
	for range 8 {
		wg.Go(func() {
			for range 4 {
				res, err := call(t, p, "blob.put", map[string]string{"text": text})
				if err == nil {
					mu.Lock()
					answered = append(answered, res.(BlobPutResult).Ref)
					mu.Unlock()
				}
			}
		})
	}
	wg.Wait()
	if len(answered) != 0 {
		t.Fatalf("blob.put answered %d times with the ref of a blob that was never made durable", len(answered))
	}
	unblock()
	_, err := call(t, p, "blob.get", map[string]string{"hash": hash})
	if rpc.CodeOf(err) != rpc.NotFound {
		t.Fatalf("blob.get of the lost blob: %v", err)
	}
	res, err := call(t, p, "blob.put", map[string]string{"text": text})
	if err != nil {
		t.Fatalf("blob.put after the store recovered: %v", err)
	}
	if res.(BlobPutResult).Hash != hash {
		t.Fatal(res)
	}
}
