package cas

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
)

// Write-behind
//
// A put writes and hashes its temp file, then hands the file to a
// background syncer and returns: the blob is readable at once (reads find
// it through the pending map) but not yet durable. The syncer fsyncs the
// file, renames it into place and fsyncs the fan-out directories, in that
// order, so a blob file under dir/ab/cd/ still either holds its complete
// bytes or does not exist. [Store.Flush] is the durability point: it waits
// until every put that returned before it was called has gone through the
// syncer and reports the first failure among them.

const (
	// maxUnsettled bounds the puts handed to the syncer and not yet settled
	// (each holds an open temp file); a put beyond it waits for the syncer.
	maxUnsettled = 256
	// syncWorkers is how many temp files of one batch are fsynced at once.
	syncWorkers = 4
)

// pendingBlob is a put that returned and is not yet durable.
type pendingBlob struct {
	hash string
	f    *os.File // the temp file, still open so its fsync sees every write error
	size int64
	seq  uint64 // order of hand-over; Flush waits for a sequence number
	// deleted is set by Delete: the syncer drops the temp file instead of
	// renaming it into place.
	deleted bool
}

// failure is a put whose background sync failed, kept until a Flush
// covering it has reported it.
type failure struct {
	seq uint64
	err error
	// reportedAt is the flush ticket current when a Flush first returned
	// this failure (0: not yet). Every Flush with a ticket up to it (those
	// already waiting then) reports it too; later ones do not.
	reportedAt uint64
}

// behind is the write-behind state of a Store. All fields are guarded by mu.
type behind struct {
	mu      sync.Mutex
	changed sync.Cond // broadcast when a batch settles or the syncer stops

	pending map[string]*pendingBlob // by hash: readable, not yet durable
	live    map[string]struct{}     // temp file names this process owns (writing or pending)
	queue   []*pendingBlob          // handed over, not yet taken by the syncer

	putSeq    uint64 // sequence number of the last hand-over
	doneSeq   uint64 // every hand-over up to this one is settled
	unsettled int    // handed over and not yet settled
	limit     int    // most unsettled puts before a put waits (maxUnsettled; tests lower it)
	waiting   int    // puts waiting for the syncer to make room
	running   bool   // a syncer goroutine is alive
	closed    bool   // Close was called: puts sync inline

	failures []*failure
	// failed holds the hashes whose last settled put failed. Such a blob
	// may still be in its place (its directory sync failed, or an older
	// damaged file is there) but is not durable: a put of it is not
	// skipped as already present, and FlushBlob does not accept it,
	// until a put of it settles.
	failed   map[string]struct{}
	tickets  uint64 // flush calls started
	flushing int    // flush calls in progress
}

func (b *behind) init() {
	b.changed.L = &b.mu
	b.pending = map[string]*pendingBlob{}
	b.live = map[string]struct{}{}
	b.failed = map[string]struct{}{}
	b.limit = maxUnsettled
}

// createTemp creates a temp file for a put and registers it as live, so a
// collection never sweeps it. The store's shared lock makes creation and
// registration one step as far as the sweep (which holds it alone) sees.
func (s *Store) createTemp() (*os.File, error) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	f, err := os.CreateTemp(filepath.Join(s.dir, tmpDir), "put-*")
	if err != nil {
		return nil, fmt.Errorf("store blob: %w", err)
	}
	s.wb.mu.Lock()
	s.wb.live[filepath.Base(f.Name())] = struct{}{}
	s.wb.mu.Unlock()
	return f, nil
}

// forget drops a temp file name from the live set once the file is gone
// or renamed.
func (s *Store) forget(name string) {
	s.wb.mu.Lock()
	delete(s.wb.live, filepath.Base(name))
	s.wb.mu.Unlock()
}

// isLive reports whether a temp file name belongs to a put of this process.
func (s *Store) isLive(name string) bool {
	s.wb.mu.Lock()
	defer s.wb.mu.Unlock()
	_, ok := s.wb.live[name]
	return ok
}

// pendingFile returns the temp path and size of a pending blob.
func (s *Store) pendingFile(hash string) (string, int64, bool) {
	s.wb.mu.Lock()
	defer s.wb.mu.Unlock()
	if p := s.wb.pending[hash]; p != nil {
		return p.f.Name(), p.size, true
	}
	return "", 0, false
}

// isPending reports whether a put of hash is pending.
func (s *Store) isPending(hash string) bool {
	s.wb.mu.Lock()
	defer s.wb.mu.Unlock()
	return s.wb.pending[hash] != nil
}

