package cas

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"sync"
	"testing"
	"testing/iotest"
	"time"

	"github.com/shoal-sh/shoal/core/rpc"
)

// TestQuarantineSparesRepairedBlob: a reader that opened a damaged blob
// and reaches its end after the right bytes were stored again and synced
// into place must not quarantine the repaired blob.
func TestQuarantineSparesRepairedBlob(t *testing.T) {
	s := openStore(t)
	data := []byte("the value as it should be")
	h, _ := s.Put(data)
	flush(t, s)
	if err := os.Truncate(s.path(h), 4); err != nil {
		t.Fatal(err)
	}
	rc, _, err := s.Open(h) // opens the damaged file
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	// The bytes are stored again (the wrong size makes the put write them)
	// and made durable in place while the reader still holds the old file.
	if _, err := s.Put(data); err != nil {
		t.Fatal(err)
	}
	flush(t, s)
	_, err = io.ReadAll(rc)
	wantCode(t, err, rpc.Corrupt)
	got, err := s.Get(h)
	if err != nil || !bytes.Equal(got, data) {
		t.Fatalf("the repaired blob was quarantined by a stale reader: %v", err)
	}
}

// blobSet is a fixed set of test blobs with their hashes.
type blobSet struct {
	data   [][]byte
	hashes []string
	index  map[string]int
}

func newBlobSet(t testing.TB, sizes ...int) *blobSet {
	b := &blobSet{index: map[string]int{}}
	for _, n := range sizes {
		d := randBytes(t, n)
		b.data = append(b.data, d)
		b.hashes = append(b.hashes, Sum(d))
		b.index[Sum(d)] = len(b.hashes) - 1
	}
	return b
}

func (b *blobSet) has(h string) bool { _, ok := b.index[h]; return ok }

// checkSettled asserts the store's state once everything is flushed:
// nothing pending, nothing live, no temp file left.
func checkSettled(t *testing.T, s *Store) {
	t.Helper()
	s.wb.mu.Lock()
	pending, live, unsettled, queued := len(s.wb.pending), len(s.wb.live), s.wb.unsettled, len(s.wb.queue)
	s.wb.mu.Unlock()
	if pending != 0 || live != 0 || unsettled != 0 || queued != 0 {
		t.Fatalf("after Flush: %d pending, %d live, %d unsettled, %d queued", pending, live, unsettled, queued)
	}
	if left := tempFiles(t, s); len(left) != 0 {
		t.Fatalf("temp files left after Flush: %v", left)
	}
}

// readBack checks every way of reading h returns data.
func readBack(s *Store, h string, data []byte) error {
	got, err := s.Get(h)
	if err != nil {
		return fmt.Errorf("Get %s: %w", h[:8], err)
	}
	if !bytes.Equal(got, data) {
		return fmt.Errorf("Get %s: wrong bytes", h[:8])
	}
	rc, n, err := s.Open(h)
	if err != nil {
		return fmt.Errorf("Open %s: %w", h[:8], err)
	}
	streamed, err := io.ReadAll(iotest.OneByteReader(io.LimitReader(rc, 64)))
	if err == nil {
		var rest []byte
		rest, err = io.ReadAll(rc)
		streamed = append(streamed, rest...)
	}
	rc.Close()
	if err != nil || n != int64(len(data)) || !bytes.Equal(streamed, data) {
		return fmt.Errorf("Open %s: %d bytes of %d (size %d), %v", h[:8], len(streamed), len(data), n, err)
	}
	if !s.Has(h) {
		return fmt.Errorf("Has %s: false", h[:8])
	}
	if size, err := s.Size(h); err != nil || size != int64(len(data)) {
		return fmt.Errorf("Size %s = %d, %v", h[:8], size, err)
	}
	return nil
}

// TestWriteBehindStress runs puts of the same and different bytes, reads,
// collections with no minimum age and flushes all at once. Every hash a put
// returned stays readable with its bytes throughout (the collection keeps
// every blob of the set, and sweeps every temp file it may), every Flush
// succeeds, and afterwards each blob is in place with nothing left over.
// It runs with the real bound on waiting puts and with one so low that
// puts keep waiting for the syncer.
func TestWriteBehindStress(t *testing.T) {
	for _, limit := range []int{maxUnsettled, 2} {
		t.Run(fmt.Sprint("limit=", limit), func(t *testing.T) { stress(t, limit) })
	}
}

