package statedir

import (
	"os"
	"path/filepath"
	"sync"
	"testing"
)

func TestEnsureToken(t *testing.T) {
	dir := t.TempDir()
	// Made at once by many: every caller gets the one on disk.
	var wg sync.WaitGroup
	got := make([]string, 8)
	for i := range got {
		wg.Add(1)
		go func() {
			defer wg.Done()
			tok, err := EnsureToken(dir, HTTPTokenName)
			if err != nil {
				t.Error(err)
			}
			got[i] = tok
		}()
	}
	wg.Wait()
	onDisk, err := ReadToken(dir, HTTPTokenName)
	if err != nil || len(onDisk) != 64 {
		t.Fatalf("token on disk %q: %v", onDisk, err)
	}
	for i, tok := range got {
		if tok != onDisk {
			t.Errorf("caller %d got %q, the file holds %q", i, tok, onDisk)
		}
	}
	path := filepath.Join(dir, HTTPTokenName)
	if fi, _ := os.Stat(path); fi.Mode().Perm() != 0o600 {
		t.Errorf("mode %v", fi.Mode().Perm())
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 1 {
		t.Errorf("left behind: %v", entries)
	}
	// Kept, and set back to 0600.
	os.Chmod(path, 0o644)
	if tok, err := EnsureToken(dir, HTTPTokenName); err != nil || tok != onDisk {
		t.Errorf("second call: %q %v", tok, err)
	}
	if fi, _ := os.Stat(path); fi.Mode().Perm() != 0o600 {
		t.Errorf("mode after: %v", fi.Mode().Perm())
	}
	// A file too short to be a token is replaced.
	os.WriteFile(path, []byte("short\n"), 0o600)
	if tok, err := EnsureToken(dir, HTTPTokenName); err != nil || len(tok) != 64 || tok == onDisk {
		t.Errorf("short file: %q %v", tok, err)
	}
	if _, err := EnsureToken(filepath.Join(dir, "missing"), TokenName); err == nil {
		t.Error("a missing directory made a token")
	}
}
