package journal

import (
	"bytes"
	"fmt"
	"math"
	"math/rand/v2"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/shoal-sh/shoal/core"
	"github.com/shoal-sh/shoal/core/bus"
	bolt "go.etcd.io/bbolt"
)

// model is what a differential test expects the journal to hold: every
// row as its Append returned it, and every event as it was delivered.
type model struct {
	rows []core.JournalRow // by entry_id - 1
	rec  *recorder
}

func (m *model) add(rows ...core.JournalRow) {
	for _, r := range rows {
		for uint64(len(m.rows)) < r.EntryID {
			m.rows = append(m.rows, core.JournalRow{})
		}
		m.rows[r.EntryID-1] = r
	}
}

// diffTS draws a writer-supplied ts: mostly none (the journal stamps
// it), else one from a small pool, so many rows share a ts, including
// negative ones, the extremes, and ones near the stamped clock.
func diffTS(rng *rand.Rand) int64 {
	now := time.Now().UnixNano()
	switch rng.IntN(12) {
	case 0:
		return -int64(1 + rng.IntN(3))
	case 1:
		return math.MinInt64 + int64(rng.IntN(2))
	case 2:
		return math.MaxInt64 - int64(rng.IntN(2))
	case 3:
		return now - int64(rng.IntN(3))*int64(time.Millisecond)
	case 4, 5:
		return int64(1 + rng.IntN(5))
	}
	return 0
}

func diffRow(rng *rand.Rand) core.JournalRow {
	var effects []string
	if rng.IntN(5) > 0 {
		effects = []string{}
	}
	for _, e := range testEffects {
		if rng.IntN(5) == 0 {
			effects = append(effects, e)
		}
	}
	return core.JournalRow{
		TS:         diffTS(rng),
		Session:    "main",
		Principal:  testPrincipals[rng.IntN(len(testPrincipals))],
		Kind:       "exec",
		Head:       testHeads[rng.IntN(len(testHeads))],
		Source:     fmt.Sprintf("cmd %d TOKEN=s3cr3t", rng.IntN(1000)),
		Effects:    effects,
		OK:         rng.IntN(3) > 0,
		Exit:       rng.IntN(3),
		Ref:        fmt.Sprintf("out:%d", rng.IntN(50)),
		DurationNS: rng.Int64N(1000),
		Transcript: rng.IntN(2) == 0,
	}
}

// expectedRange is what ReadRange(from, to, limit) must return when the
// channel delivered these events, in seq order from seq 0.
func expectedRange(delivered []bus.Event, from, to uint64, limit int) []bus.Event {
	if from >= to {
		return nil
	}
	n := uint64(len(delivered))
	want := delivered[min(from, n):min(to, n)]
	if limit > 0 && len(want) > limit {
		want = want[len(want)-limit:]
	}
	return want
}

// diffQuery draws a query whose bounds are often the rows' own ts (or one
// off), so ties and the inclusive/exclusive edges are hit.
func diffQuery(rng *rand.Rand, rows []core.JournalRow) Query {
	var q Query
	pick := func() int64 {
		if len(rows) == 0 || rng.IntN(4) == 0 {
			return diffTS(rng)
		}
		return rows[rng.IntN(len(rows))].TS + int64(rng.IntN(3)-1)
	}
	if rng.IntN(2) == 0 {
		q.Principal = testPrincipals[rng.IntN(len(testPrincipals))]
	}
	if rng.IntN(3) == 0 {
		q.Head = testHeads[rng.IntN(len(testHeads))]
	}
	if rng.IntN(3) == 0 {
		ok := rng.IntN(2) == 0
		q.OK = &ok
	}
	for range rng.IntN(3) {
		q.Effects = append(q.Effects, append(testEffects, "nope")[rng.IntN(len(testEffects)+1)])
	}
	if rng.IntN(3) == 0 {
		q.Since = pick()
	}
	if rng.IntN(3) == 0 {
		q.Until = pick()
	}
	q.Limit = []int{0, -1, 1, 2, 3, 10, 37, 5000}[rng.IntN(8)]
	return q
}

