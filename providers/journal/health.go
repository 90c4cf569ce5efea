package journal

import (
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"sync"
	"syscall"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/shoal-sh/shoal/core/rpc"
)

// Nothing runs unrecorded: before an execution runs, its caller asks
// [Journal.Writable], which refuses (JOURNAL_UNAVAILABLE) while the
// journal is closed, its last commit failed, or its disk is nearly full.
// For the run that fills the disk after the check, the journal keeps a
// reserve: a file of ReserveBytes next to it, given up when a commit
// fails so the commit can be retried in the space it frees.

const (
	// DefaultReserveBytes is the reserve's size.
	DefaultReserveBytes = 4 << 20
	// minFree is the free space below which executions are refused.
	minFree = 1 << 20
	// healthEvery spaces out free-space checks and the probes of a
	// failed journal.
	healthEvery = 250 * time.Millisecond
	// reserveSuffix names the reserve file after the journal's.
	reserveSuffix = ".reserve"
)

// health is what Writable answers from.
type health struct {
	mu      sync.Mutex
	failed  error     // why the journal cannot be written; nil when it can
	checked time.Time // last free-space check or probe
	free    uint64    // free bytes at the last check
	reserve bool      // the reserve file is in place
}

func (j *Journal) reservePath() string { return j.path + reserveSuffix }

// makeReserve puts the reserve file in place (a no-op when it is already
// whole). Its bytes are random, so a compressing file system allocates
// them too.
func (j *Journal) makeReserve() error {
	n := j.opts.ReserveBytes
	if n <= 0 {
		return nil
	}
	path := j.reservePath()
	if fi, err := os.Stat(path); err == nil && fi.Size() == int64(n) {
		return nil
	}
	tmp := path + ".tmp"
	f, err := os.OpenFile(tmp, os.O_CREATE|os.O_TRUNC|os.O_WRONLY, 0o600)
	if err != nil {
		return err
	}
	buf := make([]byte, 64<<10)
	r := rand.NewChaCha8([32]byte{})
	for written := 0; written < n && err == nil; {
		r.Read(buf)
		var w int
		w, err = f.Write(buf[:min(len(buf), n-written)])
		written += w
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp, path)
	}
	if err != nil {
		os.Remove(tmp)
		return fmt.Errorf("journal reserve %s: %w", path, err)
	}
	return nil
}

// useReserve gives the reserve up to make room; false when there was none.
func (j *Journal) useReserve() bool {
	j.health.mu.Lock()
	had := j.health.reserve
	j.health.reserve = false
	j.health.mu.Unlock()
	if !had {
		return false
	}
	if err := os.Remove(j.reservePath()); err != nil {
		j.log.Error("journal: could not give up the reserve", "err", err)
		return false
	}
	j.log.Warn("journal: a commit failed; the reserve was given up to retry it", "reserve", j.reservePath())
	return true
}

// setFailed records why the journal cannot be written (nil: it can).
func (j *Journal) setFailed(err error) {
	j.health.mu.Lock()
	j.health.failed = err
	j.health.mu.Unlock()
}

// Writable reports whether a row appended now would be written. An
// execution asks before it runs; the error is JOURNAL_UNAVAILABLE and
// says why. A journal that failed is probed again (every 250 ms at
// most), so it recovers by itself once the cause is gone.
func (j *Journal) Writable() error {
	select {
	case <-j.stopping:
		return rpc.Errorf(rpc.JournalUnavailable, "the journal is closed (the kernel is stopping); nothing was run: retry once a kernel runs again")
	default:
	}
	h := &j.health
	h.mu.Lock()
	defer h.mu.Unlock()
	if time.Since(h.checked) >= healthEvery {
		h.checked = time.Now()
		h.free = freeBytes(filepath.Dir(j.path))
		if h.failed != nil || !h.reserve {
			j.recoverLocked()
		}
	}
	if h.failed != nil {
		return rpc.Errorf(rpc.JournalUnavailable, "the journal %s cannot be written: %v; nothing was run", j.path, h.failed)
	}
	if h.free < minFree {
		return rpc.Errorf(rpc.JournalUnavailable, "the disk holding the journal %s has %d bytes free, below the %d it keeps for its rows; nothing was run: free some space and retry",
			j.path, h.free, minFree)
	}
	return nil
}

// recoverLocked tries to make a failed journal writable again: the
// reserve back in place, then a probe commit. The caller holds h.mu.
func (j *Journal) recoverLocked() {
	h := &j.health
	if !h.reserve && j.opts.ReserveBytes > 0 {
		if h.free < uint64(j.opts.ReserveBytes)+minFree {
			if h.failed == nil {
				h.failed = fmt.Errorf("the disk is full (%d bytes free; it needs %d to restore its reserve): free some space", h.free, j.opts.ReserveBytes+minFree)
			}
			return
		}
		if err := j.makeReserve(); err != nil {
			h.failed = err
			return
		}
		h.reserve = true
	}
	if h.failed == nil {
		return
	}
	err := j.db.Update(func(tx *bolt.Tx) error {
		return writeBucket(tx, bucketMeta).Put(keyProbe, []byte(time.Now().UTC().Format(time.RFC3339Nano)))
	})
	if err != nil {
		h.failed = fmt.Errorf("a test commit failed: %w", err)
		return
	}
	j.log.Info("journal writable again", "path", j.path)
	h.failed = nil
}

var keyProbe = []byte("probe")

// freeBytes is the space an unprivileged writer may still use on the
// file system holding dir; the maximum when it cannot be read.
func freeBytes(dir string) uint64 {
	var st syscall.Statfs_t
	if err := syscall.Statfs(dir, &st); err != nil {
		return ^uint64(0)
	}
	return st.Bavail * uint64(st.Bsize)
}
