// Package cas is Shoal's content store: immutable blobs named by the blake3
// hash of their bytes, kept as plain files under the state directory.
//
// # Layout
//
// A blob with hash abcd…(64 lowercase hex) lives at dir/ab/cd/abcd…. Writes
// go to dir/tmp first and are renamed into place after an fsync, so a blob
// file either holds its complete bytes or does not exist; two writers of the
// same bytes race harmlessly to the same name. Blobs that fail their hash
// check are moved to dir/quarantine and never served.
//
// # Durability
//
// [Store.Put] and [Store.PutReader] return once the bytes are written and
// hashed; the fsync and rename happen in the background (write-behind). The
// blob is readable at once, but it is durable only after [Store.Flush]
// returns nil. Whoever records a hash that must survive a crash (a journal
// row, a reply to a client) calls Flush before acknowledging it. A crash
// before the sync leaves only a temp file, which reads ignore and
// collection removes.
//
// # Integrity
//
// Every read hashes what it returns: [Store.Get] before returning, the reader
// from [Store.Open] as it streams (the mismatch surfaces at EOF). A mismatch is
// a CORRUPT kernel error.
//
// # Garbage collection
//
// [Store.GC] removes blobs nobody keeps and that are older than a minimum
// age. Storing bytes that already exist refreshes the blob's modification
// time, so a value being put right now is always young and survives a
// concurrent collection until its referrer records it; a blob still being
// synced is never removed.
package cas

import (
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/shoal-sh/shoal/core/rpc"
	"github.com/shoal-sh/shoal/internal/clip"
	"github.com/zeebo/blake3"
)

// HashLen is the length of a blob hash: 32 bytes as lowercase hex.
const HashLen = 64

// RefPrefix starts the short ref of a blob (val:blake3:<hex>).
const RefPrefix = "val:blake3:"

const (
	tmpDir        = "tmp"
	quarantineDir = "quarantine"
	// chunkSize is the unit PutReader reads, hashes and writes in; large
	// enough for blake3's SIMD paths and for few write syscalls.
	chunkSize = 1 << 20
	// overlapMin is the size from which Put writes while it hashes
	// instead of hashing first (which spares writing a duplicate).
	overlapMin = 2 * chunkSize
	// quarantineKeep is how long a quarantined blob is kept for inspection.
	quarantineKeep = 7 * 24 * time.Hour
)

// Store is a content store rooted at one directory. It is safe for
// concurrent use, also by several processes sharing the directory.
type Store struct {
	dir    string
	noSync bool
	log    *slog.Logger

	// mu orders a put's final step (touch or rename) against GC's removal
	// of the same blob: puts share it, a removal holds it alone.
	mu sync.RWMutex

	// wb is the write-behind state: pending puts and the syncer.
	wb behind
	// syncFile makes a temp file's data durable, syncDir a directory's
	// entries; tests replace them.
	syncFile func(*os.File) error
	syncDir  func(string) error

	rootsMu sync.Mutex
	roots   map[string]Roots

	// checked remembers blob files known to hold the right bytes (see
	// checked.go).
	checked checkedSet

	remoteHolder // see SetRemote
}

// Options tune a Store. The zero value is what the kernel uses.
type Options struct {
	// NoSync skips fsync of blobs and directories. Only for tests and
	// benchmarks: a crash may then leave a blob missing.
	NoSync bool
	// Log receives quarantine notices; nil discards them.
	Log *slog.Logger
}

// Roots reports the blob hashes a holder (the journal, a transcript) still
// needs; yield is called once per hash. It is an alias so that holders can
// register without importing this package.
type Roots = func(yield func(hash string)) error

// Open opens (creating if needed) the store rooted at dir.
func Open(dir string) (*Store, error) { return OpenWith(dir, Options{}) }

// OpenWith opens the store rooted at dir with options.
func OpenWith(dir string, o Options) (*Store, error) {
	for _, d := range []string{dir, filepath.Join(dir, tmpDir), filepath.Join(dir, quarantineDir)} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			return nil, fmt.Errorf("open content store: %w", err)
		}
	}
	log := o.Log
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	s := &Store{dir: dir, noSync: o.NoSync, log: log, roots: map[string]Roots{}, syncFile: (*os.File).Sync, syncDir: fsyncDir}
	s.wb.init()
	return s, nil
}

