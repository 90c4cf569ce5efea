package cas

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
)

// indexDir holds the indexes of blobs: derived data that says where the
// parts of a large value lie inside its blob (see package spill). An
// index file is written atomically but not synced: one lost in a crash
// only makes reads of its value take the whole-value path again.
const indexDir = "index"

func (s *Store) indexPath(hash string) string {
	return filepath.Join(s.dir, indexDir, hash[:2], hash)
}

// PutIndex records data as the index of blob hash, replacing any.
func (s *Store) PutIndex(hash string, data []byte) error {
	if err := ValidHash(hash); err != nil {
		return err
	}
	p := s.indexPath(hash)
	if err := os.MkdirAll(filepath.Dir(p), 0o700); err != nil {
		return fmt.Errorf("store index of %s: %w", hash, err)
	}
	f, err := os.CreateTemp(filepath.Dir(p), ".idx-*")
	if err != nil {
		return fmt.Errorf("store index of %s: %w", hash, err)
	}
	_, err = f.Write(data)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(f.Name(), p)
	}
	if err != nil {
		os.Remove(f.Name())
		return fmt.Errorf("store index of %s: %w", hash, err)
	}
	return nil
}

// IndexHead returns up to n bytes from the start of blob hash's index,
// and the index's whole size, for a reader that needs only its head.
func (s *Store) IndexHead(hash string, n int) (head []byte, size int64, err error) {
	if err := ValidHash(hash); err != nil {
		return nil, 0, err
	}
	f, err := os.Open(s.indexPath(hash))
	if err != nil {
		return nil, 0, err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, 0, err
	}
	head = make([]byte, min(int64(n), st.Size()))
	if _, err := io.ReadFull(f, head); err != nil {
		return nil, 0, err
	}
	return head, st.Size(), nil
}

// Index returns the index of blob hash; a blob without one is a
// fs.ErrNotExist error.
func (s *Store) Index(hash string) ([]byte, error) {
	if err := ValidHash(hash); err != nil {
		return nil, err
	}
	return os.ReadFile(s.indexPath(hash))
}

// dropIndex removes the index of a removed blob.
func (s *Store) dropIndex(hash string) {
	if err := os.Remove(s.indexPath(hash)); err != nil && !errors.Is(err, fs.ErrNotExist) {
		s.log.Warn("remove blob index", "hash", hash, "err", err)
	}
}

// ReadRange returns n bytes of blob hash from offset off, unchecked: the
// caller checks them against a hash of its own (a value's index keeps one
// per part). A missing blob is NOT_FOUND; a range past its end is an
// error.
func (s *Store) ReadRange(hash string, off int64, n int) ([]byte, error) {
	if err := ValidHash(hash); err != nil {
		return nil, err
	}
	f, _, err := s.openFetching(hash)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	buf := make([]byte, n)
	if _, err := f.ReadAt(buf, off); err != nil {
		return nil, fmt.Errorf("read blob %s at %d+%d: %w", hash, off, n, err)
	}
	return buf, nil
}
