// Package journal is Shoal's durable history: one row per execution, plan
// apply, approval and PTY open, kept in a bbolt file in the state
// directory, indexed for filtered queries, and the durable store behind
// the journal and session.transcript event channels.
//
// # Writing
//
// One writer goroutine owns every write. [Journal.Append] queues a row and
// waits; the writer takes everything queued, commits it in one bbolt
// transaction (one fsync for the whole batch: group commit), then hands the
// batch's events to the bus in seq order, then answers the waiting calls.
// So an acknowledged row is on disk, and an event is never seen before its
// row is.
//
// # Durable channels
//
// Inside the same transaction each row gets the next seq of the journal
// channel, and rows marked Transcript the next seq of session.transcript;
// a seq → entry_id map per channel lets [Journal.ReadRange] rebuild any
// event from its row. Seqs never repeat and never skip, across restarts
// and crashes, because they are assigned and stored with the row.
//
// # Secrets
//
// Source text passes through [Redact] before it is stored; event payloads
// carry no source at all.
package journal

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"runtime/debug"
	"sync"
	"time"

	"github.com/shoal-sh/shoal/core"
	"github.com/shoal-sh/shoal/core/bus"
	"github.com/shoal-sh/shoal/core/rpc"
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
}

var (
	_ core.Journal     = (*Journal)(nil)
	_ bus.DurableStore = (*Journal)(nil)
	_ Deliverer        = (*bus.Bus)(nil)
	_ core.Closer      = (*Journal)(nil)
)

type request struct {
	row  core.JournalRow
	done chan result // buffered: the writer never blocks on it
}

type result struct {
	row core.JournalRow
	err error
}

const defaultMaxBatch = 1024

