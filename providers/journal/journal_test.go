package journal

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/shoal-sh/shoal/core"
	"github.com/shoal-sh/shoal/core/bus"
	"github.com/shoal-sh/shoal/core/rpc"
	bolt "go.etcd.io/bbolt"
)

// recorder is a bus stand-in that checks seq order per channel.
type recorder struct {
	mu     sync.Mutex
	events map[string][]bus.Event
	err    error
}

func (r *recorder) Deliver(ev bus.Event) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.events == nil {
		r.events = map[string][]bus.Event{}
	}
	evs := r.events[ev.Channel]
	if want := uint64(len(evs)); ev.Seq != want && r.err == nil {
		r.err = fmt.Errorf("%s: delivered seq %d, want %d", ev.Channel, ev.Seq, want)
	}
	r.events[ev.Channel] = append(evs, ev)
	return nil
}

func openJournal(t testing.TB, path string, opts Options) *Journal {
	t.Helper()
	if path == "" {
		path = filepath.Join(t.TempDir(), FileName)
	}
	j, err := Open(path, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { j.Close() })
	return j
}

func appendRow(t testing.TB, j *Journal, row core.JournalRow) core.JournalRow {
	t.Helper()
	got, err := j.Append(context.Background(), row)
	if err != nil {
		t.Fatal(err)
	}
	return got
}

// appendAll appends rows through concurrent callers, so they commit in
// large batches, and returns them as stored (in no particular order).
func appendAll(t testing.TB, j *Journal, rows []core.JournalRow) []core.JournalRow {
	t.Helper()
	out := make([]core.JournalRow, len(rows))
	var wg sync.WaitGroup
	const workers = 16
	for w := range workers {
		wg.Go(func() {
			for i := w; i < len(rows); i += workers {
				r, err := j.Append(context.Background(), rows[i])
				if err != nil {
					t.Error(err)
					return
				}
				out[i] = r
			}
		})
	}
	wg.Wait()
	if t.Failed() {
		t.FailNow()
	}
	return out
}

func TestAppendFillsAndRedacts(t *testing.T) {
	j := openJournal(t, "", Options{})
	got := appendRow(t, j, core.JournalRow{
		Session: "main", Principal: "agent:a", Kind: "exec", Head: "curl",
		Source: "curl -H 'Authorization: Bearer abcdefghijklmnop' https://x", OK: true,
	})
	if got.EntryID != 1 || got.TS == 0 {
		t.Fatalf("entry_id %d ts %d", got.EntryID, got.TS)
	}
	if strings.Contains(got.Source, "abcdefghijklmnop") || !strings.Contains(got.Source, Marker) {
		t.Fatalf("source not redacted: %q", got.Source)
	}
	if got.Effects == nil {
		t.Fatal("effects stored as null")
	}
	rows, err := j.Query(Query{})
	if err != nil || len(rows) != 1 || rows[0].Source != got.Source {
		t.Fatalf("stored row: %+v, %v", rows, err)
	}
	kept := appendRow(t, j, core.JournalRow{TS: 12345, Head: "ls"})
	if kept.TS != 12345 {
		t.Fatalf("caller's ts replaced: %d", kept.TS)
	}
}