// check compares n random queries and n random channel reads with the
// model.
func (m *model) check(t *testing.T, j *Journal, rng *rand.Rand, n int, when string) {
	t.Helper()
	for range n {
		m.checkQuery(t, j, diffQuery(rng, m.rows), when)
	}
	for _, ch := range []string{ChannelJournal, ChannelTranscript} {
		delivered := m.rec.events[ch]
		total := uint64(len(delivered))
		if next, err := j.NextSeq(ch); err != nil || next != total {
			t.Fatalf("%s: %s next seq %d, %v; %d delivered", when, ch, next, err, total)
		}
		for range n / 2 {
			from, to := rng.Uint64N(total+3), rng.Uint64N(total+3)
			if rng.IntN(8) == 0 {
				from = 0
			}
			if rng.IntN(8) == 0 {
				to = math.MaxUint64
			}
			limit := []int{0, 1, 2, 5, 100}[rng.IntN(5)]
			if limit == 0 && to-from > 150 && from < to {
				to = from + 150 // quick; longer ranges are read with a limit
			}
			got, err := j.ReadRange(ch, from, to, limit)
			if err != nil {
				t.Fatalf("%s: %s [%d, %d): %v", when, ch, from, to, err)
			}
			want := expectedRange(delivered, from, to, limit)
			if len(got) != len(want) {
				t.Fatalf("%s: %s [%d, %d) limit %d: %d events, want %d", when, ch, from, to, limit, len(got), len(want))
			}
			for i := range got {
				if got[i].Seq != want[i].Seq || got[i].TS != want[i].TS || !bytes.Equal(got[i].Payload, want[i].Payload) {
					t.Fatalf("%s: %s [%d, %d): rebuilt %d %s, delivered %d %s", when, ch, from, to,
						got[i].Seq, got[i].Payload, want[i].Seq, want[i].Payload)
				}
			}
		}
	}
}

func (m *model) checkQuery(t *testing.T, j *Journal, q Query, when string) {
	t.Helper()
	got, err := j.Query(q)
	if err != nil {
		t.Fatalf("%s: query %+v: %v", when, q, err)
	}
	want := naive(m.rows, q)
	if !slices.Equal(ids(got), ids(want)) {
		t.Fatalf("%s: query %s:\n got %v\nwant %v", when, fmtQuery(q), ids(got), ids(want))
	}
	for i := range got {
		if strings.Contains(got[i].Source, "s3cr3t") {
			t.Fatalf("%s: row %d kept a secret: %q", when, got[i].EntryID, got[i].Source)
		}
		if !reflect.DeepEqual(got[i], want[i]) {
			t.Fatalf("%s: query %s row %d:\n got %+v\nwant %+v", when, fmtQuery(q), got[i].EntryID, got[i], want[i])
		}
	}
}

func fmtQuery(q Query) string {
	ok := "-"
	if q.OK != nil {
		ok = fmt.Sprint(*q.OK)
	}
	p, h := q.Principal, q.Head
	if len(p) > 20 {
		p = p[:20] + "…"
	}
	if len(h) > 20 {
		h = h[:20] + "…"
	}
	return fmt.Sprintf("{principal %q head %q ok %s effects %q since %d until %d limit %d}",
		p, h, ok, q.Effects, q.Since, q.Until, q.Limit)
}

// diffOptions draws how the journal indexes: after every commit, every
// few commits, never (all rows stay in the tail until Close), or when
// idle; sometimes with small batches, so commits split into many.
func diffOptions(rng *rand.Rand, rec *recorder) Options {
	o := Options{Bus: rec, NoSync: true, idleFlush: time.Hour}
	switch rng.IntN(4) {
	case 0:
		o.indexLag = 1
	case 1:
		o.indexLag = 2 + rng.IntN(60)
	case 2:
		o.indexLag = 1 << 30
	case 3:
		o.indexLag = 1 << 30
		o.idleFlush = time.Millisecond
	}
	if rng.IntN(3) == 0 {
		o.MaxBatch = 1 + rng.IntN(8)
	}
	return o
}

// TestDifferential appends random rows (many sharing a ts, some with a
// ts in the past, negative or extreme) in random batches, reopens the
// file now and then with other index settings, and after every step
// compares random queries and channel reads with a brute-force model:
// the same rows, in the same order, whatever is indexed and whatever is
// still in the tail.
//
// The last run starts from a version 1 file, which the first Open
// upgrades: its rows, index keys and seq map are read as they are, and
// new rows extend them.
func TestDifferential(t *testing.T) {
	for seed := range uint64(3) {
		t.Run(fmt.Sprint(seed), func(t *testing.T) { testDifferential(t, seed, 0) })
	}
	t.Run("version 1", func(t *testing.T) { testDifferential(t, 3, 150) })
}