// Dir is the store's root directory.
func (s *Store) Dir() string { return s.dir }

// ValidHash reports whether h is a well-formed blob hash (64 lowercase hex
// characters), as an INVALID_PARAMS error when it is not.
func ValidHash(h string) error {
	if len(h) != HashLen {
		return rpc.Errorf(rpc.InvalidParams, "blob hash %q has %d characters; a blake3 hash is 64 lowercase hex characters", clip.String(h, 80), len(h))
	}
	if !isLowerHex(h) {
		return rpc.Errorf(rpc.InvalidParams, "blob hash %q is not lowercase hex; a blake3 hash is 64 lowercase hex characters", clip.String(h, 80))
	}
	return nil
}

func isLowerHex(s string) bool {
	for i := 0; i < len(s); i++ {
		if c := s[i]; !('0' <= c && c <= '9' || 'a' <= c && c <= 'f') {
			return false
		}
	}
	return true
}

// ParseRef returns the hash named by any accepted spelling of a blob
// reference: "val:blake3:<hex>", "blake3:<hex>" or the bare "<hex>".
func ParseRef(ref string) (string, error) {
	h := strings.TrimPrefix(ref, "val:")
	h = strings.TrimPrefix(h, "blake3:")
	if err := ValidHash(h); err != nil {
		return "", err
	}
	return h, nil
}

// Ref is the short ref of a hash: val:blake3:<hex>.
func Ref(hash string) string { return RefPrefix + hash }

// Sum returns the hash of data as the store names it.
func Sum(data []byte) string {
	sum := blake3.Sum256(data)
	return hex.EncodeToString(sum[:])
}

func (s *Store) path(hash string) string {
	return filepath.Join(s.dir, hash[0:2], hash[2:4], hash)
}

// Put stores data and returns its hash. Storing bytes that are already
// present writes nothing and refreshes the blob's age. The blob is readable
// when Put returns and durable after the next [Store.Flush].
//
// A large value is written while it is hashed (see [Store.PutReader]);
// bytes found already present then cost a write to a temp file that is
// dropped.
func (s *Store) Put(data []byte) (string, error) {
	hash, err := s.put(data)
	if err == nil {
		s.stored(hash)
	}
	return hash, err
}

func (s *Store) put(data []byte) (string, error) {
	if len(data) >= overlapMin {
		hash, _, err := s.store(func(w *blobWriter) error {
			_, err := w.Write(data)
			return err
		}, false)
		return hash, err
	}
	hash := Sum(data)
	err := s.putKnown(hash, int64(len(data)), func(f *os.File) error {
		_, err := f.Write(data)
		return err
	})
	if err != nil {
		return "", err
	}
	return hash, nil
}

// putKnown stores the size bytes write writes to a temp file as the blob
// hash, which the caller computed from those very bytes; nothing is
// written when the blob is there already.
func (s *Store) putKnown(hash string, size int64, write func(f *os.File) error) error {
	if s.present(hash, size) {
		return nil
	}
	f, err := s.createTemp()
	if err != nil {
		return err
	}
	if err := write(f); err != nil {
		return s.abandon(f, fmt.Errorf("store blob: %w", err))
	}
	return s.finish(f, hash, size)
}

// PutReader streams r into the store and returns the hash and size of what
// it read. Hashing and writing overlap, so on a fast disk the cost is close
// to hashing alone; an in-memory source (*bytes.Reader, *strings.Reader)
// is not even copied. Like [Store.Put], the blob is durable after the next
// [Store.Flush].
func (s *Store) PutReader(r io.Reader) (hash string, size int64, err error) {
	return s.putReader(r, false)
}