// TestGroupCommit hammers Append from many goroutines and checks that every
// row got a distinct id, that ids and seqs have no gap, and that events
// reached the bus in seq order with the payload of their row.
func TestGroupCommit(t *testing.T) {
	rec := &recorder{}
	j := openJournal(t, "", Options{Bus: rec, NoSync: true})
	const writers, each = 32, 40
	var wg sync.WaitGroup
	results := make(chan core.JournalRow, writers*each)
	for w := range writers {
		wg.Go(func() {
			for i := range each {
				row, err := j.Append(context.Background(), core.JournalRow{
					Session: "main", Principal: fmt.Sprintf("agent:%d", w), Head: "echo",
					Source: fmt.Sprintf("echo %d", i), Transcript: i%2 == 0, OK: true,
				})
				if err != nil {
					t.Error(err)
					return
				}
				results <- row
			}
		})
	}
	wg.Wait()
	close(results)
	seen := map[uint64]core.JournalRow{}
	for r := range results {
		if _, dup := seen[r.EntryID]; dup {
			t.Fatalf("entry_id %d given twice", r.EntryID)
		}
		seen[r.EntryID] = r
	}
	const n = writers * each
	for id := uint64(1); id <= n; id++ {
		if _, ok := seen[id]; !ok {
			t.Fatalf("entry_id %d missing: ids have a gap", id)
		}
	}
	if rec.err != nil {
		t.Fatal(rec.err)
	}
	if got := len(rec.events[ChannelJournal]); got != n {
		t.Fatalf("%d journal events, want %d", got, n)
	}
	if got := len(rec.events[ChannelTranscript]); got != n/2 {
		t.Fatalf("%d transcript events, want %d", got, n/2)
	}
	for _, ev := range rec.events[ChannelJournal] {
		var p journalPayload
		if err := json.Unmarshal(ev.Payload, &p); err != nil {
			t.Fatal(err)
		}
		if r := seen[p.EntryID]; r.Principal != p.Principal || r.TS != ev.TS {
			t.Fatalf("event seq %d does not describe row %d", ev.Seq, p.EntryID)
		}
	}
	for _, ch := range []string{ChannelJournal, ChannelTranscript} {
		next, _ := j.NextSeq(ch)
		if next != uint64(len(rec.events[ch])) {
			t.Fatalf("%s next seq %d after %d events", ch, next, len(rec.events[ch]))
		}
	}
	// The counters add up: every row answered, in at most one commit each,
	// and time counted for the waits and the transactions.
	st := j.Stats()
	if st.Rows != n || st.Commits == 0 || st.Commits > n {
		t.Fatalf("stats %+v after %d rows", st, n)
	}
	if st.WaitNS == 0 || st.CommitNS == 0 {
		t.Fatalf("stats %+v: no time counted", st)
	}
}

func TestSeqsContinueAcrossReopen(t *testing.T) {
	path := filepath.Join(t.TempDir(), FileName)
	j, err := Open(path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	epoch := j.Epoch()
	for i := range 5 {
		appendRow(t, j, core.JournalRow{Head: "a", Transcript: i < 3})
	}
	if err := j.Close(); err != nil {
		t.Fatal(err)
	}
	if err := j.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}

	rec := &recorder{}
	j2 := openJournal(t, path, Options{Bus: rec})
	if j2.Epoch() != epoch {
		t.Fatalf("epoch changed across reopen: %s → %s", epoch, j2.Epoch())
	}
	for ch, want := range map[string]uint64{ChannelJournal: 5, ChannelTranscript: 3} {
		if next, err := j2.NextSeq(ch); err != nil || next != want {
			t.Fatalf("%s next seq after reopen = %d, %v; want %d", ch, next, err, want)
		}
	}
	row := appendRow(t, j2, core.JournalRow{Head: "b", Transcript: true})
	if row.EntryID != 6 {
		t.Fatalf("entry_id after reopen = %d, want 6", row.EntryID)
	}
	if evs := rec.events[ChannelJournal]; len(evs) != 1 || evs[0].Seq != 5 {
		t.Fatalf("journal event after reopen: %+v", evs)
	}
	if evs := rec.events[ChannelTranscript]; len(evs) != 1 || evs[0].Seq != 3 {
		t.Fatalf("transcript event after reopen: %+v", evs)
	}
}