func stress(t *testing.T, limit int) {
	s := openStore(t)
	s.wb.limit = limit
	sizes := []int{0, 1, 2, 3, overlapMin + 5}
	for i := range 40 {
		sizes = append(sizes, 10+i*97)
	}
	set := newBlobSet(t, sizes...)
	var returned sync.Map
	var putters, others sync.WaitGroup
	stop := make(chan struct{})
	errs := make(chan error, 64)
	report := func(err error) {
		select {
		case errs <- err:
		default:
		}
	}
	for g := range 6 {
		putters.Go(func() {
			for i := range 15 {
				k := (i*3 + g/2) % len(set.data) // goroutines 2j and 2j+1 put the same bytes together
				var h string
				var err error
				switch i % 3 {
				case 0:
					h, err = s.Put(set.data[k])
				case 1:
					h, _, err = s.PutReader(bytes.NewReader(set.data[k]))
				default:
					h, _, err = s.PutReader(struct{ io.Reader }{bytes.NewReader(set.data[k])})
				}
				if err != nil || h != set.hashes[k] {
					report(fmt.Errorf("put %d: %s, %v", k, h, err))
					return
				}
				returned.Store(h, k)
				if err := readBack(s, h, set.data[k]); err != nil {
					report(fmt.Errorf("right after its put: %w", err))
					return
				}
			}
		})
	}
	// until runs step in a goroutine of others until stop closes.
	until := func(step func(i int)) {
		others.Go(func() {
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				step(i)
			}
		})
	}
	for range 2 {
		until(func(int) {
			returned.Range(func(h, k any) bool {
				if err := readBack(s, h.(string), set.data[k.(int)]); err != nil {
					report(err)
				}
				return true
			})
		})
	}
	until(func(i int) { // garbage for the collector
		if _, err := s.Put(fmt.Appendf(nil, "garbage %d", i)); err != nil {
			report(err)
		}
	})
	until(func(int) {
		if _, err := s.GC(set.has, 0); err != nil {
			report(err)
		}
	})
	until(func(int) {
		if err := s.Flush(); err != nil {
			report(fmt.Errorf("Flush: %w", err))
		}
	})
	putters.Wait()
	close(stop)
	others.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if t.Failed() {
		return
	}
	flush(t, s)
	checkSettled(t, s)
	n := 0
	returned.Range(func(h, k any) bool {
		n++
		got, err := os.ReadFile(s.path(h.(string)))
		if err != nil || !bytes.Equal(got, set.data[k.(int)]) {
			t.Errorf("blob %s not in place after Flush: %v", h.(string)[:8], err)
		}
		return true
	})
	if n != len(set.data) {
		t.Errorf("%d blobs put, want %d", n, len(set.data))
	}
}

// waitFor polls the write-behind state until cond holds (no timing
// assumption: it only waits for other goroutines to get there).
func waitFor(s *Store, cond func(wb *behind) bool) {
	for {
		s.wb.mu.Lock()
		ok := cond(&s.wb)
		s.wb.mu.Unlock()
		if ok {
			return
		}
		runtime.Gosched()
	}
}

// TestCloseWhilePutWaitsForRoom: a put waiting for the syncer to make room
// when Close is called completes like any put after Close (synced before
// it returns), and no syncer is left running once both have returned.
// Which of the two the syncer's progress wakes first varies, so the
// scenario is repeated.
func TestCloseWhilePutWaitsForRoom(t *testing.T) {
	for i := range 30 {
		s, err := Open(filepath.Join(t.TempDir(), fmt.Sprint("cas", i)))
		if err != nil {
			t.Fatal(err)
		}
		s.wb.limit = 1
		g := hold(t, s)
		if _, err := s.Put([]byte("first")); err != nil {
			t.Fatal(err)
		}
		second := []byte("second")
		put := make(chan error, 1)
		go func() { _, err := s.Put(second); put <- err }()
		waitFor(s, func(wb *behind) bool { return wb.waiting == 1 })
		closed := make(chan error, 1)
		go func() { closed <- s.Close() }()
		waitFor(s, func(wb *behind) bool { return wb.closed && wb.flushing == 1 })
		g.let()
		if err := <-put; err != nil {
			t.Fatal(err)
		}
		if err := <-closed; err != nil {
			t.Fatal(err)
		}
		s.wb.mu.Lock()
		running := s.wb.running
		s.wb.mu.Unlock()
		if !inPlace(s, Sum(second)) || running {
			t.Fatalf("round %d: a put that waited across Close returned before its sync (in place: %v, syncer running: %v)",
				i, inPlace(s, Sum(second)), running)
		}
	}
}