// finish completes a put whose bytes are all in the temp file f: in the
// background normally, inline when syncing is off or the store is closed.
func (s *Store) finish(f *os.File, hash string, size int64) error {
	wb := &s.wb
	wb.mu.Lock()
	if s.noSync || wb.closed {
		wb.mu.Unlock()
		return s.commit(f, hash)
	}
	for wb.unsettled >= wb.limit && wb.pending[hash] == nil {
		wb.waiting++
		wb.changed.Wait()
		wb.waiting--
		if wb.closed {
			// Close was called meanwhile and may have returned: do not
			// start a syncer behind its back.
			wb.mu.Unlock()
			return s.commit(f, hash)
		}
	}
	if wb.pending[hash] != nil {
		// The same bytes are already on their way; that put makes them
		// durable, and a Flush after this call waits for it.
		wb.mu.Unlock()
		return s.abandon(f, nil)
	}
	wb.putSeq++
	p := &pendingBlob{hash: hash, f: f, size: size, seq: wb.putSeq}
	wb.pending[hash] = p
	wb.queue = append(wb.queue, p)
	wb.unsettled++
	if !wb.running {
		wb.running = true
		go s.syncLoop()
	}
	wb.mu.Unlock()
	return nil
}

// syncLoop settles batches until nothing is queued. Puts that arrive while
// a batch is being synced form the next batch.
func (s *Store) syncLoop() {
	wb := &s.wb
	for {
		wb.mu.Lock()
		batch := wb.queue
		wb.queue = nil
		if len(batch) == 0 {
			wb.running = false
			wb.changed.Broadcast()
			wb.mu.Unlock()
			return
		}
		wb.mu.Unlock()

		errs := s.settle(batch)

		wb.mu.Lock()
		for i, p := range batch {
			if wb.pending[p.hash] == p {
				delete(wb.pending, p.hash)
			}
			delete(wb.live, filepath.Base(p.f.Name()))
			if errs[i] != nil {
				wb.failures = append(wb.failures, &failure{seq: p.seq, err: errs[i]})
				wb.failed[p.hash] = struct{}{}
			} else if !p.deleted {
				delete(wb.failed, p.hash)
			}
		}
		wb.doneSeq = batch[len(batch)-1].seq
		wb.unsettled -= len(batch)
		wb.changed.Broadcast()
		wb.mu.Unlock()
		for i, p := range batch {
			if errs[i] != nil {
				s.log.Error("content store: a stored blob could not be made durable", "hash", p.hash, "err", errs[i])
			}
		}
	}
}

// settle makes a batch durable: fsync every temp file (several at once),
// rename each into place, then fsync each touched directory once. It
// returns one error per blob.
func (s *Store) settle(batch []*pendingBlob) []error {
	errs := make([]error, len(batch))
	next := make(chan int)
	var wg sync.WaitGroup
	for range min(syncWorkers, len(batch)) {
		wg.Go(func() {
			for i := range next {
				if err := s.syncFile(batch[i].f); err != nil {
					errs[i] = fmt.Errorf("store blob %s: sync: %w", batch[i].hash, err)
				}
			}
		})
	}
	for i := range batch {
		next <- i
	}
	close(next)
	wg.Wait()

	dirs := map[string][]int{} // directory to sync → blobs that need it
	s.mu.RLock()
	for i, p := range batch {
		name := p.f.Name()
		if err := p.f.Close(); err != nil && errs[i] == nil {
			errs[i] = fmt.Errorf("store blob %s: %w", p.hash, err)
		}
		s.wb.mu.Lock()
		deleted := p.deleted
		s.wb.mu.Unlock()
		if errs[i] != nil || deleted {
			// Never rename bytes whose sync failed: the file under its
			// name would not be known to hold them.
			os.Remove(name)
			continue
		}
		placed, err := s.place(name, p.hash)
		if err != nil {
			errs[i] = err
			continue
		}
		for _, d := range placed {
			dirs[d] = append(dirs[d], i)
		}
	}
	s.mu.RUnlock()
	for d, who := range dirs {
		if err := s.syncDir(d); err != nil {
			for _, i := range who {
				if errs[i] == nil {
					errs[i] = fmt.Errorf("store blob %s: sync %s: %w", batch[i].hash, d, err)
				}
			}
		}
	}
	return errs
}