func TestReadRange(t *testing.T) {
	rec := &recorder{}
	j := openJournal(t, "", Options{Bus: rec, NoSync: true})
	for i := range 10 {
		appendRow(t, j, core.JournalRow{Head: fmt.Sprint(i), Source: "secret stays out", Transcript: i%3 == 0})
	}
	tests := []struct {
		channel      string
		from, to     uint64
		limit        int
		wantFirst, n int
		wantErr      bool
	}{
		{ChannelJournal, 0, 10, 0, 0, 10, false},
		{ChannelJournal, 2, 5, 0, 2, 3, false},
		{ChannelJournal, 0, 10, 4, 6, 4, false},  // the newest four
		{ChannelJournal, 8, 100, 0, 8, 2, false}, // past the end
		{ChannelJournal, 5, 5, 0, 0, 0, false},
		{ChannelTranscript, 0, 4, 0, 0, 4, false}, // rows 0, 3, 6, 9
		{ChannelTranscript, 1, 3, 1, 2, 1, false},
		{"render", 0, 1, 0, 0, 0, true},
	}
	for _, tt := range tests {
		got, err := j.ReadRange(tt.channel, tt.from, tt.to, tt.limit)
		if tt.wantErr {
			if err == nil {
				t.Errorf("ReadRange(%s) accepted a channel the journal does not keep", tt.channel)
			}
			continue
		}
		if err != nil {
			t.Fatal(err)
		}
		if len(got) != tt.n {
			t.Fatalf("ReadRange(%s, %d, %d, %d): %d events, want %d", tt.channel, tt.from, tt.to, tt.limit, len(got), tt.n)
		}
		for i, ev := range got {
			want := rec.events[tt.channel][tt.wantFirst+i]
			if ev.Seq != want.Seq || ev.TS != want.TS || ev.Channel != want.Channel || !bytes.Equal(ev.Payload, want.Payload) {
				t.Fatalf("rebuilt %+v, delivered %+v", ev, want)
			}
			if bytes.Contains(ev.Payload, []byte("secret")) {
				t.Fatalf("event payload carries source: %s", ev.Payload)
			}
		}
	}
	oldest, ok, err := j.OldestSeq(ChannelTranscript)
	if err != nil || !ok || oldest != 0 {
		t.Fatalf("OldestSeq = %d, %v, %v", oldest, ok, err)
	}
	empty := openJournal(t, "", Options{})
	if _, ok, _ := empty.OldestSeq(ChannelJournal); ok {
		t.Fatal("OldestSeq of an empty journal reports a seq")
	}
}

func TestAppendAfterClose(t *testing.T) {
	j := openJournal(t, "", Options{})
	j.Close()
	_, err := j.Append(context.Background(), core.JournalRow{Head: "late"})
	if rpc.CodeOf(err) != rpc.Unavailable {
		t.Fatalf("Append after Close: %v, want UNAVAILABLE", err)
	}
}

func TestAppendContextCancelled(t *testing.T) {
	j := openJournal(t, "", Options{})
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := j.Append(ctx, core.JournalRow{}); !errors.Is(err, context.Canceled) {
		// The row may have been taken before the cancel was seen; then
		// it must have been committed and answered normally.
		if err != nil {
			t.Fatalf("Append with a cancelled context: %v", err)
		}
	}
}