// syncScript drives the syncer per temp file: the n-th file synced (in
// hand-over order of the test's puts) gets the n-th step.
type syncScript struct {
	mu    sync.Mutex
	steps []func(f *os.File) error
	n     int
}

func script(s *Store, steps ...func(f *os.File) error) *syncScript {
	sc := &syncScript{steps: steps}
	s.syncFile = func(f *os.File) error {
		sc.mu.Lock()
		step := sc.steps[min(sc.n, len(sc.steps)-1)]
		sc.n++
		sc.mu.Unlock()
		return step(f)
	}
	return sc
}

// TestFlushBlobSeesFailureTakenByAnotherFlush: Flush reports a failed sync
// to the first Flush that covers it; the uploader whose put it was must
// still learn its blob is not durable, also when the same bytes are being
// stored again by someone else.
func TestFlushBlobSeesFailureTakenByAnotherFlush(t *testing.T) {
	s := openStore(t)
	boom := errors.New("EIO")
	release := make(chan struct{})
	script(s,
		func(*os.File) error { return boom },                  // the uploader's put
		func(f *os.File) error { <-release; return f.Sync() }, // someone's re-put
		func(f *os.File) error { return f.Sync() })
	data := []byte("uploaded")
	h, err := s.Put(data)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Flush(); !errors.Is(err, boom) { // another caller's Flush takes the failure
		t.Fatalf("Flush = %v", err)
	}
	if err := s.FlushBlob(h); err == nil {
		t.Fatal("FlushBlob = nil for a blob whose sync failed")
	}
	// Someone stores the same bytes again; while that put is pending the
	// blob is present (Has) but not durable: FlushBlob waits for it.
	if _, err := s.Put(data); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- s.FlushBlob(h) }()
	waitFor(s, func(wb *behind) bool { return wb.flushing == 1 })
	close(release)
	if err := <-done; err != nil {
		t.Fatalf("FlushBlob of a re-put blob: %v", err)
	}
	if !inPlace(s, h) || s.isPending(h) {
		t.Fatal("FlushBlob returned before the blob was durable")
	}
	// A failure of some other blob does not fail FlushBlob of a durable one.
	script(s, func(*os.File) error { return boom })
	if _, err := s.Put([]byte("other")); err != nil {
		t.Fatal(err)
	}
	if err := s.FlushBlob(h); err != nil {
		t.Fatalf("FlushBlob of a durable blob = %v", err)
	}
	if _, err := s.Get(Sum([]byte("other"))); rpc.CodeOf(err) != rpc.NotFound {
		t.Fatalf("the failed blob is served: %v", err)
	}
}

// failingWriterTo hands over n bytes (in chunk-sized and odd writes), then
// fails, as a source whose producer died would.
type failingWriterTo struct{ data []byte }

func (f *failingWriterTo) Read([]byte) (int, error) { panic("io.Copy should use WriteTo") }

func (f *failingWriterTo) WriteTo(w io.Writer) (int64, error) {
	n, err := w.Write(f.data)
	if err != nil {
		return int64(n), err
	}
	return int64(n), errors.New("producer died")
}

// TestPutReaderSourceErrorLeavesNothing: a source failing midway, through
// either way the store takes bytes, fails the put and leaves nothing.
func TestPutReaderSourceErrorLeavesNothing(t *testing.T) {
	s := openStore(t)
	g := hold(t, s) // nothing may reach the syncer
	sources := map[string]io.Reader{
		"reader, whole chunks":  &failingReader{n: 2 * chunkSize},
		"reader, partial chunk": &failingReader{n: chunkSize/2 + 3},
		"reader, nothing":       &failingReader{n: 0},
		"writer, lent chunks":   &failingWriterTo{data: randBytes(t, 2*chunkSize+9)},
		"writer, small":         &failingWriterTo{data: []byte("abc")},
	}
	for name, src := range sources {
		if h, n, err := s.PutReader(src); err == nil || h != "" {
			t.Fatalf("%s: PutReader = %s, %d, %v", name, h, n, err)
		}
		checkSettled(t, s)
	}
	g.let()
	flush(t, s)
	if len(g.synced) != 0 {
		t.Fatalf("a failed put reached the syncer: %v", g.synced)
	}
}

