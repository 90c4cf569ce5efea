package cas

import (
	"encoding/hex"
	"fmt"
	"io"
	"os"
	"sync"
	"syscall"

	"github.com/zeebo/blake3"
)

// The store remembers which blob files it knows to hold the right bytes:
// a file it wrote itself from bytes it hashed, or one a full read found to
// match. It remembers them by file identity — device, inode, size, and the
// modification and change times — so any write, truncation, replacement or
// rename of the file (each sets the change time, which cannot be set back
// by hand) makes the next send check the bytes again. Only the side
// socket's get uses it: it lets a repeated get send the file by
// sendfile(2) without hashing every byte (see docs/store.md).

// maxChecked bounds the memory: the oldest entries are forgotten first.
const maxChecked = 8192

type fileID struct {
	dev, ino     uint64
	size         int64
	mtime, ctime syscall.Timespec
}

func identity(st os.FileInfo) (fileID, bool) {
	sys, ok := st.Sys().(*syscall.Stat_t)
	if !ok {
		return fileID{}, false
	}
	return fileID{dev: uint64(sys.Dev), ino: sys.Ino, size: st.Size(), mtime: sys.Mtim, ctime: sys.Ctim}, true
}

type checkedSet struct {
	mu    sync.Mutex
	m     map[string]fileID
	order []string // insertion order, for forgetting the oldest
}

func (c *checkedSet) note(hash string, id fileID) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.m == nil {
		c.m = map[string]fileID{}
	}
	if _, ok := c.m[hash]; !ok {
		c.order = append(c.order, hash)
	}
	c.m[hash] = id
	for len(c.m) > maxChecked {
		old := c.order[0]
		c.order = c.order[1:]
		delete(c.m, old)
	}
	if len(c.order) > 2*maxChecked {
		// Hashes forgotten by drop still sit in order; compact.
		keep := c.order[:0]
		for _, h := range c.order {
			if _, ok := c.m[h]; ok {
				keep = append(keep, h)
			}
		}
		c.order = keep
	}
}

func (c *checkedSet) has(hash string, id fileID) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	got, ok := c.m[hash]
	return ok && got == id
}

func (c *checkedSet) drop(hash string) {
	c.mu.Lock()
	delete(c.m, hash)
	c.mu.Unlock()
}

// notePlaced remembers the blob file just renamed into place at dst from
// the temp file whose identity before the rename was tmp: its bytes are
// the ones the put hashed.
func (s *Store) notePlaced(hash string, tmp os.FileInfo, dst string) {
	st, err := os.Stat(dst)
	if err != nil || tmp == nil || !os.SameFile(tmp, st) || tmp.Size() != st.Size() {
		return
	}
	if id, ok := identity(st); ok {
		s.checked.note(hash, id)
	}
}

// OpenSend opens blob hash for sending as it is and says whether its file
// is known to hold the right bytes (checked true: it may be sent
// unhashed). When checked is false the caller must have it checked, by
// [Store.Check], before it lets the last of its bytes go.
func (s *Store) OpenSend(hash string) (f *os.File, size int64, checked bool, err error) {
	if err := ValidHash(hash); err != nil {
		return nil, 0, false, err
	}
	f, _, err = s.openFetching(hash)
	if err != nil {
		return nil, 0, false, err
	}
	st, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, 0, false, fmt.Errorf("open blob %s: %w", hash, err)
	}
	id, ok := identity(st)
	return f, st.Size(), ok && s.checked.has(hash, id), nil
}

// Check hashes the whole of f, a file of blob hash from [Store.OpenSend],
// without moving its offset, and remembers it as checked when it matches.
// A mismatch is CORRUPT and quarantines the blob, as any read would.
func (s *Store) Check(hash string, f *os.File) error {
	before, err := f.Stat()
	if err != nil {
		return fmt.Errorf("check blob %s: %w", hash, err)
	}
	h := blake3.New()
	if _, err := io.CopyBuffer(h, io.NewSectionReader(f, 0, 1<<62), make([]byte, chunkSize)); err != nil {
		return fmt.Errorf("check blob %s: %w", hash, err)
	}
	if hex.EncodeToString(h.Sum(nil)) != hash {
		s.checked.drop(hash)
		pending := f.Name() != s.path(hash)
		return s.mismatch(hash, pending, f)
	}
	after, err := f.Stat()
	if err != nil {
		return fmt.Errorf("check blob %s: %w", hash, err)
	}
	id0, ok0 := identity(before)
	id1, ok1 := identity(after)
	if ok0 && ok1 && id0 == id1 && f.Name() == s.path(hash) {
		s.checked.note(hash, id1)
	}
	return nil
}