func TestCloseCommitsQueuedRows(t *testing.T) {
	path := filepath.Join(t.TempDir(), FileName)
	j, err := Open(path, Options{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	var mu sync.Mutex
	acked := 0
	for range 50 {
		wg.Go(func() {
			if _, err := j.Append(context.Background(), core.JournalRow{Head: "x"}); err == nil {
				mu.Lock()
				acked++
				mu.Unlock()
			} else if rpc.CodeOf(err) != rpc.Unavailable {
				t.Error(err)
			}
		})
	}
	j.Close()
	wg.Wait()
	j2 := openJournal(t, path, Options{})
	rows, _ := j2.Query(Query{Limit: MaxLimit})
	if len(rows) < acked {
		t.Fatalf("%d rows stored, %d acknowledged", len(rows), acked)
	}
}

func TestBlobRefs(t *testing.T) {
	j := openJournal(t, "", Options{})
	h := strings.Repeat("ab", 32)
	appendRow(t, j, core.JournalRow{Ref: "val:blake3:" + h})
	appendRow(t, j, core.JournalRow{Ref: "val:blake3:" + h})
	appendRow(t, j, core.JournalRow{Ref: "out:3"})
	appendRow(t, j, core.JournalRow{Ref: "val:blake3:nothex"})
	var got []string
	if err := j.BlobRefs(func(s string) { got = append(got, s) }); err != nil {
		t.Fatal(err)
	}
	if len(got) != 1 || got[0] != h {
		t.Fatalf("BlobRefs = %v", got)
	}
}

func TestDamagedFilesFailLoudly(t *testing.T) {
	valid := func(t *testing.T, path string) {
		j, err := Open(path, Options{NoSync: true})
		if err != nil {
			t.Fatal(err)
		}
		rows := make([]core.JournalRow, 2000)
		for i := range rows {
			rows[i] = core.JournalRow{Head: "h", Source: strings.Repeat("x", i%300)}
		}
		appendAll(t, j, rows)
		j.Close()
	}
	tests := []struct {
		name string
		make func(t *testing.T, path string)
	}{
		{"garbage", func(t *testing.T, path string) {
			os.WriteFile(path, bytes.Repeat([]byte("not a database "), 2000), 0o600)
		}},
		{"short garbage", func(t *testing.T, path string) { os.WriteFile(path, []byte("{}"), 0o600) }},
		{"empty", func(t *testing.T, path string) { os.WriteFile(path, nil, 0o600) }},
		{"truncated to half", func(t *testing.T, path string) {
			valid(t, path)
			fi, _ := os.Stat(path)
			os.Truncate(path, fi.Size()/2)
		}},
		{"truncated to one page", func(t *testing.T, path string) {
			valid(t, path)
			os.Truncate(path, 4096)
		}},
		{"meta pages zeroed", func(t *testing.T, path string) {
			valid(t, path)
			f, _ := os.OpenFile(path, os.O_WRONLY, 0)
			f.WriteAt(make([]byte, 8192), 0)
			f.Close()
		}},
		{"another bbolt file", func(t *testing.T, path string) {
			db, err := bolt.Open(path, 0o600, nil)
			if err != nil {
				t.Fatal(err)
			}
			db.Update(func(tx *bolt.Tx) error { _, err := tx.CreateBucket([]byte("other")); return err })
			db.Close()
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), FileName)
			tt.make(t, path)
			j, err := Open(path, Options{})
			if err == nil {
				j.Close()
				t.Fatal("a damaged journal opened")
			}
			msg := err.Error()
			if !strings.Contains(msg, path) || !strings.Contains(msg, "move it aside") {
				t.Fatalf("error does not name the file and the remedy: %v", err)
			}
		})
	}
}

func TestLockedByAnotherOpen(t *testing.T) {
	defer func(d time.Duration) { lockTimeout = d }(lockTimeout)
	lockTimeout = 50 * time.Millisecond
	j := openJournal(t, "", Options{})
	_, err := Open(j.Path(), Options{})
	if err == nil || !strings.Contains(err.Error(), "another process") {
		t.Fatalf("second open of a held journal: %v", err)
	}
}

// A row is found by queries as soon as its Append returns, whether its
// index entries are written yet or not, while other rows are committed
// and indexed around it.
func TestQuerySeesAcknowledgedRows(t *testing.T) {
	j := openJournal(t, "", Options{NoSync: true, indexLag: 40, idleFlush: time.Millisecond})
	var wg sync.WaitGroup
	for w := range 8 {
		wg.Go(func() {
			principal := fmt.Sprintf("agent:%d", w)
			for i := range 150 {
				row, err := j.Append(context.Background(), core.JournalRow{Principal: principal, Head: "echo", Exit: i})
				if err != nil {
					t.Error(err)
					return
				}
				got, err := j.Query(Query{Principal: principal, Limit: 1})
				if err != nil {
					t.Error(err)
					return
				}
				if len(got) != 1 || got[0].EntryID != row.EntryID || got[0].Exit != i {
					t.Errorf("%s: query after appending row %d found %+v", principal, row.EntryID, got)
					return
				}
			}
		})
	}
	wg.Wait()
}

