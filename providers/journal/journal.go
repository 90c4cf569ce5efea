// Package journal is Shoal's durable history: one row per execution, plan
// apply, approval and PTY open, kept in a bbolt file in the state
// directory, indexed for filtered queries, and the durable store behind
// the journal and session.transcript event channels.
//
// # Writing
//
// One writer goroutine owns every write. [Journal.Append] encodes its row
// and queues it, then waits; the writer takes everything queued, commits
// it in one bbolt transaction (one commit for the whole batch: group
// commit), then hands the batch's events to the bus in seq order, then
// answers the waiting calls. So an acknowledged row is on disk, and an
// event is never seen before its row is.
//
// # Index lag
//
// A batch's transaction writes its rows and their transcript seq
// mappings, but not their index entries: those are written for many
// batches at once, in one transaction, when enough rows are waiting for
// them (indexLag), when the writer has been idle for a moment, and at
// Close and Open. A commit's cost is mostly the pages it dirties, and
// every index dirties a page per distinct value per commit, so this
// divides that cost by the number of batches in between. The meta key
// "indexed" says how far the indexes reach; queries read the rows past it
// (the tail, at most a few thousand, kept decoded in memory) directly and
// merge them in, so a row is found by a query as soon as it is
// acknowledged.
//
// # Durable channels
//
// Inside the same transaction each row gets the next seq of the journal
// channel (its entry_id - 1), and rows marked Transcript the next seq of
// session.transcript, whose seq → entry_id map is stored with the row;
// so [Journal.ReadRange] rebuilds any event from its row. Seqs never
// repeat and never skip, across restarts and crashes, because they are
// assigned and stored with the row.
//
// # Secrets
//
// Source text passes through [Redact] before it is stored; event payloads
// carry no source at all.
package journal

import (
	"context"
	"crypto/rand"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"os"
	"path/filepath"
	"runtime/debug"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/shoal-sh/shoal/core"
	"github.com/shoal-sh/shoal/core/bus"
	"github.com/shoal-sh/shoal/core/rpc"
	"github.com/shoal-sh/shoal/core/value"
	"github.com/shoal-sh/shoal/providers/val/cas"
	bolt "go.etcd.io/bbolt"
	berrors "go.etcd.io/bbolt/errors"
)

// Deliverer receives committed events in seq order; *bus.Bus is one.
type Deliverer interface {
	Deliver(ev bus.Event) error
}

// Options tune a Journal. The zero value is what the kernel uses, minus
// the bus.
type Options struct {
	// Bus receives the journal and session.transcript events after each
	// commit. Nil means no delivery.
	Bus Deliverer
	// NoSync skips fsync. Only for tests and benchmarks: a crash may then
	// lose acknowledged rows.
	NoSync bool
	// MaxBatch caps the rows committed in one transaction (default 1024).
	MaxBatch int
	// Log receives delivery failures; nil discards them.
	Log *slog.Logger
	// ReserveBytes is the size of the reserve file kept next to the
	// journal and given up when a commit fails for want of space
	// (DefaultReserveBytes when zero, none when negative).
	ReserveBytes int

	// indexLag is how many committed rows may wait for their index
	// entries before the writer writes them (default defaultIndexLag;
	// 1 indexes after every commit). Tests vary it.
	indexLag int
	// idleFlush is how long the writer waits for more appends before it
	// indexes the waiting rows anyway (default defaultIdleFlush).
	idleFlush time.Duration
}

// Journal is the durable journal. It implements [core.Journal] and
// [bus.DurableStore].
type Journal struct {
	db    *bolt.DB
	path  string
	epoch string
	opts  Options
	log   *slog.Logger

	queue    chan *request
	stopping chan struct{}
	stopped  chan struct{}
	stopOnce sync.Once

	// lastTS keeps stamped timestamps from going backwards when the wall
	// clock does; only the writer touches it.
	lastTS int64

	// tail holds the committed rows that have no index entries yet,
	// oldest first, with contiguous entry_ids. Only the writer changes
	// it (under tailMu); queries take a snapshot. The slice's elements
	// are never overwritten, so a snapshot stays valid.
	tailMu sync.RWMutex
	tail   []*storedRow
	// indexRetry is when the writer may next try to write the tail's
	// index entries after a failure (zero: any time). Writer only.
	indexRetry time.Time

	stats  stats
	health health
}