// PutReaderDurable is PutReader followed by FlushBlob: it returns once the
// blob is durable. The disk starts writing the bytes while they are still
// arriving, so the wait at the end is short: the cost is close to the
// slower of the disk and the hashing, not their sum.
func (s *Store) PutReaderDurable(r io.Reader) (hash string, size int64, err error) {
	hash, size, err = s.putReader(r, true)
	if err == nil {
		err = s.FlushBlob(hash)
	}
	if err != nil {
		return "", 0, err
	}
	return hash, size, nil
}

func (s *Store) putReader(r io.Reader, early bool) (hash string, size int64, err error) {
	hash, size, err = s.store(func(w *blobWriter) error {
		_, err := io.Copy(w, r)
		return err
	}, early)
	if err == nil {
		s.stored(hash)
	}
	return hash, size, err
}

// PutPieces stores the slices one after the other as one blob and
// returns its hash and size, as PutReader would of their concatenation
// but without copying them: batches of them are written while the ones
// before are hashed. The slices must not change until it returns.
func (s *Store) PutPieces(pieces [][]byte) (hash string, size int64, err error) {
	hash, size, err = s.store(func(w *blobWriter) error { return w.writePieces(pieces) }, false)
	if err == nil {
		s.stored(hash)
	}
	return hash, size, err
}

// PutPiecesSummed is PutPieces of slices whose hash the caller has
// computed already, as PutPieces would return it (the blake3 of their
// concatenation, in hex): it neither hashes them again nor, when that
// blob is stored already, writes anything. It is for a caller that hashed
// these very bytes as it made them (spill, hashing a command's output as
// it arrives); a wrong hash would store the bytes under a name that is
// not theirs, which a get that checks the blob then refuses. The slices
// must not change until it returns.
func (s *Store) PutPiecesSummed(pieces [][]byte, hash string) (size int64, err error) {
	if err := ValidHash(hash); err != nil {
		return 0, err
	}
	for _, p := range pieces {
		size += int64(len(p))
	}
	err = s.putKnown(hash, size, func(f *os.File) error { return writeBuffers(f, pieces) })
	if err != nil {
		return 0, err
	}
	s.stored(hash)
	return size, nil
}

// present reports whether a blob of that hash and size exists or is
// pending, refreshing its age when it exists so that a collection running
// now keeps it.
func (s *Store) present(hash string, size int64) bool {
	if pending, ok := s.skippable(hash, size); !ok || pending {
		return pending
	}
	s.mu.RLock()
	defer s.mu.RUnlock()
	p := s.path(hash)
	st, err := os.Stat(p)
	if err != nil || st.Size() != size {
		// A blob of the wrong size is damaged: the new write replaces it.
		return false
	}
	now := time.Now()
	return os.Chtimes(p, now, now) == nil
}

// commit makes the temp file f durable and renames it into place before
// returning: the inline path, used when syncing is off or after Close.
func (s *Store) commit(f *os.File, hash string) (err error) {
	defer s.forget(f.Name())
	defer func() { s.settled(hash, err) }()
	if !s.noSync {
		if err := s.syncFile(f); err != nil {
			return s.abandon(f, fmt.Errorf("store blob %s: sync: %w", hash, err))
		}
	}
	if err := f.Close(); err != nil {
		os.Remove(f.Name())
		return fmt.Errorf("store blob %s: %w", hash, err)
	}
	s.mu.RLock()
	defer s.mu.RUnlock()
	dirs, err := s.place(f.Name(), hash)
	if err != nil || s.noSync {
		return err
	}
	for _, d := range dirs {
		if err := s.syncDir(d); err != nil {
			return fmt.Errorf("store blob %s: sync %s: %w", hash, d, err)
		}
	}
	return nil
}