// readHalf opens h and reads the first half of its bytes.
func readHalf(t *testing.T, s *Store, h string, data []byte) io.ReadCloser {
	t.Helper()
	rc, n, err := s.Open(h)
	if err != nil || n != int64(len(data)) {
		t.Fatalf("Open: %d, %v", n, err)
	}
	head := make([]byte, len(data)/2)
	if _, err := io.ReadFull(rc, head); err != nil || !bytes.Equal(head, data[:len(head)]) {
		t.Fatalf("first half: %v", err)
	}
	return rc
}

// readRest reads the rest of a reader from readHalf and checks it.
func readRest(t *testing.T, rc io.ReadCloser, data []byte) {
	t.Helper()
	defer rc.Close()
	rest, err := io.ReadAll(rc)
	if err != nil || !bytes.Equal(rest, data[len(data)/2:]) {
		t.Fatalf("rest of the stream: %d bytes, %v", len(rest), err)
	}
}

// TestStreamsOutliveTheirFile: a reader keeps streaming the bytes it
// opened, checked, when the file under it is renamed into place, deleted,
// collected or dropped after a failed sync; later reads see the change.
func TestStreamsOutliveTheirFile(t *testing.T) {
	data := randBytes(t, 3*chunkSize+11)
	h := Sum(data)

	t.Run("pending, renamed into place", func(t *testing.T) {
		s := openStore(t)
		g := hold(t, s)
		s.Put(data)
		rc := readHalf(t, s, h, data)
		g.let()
		flush(t, s)
		if !inPlace(s, h) {
			t.Fatal("not in place after Flush")
		}
		readRest(t, rc, data)
	})
	t.Run("pending, deleted", func(t *testing.T) {
		s := openStore(t)
		g := hold(t, s)
		s.Put(data)
		rc := readHalf(t, s, h, data)
		if err := s.Delete(h); err != nil {
			t.Fatal(err)
		}
		g.let()
		flush(t, s)
		readRest(t, rc, data)
		if _, err := s.Get(h); rpc.CodeOf(err) != rpc.NotFound {
			t.Fatalf("Get after Delete: %v", err)
		}
		checkSettled(t, s)
	})
	t.Run("pending, sync failed", func(t *testing.T) {
		s := openStore(t)
		g := hold(t, s)
		s.Put(data)
		g.failAll(t, s, errors.New("EIO"))
		rc := readHalf(t, s, h, data)
		g.let()
		if err := s.Flush(); err == nil {
			t.Fatal("Flush missed the failure")
		}
		readRest(t, rc, data)
		if _, _, err := s.Open(h); rpc.CodeOf(err) != rpc.NotFound {
			t.Fatalf("Open after a failed sync: %v", err)
		}
		checkSettled(t, s)
	})
	t.Run("in place, collected", func(t *testing.T) {
		s := openStore(t)
		s.Put(data)
		age(t, s, h, time.Hour)
		rc := readHalf(t, s, h, data)
		if st, err := s.GC(func(string) bool { return false }, time.Minute); err != nil || st.Removed != 1 {
			t.Fatalf("GC: %+v, %v", st, err)
		}
		readRest(t, rc, data)
		if s.Has(h) {
			t.Fatal("collected blob still present")
		}
	})
}

// TestDeleteRacesPut: puts and deletes of one blob at once leave the store
// consistent: once flushed, the blob is either in place with its bytes or
// absent everywhere, and nothing is left over.
func TestDeleteRacesPut(t *testing.T) {
	s := openStore(t)
	data := []byte("now you see me")
	h := Sum(data)
	var wg sync.WaitGroup
	for range 3 {
		wg.Go(func() {
			for range 40 {
				if _, err := s.Put(data); err != nil {
					t.Error(err)
				}
			}
		})
	}
	wg.Go(func() {
		for range 60 {
			if err := s.Delete(h); err != nil {
				t.Error(err)
			}
		}
	})
	wg.Wait()
	flush(t, s)
	checkSettled(t, s)
	if s.Has(h) != inPlace(s, h) {
		t.Fatalf("Has = %v, in place = %v", s.Has(h), inPlace(s, h))
	}
	if s.Has(h) {
		if got, err := s.Get(h); err != nil || !bytes.Equal(got, data) {
			t.Fatalf("Get: %v", err)
		}
	}
	// A put now is durable after Flush, whatever came before.
	if _, err := s.Put(data); err != nil {
		t.Fatal(err)
	}
	if err := s.FlushBlob(h); err != nil {
		t.Fatal(err)
	}
}