// stats are the journal's running counters (see [Journal.Stats]).
type stats struct {
	rows, commits, waitNS, commitNS atomic.Uint64
}

// Stats returns the running counters since the journal was opened.
func (j *Journal) Stats() core.JournalStats {
	return core.JournalStats{Rows: j.stats.rows.Load(), Commits: j.stats.commits.Load(),
		WaitNS: j.stats.waitNS.Load(), CommitNS: j.stats.commitNS.Load()}
}

var (
	_ core.Journal     = (*Journal)(nil)
	_ bus.DurableStore = (*Journal)(nil)
	_ Deliverer        = (*bus.Bus)(nil)
	_ core.Closer      = (*Journal)(nil)
)

type request struct {
	row  core.JournalRow
	body []byte      // the row's encoded body (encodeBody), made by Append
	done chan result // buffered: the writer never blocks on it
}

type result struct {
	row core.JournalRow
	err error
}

const (
	defaultMaxBatch  = 1024
	defaultIndexLag  = 1024
	defaultIdleFlush = 20 * time.Millisecond
	// indexRetryAfter spaces out attempts to write index entries after
	// one failed; the rows keep being committed meanwhile.
	indexRetryAfter = 5 * time.Second
)

// Open opens the journal file at path, creating it when it does not exist.
// A file that exists but is not an intact Shoal journal is an error naming
// the file and what to do; it is never treated as an empty journal.
func Open(path string, opts Options) (*Journal, error) {
	if opts.MaxBatch <= 0 {
		opts.MaxBatch = defaultMaxBatch
	}
	if opts.indexLag <= 0 {
		opts.indexLag = defaultIndexLag
	}
	if opts.idleFlush <= 0 {
		opts.idleFlush = defaultIdleFlush
	}
	if opts.ReserveBytes == 0 {
		opts.ReserveBytes = DefaultReserveBytes
	}
	log := opts.Log
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	fi, err := os.Stat(path)
	switch {
	case errors.Is(err, os.ErrNotExist):
		if err := create(path); err != nil {
			return nil, err
		}
	case err != nil:
		return nil, fmt.Errorf("open journal: %w", err)
	case fi.Size() == 0:
		// Open never leaves an empty file behind (see create), so this
		// one lost its contents.
		return nil, damaged(path, errors.New("the file is empty (0 bytes), so its rows are gone"))
	}
	db, epoch, err := openDB(path, opts.NoSync)
	if err != nil {
		return nil, err
	}
	j := &Journal{
		db:       db,
		path:     path,
		epoch:    epoch,
		opts:     opts,
		log:      log,
		queue:    make(chan *request, 4*opts.MaxBatch),
		stopping: make(chan struct{}),
		stopped:  make(chan struct{}),
	}
	// Rows a crash left unindexed are indexed before anything else.
	if err := j.loadTail(); err != nil {
		db.Close()
		return nil, err
	}
	j.flushIndexes() // on failure the rows stay in the tail; the writer retries
	if err := j.makeReserve(); err != nil {
		// Opened all the same (refusing to start would be worse); the
		// journal reports itself unwritable until the reserve is back.
		log.Error("journal: no reserve", "err", err)
		j.health.failed = fmt.Errorf("its reserve could not be made (%v): free some space", err)
	} else {
		j.health.reserve = opts.ReserveBytes > 0
	}
	go j.write()
	return j, nil
}

