package journal

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"math/rand/v2"
	"path/filepath"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/shoal-sh/shoal/core"
	"github.com/shoal-sh/shoal/core/bus"
	"github.com/shoal-sh/shoal/core/rpc"
)

// Appends race with queries, channel reads and finally Close, while the
// writer indexes at random moments (every 50 rows and whenever it is
// idle for a millisecond). Every answer must be consistent on its own:
// each writer's rows found newest first without a hole, read-your-writes
// for every writer, channel reads contiguous. After Close, calls fail
// cleanly and every acknowledged row is in the file.
func TestConcurrentReadersAndClose(t *testing.T) {
	path := filepath.Join(t.TempDir(), FileName)
	rec := &recorder{}
	j, err := Open(path, Options{Bus: rec, NoSync: true, indexLag: 50, idleFlush: time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	const writers = 4
	var (
		acked   [writers]atomic.Int64 // rows each writer got acknowledged
		total   atomic.Int64
		closing atomic.Bool
		wg      sync.WaitGroup
		enough  = make(chan struct{})
		once    sync.Once
	)
	principal := func(w int) string { return fmt.Sprintf("agent:%d", w) }
	for w := range writers {
		wg.Go(func() {
			for i := 0; ; i++ {
				row, err := j.Append(context.Background(), core.JournalRow{
					Principal: principal(w), Head: []string{"git", "ls"}[i%2], Exit: i, OK: i%3 > 0,
					Effects: []string{"proc.spawn"}, Transcript: i%2 == 0,
				})
				if err != nil {
					if rpc.CodeOf(err) != rpc.Unavailable || !closing.Load() {
						t.Errorf("writer %d: %v", w, err)
					}
					return
				}
				acked[w].Store(int64(i + 1))
				if total.Add(1) >= 600 {
					once.Do(func() { close(enough) })
				}
				// Read your write, through the index or the tail.
				got, err := j.Query(Query{Principal: principal(w), Head: row.Head, Limit: 1})
				if err != nil {
					if !closing.Load() {
						t.Errorf("writer %d: query: %v", w, err)
					}
					return
				}
				if len(got) != 1 || got[0].EntryID != row.EntryID {
					t.Errorf("writer %d: query after appending row %d found %v", w, row.EntryID, ids(got))
					return
				}
			}
		})
	}
	for r := range 3 {
		wg.Go(func() {
			rng := rand.New(rand.NewPCG(uint64(r), 1))
			fail := func(format string, args ...any) bool {
				if !closing.Load() {
					t.Errorf(format, args...)
				}
				return false
			}
			for {
				w := rng.IntN(writers)
				before := acked[w].Load()
				got, err := j.Query(Query{Principal: principal(w), Limit: MaxLimit})
				if err != nil {
					fail("query: %v", err)
					return
				}
				// Newest first: exits n-1, n-2, … with no hole, n ≥ what
				// was acknowledged before the query began.
				if int64(len(got)) < min(before, MaxLimit) {
					t.Errorf("%s: %d rows found, %d acknowledged before", principal(w), len(got), before)
					return
				}
				for i := range got {
					if got[i].Exit != got[0].Exit-i {
						t.Errorf("%s: rows found out of order or with a hole: exit %d at %d, newest %d", principal(w), got[i].Exit, i, got[0].Exit)
						return
					}
				}
				for _, ch := range []string{ChannelJournal, ChannelTranscript} {
					from := uint64(rng.IntN(int(total.Load()) + 1))
					evs, err := j.ReadRange(ch, from, math.MaxUint64, 1+rng.IntN(100))
					if err != nil {
						fail("read %s: %v", ch, err)
						return
					}
					for i, ev := range evs {
						if ev.Seq < from || i > 0 && ev.Seq != evs[i-1].Seq+1 {
							t.Errorf("%s from %d: seqs %d then %d", ch, from, evs[max(i-1, 0)].Seq, ev.Seq)
							return
						}
						var p struct {
							EntryID uint64 `json:"entry_id"`
						}
						if err := json.Unmarshal(ev.Payload, &p); err != nil || ch == ChannelJournal && p.EntryID != ev.Seq+1 {
							t.Errorf("%s seq %d: payload %s", ch, ev.Seq, ev.Payload)
							return
						}
					}
				}
				if _, err := j.NextSeq(ChannelTranscript); err != nil {
					fail("next seq: %v", err)
					return
				}
			}
		})
	}
	<-enough
	closing.Store(true)
	if err := j.Close(); err != nil {
		t.Fatal(err)
	}
	wg.Wait()
	if rec.err != nil {
		t.Fatal(rec.err)
	}
	if _, err := j.Query(Query{}); err == nil {
		t.Fatal("query after Close succeeded")
	}
	if _, err := j.ReadRange(ChannelJournal, 0, 10, 0); err == nil {
		t.Fatal("channel read after Close succeeded")
	}

	j = openJournal(t, path, Options{NoSync: true})
	for w := range writers {
		got, err := j.Query(Query{Principal: principal(w), Limit: MaxLimit})
		if err != nil {
			t.Fatal(err)
		}
		n := acked[w].Load()
		if int64(len(got)) < min(n, MaxLimit) || len(got) > 0 && int64(got[0].Exit) < n-1 {
			t.Fatalf("%s after reopening: %d rows, newest exit %d; %d acknowledged", principal(w), len(got), got[0].Exit, n)
		}
	}
	if next, _ := j.NextSeq(ChannelJournal); next != uint64(len(rec.events[ChannelJournal])) {
		t.Fatalf("journal next seq %d after reopening, %d delivered", next, len(rec.events[ChannelJournal]))
	}
	evs, err := j.ReadRange(ChannelTranscript, 0, math.MaxUint64, 0)
	if err != nil || !slices.EqualFunc(evs, rec.events[ChannelTranscript], func(a, b bus.Event) bool {
		return a.Seq == b.Seq && string(a.Payload) == string(b.Payload)
	}) {
		t.Fatalf("transcript after reopening: %d events, %v; %d delivered", len(evs), err, len(rec.events[ChannelTranscript]))
	}
}