// TestCloseAmidPutsAndFlushes: Close while puts (some waiting for room)
// and flushes run. Every flush succeeds, and once all have returned every
// put's blob is in place, nothing is pending and no syncer runs.
func TestCloseAmidPutsAndFlushes(t *testing.T) {
	s := openStore(t)
	s.wb.limit = 2
	var (
		wg     sync.WaitGroup
		mu     sync.Mutex
		hashes []string
	)
	for g := range 4 {
		wg.Go(func() {
			for i := range 30 {
				h, err := s.Put(fmt.Appendf(nil, "put %d of %d", i, g%2)) // two pairs put the same bytes
				if err != nil {
					t.Error(err)
					return
				}
				mu.Lock()
				hashes = append(hashes, h)
				mu.Unlock()
				if i%5 == 0 {
					if err := s.Flush(); err != nil {
						t.Error(err)
					}
				}
			}
		})
	}
	waitFor(s, func(wb *behind) bool { return wb.putSeq >= 10 })
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	wg.Wait()
	s.wb.mu.Lock()
	running := s.wb.running
	s.wb.mu.Unlock()
	if running {
		t.Fatal("a syncer runs after Close and every put returned")
	}
	checkSettled(t, s)
	for _, h := range hashes {
		if !inPlace(s, h) {
			t.Fatalf("blob %s not in place after Close", h[:8])
		}
	}
}

// TestDirSyncFailureIsNotDurable: when the blob's file is synced and in
// its place but its directory cannot be synced, the put is reported by
// Flush, FlushBlob does not call the blob durable, and storing the bytes
// again (which must not be skipped as already present) makes it durable.
func TestDirSyncFailureIsNotDurable(t *testing.T) {
	s := openStore(t)
	data := []byte("entry not on disk")
	h := Sum(data)
	fan := filepath.Dir(s.path(h))
	boom := errors.New("EIO on directory")
	var mu sync.Mutex
	failing := true
	s.syncDir = func(dir string) error {
		mu.Lock()
		defer mu.Unlock()
		if failing && dir == fan {
			return boom
		}
		return fsyncDir(dir)
	}
	if _, err := s.Put(data); err != nil {
		t.Fatal(err)
	}
	if err := s.Flush(); !errors.Is(err, boom) {
		t.Fatalf("Flush = %v, want the directory sync failure", err)
	}
	if err := s.FlushBlob(h); err == nil {
		t.Fatal("FlushBlob calls a blob durable whose directory sync failed")
	}
	mu.Lock()
	failing = false
	mu.Unlock()
	if _, err := s.Put(data); err != nil {
		t.Fatal(err)
	}
	if err := s.FlushBlob(h); err != nil {
		t.Fatalf("FlushBlob after storing again: %v", err)
	}
	if got, err := s.Get(h); err != nil || !bytes.Equal(got, data) {
		t.Fatalf("Get: %v", err)
	}
}

// TestFailedRepairIsNotDurable: a put meant to replace a damaged file in
// the blob's place fails its sync; the damaged file is still there, but
// FlushBlob must not call the blob durable.
func TestFailedRepairIsNotDurable(t *testing.T) {
	s := openStore(t)
	data := []byte("to be repaired")
	h, _ := s.Put(data)
	flush(t, s)
	if err := os.Truncate(s.path(h), 3); err != nil {
		t.Fatal(err)
	}
	script(s, func(*os.File) error { return errors.New("EIO") })
	if _, err := s.Put(data); err != nil {
		t.Fatal(err)
	}
	if err := s.FlushBlob(h); err == nil {
		t.Fatal("FlushBlob = nil while only a damaged file is in place")
	}
	script(s, func(f *os.File) error { return f.Sync() })
	if _, err := s.Put(data); err != nil {
		t.Fatal(err)
	}
	if err := s.FlushBlob(h); err != nil {
		t.Fatal(err)
	}
	if got, err := s.Get(h); err != nil || !bytes.Equal(got, data) {
		t.Fatalf("Get: %v", err)
	}
}
