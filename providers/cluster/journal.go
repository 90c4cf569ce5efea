package cluster

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/shoal-sh/shoal/core"
	"github.com/shoal-sh/shoal/core/bus"
	"github.com/shoal-sh/shoal/core/rpc"
	"github.com/shoal-sh/shoal/core/wire"
	"github.com/shoal-sh/shoal/providers/journal"
)

// The cluster journal. Every kernel publishes each of its rows, in
// entry_id order, to the SHOAL_JOURNAL stream on subject
// shoal.journal.<kernel id>, and moves its export cursor (kept in its own
// journal) only past rows the stream acknowledged. Each message carries
// Nats-Msg-Id <kernel>:<entry_id>, so a row sent again after a crash or a
// lost ack is dropped by the stream's duplicate window; and after every
// (re)connect the exporter first reads the last row the stream holds for
// this kernel and skips to it, which covers repeats older than the
// window. So no row is lost or stored twice.

// Export limits.
const (
	exportBatch    = 256       // rows per round of async publishes
	maxSourceBytes = 64 << 10  // source kept in an exported row; longer is cut
	exportCursor   = "cluster" // the cursor's name in the journal
	// MaxClusterScan bounds the messages one scope=cluster query reads.
	MaxClusterScan = 100_000
)

type exporter struct {
	c      *Cluster
	j      *journal.Journal
	maxAge time.Duration
	wake   chan struct{}
	done   chan struct{}
	sub    *bus.Subscription

	cursor     atomic.Uint64
	reconcile  atomic.Bool // read the stream's last row for us before the next export
	exported   atomic.Uint64
	mu         sync.Mutex
	lastErr    string
	lastExport time.Time
}

func newExporter(c *Cluster, j *journal.Journal, maxAge time.Duration) *exporter {
	e := &exporter{c: c, j: j, maxAge: maxAge, wake: make(chan struct{}, 1), done: make(chan struct{})}
	e.reconcile.Store(true)
	return e
}

func (e *exporter) poke() {
	select {
	case e.wake <- struct{}{}:
	default:
	}
}

func (e *exporter) reconnected() { e.reconcile.Store(true) }

func (e *exporter) subject() string { return journalSubjectPrefix + e.c.id }

func (e *exporter) streamConfig() jetstream.StreamConfig {
	return jetstream.StreamConfig{
		Name:        journalStream,
		Description: "Shoal cluster journal: every kernel's rows",
		Subjects:    []string{journalSubjectPrefix + ">"},
		Retention:   jetstream.LimitsPolicy,
		Discard:     jetstream.DiscardOld,
		MaxAge:      e.maxAge,
		Storage:     jetstream.FileStorage,
		Replicas:    e.c.cfg.Replicas,
		Duplicates:  10 * time.Minute,
		AllowDirect: true,
	}
}

// start loads the cursor and runs the export loop; a subscription to the
// journal channel wakes it after each commit.
func (e *exporter) start(h *core.Host) {
	if cur, err := e.j.ExportCursor(exportCursor); err == nil {
		e.cursor.Store(cur)
	} else {
		e.noteErr(err)
	}
	if h.Bus != nil {
		if sub, err := h.Bus.Subscribe(journal.ChannelJournal, func(bus.Event) error { e.poke(); return nil }); err == nil {
			e.sub = sub
		}
	}
	e.c.wg.Add(1)
	go e.loop()
}

func (e *exporter) loop() {
	defer e.c.wg.Done()
	defer close(e.done)
	tick := time.NewTicker(2 * time.Second)
	defer tick.Stop()
	e.poke()
	for {
		select {
		case <-e.c.stop:
			return
		case <-e.wake:
		case <-tick.C:
		}
		for {
			more, err := e.exportOnce()
			if err != nil {
				e.noteErr(err)
				break
			}
			if !more {
				break
			}
		}
	}
}

func (e *exporter) noteErr(err error) {
	e.mu.Lock()
	e.lastErr = err.Error()
	e.mu.Unlock()
	e.c.log.Debug("cluster journal export", "err", err)
}

// exportOnce publishes the next batch of rows after the cursor and moves
// the cursor once all are acknowledged. more says another batch waits.
func (e *exporter) exportOnce() (more bool, err error) {
	if !e.c.connected() {
		return false, nil
	}
	ctx, cancel := e.c.ctx()
	defer cancel()
	st, err := e.c.ensureStream(ctx, e.streamConfig())
	if err != nil {
		return false, err
	}
	if e.reconcile.Load() {
		if err := e.skipExported(ctx, st); err != nil {
			return false, err
		}
		e.reconcile.Store(false)
	}
	cur := e.cursor.Load()
	rows, err := e.j.RowsAfter(cur, exportBatch)
	if err != nil || len(rows) == 0 {
		return false, err
	}
	futures := make([]jetstream.PubAckFuture, 0, len(rows))
	for _, r := range rows {
		msg, err := e.message(r)
		if err != nil {
			return false, err
		}
		f, err := e.c.js.PublishMsgAsync(msg, jetstream.WithMsgID(msg.Header.Get(jetstream.MsgIDHeader)), jetstream.WithExpectStream(journalStream))
		if err != nil {
			return false, fmt.Errorf("export row %d: %w", r.EntryID, err)
		}
		futures = append(futures, f)
	}
	for i, f := range futures {
		select {
		case <-f.Ok():
		case err := <-f.Err():
			e.advance(rows, i) // the rows before it are stored
			return false, fmt.Errorf("export row %d: %w", rows[i].EntryID, err)
		case <-ctx.Done():
			e.advance(rows, i)
			return false, fmt.Errorf("export row %d: %w", rows[i].EntryID, ctx.Err())
		}
	}
	if err := e.advance(rows, len(rows)); err != nil {
		return false, err
	}
	return len(rows) == exportBatch, nil
}

