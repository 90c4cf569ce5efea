package journal

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/shoal-sh/shoal/core"
	bolt "go.etcd.io/bbolt"
)

var (
	testPrincipals = []string{"agent:a", "agent:b", "human:owner", "agent:a\x00b", strings.Repeat("p", maxIndexedValue+5)}
	testHeads      = []string{"git", "ls", "curl", "rm", "", strings.Repeat("p", maxIndexedValue+5) + "x"}
	testEffects    = []string{"fs.read", "fs.write", "fs.delete", "proc.spawn", "net", "env.write", "pty", "event.publish"}
)

// seedRows appends n random rows whose ts are drawn with repeats, so ties
// on ts are exercised, and returns them as stored.
func seedRows(t *testing.T, j *Journal, n int, rng *rand.Rand) []core.JournalRow {
	t.Helper()
	rows := make([]core.JournalRow, 0, n)
	for range n {
		var effects []string
		for _, e := range testEffects {
			if rng.IntN(4) == 0 {
				effects = append(effects, e)
			}
		}
		rows = append(rows, core.JournalRow{
			TS:        1000 + int64(rng.IntN(n/2+1))*10,
			Session:   "main",
			Principal: testPrincipals[rng.IntN(len(testPrincipals))],
			Head:      testHeads[rng.IntN(len(testHeads))],
			OK:        rng.IntN(3) > 0,
			Effects:   effects,
		})
	}
	return appendAll(t, j, rows)
}

// naive answers q by scanning every row: the oracle for the indexes.
func naive(rows []core.JournalRow, q Query) []core.JournalRow {
	var out []core.JournalRow
	for _, r := range rows {
		s := storedRow{JournalRow: r}
		if q.matches(&s) {
			out = append(out, r)
		}
	}
	slices.SortFunc(out, func(a, b core.JournalRow) int {
		if a.TS != b.TS {
			return -cmpInt(a.TS, b.TS)
		}
		return -cmpInt(int64(a.EntryID), int64(b.EntryID))
	})
	return out[:min(len(out), q.limit())]
}

func cmpInt(a, b int64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

func ids(rows []core.JournalRow) []uint64 {
	out := make([]uint64, len(rows))
	for i, r := range rows {
		out[i] = r.EntryID
	}
	return out
}

// checkLagMode makes sure the lag modes do what they are named for.
func checkLagMode(t *testing.T, j *Journal, n int) {
	t.Helper()
	var indexed uint64
	j.db.View(func(tx *bolt.Tx) error {
		indexed = indexedThrough(tx)
		if err := checkIndexes(tx, int(indexed)); err != nil {
			t.Fatal(err)
		}
		return nil
	})
	switch {
	case j.opts.indexLag > n && indexed != 0:
		t.Fatalf("tail mode: %d rows indexed", indexed)
	case j.opts.indexLag < n && j.opts.indexLag > 1 && indexed == 0:
		t.Fatalf("mixed mode: no row indexed")
	}
}

// lagModes are the index-lag settings queries are checked under: every
// row indexed right after its commit, every row still in the unindexed
// tail, and a mix of both.
var lagModes = []struct {
	name string
	opts Options
}{
	{"indexed", Options{NoSync: true, indexLag: 1}},
	{"tail", Options{NoSync: true, indexLag: 1 << 30, idleFlush: time.Hour}},
	{"mixed", Options{NoSync: true, indexLag: 300, idleFlush: time.Hour}},
}

func TestQueryFilters(t *testing.T) {
	for _, mode := range lagModes {
		t.Run(mode.name, func(t *testing.T) { testQueryFilters(t, mode.opts) })
	}
}

func testQueryFilters(t *testing.T, opts Options) {
	j := openJournal(t, "", opts)
	rows := seedRows(t, j, 1000, rand.New(rand.NewPCG(1, 2)))
	yes, no := true, false
	tests := []Query{
		{},
		{Limit: 5},
		{Limit: 5000},
		{Principal: "agent:a"},
		{Principal: "agent:a\x00b"},
		{Principal: testPrincipals[4]},
		{Principal: "agent:nobody"},
		{Head: "git"},
		{Head: testHeads[5]},
		{OK: &yes},
		{OK: &no, Limit: 1000},
		{Effects: []string{"net"}},
		{Effects: []string{"fs.write", "fs.delete"}},
		{Effects: []string{"fs.write", "fs.write", "nope"}},
		{Effects: []string{"nope"}},
		{Since: 3000},
		{Until: 2000},
		{Since: 2000, Until: 4000},
		{Since: 4000, Until: 2000},
		{Since: 2000, Until: 2010},
		{Principal: "agent:b", Head: "ls", Limit: 25},
		{Principal: "human:owner", Head: "curl", OK: &no, Effects: []string{"net", "proc.spawn"}, Since: 1500, Until: 7000},
		{Head: "rm", OK: &yes, Effects: []string{"fs.delete"}, Limit: 3},
	}
	for i, q := range tests {
		t.Run(fmt.Sprint(i), func(t *testing.T) {
			got, err := j.Query(q)
			if err != nil {
				t.Fatal(err)
			}
			want := naive(rows, q)
			if !slices.Equal(ids(got), ids(want)) {
				t.Fatalf("query %+v:\n got %v\nwant %v", q, ids(got), ids(want))
			}
		})
	}
}

// TestQueryRandom compares random filter combinations with the oracle.
func TestQueryRandom(t *testing.T) {
	for _, mode := range lagModes {
		t.Run(mode.name, func(t *testing.T) { testQueryRandom(t, mode.opts) })
	}
}

func testQueryRandom(t *testing.T, opts Options) {
	rng := rand.New(rand.NewPCG(3, 4))
	j := openJournal(t, "", opts)
	rows := seedRows(t, j, 800, rng)
	checkLagMode(t, j, len(rows))
	for i := range 300 {
		q := diffQuery(rng, rows)
		got, err := j.Query(q)
		if err != nil {
			t.Fatal(err)
		}
		if want := naive(rows, q); !slices.Equal(ids(got), ids(want)) {
			t.Fatalf("case %d, query %+v:\n got %v\nwant %v", i, q, ids(got), ids(want))
		}
	}
}

func TestQueryNewestFirstAndLimit(t *testing.T) {
	for _, mode := range lagModes {
		t.Run(mode.name, func(t *testing.T) { testQueryNewestFirstAndLimit(t, mode.opts) })
	}
}

func testQueryNewestFirstAndLimit(t *testing.T, opts Options) {
	j := openJournal(t, "", opts)
	appendAll(t, j, make([]core.JournalRow, 1200))
	for _, tt := range []struct{ limit, want int }{{0, DefaultLimit}, {-3, DefaultLimit}, {7, 7}, {5000, MaxLimit}} {
		got, err := j.Query(Query{Limit: tt.limit})
		if err != nil {
			t.Fatal(err)
		}
		if len(got) != tt.want {
			t.Fatalf("limit %d: %d rows, want %d", tt.limit, len(got), tt.want)
		}
		for i := range got {
			if got[i].EntryID != uint64(1200-i) {
				t.Fatalf("limit %d: row %d is entry %d, want %d (newest first)", tt.limit, i, got[i].EntryID, 1200-i)
			}
		}
	}
}