// create makes a new, initialized journal at path atomically: it is built
// under a temporary name and linked into place, so a crash during creation
// leaves either no journal or a whole empty one, never a file that could
// be mistaken for a damaged one or a damaged one for a new one.
func create(path string) error {
	dir := filepath.Dir(path)
	f, err := os.CreateTemp(dir, ".journal-*.db")
	if err != nil {
		return fmt.Errorf("create journal: %w", err)
	}
	tmp := f.Name()
	f.Close()
	defer os.Remove(tmp)
	db, err := bolt.Open(tmp, 0o600, &bolt.Options{Timeout: lockTimeout})
	if err != nil {
		return fmt.Errorf("create journal: %w", err)
	}
	_, err = initialize(db)
	if cerr := db.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("create journal: %w", err)
	}
	// Link, not rename: when another process created the journal at the
	// same moment, its file wins and ours is dropped.
	if err := os.Link(tmp, path); err != nil && !errors.Is(err, os.ErrExist) {
		return fmt.Errorf("create journal: %w", err)
	}
	return syncDir(dir)
}

func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return fmt.Errorf("create journal: %w", err)
	}
	defer d.Close()
	if err := d.Sync(); err != nil {
		return fmt.Errorf("create journal: sync %s: %w", dir, err)
	}
	return nil
}

// openDB opens an existing journal file. It is first opened read-only and
// checked, because bbolt maps the file into memory and a write-mode open
// already reads pages a truncated file no longer has. Memory faults are
// turned into panics here and reported as a damaged journal instead of
// crashing the kernel. A version 1 file is upgraded in place.
func openDB(path string, noSync bool) (db *bolt.DB, epoch string, err error) {
	defer debug.SetPanicOnFault(debug.SetPanicOnFault(true))
	defer func() {
		if r := recover(); r != nil {
			if db != nil {
				db.Close()
			}
			db, epoch, err = nil, "", damaged(path, fmt.Errorf("reading it failed: %v", r))
		}
	}()
	db, err = openBolt(path, &bolt.Options{ReadOnly: true})
	if err != nil {
		return nil, "", err
	}
	epoch, version, err := check(db, path)
	db.Close()
	db = nil
	if err != nil {
		return nil, "", err
	}
	db, err = openBolt(path, writeOptions(noSync))
	if err != nil {
		return nil, "", err
	}
	if version == schemaVersionV1 {
		if err := migrate(db, path); err != nil {
			db.Close()
			return nil, "", err
		}
	}
	return db, epoch, nil
}

// writeOptions are the bbolt options of the writing open.
func writeOptions(noSync bool) *bolt.Options {
	return &bolt.Options{NoSync: noSync, NoGrowSync: noSync, FreelistType: bolt.FreelistMapType}
}

// lockTimeout is how long Open waits for another holder of the file.
var lockTimeout = 2 * time.Second

func openBolt(path string, o *bolt.Options) (*bolt.DB, error) {
	o.Timeout = lockTimeout
	db, err := bolt.Open(path, 0o600, o)
	switch {
	case err == nil:
		return db, nil
	case errors.Is(err, berrors.ErrTimeout):
		return nil, fmt.Errorf("open journal %s: another process holds it (is another kernel running on this state directory?); stop it or use another --state-dir", path)
	case errors.Is(err, os.ErrNotExist), errors.Is(err, os.ErrPermission):
		return nil, fmt.Errorf("open journal: %w", err)
	default:
		// Invalid or mismatched meta pages, a checksum failure, a file
		// too small to be a database: all mean the file cannot be trusted.
		return nil, damaged(path, err)
	}
}