// advance moves the cursor past the first n rows, all acknowledged.
func (e *exporter) advance(rows []core.JournalRow, n int) error {
	if n == 0 {
		return nil
	}
	id := rows[n-1].EntryID
	if err := e.j.SetExportCursor(exportCursor, id); err != nil {
		return err
	}
	e.cursor.Store(id)
	e.exported.Add(uint64(n))
	e.mu.Lock()
	e.lastExport = time.Now()
	e.lastErr = ""
	e.mu.Unlock()
	return nil
}

// skipExported moves the cursor to the newest row the stream already
// holds from this kernel, when that is past it (a crash after the acks
// and before the cursor was saved).
func (e *exporter) skipExported(ctx context.Context, st jetstream.Stream) error {
	m, err := st.GetLastMsgForSubject(ctx, e.subject())
	if errors.Is(err, jetstream.ErrMsgNotFound) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("last exported row: %w", err)
	}
	id, err := strconv.ParseUint(m.Header.Get(hdrEntry), 10, 64)
	if err != nil {
		return fmt.Errorf("last exported row has no %s header", hdrEntry)
	}
	if last, _ := e.j.LastEntryID(); id > last {
		// The stream has rows of a kernel with this id that this journal
		// never wrote: another state dir with the same [cluster] name, or
		// a journal that was reset. Exporting on would mix them up.
		return fmt.Errorf("the cluster journal holds row %d from kernel %s, past this journal's last row %d: two kernels share the id, or this journal was reset; give this kernel its own [cluster] name", id, e.c.id, last)
	}
	if id > e.cursor.Load() {
		if err := e.j.SetExportCursor(exportCursor, id); err != nil {
			return err
		}
		e.cursor.Store(id)
	}
	return nil
}

// message is the row as the cluster journal stores it.
func (e *exporter) message(r core.JournalRow) (*nats.Msg, error) {
	cut := false
	if len(r.Source) > maxSourceBytes {
		r.Source, cut = r.Source[:maxSourceBytes], true
	}
	data, err := json.Marshal(exportedRow{ClusterRow: journal.ClusterRow{JournalRow: r, Kernel: e.c.id, Host: e.c.host}, SourceCut: cut})
	if err != nil {
		return nil, err
	}
	msg := &nats.Msg{Subject: e.subject(), Data: data, Header: nats.Header{}}
	msg.Header.Set(jetstream.MsgIDHeader, e.c.id+":"+strconv.FormatUint(r.EntryID, 10))
	msg.Header.Set(hdrEntry, strconv.FormatUint(r.EntryID, 10))
	return msg, nil
}

type exportedRow struct {
	journal.ClusterRow
	SourceCut bool `json:"source_cut,omitempty"`
}

func (e *exporter) status() wire.ClusterExport {
	e.mu.Lock()
	defer e.mu.Unlock()
	last, _ := e.j.LastEntryID()
	cur := e.cursor.Load()
	st := wire.ClusterExport{Cursor: cur, LastEntryID: last, Behind: last - min(cur, last),
		Exported: e.exported.Load(), LastError: e.lastErr}
	if !e.lastExport.IsZero() {
		st.LastExport = e.lastExport.UnixNano()
	}
	return st
}

func (e *exporter) close() {
	if e.sub != nil {
		e.sub.Close()
	}
}

// QueryCluster answers journal.query scope=cluster from the cluster
// journal: the same filters, rows newest first in the stream's order (the
// order kernels exported them; one kernel's rows keep their entry order),
// at most the query's limit, reading at most MaxClusterScan messages.
func (c *Cluster) QueryCluster(ctx context.Context, q journal.Query) (journal.ClusterResult, error) {
	res := journal.ClusterResult{Scope: "cluster", Rows: []journal.ClusterRow{}, Complete: true}
	if err := c.down("journal.query scope=cluster"); err != nil {
		return res, err
	}
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	st, err := c.ensureStream(ctx, c.export.streamConfig())
	if err != nil {
		return res, c.unavailable("journal.query scope=cluster", err)
	}
	info, err := st.Info(ctx)
	if err != nil {
		return res, c.unavailable("journal.query scope=cluster", err)
	}
	first, hi := info.State.FirstSeq, info.State.LastSeq
	if info.State.Msgs == 0 {
		return res, nil
	}
	limit := q.EffectiveLimit()
	chunk := uint64(256)
	for hi >= first {
		if res.Scanned >= MaxClusterScan {
			res.Complete = false
			break
		}
		n := min(chunk, hi-first+1, uint64(MaxClusterScan-res.Scanned))
		lo := hi - n + 1
		msgs, err := fetchRange(ctx, st, lo, hi)
		if err != nil {
			return res, rpc.Errorf(rpc.Internal, "journal.query scope=cluster: read the cluster journal: %v", err)
		}
		res.Scanned += len(msgs)
		for i := len(msgs) - 1; i >= 0; i-- {
			m := msgs[i]
			// A row is exported at or after its ts, so once a message is
			// older than since, every earlier one is too.
			if q.Since != 0 && m.time.UnixNano() < q.Since {
				return res, nil
			}
			var row journal.ClusterRow
			if json.Unmarshal(m.data, &row) != nil || !q.Matches(row.JournalRow) {
				continue
			}
			res.Rows = append(res.Rows, row)
			if len(res.Rows) == limit {
				return res, nil
			}
		}
		if lo == first {
			break
		}
		hi = lo - 1
		chunk = min(chunk*4, 16384)
	}
	return res, nil
}