// Close writes the waiting index entries, so a closed journal is fully
// indexed.
func TestCloseIndexesTail(t *testing.T) {
	path := filepath.Join(t.TempDir(), FileName)
	j, err := Open(path, Options{NoSync: true, indexLag: 1 << 20, idleFlush: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	appendAll(t, j, make([]core.JournalRow, 100))
	if len(j.tailSnapshot()) != 100 {
		t.Fatalf("tail holds %d rows, want 100", len(j.tailSnapshot()))
	}
	if err := j.Close(); err != nil {
		t.Fatal(err)
	}
	db, err := bolt.Open(path, 0o600, &bolt.Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	db.View(func(tx *bolt.Tx) error {
		if w := indexedThrough(tx); w != 100 {
			t.Errorf("indexed through %d after Close, want 100", w)
		}
		if err := checkIndexes(tx, 100); err != nil {
			t.Error(err)
		}
		return nil
	})
}

// An idle writer indexes the waiting rows on its own.
func TestIdleWriterIndexesTail(t *testing.T) {
	j := openJournal(t, "", Options{NoSync: true, indexLag: 1 << 20, idleFlush: time.Millisecond})
	appendRow(t, j, core.JournalRow{Head: "a"})
	for deadline := time.Now().Add(10 * time.Second); len(j.tailSnapshot()) > 0; time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the idle writer never indexed the tail")
		}
	}
	j.db.View(func(tx *bolt.Tx) error {
		if w := indexedThrough(tx); w != 1 {
			t.Errorf("indexed through %d, want 1", w)
		}
		return nil
	})
}

// When writing index entries fails, the rows are still committed: the
// batch is retried without them, and they stay in the tail.
func TestIndexFailureDoesNotBlockAppends(t *testing.T) {
	j := openJournal(t, "", Options{NoSync: true, indexLag: 3, idleFlush: time.Hour})
	appendRow(t, j, core.JournalRow{Head: "a"})
	// A malformed block where the next index entries would go.
	err := j.db.Update(func(tx *bolt.Tx) error {
		return tx.Bucket(bucketByTS).Put(tsid(1, 0), []byte("short"))
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, h := range []string{"b", "c", "d"} {
		appendRow(t, j, core.JournalRow{Head: h})
	}
	if n := len(j.tailSnapshot()); n != 4 {
		t.Fatalf("tail holds %d rows, want all 4", n)
	}
	evs, err := j.ReadRange(ChannelJournal, 0, 10, 0)
	if err != nil || len(evs) != 4 {
		t.Fatalf("read back %d events, %v", len(evs), err)
	}
	// A query that reaches the damaged block says so.
	if _, err := j.Query(Query{}); !errors.Is(err, errBlock) {
		t.Fatalf("query over a malformed index block: %v", err)
	}
}

// Random ranges over events committed in batches of many rows (so the
// transcript seq map holds multi-row blocks) rebuild exactly what was
// delivered.
func TestReadRangeRandom(t *testing.T) {
	rec := &recorder{}
	j := openJournal(t, "", Options{Bus: rec, NoSync: true})
	rows := make([]core.JournalRow, 600)
	for i := range rows {
		rows[i] = core.JournalRow{Head: fmt.Sprint(i), Transcript: i%3 != 1}
	}
	appendAll(t, j, rows)
	if rec.err != nil {
		t.Fatal(rec.err)
	}
	rng := rand.New(rand.NewPCG(7, 8))
	for _, ch := range []string{ChannelJournal, ChannelTranscript} {
		delivered := rec.events[ch]
		n := uint64(len(delivered))
		if next, _ := j.NextSeq(ch); next != n {
			t.Fatalf("%s next seq %d, want %d", ch, next, n)
		}
		for range 300 {
			from, to := rng.Uint64N(n+5), rng.Uint64N(n+5)
			if rng.IntN(10) == 0 {
				to = math.MaxUint64
			}
			limit := rng.IntN(50)
			got, err := j.ReadRange(ch, from, to, limit)
			if err != nil {
				t.Fatal(err)
			}
			want := expectedRange(delivered, from, to, limit)
			if len(got) != len(want) {
				t.Fatalf("%s [%d, %d) limit %d: %d events, want %d", ch, from, to, limit, len(got), len(want))
			}
			for i := range got {
				if got[i].Seq != want[i].Seq || !bytes.Equal(got[i].Payload, want[i].Payload) {
					t.Fatalf("%s [%d, %d): rebuilt %+v, delivered %+v", ch, from, to, got[i], want[i])
				}
			}
		}
	}
}