// check verifies that an existing file is a whole Shoal journal: its size
// covers every page the metadata claims (checked before any page is read),
// and it has our buckets and epoch. It returns the epoch and the schema
// version, which is this one or version 1.
func check(db *bolt.DB, path string) (epoch, version string, err error) {
	err = db.View(func(tx *bolt.Tx) error {
		fi, err := os.Stat(path)
		if err != nil {
			return err
		}
		if fi.Size() < tx.Size() {
			return damaged(path, fmt.Errorf("the file is %d bytes but its pages reach %d bytes: it was truncated", fi.Size(), tx.Size()))
		}
		meta := tx.Bucket(bucketMeta)
		if meta == nil {
			return damaged(path, errors.New("it is a bbolt file but not a Shoal journal (no meta bucket)"))
		}
		version = string(meta.Get(keyVersion))
		want := allBuckets
		switch version {
		case schemaVersion:
			if len(meta.Get(keyIndexed)) != 8 {
				return damaged(path, errors.New("its index watermark (meta \"indexed\") is missing"))
			}
		case schemaVersionV1:
			want = append(want[:len(want):len(want)], bucketSeqJournalV1)
		default:
			return fmt.Errorf("open journal %s: schema version %q, this kernel reads versions %q and %q; use a matching shoal or move the file aside", path, version, schemaVersionV1, schemaVersion)
		}
		for _, b := range want {
			if tx.Bucket(b) == nil {
				return damaged(path, fmt.Errorf("bucket %q is missing", b))
			}
		}
		if epoch = string(meta.Get(keyEpoch)); epoch == "" {
			return damaged(path, errors.New("its epoch is missing"))
		}
		return nil
	})
	return epoch, version, err
}

// migrate upgrades a version 1 file to version 2 in one transaction: its
// rows keep their JSON encoding (still read) and are all indexed; its
// seq.journal map, which version 1 kept equal to entry_id - 1, is checked
// at both ends and dropped.
func migrate(db *bolt.DB, path string) error {
	err := db.Update(func(tx *bolt.Tx) error {
		rows := tx.Bucket(bucketRows)
		seqs := tx.Bucket(bucketSeqJournalV1)
		firstRow, _ := rows.Cursor().First()
		lastRow, _ := rows.Cursor().Last()
		firstSeq, firstID := seqs.Cursor().First()
		lastSeq, lastID := seqs.Cursor().Last()
		u := func(b []byte) uint64 {
			if len(b) != 8 {
				return math.MaxUint64
			}
			return binary.BigEndian.Uint64(b)
		}
		consistent := firstRow == nil && firstSeq == nil && rows.Sequence() == 0 ||
			firstRow != nil && firstSeq != nil &&
				u(firstSeq)+1 == u(firstID) && u(firstID) == u(firstRow) &&
				u(lastSeq)+1 == u(lastID) && u(lastID) == u(lastRow) && u(lastRow) == rows.Sequence()
		if !consistent {
			return damaged(path, errors.New("its journal seqs do not match its rows (version 1 file)"))
		}
		if err := tx.DeleteBucket(bucketSeqJournalV1); err != nil {
			return err
		}
		meta := tx.Bucket(bucketMeta)
		if err := meta.Put(keyIndexed, be64(rows.Sequence())); err != nil {
			return err
		}
		return meta.Put(keyVersion, []byte(schemaVersion))
	})
	if err != nil {
		return fmt.Errorf("open journal %s: upgrade from schema version 1: %w", path, err)
	}
	return nil
}

func initialize(db *bolt.DB) (string, error) {
	var b [8]byte
	rand.Read(b[:])
	epoch := hex.EncodeToString(b[:])
	err := db.Update(func(tx *bolt.Tx) error {
		for _, name := range allBuckets {
			if _, err := tx.CreateBucketIfNotExists(name); err != nil {
				return err
			}
		}
		meta := tx.Bucket(bucketMeta)
		if err := meta.Put(keyVersion, []byte(schemaVersion)); err != nil {
			return err
		}
		if err := meta.Put(keyIndexed, be64(0)); err != nil {
			return err
		}
		return meta.Put(keyEpoch, []byte(epoch))
	})
	if err != nil {
		return "", fmt.Errorf("create journal: %w", err)
	}
	return epoch, nil
}

func damaged(path string, why error) error {
	return fmt.Errorf("journal %s is damaged or not a Shoal journal: %v. The kernel will not use it: move it aside (mv %s %s.broken) to start a new journal, or restore it from a backup", path, why, path, path)
}

// Path is the journal file.
func (j *Journal) Path() string { return j.path }

