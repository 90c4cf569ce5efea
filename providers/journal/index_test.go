package journal

import (
	"bytes"
	"math/rand/v2"
	"path/filepath"
	"slices"
	"testing"

	"github.com/shoal-sh/shoal/core"
	bolt "go.etcd.io/bbolt"
)

// Random flushes, mostly newer rows with some older ones and repeats,
// keep every value's blocks ascending and disjoint, hold exactly the
// tsids written, and answer seekLE like a sorted list does.
func TestIndexBlocksRandom(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	db, err := bolt.Open(filepath.Join(t.TempDir(), "ix.db"), 0o600, &bolt.Options{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if _, err := initialize(db); err != nil {
		t.Fatal(err)
	}
	principals := []string{"a", "b", "c"}
	want := map[string][][]byte{} // principal → tsids
	var id uint64
	var written []*storedRow
	ts := int64(1_000_000)
	for flush := range 300 {
		var rows []*storedRow
		for range rng.IntN(300) {
			id++
			s := &storedRow{JournalRow: core.JournalRow{EntryID: id, Principal: principals[rng.IntN(len(principals))]}}
			switch r := rng.IntN(20); {
			case r == 0: // a writer-supplied ts in the past
				s.TS = rng.Int64N(ts)
			case r == 1 && len(rows) > 0: // the same row twice in a flush
				s = rows[rng.IntN(len(rows))]
				id--
			case r == 2 && len(written) > 0: // a row indexed again later
				s = written[rng.IntN(len(written))]
				id--
			default:
				ts += rng.Int64N(3)
				s.TS = ts
			}
			if s.EntryID == id && !slices.Contains(rows, s) {
				want[s.Principal] = append(want[s.Principal], tsid(s.TS, s.EntryID))
			}
			rows = append(rows, s)
		}
		written = append(written, rows...)
		err := db.Update(func(tx *bolt.Tx) error { return putIndexes(tx, rows) })
		if err != nil {
			t.Fatal(err)
		}
		if flush%50 != 49 {
			continue
		}
		db.View(func(tx *bolt.Tx) error {
			b := tx.Bucket(bucketPrincipal)
			if _, err := checkIndex(b); err != nil {
				t.Fatal(err)
			}
			for _, p := range principals {
				list := slices.Clone(want[p])
				slices.SortFunc(list, bytes.Compare)
				var walkErr error
				w := &prefixWalk{c: b.Cursor(), prefix: valuePrefix(p), err: &walkErr}
				// Every tsid, walked down from the top.
				var got [][]byte
				for k, ok := w.seekLE(tsid(maxTS, ^uint64(0))); ok; k, ok = w.seekLE(k) {
					got = append(got, bytes.Clone(k))
					k = bytes.Clone(k)
					if !decrement(k) {
						break
					}
				}
				slices.Reverse(got)
				if walkErr != nil || !slices.EqualFunc(got, list, bytes.Equal) {
					t.Fatalf("flush %d, %s: walk found %d tsids, want %d (%v)", flush, p, len(got), len(list), walkErr)
				}
				// Random probes between and on them.
				for range 200 {
					probe := tsid(rng.Int64N(ts+10), rng.Uint64N(id+2))
					i, found := slices.BinarySearchFunc(list, probe, bytes.Compare)
					k, ok := w.seekLE(probe)
					switch {
					case found && (!ok || !bytes.Equal(k, probe)):
						t.Fatalf("%s: seekLE(%x) = %x, %v; want itself", p, probe, k, ok)
					case !found && i == 0 && ok:
						t.Fatalf("%s: seekLE(%x) = %x below every tsid", p, probe, k)
					case !found && i > 0 && (!ok || !bytes.Equal(k, list[i-1])):
						t.Fatalf("%s: seekLE(%x) = %x, %v; want %x", p, probe, k, ok, list[i-1])
					}
				}
			}
			return nil
		})
	}
}