// Flush makes durable every put that returned before it was called: when
// it returns nil, each of those blobs is synced and renamed into place and
// survives a crash. It returns the first error among those puts whose
// background sync failed (such a blob was dropped: it is no longer in the
// store unless stored again). A failure is returned by the first Flush
// that covers it and by every Flush already waiting at that moment, not by
// later ones.
//
// Whoever records a blob hash somewhere that outlives the process (a
// journal row, a reply to a client) calls Flush after the put and before
// acknowledging the record. A Flush with nothing pending costs a lock.
func (s *Store) Flush() error {
	wb := &s.wb
	wb.mu.Lock()
	defer wb.mu.Unlock()
	target := wb.putSeq
	wb.tickets++
	ticket := wb.tickets
	wb.flushing++
	for wb.doneSeq < target {
		wb.changed.Wait()
	}
	var first error
	for _, f := range wb.failures {
		if f.seq > target || (f.reportedAt != 0 && ticket > f.reportedAt) {
			continue
		}
		if f.reportedAt == 0 {
			f.reportedAt = wb.tickets
		}
		if first == nil {
			first = f.err
		}
	}
	wb.flushing--
	if wb.flushing == 0 {
		kept := wb.failures[:0]
		for _, f := range wb.failures {
			if f.reportedAt == 0 {
				kept = append(kept, f)
			}
		}
		clear(wb.failures[len(kept):])
		wb.failures = kept
	}
	return first
}

// FlushBlob flushes and returns nil only if the blob hash is then durable:
// synced and in its place, not merely pending. Whoever hands out the hash
// of its own put calls it rather than Flush: Flush reports a failed sync to
// the first Flush that covers it, which may be another caller's, and a put
// of bytes already pending relies on the earlier put's sync. An error of
// another blob's sync does not fail it.
func (s *Store) FlushBlob(hash string) error {
	if err := ValidHash(hash); err != nil {
		return err
	}
	var err error
	// The second round covers a put of the same bytes handed over after
	// the first Flush began (stored again after a failure).
	for range 2 {
		err = s.Flush()
		if s.durable(hash) {
			return nil
		}
		if !s.isPending(hash) {
			break
		}
	}
	if err == nil {
		err = errors.New("its sync failed (reported to another caller; see the kernel log) or it was deleted")
	}
	return fmt.Errorf("blob %s was not made durable: %w; store it again", hash, err)
}

// durable reports whether the blob is in its place, no put of it is
// pending and its last settled put did not fail. Checked in that order: a
// blob found in place and then not pending was renamed by a put that has
// since settled (synced its directories) or was already there.
func (s *Store) durable(hash string) bool {
	if _, err := os.Stat(s.path(hash)); err != nil {
		return false
	}
	s.wb.mu.Lock()
	defer s.wb.mu.Unlock()
	_, failed := s.wb.failed[hash]
	return s.wb.pending[hash] == nil && !failed
}

// settled records the outcome of a put synced inline.
func (s *Store) settled(hash string, err error) {
	s.wb.mu.Lock()
	defer s.wb.mu.Unlock()
	if err != nil {
		s.wb.failed[hash] = struct{}{}
	} else {
		delete(s.wb.failed, hash)
	}
}

// skippable reports whether a put of hash may rely on a pending put of
// it (of that size) or on a file in its place: not when the last put of
// it failed.
func (s *Store) skippable(hash string, size int64) (pending, ok bool) {
	s.wb.mu.Lock()
	defer s.wb.mu.Unlock()
	if _, failed := s.wb.failed[hash]; failed {
		return false, false
	}
	p := s.wb.pending[hash]
	return p != nil && p.size == size, true
}

// Close flushes pending puts. Puts after Close still work but are synced
// before they return.
func (s *Store) Close() error {
	s.wb.mu.Lock()
	s.wb.closed = true
	s.wb.mu.Unlock()
	err := s.Flush()
	// Wait for the syncer goroutine itself to finish.
	s.wb.mu.Lock()
	for s.wb.running {
		s.wb.changed.Wait()
	}
	s.wb.mu.Unlock()
	return err
}

// dropPending makes Delete win over a pending put of the same blob: the
// syncer discards the temp file instead of renaming it. The caller holds
// s.mu exclusively, so the syncer is not renaming at this moment.
func (s *Store) dropPending(hash string) {
	s.wb.mu.Lock()
	defer s.wb.mu.Unlock()
	if p := s.wb.pending[hash]; p != nil {
		p.deleted = true
		delete(s.wb.pending, hash)
	}
}
