package journal

import (
	"context"
	"encoding/binary"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/shoal-sh/shoal/core"
	bolt "go.etcd.io/bbolt"
)

func benchRow(i int) core.JournalRow {
	return core.JournalRow{
		Session: "main", Principal: fmt.Sprintf("agent:%d", i%4), Kind: "exec", Head: "git",
		Source: "git status --short && go test ./...", Effects: []string{"fs.read", "proc.spawn"},
		OK: true, Ref: fmt.Sprintf("out:%d", i+1), Transcript: true,
	}
}

// BenchmarkDurableAppend measures durable appends through the group-commit
// writer with 16, 64 and 256 callers at once, and in the same run the naive
// alternative: one bbolt Update (one commit, two fsyncs) per row. The
// ratios printed at the end compare the two on the same disk at the same
// moment, which is what makes them meaningful on a shared machine.
func BenchmarkDurableAppend(b *testing.B) {
	rates := map[string]float64{}
	callers := []int{16, 64, 256}
	for _, n := range callers {
		name := fmt.Sprintf("group-commit-%d", n)
		b.Run(name, func(b *testing.B) {
			rates[name] = benchAppend(b, n, Options{})
		})
	}
	b.Run("group-commit-64-nosync", func(b *testing.B) {
		rates["nosync"] = benchAppend(b, 64, Options{NoSync: true})
	})
	b.Run("update-per-row", func(b *testing.B) {
		j, err := Open(filepath.Join(b.TempDir(), FileName), Options{})
		if err != nil {
			b.Fatal(err)
		}
		defer j.Close()
		i := 0
		for b.Loop() {
			if err := j.updatePerRow(benchRow(i)); err != nil {
				b.Fatal(err)
			}
			i++
		}
		u := float64(b.N) / b.Elapsed().Seconds()
		b.ReportMetric(u, "rows/s")
		// Reported here, in the last sub-benchmark, because a parent
		// benchmark's own log is not printed.
		for _, n := range callers {
			g := rates[fmt.Sprintf("group-commit-%d", n)]
			b.ReportMetric(g/u, fmt.Sprintf("x-group-%d", n))
			b.Logf("group commit, %3d callers: %6.0f rows/s = %5.1f× one Update per row (%.0f rows/s)", n, g, g/u, u)
		}
	})
}

// benchAppend runs b.N appends from callers goroutines and returns rows/s.
func benchAppend(b *testing.B, callers int, opts Options) float64 {
	j, err := Open(filepath.Join(b.TempDir(), FileName), opts)
	if err != nil {
		b.Fatal(err)
	}
	defer j.Close()
	var n atomic.Int64
	// RunParallel starts parallelism × GOMAXPROCS goroutines.
	b.SetParallelism(max(1, callers/runtime.GOMAXPROCS(0)))
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if _, err := j.Append(context.Background(), benchRow(int(n.Add(1)))); err != nil {
				b.Error(err)
				return
			}
		}
	})
	rate := float64(b.N) / b.Elapsed().Seconds()
	b.ReportMetric(rate, "rows/s")
	return rate
}

// buildJournal writes n synthetic rows in large unsynced transactions. It
// looks like a long-lived kernel's journal: 50 principals, 40 heads, 80%
// ok, a few effects per row.
func buildJournal(b *testing.B, path string, n int) {
	db, err := bolt.Open(path, 0o600, &bolt.Options{NoSync: true, NoGrowSync: true, NoFreelistSync: true})
	if err != nil {
		b.Fatal(err)
	}
	if _, err := initialize(db); err != nil {
		b.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(1, 1))
	effects := []string{"fs.read", "fs.write", "fs.delete", "proc.spawn", "net", "env.write", "pty", "event.publish"}
	ts := time.Date(2025, 6, 1, 0, 0, 0, 0, time.UTC).UnixNano()
	const batch = 50_000
	id := uint64(0)
	for start := 0; start < n; start += batch {
		var rows []*storedRow
		for range min(n-start, batch) {
			id++
			ts += int64(rng.IntN(2_000_000_000))
			var eff []string
			for _, e := range effects {
				if rng.IntN(5) == 0 {
					eff = append(eff, e)
				}
			}
			s := storedRow{JournalRow: core.JournalRow{
				EntryID: id, TS: ts, Session: "main", Kind: "exec",
				Principal: fmt.Sprintf("agent:%d", rng.IntN(50)),
				Head:      fmt.Sprintf("cmd%d", rng.IntN(40)),
				Source:    "some command --with flags | and a pipe",
				Effects:   eff, OK: rng.IntN(5) != 0, Ref: fmt.Sprintf("out:%d", id),
			}, JournalSeq: id - 1}
			rows = append(rows, &s)
		}
		err := db.Update(func(tx *bolt.Tx) error {
			setFill(tx)
			// Blocks of 64 rows, as the writer commits them under load.
			for i := 0; i < len(rows); i += 64 {
				var encoded [][]byte
				for _, s := range rows[i:min(i+64, len(rows))] {
					encoded = append(encoded, encodeRow(s))
				}
				if err := tx.Bucket(bucketRows).Put(be64(rows[i].EntryID), encodeRowBlock(encoded)); err != nil {
					return err
				}
			}
			if err := putIndexes(tx, rows); err != nil {
				return err
			}
			if err := tx.Bucket(bucketMeta).Put(keyIndexed, be64(id)); err != nil {
				return err
			}
			return tx.Bucket(bucketRows).SetSequence(id)
		})
		if err != nil {
			b.Fatal(err)
		}
	}
	if err := db.Close(); err != nil {
		b.Fatal(err)
	}
}