// Append stores a row durably and returns it with EntryID and TS filled in
// (TS is kept when the caller set it). Source is redacted first. When ctx
// ends while the row is queued the call returns ctx's error, and the row
// may still be committed.
func (j *Journal) Append(ctx context.Context, row core.JournalRow) (core.JournalRow, error) {
	row.Source = Redact(row.Source)
	if row.Effects == nil {
		row.Effects = []string{}
	}
	// The row stays in memory (the tail) until its index entries are
	// written, so it keeps a copy of the caller's slice: a caller reusing
	// its own must not change what queries find. The answer gives the
	// caller's slice back.
	effects := row.Effects
	row.Effects = slices.Clone(effects)
	// Encoded here, on the caller's goroutine, so the writer only adds
	// what the commit assigns.
	start := time.Now()
	r := &request{row: row, body: encodeBody(&row), done: make(chan result, 1)}
	select {
	case j.queue <- r:
	case <-j.stopping:
		return core.JournalRow{}, errClosed
	case <-ctx.Done():
		return core.JournalRow{}, ctx.Err()
	}
	select {
	case res := <-r.done:
		if res.err == nil {
			j.stats.rows.Add(1)
			j.stats.waitNS.Add(uint64(time.Since(start)))
		}
		return res.answer(effects)
	case <-j.stopped:
		// The writer answers everything it took before it stops; a request
		// it did not take was never written.
		select {
		case res := <-r.done:
			return res.answer(effects)
		default:
			return core.JournalRow{}, errClosed
		}
	case <-ctx.Done():
		return core.JournalRow{}, ctx.Err()
	}
}

// answer is what Append returns for res: the stored row, with the
// caller's effects slice instead of the journal's copy.
func (res result) answer(effects []string) (core.JournalRow, error) {
	if res.err != nil {
		return core.JournalRow{}, res.err
	}
	res.row.Effects = effects
	return res.row, nil
}

var errClosed = rpc.Errorf(rpc.Unavailable, "the journal is closed (the kernel is stopping); retry once it runs again")

// write is the writer goroutine.
func (j *Journal) write() {
	defer close(j.stopped)
	batch := make([]*request, 0, j.opts.MaxBatch)
	var prev int // rows in the previous batch
	var lastCommit time.Duration
	idle := time.NewTimer(time.Hour)
	idle.Stop()
	for {
		batch = batch[:0]
		if len(j.tail) > 0 {
			idle.Reset(max(j.opts.idleFlush, time.Until(j.indexRetry)))
		}
		select {
		case r := <-j.queue:
			batch = append(batch, r)
		case <-idle.C:
			j.flushIndexes()
			prev = 0
			continue
		case <-j.stopping:
			for {
				batch = j.drain(batch[:0])
				if len(batch) == 0 {
					break
				}
				j.commit(batch)
			}
			j.flushIndexes()
			return
		}
		idle.Stop()
		batch = j.drain(batch)
		batch = j.linger(batch, prev, lastCommit)
		start := time.Now()
		j.commit(batch)
		prev, lastCommit = len(batch), time.Since(start)
		j.stats.commits.Add(1)
		j.stats.commitNS.Add(uint64(lastCommit))
	}
}

// linger briefly holds a batch open while callers are still coming back.
// When the previous batch had several rows, its callers are about to
// append again; waiting a fraction of a commit's cost for as many rows as
// the previous batch had lets one commit cover them all instead of
// starting a half-full one, with the stragglers' commit behind it. A lone
// appender never waits. The writer takes each request as it arrives, so
// it stops waiting the moment the last one is in.
func (j *Journal) linger(batch []*request, prev int, lastCommit time.Duration) []*request {
	want := min(prev, j.opts.MaxBatch)
	if len(batch) >= want {
		return batch
	}
	t := time.NewTimer(min(lastCommit/4, maxLinger))
	defer t.Stop()
	for len(batch) < want {
		select {
		case r := <-j.queue:
			batch = append(batch, r)
		case <-t.C:
			return batch
		}
	}
	return batch
}

const maxLinger = 2 * time.Millisecond