// Open opens the journal file at path, creating it when it does not exist.
// A file that exists but is not an intact Shoal journal is an error naming
// the file and what to do; it is never treated as an empty journal.
func Open(path string, opts Options) (*Journal, error) {
	if opts.MaxBatch <= 0 {
		opts.MaxBatch = defaultMaxBatch
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
// crashing the kernel.
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
	epoch, err = check(db, path)
	db.Close()
	db = nil
	if err != nil {
		return nil, "", err
	}
	db, err = openBolt(path, &bolt.Options{NoSync: noSync, NoGrowSync: noSync, FreelistType: bolt.FreelistMapType})
	if err != nil {
		return nil, "", err
	}
	return db, epoch, nil
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
// and it has our buckets and epoch.
func check(db *bolt.DB, path string) (string, error) {
	var epoch string
	err := db.View(func(tx *bolt.Tx) error {
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
		if v := string(meta.Get(keyVersion)); v != schemaVersion {
			return fmt.Errorf("open journal %s: schema version %q, this kernel reads version %q; use a matching shoal or move the file aside", path, v, schemaVersion)
		}
		for _, b := range allBuckets {
			if tx.Bucket(b) == nil {
				return damaged(path, fmt.Errorf("bucket %q is missing", b))
			}
		}
		if epoch = string(meta.Get(keyEpoch)); epoch == "" {
			return damaged(path, errors.New("its epoch is missing"))
		}
		return nil
	})
	return epoch, err
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
	r := &request{row: row, done: make(chan result, 1)}
	select {
	case j.queue <- r:
	case <-j.stopping:
		return core.JournalRow{}, errClosed
	case <-ctx.Done():
		return core.JournalRow{}, ctx.Err()
	}
	select {
	case res := <-r.done:
		return res.row, res.err
	case <-j.stopped:
		// The writer answers everything it took before it stops; a request
		// it did not take was never written.
		select {
		case res := <-r.done:
			return res.row, res.err
		default:
			return core.JournalRow{}, errClosed
		}
	case <-ctx.Done():
		return core.JournalRow{}, ctx.Err()
	}
}

var errClosed = rpc.Errorf(rpc.Unavailable, "the journal is closed (the kernel is stopping); retry once it runs again")

// write is the writer goroutine.
func (j *Journal) write() {
	defer close(j.stopped)
	batch := make([]*request, 0, j.opts.MaxBatch)
	var prev int // rows in the previous batch
	var lastCommit time.Duration
	for {
		batch = batch[:0]
		select {
		case r := <-j.queue:
			batch = append(batch, r)
		case <-j.stopping:
			for {
				batch = j.drain(batch[:0])
				if len(batch) == 0 {
					return
				}
				j.commit(batch)
			}
		}
		j.linger(prev, lastCommit)
		batch = j.drain(batch)
		start := time.Now()
		j.commit(batch)
		prev, lastCommit = len(batch), time.Since(start)
	}
}

// linger briefly holds a batch open while callers are still coming back.
// When the previous batch had several rows, its callers are about to
// append again; waiting a fraction of a commit's cost for the queue to
// refill lets one fsync cover them all instead of starting a half-full
// commit. A lone appender (prev ≤ 1) never waits.
func (j *Journal) linger(prev int, lastCommit time.Duration) {
	if prev <= 1 {
		return
	}
	want := min(prev, j.opts.MaxBatch-1)
	deadline := time.Now().Add(min(lastCommit/4, maxLinger))
	for len(j.queue) < want && time.Now().Before(deadline) {
		time.Sleep(lingerStep)
	}
}

const (
	maxLinger  = 2 * time.Millisecond
	lingerStep = 50 * time.Microsecond
)

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
// answers its callers.
func (j *Journal) commit(batch []*request) {
	rows := make([]storedRow, len(batch))
	lastTS := j.lastTS
	err := j.db.Update(func(tx *bolt.Tx) error {
		setFill(tx)
		rb := tx.Bucket(bucketRows)
		jnext := nextSeq(tx, ChannelJournal)
		tnext := nextSeq(tx, ChannelTranscript)
		now := time.Now().UnixNano()
		lastTS = max(lastTS, now)
		for i, r := range batch {
			id, err := rb.NextSequence()
			if err != nil {
				return err
			}
			s := &rows[i]
			s.JournalRow = r.row
			s.EntryID = id
			if s.TS == 0 {
				s.TS = lastTS
			}
			s.InTranscript = r.row.Transcript
			s.JournalSeq = jnext
			jnext++
			if s.InTranscript {
				seq := tnext
				s.TranscriptSeq = &seq
				tnext++
			}
			if err := putRow(tx, s); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		err = fmt.Errorf("journal %s: commit %d rows: %w", j.path, len(batch), err)
		j.log.Error("journal commit failed", "err", err)
		for _, r := range batch {
			r.done <- result{err: err}
		}
		return
	}
	j.lastTS = lastTS
	if j.opts.Bus != nil {
		j.deliver(rows)
	}
	for i, r := range batch {
		r.done <- result{row: rows[i].row()}
	}
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
// delivery and rebuilt reads, so both carry identical payloads.
func (s *storedRow) event(channel string) bus.Event {
	var payload any
	var seq uint64
	switch channel {
	case ChannelTranscript:
		seq = *s.TranscriptSeq
		payload = transcriptPayload{EntryID: s.EntryID, Session: s.Session, Principal: s.Principal,
			Ref: s.Ref, OK: s.OK, Exit: s.Exit, Head: s.Head}
	default:
		seq = s.JournalSeq
		effects := s.Effects
		if effects == nil {
			effects = []string{}
		}
		payload = journalPayload{EntryID: s.EntryID, TS: s.TS, Session: s.Session, Principal: s.Principal,
			Kind: s.Kind, Head: s.Head, OK: s.OK, Exit: s.Exit, Effects: effects, Ref: s.Ref}
	}
	data, _ := json.Marshal(payload) // plain structs of strings and numbers
	return bus.Event{Channel: channel, Seq: seq, TS: s.TS, Payload: data}
}