// place renames the synced temp file name into the blob's place, creating
// its fan-out directories, and returns the directories whose entries must
// be synced for the blob to survive a crash. On failure the temp file is
// removed. The caller holds s.mu shared.
func (s *Store) place(name, hash string) (dirs []string, err error) {
	dst := s.path(hash)
	fan := filepath.Dir(dst)
	_, statErr := os.Stat(fan)
	if err := os.MkdirAll(fan, 0o700); err != nil {
		os.Remove(name)
		return nil, fmt.Errorf("store blob %s: %w", hash, err)
	}
	tmp, _ := os.Stat(name)
	if err := os.Rename(name, dst); err != nil {
		os.Remove(name)
		return nil, fmt.Errorf("store blob %s: %w", hash, err)
	}
	s.notePlaced(hash, tmp, dst)
	dirs = []string{fan}
	if statErr != nil {
		// The fan-out directories are new: their own entries must reach
		// the disk too, or the blob could vanish with them in a crash.
		dirs = append(dirs, filepath.Dir(fan), s.dir)
	}
	return dirs, nil
}

// abandon closes and removes a temp file, returning err.
func (s *Store) abandon(f *os.File, err error) error {
	f.Close()
	os.Remove(f.Name())
	s.forget(f.Name())
	return err
}

func fsyncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}

// Get returns the blob's bytes after checking them against the hash. A
// missing blob is NOT_FOUND; a damaged one is CORRUPT, quarantined and
// never returned.
func (s *Store) Get(hash string) ([]byte, error) {
	if err := ValidHash(hash); err != nil {
		return nil, err
	}
	f, pending, err := s.openFetching(hash)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	data, err := readAll(f)
	if err != nil {
		return nil, fmt.Errorf("read blob %s: %w", hash, err)
	}
	if Sum(data) != hash {
		return nil, s.mismatch(hash, pending, f)
	}
	return data, nil
}

// readAll reads f to its end, sized by its current length as os.ReadFile does.
func readAll(f *os.File) ([]byte, error) {
	size := 512
	if st, err := f.Stat(); err == nil && st.Size() < 1<<40 {
		size = max(size, int(st.Size())+1)
	}
	data := make([]byte, 0, size)
	for {
		n, err := f.Read(data[len(data):cap(data)])
		data = data[:len(data)+n]
		if err == io.EOF {
			return data, nil
		}
		if err != nil {
			return nil, err
		}
		if len(data) == cap(data) {
			data = append(data, 0)[:len(data)]
		}
	}
}

// openBlob opens a blob where it is: its pending temp file while the put
// is being synced, else its place in the fan-out. pending says which.
//
// The syncer renames a temp file into place before it drops the blob from
// the pending map, so a blob that was pending when looked up is found
// under one of the two names, and one that was not is at its place.
func (s *Store) openBlob(hash string) (f *os.File, pending bool, err error) {
	if tmp, _, ok := s.pendingFile(hash); ok {
		if f, err := os.Open(tmp); err == nil {
			return f, true, nil
		}
		// Renamed into place since (or dropped by a failed sync).
	}
	f, err = os.Open(s.path(hash))
	return f, false, err
}

// openFetching is openBlob that first fetches a missing blob from the
// cluster's remote store, if there is one.
func (s *Store) openFetching(hash string) (*os.File, bool, error) {
	f, pending, err := s.openBlob(hash)
	if err != nil {
		if err = s.fetchMissing(hash, err); err != nil {
			return nil, false, err
		}
		if f, pending, err = s.openBlob(hash); err != nil {
			return nil, false, s.readError(hash, err)
		}
	}
	return f, pending, nil
}

// mismatch is the CORRUPT error for a blob that failed its check, read
// from f. Only a blob at its place is quarantined; a pending temp file is
// left to the syncer (a later read from the place quarantines it).
func (s *Store) mismatch(hash string, pending bool, f *os.File) error {
	if pending {
		return rpc.Errorf(rpc.Corrupt, "blob %s failed its blake3 check while being stored; it will not be served. Produce the value again", hash)
	}
	return s.corrupt(hash, f)
}

// Open returns a reader of the blob and its size. The reader checks the
// bytes as they stream: when they do not match the hash, the read that
// reaches the end fails with CORRUPT instead of io.EOF. A caller that stops
// early has not had the bytes checked.
func (s *Store) Open(hash string) (io.ReadCloser, int64, error) {
	if err := ValidHash(hash); err != nil {
		return nil, 0, err
	}
	f, pending, err := s.openFetching(hash)
	if err != nil {
		return nil, 0, err
	}
	st, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, 0, fmt.Errorf("open blob %s: %w", hash, err)
	}
	return &verifier{f: f, h: blake3.New(), hash: hash, store: s, pending: pending}, st.Size(), nil
}