// drain adds whatever is queued, up to the batch limit, without waiting.
func (j *Journal) drain(batch []*request) []*request {
	for len(batch) < j.opts.MaxBatch {
		select {
		case r := <-j.queue:
			batch = append(batch, r)
		default:
			return batch
		}
	}
	return batch
}

// commit writes one batch in one transaction, delivers its events, then
// answers its callers. The rows' index entries wait in the tail until it
// holds indexLag rows; then the transaction also writes the whole tail's
// index entries, so the index pages cost no commit of their own. If that
// transaction fails, the batch is tried once more without the indexes,
// so a problem there never keeps rows from being written.
func (j *Journal) commit(batch []*request) {
	rows := make([]storedRow, len(batch))
	index := len(j.tail)+len(batch) >= j.opts.indexLag && time.Now().After(j.indexRetry)
	lastTS, err := j.commitTx(batch, rows, index)
	if err != nil && index {
		j.log.Error("journal commit with index entries failed; committing the rows alone", "err", err)
		j.indexRetry = time.Now().Add(indexRetryAfter)
		index = false
		lastTS, err = j.commitTx(batch, rows, false)
	}
	if err != nil && j.useReserve() {
		// Most likely the disk is full: retry in the space the reserve
		// leaves, and refuse new executions until it is back.
		lastTS, err = j.commitTx(batch, rows, false)
		index = false
		if err == nil {
			j.setFailed(errors.New("the disk is full (a commit needed the journal's reserve): free some space"))
		}
	}
	if err != nil {
		err = fmt.Errorf("journal %s: commit %d rows: %w", j.path, len(batch), err)
		j.log.Error("journal commit failed", "err", err)
		j.setFailed(err)
		for _, r := range batch {
			r.done <- result{err: err}
		}
		return
	}
	j.lastTS = lastTS
	if index {
		j.setTail(nil)
	} else {
		tail := slices.Grow(j.tail, len(rows))
		for i := range rows {
			tail = append(tail, &rows[i])
		}
		j.setTail(tail)
	}
	if j.opts.Bus != nil {
		j.deliver(rows)
	}
	for i, r := range batch {
		r.done <- result{row: rows[i].row()}
	}
}

// commitTx is commit's transaction: it fills rows from batch and writes
// them, and with index also the index entries of the tail and the batch.
func (j *Journal) commitTx(batch []*request, rows []storedRow, index bool) (lastTS int64, err error) {
	size := 0
	for _, r := range batch {
		size += rowHeadMax + len(r.body)
	}
	// One buffer holds every encoded row of the batch; bbolt keeps
	// references to the values until the commit, and nothing reuses it.
	buf := make([]byte, 0, size)
	encoded := make([][]byte, len(batch))
	lastTS = j.lastTS
	err = j.db.Update(func(tx *bolt.Tx) error {
		rb := writeBucket(tx, bucketRows)
		sb := writeBucket(tx, bucketSeqTranscript)
		id := lastRowID(tx)
		tnext := nextSeq(tx, ChannelTranscript)
		tfirst, tids := tnext, []byte(nil)
		lastTS = max(lastTS, time.Now().UnixNano())
		for i, r := range batch {
			id++
			s := &rows[i]
			*s = storedRow{JournalRow: r.row, InTranscript: r.row.Transcript, JournalSeq: id - 1}
			s.EntryID = id
			if s.TS == 0 {
				s.TS = lastTS
			}
			if s.InTranscript {
				seq := tnext
				s.TranscriptSeq = &seq
				tnext++
			}
			start := len(buf)
			buf = append(appendRowHead(buf, s), r.body...)
			encoded[i] = buf[start:len(buf):len(buf)]
			if s.TranscriptSeq != nil {
				tids = binary.BigEndian.AppendUint64(tids, id)
			}
			if h, ok := strings.CutPrefix(s.Ref, cas.RefPrefix); ok && cas.ValidHash(h) == nil {
				// With the row, never later: the content store's collector
				// must see every reference an acknowledged row holds.
				if err := writeBucket(tx, bucketValRefs).Put([]byte(h), nil); err != nil {
					return fmt.Errorf("row %d: blob ref: %w", id, err)
				}
			}
		}
		// A few values for the batch: blocks of rows (or a row alone).
		for start, n := range rowChunks(encoded) {
			value := encoded[start]
			if n > 1 {
				value = encodeRowBlock(encoded[start : start+n])
			}
			if err := rb.Put(be64(rows[start].EntryID), value); err != nil {
				return fmt.Errorf("rows %d to %d: %w", rows[start].EntryID, rows[start+n-1].EntryID, err)
			}
		}
		if err := rb.SetSequence(id); err != nil {
			return err
		}
		if len(tids) > 0 {
			// One block for the batch's transcript seqs (see walkSeqsDown).
			if err := sb.Put(be64(tfirst), tids); err != nil {
				return fmt.Errorf("transcript seqs: %w", err)
			}
		}
		if !index {
			return nil
		}
		all := slices.Grow(slices.Clip(j.tail), len(rows))
		for i := range rows {
			all = append(all, &rows[i])
		}
		if err := putIndexes(tx, all); err != nil {
			return err
		}
		return tx.Bucket(bucketMeta).Put(keyIndexed, be64(id))
	})
	return lastTS, err
}