// BenchmarkQuery1M queries a journal of one million rows. The indexed
// query (principal + head, limit 25) is compared with a scan of the rows
// newest first, which is what the query would cost without indexes.
func BenchmarkQuery1M(b *testing.B) {
	const n = 1_000_000
	path := filepath.Join(b.TempDir(), FileName)
	start := time.Now()
	buildJournal(b, path, n)
	fi, _ := os.Stat(path)
	b.Logf("built %d rows in %v (%d MiB)", n, time.Since(start).Round(time.Millisecond), fi.Size()>>20)
	j, err := Open(path, Options{})
	if err != nil {
		b.Fatal(err)
	}
	defer j.Close()

	no := false
	queries := []struct {
		name string
		q    func(i int) Query
	}{
		{"principal+head-limit25", func(i int) Query {
			return Query{Principal: fmt.Sprintf("agent:%d", i%50), Head: fmt.Sprintf("cmd%d", (i*7)%40), Limit: 25}
		}},
		{"principal+head+failed+net-limit25", func(i int) Query {
			return Query{Principal: fmt.Sprintf("agent:%d", i%50), Head: fmt.Sprintf("cmd%d", (i*7)%40), OK: &no, Effects: []string{"net"}, Limit: 25}
		}},
		{"effects-anyof-limit100", func(i int) Query {
			return Query{Effects: []string{"fs.delete", "env.write"}}
		}},
		{"since-until-limit100", func(i int) Query {
			base := time.Date(2025, 6, 1, 0, 0, 0, 0, time.UTC).UnixNano()
			return Query{Since: base + int64(i%1000)*1e12, Until: base + int64(i%1000+1)*1e12}
		}},
		{"newest-limit100", func(i int) Query { return Query{} }},
	}
	times := map[string]float64{}
	for _, tc := range queries {
		b.Run(tc.name, func(b *testing.B) {
			i := 0
			for b.Loop() {
				rows, err := j.Query(tc.q(i))
				if err != nil {
					b.Fatal(err)
				}
				if len(rows) == 0 {
					b.Fatalf("query %+v found nothing", tc.q(i))
				}
				i++
			}
			times[tc.name] = float64(b.Elapsed().Nanoseconds()) / float64(b.N)
		})
	}
	b.Run("scan-principal+head-limit25", func(b *testing.B) {
		i := 0
		for b.Loop() {
			q := queries[0].q(i)
			var found int
			j.db.View(func(tx *bolt.Tx) error {
				c := tx.Bucket(bucketRows).Cursor()
				for k, _ := c.Last(); k != nil && found < 25; k, _ = c.Prev() {
					s, err := decodeRow(tx.Bucket(bucketRows), binary.BigEndian.Uint64(k))
					if err != nil {
						return err
					}
					if q.matches(s) {
						found++
					}
				}
				return nil
			})
			i++
		}
		times["scan"] = float64(b.Elapsed().Nanoseconds()) / float64(b.N)
	})
	if ix, scan := times["principal+head-limit25"], times["scan"]; ix > 0 && scan > 0 {
		b.Logf("principal+head limit 25: indexed %.0f µs, scan %.0f µs: %.0f× faster", ix/1e3, scan/1e3, scan/ix)
	}
}

// updatePerRow is the naive writer the group commit is measured against:
// one bbolt Update, so one commit with its fsyncs, per row, writing the
// row with its index entries.
func (j *Journal) updatePerRow(row core.JournalRow) error {
	return j.db.Update(func(tx *bolt.Tx) error {
		setFill(tx)
		rows := tx.Bucket(bucketRows)
		id := lastRowID(tx) + 1
		s := storedRow{JournalRow: row, InTranscript: row.Transcript, JournalSeq: id - 1}
		s.EntryID, s.TS = id, time.Now().UnixNano()
		if s.InTranscript {
			seq := nextSeq(tx, ChannelTranscript)
			s.TranscriptSeq = &seq
		}
		if err := putRow(tx, &s); err != nil {
			return err
		}
		if err := tx.Bucket(bucketMeta).Put(keyIndexed, be64(id)); err != nil {
			return err
		}
		return rows.SetSequence(id)
	})
}

// BenchmarkOpen1M opens (and closes) a journal of one million rows and an
// empty one alternately and reports the ratio of the medians (the held
// figure: a kernel's start does not grow with its history).
func BenchmarkOpen1M(b *testing.B) {
	big := filepath.Join(b.TempDir(), FileName)
	buildJournal(b, big, 1_000_000)
	empty := filepath.Join(b.TempDir(), FileName)
	open := func(path string) time.Duration {
		t0 := time.Now()
		j, err := Open(path, Options{})
		if err != nil {
			b.Fatal(err)
		}
		d := time.Since(t0)
		if err := j.Close(); err != nil {
			b.Fatal(err)
		}
		return d
	}
	open(empty) // create it
	var bigT, emptyT []time.Duration
	for b.Loop() {
		bigT = append(bigT, open(big))
		emptyT = append(emptyT, open(empty))
	}
	med := func(d []time.Duration) time.Duration {
		slices.Sort(d)
		return d[len(d)/2]
	}
	b.ReportMetric(float64(med(bigT).Microseconds()), "1M-rows-µs")
	b.ReportMetric(float64(med(emptyT).Microseconds()), "empty-µs")
	b.ReportMetric(float64(med(bigT))/float64(med(emptyT)), "1M-vs-empty")
}
