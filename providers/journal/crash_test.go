package journal

import (
	"bufio"
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/shoal-sh/shoal/core"
	bolt "go.etcd.io/bbolt"
)

const (
	crashHelperEnv = "SHOAL_JOURNAL_CRASH_HELPER"
	crashLagEnv    = "SHOAL_JOURNAL_CRASH_INDEX_LAG"
)

// TestCrashHelper is not a test: TestCrash runs the test binary again with
// it selected and crashHelperEnv naming a journal. It appends rows from
// several goroutines and prints each acknowledged entry_id, until killed.
func TestCrashHelper(t *testing.T) {
	path := os.Getenv(crashHelperEnv)
	if path == "" {
		t.Skip("helper process of TestCrash")
	}
	var opts Options
	// Some runs write index entries every few commits, so that kills land
	// in those commits too.
	if lag, err := strconv.Atoi(os.Getenv(crashLagEnv)); err == nil {
		opts.indexLag = lag
	}
	j, err := Open(path, opts)
	if err != nil {
		fmt.Println("open:", err)
		os.Exit(2)
	}
	var mu sync.Mutex
	out := bufio.NewWriter(os.Stdout)
	deadline := time.Now().Add(time.Minute) // a parent that never kills us
	var wg sync.WaitGroup
	for w := range 8 {
		wg.Go(func() {
			for i := 0; time.Now().Before(deadline); i++ {
				row, err := j.Append(context.Background(), core.JournalRow{
					Session: "main", Principal: fmt.Sprintf("agent:%d", w), Head: "echo",
					Source: fmt.Sprintf("echo %d", i), Transcript: i%3 == 0, OK: true,
				})
				if err != nil {
					fmt.Println("append:", err)
					os.Exit(2)
				}
				mu.Lock()
				fmt.Fprintln(out, row.EntryID)
				out.Flush() // only acknowledged ids, one whole line at a time
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	os.Exit(0)
}

// TestCrash kills a writing process at random points and checks after each
// kill that every acknowledged row survived and that both channels' seqs
// have neither gaps nor reuse.
func TestCrash(t *testing.T) {
	if testing.Short() {
		t.Skip("crash test re-executes the test binary")
	}
	path := filepath.Join(t.TempDir(), FileName)
	crashRuns(t, path, 10, map[uint64]bool{})
}

// A version 1 journal upgraded by a process that is killed at random
// points, perhaps in the middle of the upgrade, keeps its rows and seqs,
// and every later run continues it.
func TestCrashUpgrade(t *testing.T) {
	if testing.Short() {
		t.Skip("crash test re-executes the test binary")
	}
	path := filepath.Join(t.TempDir(), FileName)
	old := v1Rows(300)
	writeV1(t, path, old)
	acked := map[uint64]bool{}
	for id := range uint64(len(old)) {
		acked[id+1] = true
	}
	crashRuns(t, path, 4, acked)
	j := openJournal(t, path, Options{NoSync: true})
	for _, q := range []Query{{Principal: "agent:1", Head: "ls", Limit: MaxLimit}, {Until: 1000 + 300, Limit: MaxLimit}} {
		got, err := j.Query(q)
		if err != nil {
			t.Fatal(err)
		}
		if want := naive(withIDs(old), q); !slices.Equal(ids(got), ids(want)) {
			t.Fatalf("query %+v over the upgraded rows:\n got %v\nwant %v", q, ids(got), ids(want))
		}
	}
}

// crashRuns runs the crash helper iters times on the journal at path,
// killing it at a random point each time, and checks the file after each
// kill; acked holds the entry_ids that must survive.
func crashRuns(t *testing.T, path string, iters int, acked map[uint64]bool) {
	t.Helper()
	rng := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 7))
	var lastNext [2]uint64
	for iter := range iters {
		cmd := exec.Command(os.Args[0], "-test.run=^TestCrashHelper$", "-test.count=1")
		cmd.Env = append(os.Environ(), crashHelperEnv+"="+path)
		if iter%2 == 1 {
			cmd.Env = append(cmd.Env, crashLagEnv+"=20")
		}
		stdout, err := cmd.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		killAfter := rng.IntN(400) // acknowledged rows to wait for; 0 kills at once
		sc := bufio.NewScanner(stdout)
		lines := 0
		killed := false
		kill := func() {
			if !killed {
				cmd.Process.Kill() // SIGKILL: no deferred work runs
				killed = true
			}
		}
		if killAfter == 0 {
			kill()
		}
		for sc.Scan() {
			id, err := strconv.ParseUint(sc.Text(), 10, 64)
			if err != nil {
				kill()
				t.Fatalf("iteration %d: helper said %q", iter, sc.Text())
			}
			acked[id] = true
			if lines++; lines >= killAfter {
				kill()
			}
		}
		kill()
		cmd.Wait()

		next := checkJournalFile(t, path, acked)
		for i, n := range next {
			if n < lastNext[i] {
				t.Fatalf("iteration %d: channel %d next seq went back from %d to %d", iter, i, lastNext[i], n)
			}
		}
		lastNext = next
		t.Logf("iteration %d: killed after %d acks; %d rows, next seqs %v", iter, lines, len(acked), next)
	}
}

// checkJournalFile opens the journal as the kernel would, then checks the
// file's invariants directly: every acknowledged id present, entry ids
// 1..n without a gap, each channel's seqs 0..m-1 without a gap, mapped to
// rows in id order and agreeing with the seq stored in the row.
func checkJournalFile(t *testing.T, path string, acked map[uint64]bool) [2]uint64 {
	t.Helper()
	if _, err := os.Stat(path); os.IsNotExist(err) && len(acked) == 0 {
		return [2]uint64{} // killed before the journal was created
	}
	j, err := Open(path, Options{})
	if err != nil {
		t.Fatalf("reopen after kill: %v", err)
	}
	defer j.Close()
	var next [2]uint64
	for i, ch := range []string{ChannelJournal, ChannelTranscript} {
		if next[i], err = j.NextSeq(ch); err != nil {
			t.Fatal(err)
		}
	}
	var all []core.JournalRow // every row, for the queries below
	err = j.db.View(func(tx *bolt.Tx) error {
		rows := tx.Bucket(bucketRows)
		n := lastRowID(tx)
		for id := range acked {
			if _, err := rowData(rows, id); err != nil {
				return fmt.Errorf("acknowledged row %d is missing", id)
			}
		}
		var transcript uint64
		for id := uint64(1); id <= n; id++ {
			s, err := decodeRow(rows, id)
			if err != nil {
				return fmt.Errorf("entry ids have a gap at %d: %v", id, err)
			}
			all = append(all, s.row())
			if s.JournalSeq != id-1 {
				return fmt.Errorf("row %d has journal seq %d, want %d", id, s.JournalSeq, id-1)
			}
			if s.InTranscript {
				if s.TranscriptSeq == nil || *s.TranscriptSeq != transcript {
					return fmt.Errorf("row %d has transcript seq %v, want %d", id, s.TranscriptSeq, transcript)
				}
				transcript++
			}
		}
		for i, ch := range []string{ChannelJournal, ChannelTranscript} {
			if want := []uint64{n, transcript}[i]; next[i] != want {
				return fmt.Errorf("%s next seq %d, want %d", ch, next[i], want)
			}
		}
		type pair struct{ seq, id uint64 }
		var pairs []pair
		err := walkSeqsDown(tx, ChannelTranscript, math.MaxUint64, func(seq, id uint64) bool {
			pairs = append(pairs, pair{seq, id})
			return true
		})
		if err != nil {
			return err
		}
		slices.Reverse(pairs)
		var seq, lastID uint64
		for _, p := range pairs {
			if p.seq != seq {
				return fmt.Errorf("transcript seqs jump from %d to %d", seq, p.seq)
			}
			if p.id <= lastID || p.id > n {
				return fmt.Errorf("transcript seq %d maps to row %d after row %d", seq, p.id, lastID)
			}
			s, err := decodeRow(rows, p.id)
			if err != nil || s.TranscriptSeq == nil || *s.TranscriptSeq != seq {
				return fmt.Errorf("transcript seq %d maps to row %d, which does not have it (%v)", seq, p.id, err)
			}
			seq, lastID = seq+1, p.id
		}
		if seq != transcript {
			return fmt.Errorf("transcript maps %d seqs, want %d", seq, transcript)
		}
		// Open indexes what a crash left unindexed.
		if w := indexedThrough(tx); w != n {
			return fmt.Errorf("indexes reach row %d of %d after reopening", w, n)
		}
		if err := checkIndexes(tx, int(n)); err != nil {
			return err
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	// The indexes written after the crash answer like a scan of the rows.
	yes := true
	for _, q := range []Query{{Limit: MaxLimit}, {Principal: "agent:3", Limit: MaxLimit}, {Principal: "agent:5", Head: "echo", OK: &yes, Limit: 50}} {
		got, err := j.Query(q)
		if err != nil {
			t.Fatal(err)
		}
		if want := naive(all, q); !slices.Equal(ids(got), ids(want)) {
			t.Fatalf("query %+v after reopening:\n got %v\nwant %v", q, ids(got), ids(want))
		}
	}
	return next
}