func (j *Journal) setTail(tail []*storedRow) {
	j.tailMu.Lock()
	j.tail = tail
	j.tailMu.Unlock()
}

// tailSnapshot is the current tail for a reader.
func (j *Journal) tailSnapshot() []*storedRow {
	j.tailMu.RLock()
	defer j.tailMu.RUnlock()
	return j.tail
}

// flushIndexes writes the tail's index entries in one transaction and
// moves the "indexed" watermark past them. On failure the rows stay in the
// tail, where queries still find them, and the next flush tries again.
func (j *Journal) flushIndexes() error {
	if len(j.tail) == 0 {
		return nil
	}
	tail := j.tail
	last := tail[len(tail)-1].EntryID
	err := j.db.Update(func(tx *bolt.Tx) error {
		if err := putIndexes(tx, tail); err != nil {
			return err
		}
		return tx.Bucket(bucketMeta).Put(keyIndexed, be64(last))
	})
	if err != nil {
		err = fmt.Errorf("journal %s: index rows %d to %d: %w", j.path, tail[0].EntryID, last, err)
		j.log.Error("journal index write failed", "err", err)
		j.indexRetry = time.Now().Add(indexRetryAfter)
		return err
	}
	// A new slice: snapshots taken before keep the old one intact.
	j.setTail(nil)
	return nil
}

// loadTail reads the rows past the index watermark: after a crash, the
// rows committed since the last index write.
func (j *Journal) loadTail() error {
	var tail []*storedRow
	err := j.db.View(func(tx *bolt.Tx) error {
		rows := tx.Bucket(bucketRows)
		from, to := indexedThrough(tx), lastRowID(tx)
		for id := from + 1; id <= to && id > from; id++ {
			s, err := decodeRow(rows, id)
			if err != nil {
				return err
			}
			tail = append(tail, s)
		}
		return nil
	})
	if err != nil {
		return damaged(j.path, fmt.Errorf("reading its unindexed rows failed: %v", err))
	}
	j.tail = tail
	return nil
}

// deliver hands a committed batch's events to the bus: first every journal
// event, then every transcript event, each in seq order.
func (j *Journal) deliver(rows []storedRow) {
	for i := range rows {
		j.deliverOne(rows[i].event(ChannelJournal))
	}
	for i := range rows {
		if rows[i].TranscriptSeq != nil {
			j.deliverOne(rows[i].event(ChannelTranscript))
		}
	}
}

func (j *Journal) deliverOne(ev bus.Event) {
	if err := j.opts.Bus.Deliver(ev); err != nil {
		// The row is committed; a reader past the ring still gets the
		// event from the store, so this only loses live fan-out.
		j.log.Error("journal event not delivered", "channel", ev.Channel, "seq", ev.Seq, "err", err)
	}
}

