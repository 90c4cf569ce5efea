package val

import (
	"context"
	"encoding/base64"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"testing"

	"github.com/shoal-sh/shoal/core"
	"github.com/shoal-sh/shoal/core/rpc"
	"github.com/shoal-sh/shoal/core/uri"
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

// TestConcurrentUploadsReadsAndCollections: blob.put of the same and
// different bytes, shoal://val reads and blob.get of every answered ref,
// and collections, all at once. Every answered ref is readable at once
// and, after the provider closes, in its place on disk.
func TestConcurrentUploadsReadsAndCollections(t *testing.T) {
	p, _ := provisionWith(t, nil, &fakeJournal{})
	var (
		wg       sync.WaitGroup
		answered sync.Map // hash → text
	)
	for g := range 4 {
		wg.Go(func() {
			for i := range 15 {
				text := fmt.Sprintf("upload %d (%d)", i, g%2) // two pairs upload the same bytes
				res, err := call(t, p, "blob.put", map[string]string{"text": text})
				if err != nil {
					t.Error(err)
					return
				}
				put := res.(BlobPutResult)
				answered.Store(put.Hash, text)
				u, _ := uri.Parse("shoal://val/" + put.Hash)
				c, err := p.Read(context.Background(), &core.Caller{}, u)
				if err != nil || c.Ref != put.Ref {
					t.Errorf("read %s: %v", put.Ref, err)
					return
				}
				res, err = call(t, p, "blob.get", map[string]string{"hash": put.Ref})
				if err != nil || res.(BlobGetResult).B64 != base64.StdEncoding.EncodeToString([]byte(text)) {
					t.Errorf("blob.get %s: %v", put.Ref, err)
					return
				}
			}
		})
	}
	wg.Go(func() {
		for range 5 {
			if _, err := p.Collect(); err != nil {
				t.Error(err)
			}
		}
	})
	wg.Wait()
	if err := p.Close(); err != nil {
		t.Fatal(err)
	}
	n := 0
	answered.Range(func(k, v any) bool {
		n++
		hash := k.(string)
		got, err := os.ReadFile(filepath.Join(p.Store().Dir(), hash[:2], hash[2:4], hash))
		if err != nil || string(got) != v.(string) {
			t.Errorf("blob %s not in place: %v", hash[:8], err)
		}
		return true
	})
	if n != 30 {
		t.Fatalf("%d distinct uploads answered, want 30", n)
	}
	// After Close the store still takes uploads, durable at once.
	res, err := call(t, p, "blob.put", map[string]string{"text": "after close"})
	if err != nil {
		t.Fatal(err)
	}
	hash := res.(BlobPutResult).Hash
	if _, err := os.Stat(filepath.Join(p.Store().Dir(), hash[:2], hash[2:4], hash)); err != nil {
		t.Fatalf("upload after Close not in place: %v", err)
	}
}