type verifier struct {
	f       *os.File
	h       *blake3.Hasher
	hash    string
	store   *Store
	pending bool  // f is a pending put's temp file
	err     error // sticky result once the end was reached
}

func (v *verifier) Read(p []byte) (int, error) {
	if v.err != nil {
		return 0, v.err
	}
	n, err := v.f.Read(p)
	v.h.Write(p[:n])
	if err == io.EOF {
		if hex.EncodeToString(v.h.Sum(nil)) != v.hash {
			v.err = v.store.mismatch(v.hash, v.pending, v.f)
			return n, v.err
		}
		v.err = io.EOF
	} else if err != nil {
		v.err = fmt.Errorf("read blob %s: %w", v.hash, err)
	}
	return n, v.err
}

func (v *verifier) Close() error { return v.f.Close() }

// Has reports whether the blob is present (without checking its bytes). A
// blob still being synced is present.
func (s *Store) Has(hash string) bool {
	if ValidHash(hash) != nil {
		return false
	}
	if s.isPending(hash) {
		return true
	}
	_, err := os.Stat(s.path(hash))
	return err == nil
}

// Size returns the blob's size in bytes.
func (s *Store) Size(hash string) (int64, error) {
	if err := ValidHash(hash); err != nil {
		return 0, err
	}
	if _, size, ok := s.pendingFile(hash); ok {
		return size, nil
	}
	st, err := os.Stat(s.path(hash))
	if err != nil {
		if err = s.fetchMissing(hash, err); err != nil {
			return 0, err
		}
		if st, err = os.Stat(s.path(hash)); err != nil {
			if _, size, ok := s.pendingFile(hash); ok {
				return size, nil
			}
			return 0, s.readError(hash, err)
		}
	}
	return st.Size(), nil
}

// Delete removes the blob. Deleting a missing blob is not an error; a
// pending put of it is dropped instead of being renamed into place.
func (s *Store) Delete(hash string) error {
	if err := ValidHash(hash); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.dropPending(hash)
	if err := os.Remove(s.path(hash)); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("delete blob %s: %w", hash, err)
	}
	s.dropIndex(hash)
	s.checked.drop(hash)
	return nil
}

func (s *Store) readError(hash string, err error) error {
	if errors.Is(err, fs.ErrNotExist) {
		return rpc.Errorf(rpc.NotFound, "no blob %s in the content store: it was never stored here or was garbage-collected; produce the value again", hash)
	}
	return fmt.Errorf("read blob %s: %w", hash, err)
}

// corrupt moves the damaged blob read from f aside so it is never served
// again (a later put of the right bytes stores it afresh) and returns the
// CORRUPT error. The file at the blob's place is moved only if it is still
// the one that was read: a put may have replaced it with the right bytes
// since.
func (s *Store) corrupt(hash string, f *os.File) error {
	read, err := f.Stat()
	s.mu.Lock()
	dst := filepath.Join(s.dir, quarantineDir, fmt.Sprintf("%s.%d", hash, time.Now().UnixNano()))
	if err == nil {
		var cur os.FileInfo
		if cur, err = os.Stat(s.path(hash)); err == nil && !os.SameFile(read, cur) {
			err = fs.ErrNotExist // replaced since the read: not ours to move
		}
	}
	if err == nil {
		err = os.Rename(s.path(hash), dst)
	}
	s.checked.drop(hash)
	s.mu.Unlock()
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		s.log.Error("content store: cannot quarantine damaged blob", "hash", hash, "err", err)
	} else if err == nil {
		s.log.Warn("content store: damaged blob quarantined", "hash", hash, "path", dst)
	}
	return rpc.Errorf(rpc.Corrupt, "blob %s failed its blake3 check and was quarantined; it will not be served. Produce the value again (storing the same bytes repairs it)", hash)
}