// Close stops the writer after it has committed everything queued, then
// closes the file. Appends after Close fail with UNAVAILABLE.
func (j *Journal) Close() error {
	j.stopOnce.Do(func() { close(j.stopping) })
	<-j.stopped
	if err := j.db.Close(); err != nil {
		return fmt.Errorf("close journal %s: %w", j.path, err)
	}
	return nil
}

// BlobRefs reports every content-store hash a row references through a
// val:blake3:<hex> ref, so the store's collector keeps them.
func (j *Journal) BlobRefs(yield func(hash string)) error {
	return j.db.View(func(tx *bolt.Tx) error {
		return tx.Bucket(bucketValRefs).ForEach(func(k, _ []byte) error {
			yield(string(k))
			return nil
		})
	})
}

// journalPayload is the journal channel's event payload: the row without
// its source text.
type journalPayload struct {
	EntryID   uint64   `json:"entry_id"`
	TS        int64    `json:"ts"`
	Session   string   `json:"session"`
	Principal string   `json:"principal"`
	Kind      string   `json:"kind"`
	Head      string   `json:"head"`
	OK        bool     `json:"ok"`
	Exit      int      `json:"exit"`
	Effects   []string `json:"effects"`
	Ref       string   `json:"ref,omitempty"`
}

// transcriptPayload is the session.transcript channel's event payload.
type transcriptPayload struct {
	EntryID   uint64 `json:"entry_id"`
	Session   string `json:"session"`
	Principal string `json:"principal"`
	Ref       string `json:"ref,omitempty"`
	OK        bool   `json:"ok"`
	Exit      int    `json:"exit"`
	Head      string `json:"head"`
}

// event builds the row's event on channel; the same function serves live
// delivery and rebuilt reads, so both carry identical payloads. The
// payload is journalPayload or transcriptPayload encoded by hand (the
// writer builds these for every row before it answers the batch), which
// TestEventPayloads checks against encoding/json.
func (s *storedRow) event(channel string) bus.Event {
	var seq uint64
	n := 160 + len(s.Session) + len(s.Principal) + len(s.Kind) + len(s.Head) + len(s.Ref)
	for _, e := range s.Effects {
		n += len(e) + 3
	}
	b := make([]byte, 0, n)
	b = append(b, `{"entry_id":`...)
	b = strconv.AppendUint(b, s.EntryID, 10)
	switch channel {
	case ChannelTranscript:
		seq = *s.TranscriptSeq
		b = appendField(b, "session", s.Session)
		b = appendField(b, "principal", s.Principal)
		if s.Ref != "" {
			b = appendField(b, "ref", s.Ref)
		}
		b = append(b, `,"ok":`...)
		b = strconv.AppendBool(b, s.OK)
		b = append(b, `,"exit":`...)
		b = strconv.AppendInt(b, int64(s.Exit), 10)
		b = appendField(b, "head", s.Head)
	default:
		seq = s.JournalSeq
		b = append(b, `,"ts":`...)
		b = strconv.AppendInt(b, s.TS, 10)
		b = appendField(b, "session", s.Session)
		b = appendField(b, "principal", s.Principal)
		b = appendField(b, "kind", s.Kind)
		b = appendField(b, "head", s.Head)
		b = append(b, `,"ok":`...)
		b = strconv.AppendBool(b, s.OK)
		b = append(b, `,"exit":`...)
		b = strconv.AppendInt(b, int64(s.Exit), 10)
		b = append(b, `,"effects":[`...)
		for i, e := range s.Effects {
			if i > 0 {
				b = append(b, ',')
			}
			b = value.AppendQuoted(b, e)
		}
		b = append(b, ']')
		if s.Ref != "" {
			b = appendField(b, "ref", s.Ref)
		}
	}
	b = append(b, '}')
	return bus.Event{Channel: channel, Seq: seq, TS: s.TS, Payload: b}
}

// appendField appends ,"name":"value".
func appendField(b []byte, name, v string) []byte {
	b = append(b, ',', '"')
	b = append(b, name...)
	b = append(b, '"', ':')
	return value.AppendQuoted(b, v)
}