func testDifferential(t *testing.T, seed uint64, v1 int) {
	rng := rand.New(rand.NewPCG(seed, 99))
	path := filepath.Join(t.TempDir(), FileName)
	m := &model{rec: &recorder{}}
	if v1 > 0 {
		old := make([]core.JournalRow, v1)
		for i := range old {
			r := diffRow(rng)
			if r.TS == 0 {
				r.TS = 1_000_000 + int64(i) // version 1 stamped every row
			}
			r.Source = Redact(r.Source)
			if len(r.Principal)+len(r.Head) > 1000 && rng.IntN(4) > 0 {
				r.Principal, r.Head = "agent:b", "ls" // fewer long JSON rows: quicker under -race
			}
			if r.Effects == nil {
				r.Effects = []string{}
			}
			old[i] = r
		}
		writeV1(t, path, old)
		m.add(withIDs(old)...)
		// Their events as version 1 delivered them: the payloads are
		// built from the rows alone.
		var tseq uint64
		for _, r := range m.rows {
			s := storedRow{JournalRow: r, InTranscript: r.Transcript, JournalSeq: r.EntryID - 1}
			m.rec.Deliver(s.event(ChannelJournal))
			if r.Transcript {
				seq := tseq
				s.TranscriptSeq = &seq
				tseq++
				m.rec.Deliver(s.event(ChannelTranscript))
			}
		}
	}
	j, err := Open(path, diffOptions(rng, m.rec))
	if err != nil {
		t.Fatal(err)
	}
	defer func() { j.Close() }()
	m.check(t, j, rng, 20, "opened")
	for step := range 24 {
		when := fmt.Sprintf("step %d", step)
		switch r := rng.IntN(10); {
		case r < 4: // one row; it is found at once by a query naming it
			row := appendRow(t, j, diffRow(rng))
			m.add(row)
			ok := row.OK
			q := Query{Principal: row.Principal, Head: row.Head, OK: &ok, Since: row.TS, Limit: 1}
			if row.TS != math.MaxInt64 {
				q.Until = row.TS + 1
			}
			if len(row.Effects) > 0 {
				q.Effects = row.Effects[len(row.Effects)-1:]
			}
			m.checkQuery(t, j, q, when+" (read your write)")
		case r < 8: // a batch through concurrent callers
			rows := make([]core.JournalRow, 1+rng.IntN(150))
			for i := range rows {
				rows[i] = diffRow(rng)
			}
			m.add(appendAll(t, j, rows)...)
		default: // reopen, with other settings
			if err := j.Close(); err != nil {
				t.Fatal(err)
			}
			if j, err = Open(path, diffOptions(rng, m.rec)); err != nil {
				t.Fatal(err)
			}
			when += " (reopened)"
			err := j.db.View(func(tx *bolt.Tx) error {
				if w, n := indexedThrough(tx), lastRowID(tx); w != n {
					return fmt.Errorf("indexed through %d of %d rows", w, n)
				}
				return checkIndexes(tx, len(m.rows))
			})
			if err != nil {
				t.Fatalf("%s: %v", when, err)
			}
		}
		if m.rec.err != nil {
			t.Fatal(m.rec.err)
		}
		m.check(t, j, rng, 16, when)
	}
}

// A row whose writer gave it a negative ts is found by a query without
// since, before and after its index entries are written (the indexed
// walk stopped at ts 0).
func TestQueryNegativeTS(t *testing.T) {
	path := filepath.Join(t.TempDir(), FileName)
	j := openJournal(t, path, Options{NoSync: true, indexLag: 1 << 30, idleFlush: time.Hour})
	neg := appendRow(t, j, core.JournalRow{TS: -5, Principal: "a", Head: "h"})
	pos := appendRow(t, j, core.JournalRow{Principal: "a", Head: "h"})
	for _, when := range []string{"in the tail", "indexed"} {
		for _, q := range []Query{{}, {Principal: "a"}, {Head: "h"}, {Until: 10}, {Until: -4}, {Since: -5}, {Since: -5, Until: -4}} {
			got, err := j.Query(q)
			if err != nil {
				t.Fatal(err)
			}
			want := naive([]core.JournalRow{neg, pos}, q)
			if !slices.Equal(ids(got), ids(want)) {
				t.Fatalf("%s: query %+v: %v, want %v", when, q, ids(got), ids(want))
			}
		}
		j.Close()
		j = openJournal(t, path, Options{NoSync: true})
	}
}

// The rows the journal keeps in memory (its unindexed tail) share no
// slice with its callers: an appender that reuses its effects slice, or
// edits the row Append returned, and a reader that edits a query result,
// change nothing a later query sees.
func TestTailSharesNoSlices(t *testing.T) {
	j := openJournal(t, "", Options{NoSync: true, indexLag: 1 << 30, idleFlush: time.Hour})
	effects := []string{"fs.read", "fs.write"}
	row := appendRow(t, j, core.JournalRow{Head: "a", Effects: effects})
	effects[0] = "net" // the caller reuses its slice
	row.Effects[1] = "pty"
	got, err := j.Query(Query{Effects: []string{"fs.read"}})
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 1 {
		t.Fatalf("the row is not found by its effect once the caller reused its slice: %+v", got)
	}
	got[0].Effects[0] = "env.write" // the reader edits its result
	for _, q := range []Query{{}, {Effects: []string{"fs.read"}}} {
		got, err := j.Query(q)
		if err != nil {
			t.Fatal(err)
		}
		if len(got) != 1 || !slices.Equal(got[0].Effects, []string{"fs.read", "fs.write"}) {
			t.Fatalf("query %+v after callers edited their slices: %+v", q, got)
		}
	}
	for _, e := range []string{"net", "pty", "env.write"} {
		if got, _ := j.Query(Query{Effects: []string{e}}); len(got) != 0 {
			t.Fatalf("a query for %s finds a row that never had it: %+v", e, got)
		}
	}
}
