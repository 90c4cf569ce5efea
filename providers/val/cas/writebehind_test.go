package cas

import (
	"bytes"
	"errors"
	"io"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"testing/iotest"
	"time"

	"github.com/shoal-sh/shoal/core/rpc"
)

// gate holds the syncer at the data sync of each blob until released, and
// can fail chosen syncs.
type gate struct {
	mu      sync.Mutex
	open    chan struct{}
	fail    map[string]error // temp file name → error to return
	synced  []string         // temp file names, in sync order
	onSync  func(f *os.File) // called before the sync, if set
	release sync.Once
}

func hold(t *testing.T, s *Store) *gate {
	t.Helper()
	g := &gate{open: make(chan struct{}), fail: map[string]error{}}
	s.syncFile = func(f *os.File) error {
		<-g.open
		g.mu.Lock()
		g.synced = append(g.synced, f.Name())
		err := g.fail[filepath.Base(f.Name())]
		on := g.onSync
		g.mu.Unlock()
		if on != nil {
			on(f)
		}
		if err != nil {
			return err
		}
		return f.Sync()
	}
	// Registered after openStore's Close, so it runs first and Close does
	// not wait on a closed gate.
	t.Cleanup(g.let)
	return g
}

func (g *gate) let() { g.release.Do(func() { close(g.open) }) }

// failNext makes the sync of every temp file now in tmp/ fail.
func (g *gate) failAll(t *testing.T, s *Store, err error) {
	t.Helper()
	g.mu.Lock()
	defer g.mu.Unlock()
	for _, e := range tempFiles(t, s) {
		g.fail[e] = err
	}
}

func tempFiles(t *testing.T, s *Store) []string {
	t.Helper()
	entries, err := os.ReadDir(filepath.Join(s.Dir(), tmpDir))
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	return names
}

func inPlace(s *Store, h string) bool {
	_, err := os.Stat(s.path(h))
	return err == nil
}

func TestReadableBeforeFlush(t *testing.T) {
	s := openStore(t)
	g := hold(t, s)
	small := []byte("readable at once")
	large := randBytes(t, 2*chunkSize+3)
	hs, err := s.Put(small)
	if err != nil {
		t.Fatal(err)
	}
	hl, size, err := s.PutReader(bytes.NewReader(large))
	if err != nil || size != int64(len(large)) {
		t.Fatal(size, err)
	}
	for h, data := range map[string][]byte{hs: small, hl: large} {
		if inPlace(s, h) {
			t.Fatal("blob renamed into place before its sync")
		}
		if !s.Has(h) {
			t.Fatal("Has: pending blob not present")
		}
		if n, err := s.Size(h); err != nil || n != int64(len(data)) {
			t.Fatalf("Size = %d, %v", n, err)
		}
		got, err := s.Get(h)
		if err != nil || !bytes.Equal(got, data) {
			t.Fatalf("Get of a pending blob: %v", err)
		}
		rc, n, err := s.Open(h)
		if err != nil {
			t.Fatal(err)
		}
		streamed, err := io.ReadAll(rc)
		rc.Close()
		if err != nil || n != int64(len(data)) || !bytes.Equal(streamed, data) {
			t.Fatalf("Open of a pending blob: %d bytes, %v", len(streamed), err)
		}
	}
	// A second put of pending bytes is a no-op.
	if h, err := s.Put(small); err != nil || h != hs {
		t.Fatal(h, err)
	}
	if n := len(tempFiles(t, s)); n != 2 {
		t.Fatalf("tmp holds %d files, want 2", n)
	}
	g.let()
	flush(t, s)
	for h, data := range map[string][]byte{hs: small, hl: large} {
		got, err := os.ReadFile(s.path(h))
		if err != nil || !bytes.Equal(got, data) {
			t.Fatalf("after Flush the blob is not in place: %v", err)
		}
	}
	if n := len(tempFiles(t, s)); n != 0 {
		t.Fatalf("tmp holds %d files after Flush", n)
	}
}

// TestReadFollowsRename covers a read that finds a blob pending but its
// temp file already renamed: it reads from the blob's place.
func TestReadFollowsRename(t *testing.T) {
	s := openStore(t)
	g := hold(t, s)
	data := []byte("moved under the reader")
	h, _ := s.Put(data)
	tmp, _, ok := s.pendingFile(h)
	if !ok {
		t.Fatal("not pending")
	}
	os.MkdirAll(filepath.Dir(s.path(h)), 0o700)
	if err := os.Rename(tmp, s.path(h)); err != nil {
		t.Fatal(err)
	}
	if got, err := s.Get(h); err != nil || !bytes.Equal(got, data) {
		t.Fatalf("Get: %v", err)
	}
	g.let()
	s.Flush() // the syncer's own rename now fails; that is this test's doing
}

func TestFlushMakesDurable(t *testing.T) {
	s := openStore(t)
	if err := s.Flush(); err != nil {
		t.Fatalf("Flush of nothing: %v", err)
	}
	var hashes []string
	for i := range 20 {
		h, err := s.Put(randBytes(t, 100+i))
		if err != nil {
			t.Fatal(err)
		}
		hashes = append(hashes, h)
	}
	flush(t, s)
	for _, h := range hashes {
		if !inPlace(s, h) {
			t.Fatalf("blob %s not in place after Flush", h[:8])
		}
	}
	if n := len(tempFiles(t, s)); n != 0 {
		t.Fatalf("tmp holds %d files after Flush", n)
	}
	if s.isPending(hashes[0]) || s.wb.unsettled != 0 {
		t.Fatal("write-behind state not settled")
	}
}

// TestSyncBeforeRename checks the order that keeps the layout's promise:
// at the moment a blob's data is synced, nothing is at its place yet.
func TestSyncBeforeRename(t *testing.T) {
	s := openStore(t)
	g := hold(t, s)
	var early []string
	var mu sync.Mutex
	g.onSync = func(f *os.File) {
		data, _ := os.ReadFile(f.Name())
		if inPlace(s, Sum(data)) {
			mu.Lock()
			early = append(early, f.Name())
			mu.Unlock()
		}
	}
	for i := range 8 {
		if _, err := s.Put(randBytes(t, 1000*i+1)); err != nil {
			t.Fatal(err)
		}
	}
	g.let()
	flush(t, s)
	if len(early) != 0 || len(g.synced) != 8 {
		t.Fatalf("renamed before sync: %v; synced %d", early, len(g.synced))
	}
}

func TestSyncFailureSurfacesAtFlush(t *testing.T) {
	s := openStore(t)
	g := hold(t, s)
	doomed := []byte("never durable")
	h, err := s.Put(doomed)
	if err != nil {
		t.Fatal(err)
	}
	ok, _ := s.Put([]byte("fine"))
	boom := errors.New("disk on fire")
	g.mu.Lock()
	g.fail[filepath.Base(mustPending(t, s, h))] = boom
	g.mu.Unlock()
	g.let()
	err = s.Flush()
	if !errors.Is(err, boom) {
		t.Fatalf("Flush = %v, want the sync failure", err)
	}
	if s.Has(h) || inPlace(s, h) {
		t.Fatal("a blob whose sync failed is still served")
	}
	_, err = s.Get(h)
	wantCode(t, err, rpc.NotFound)
	if !inPlace(s, ok) {
		t.Fatal("the other blob of the batch is not in place")
	}
	if n := len(tempFiles(t, s)); n != 0 {
		t.Fatalf("tmp holds %d files", n)
	}
	// Reported once; storing the bytes again works.
	if err := s.Flush(); err != nil {
		t.Fatalf("second Flush = %v", err)
	}
	if _, err := s.Put(doomed); err != nil {
		t.Fatal(err)
	}
	flush(t, s)
	if !inPlace(s, h) {
		t.Fatal("re-put blob not in place")
	}
}

func mustPending(t *testing.T, s *Store, h string) string {
	t.Helper()
	tmp, _, ok := s.pendingFile(h)
	if !ok {
		t.Fatalf("blob %s not pending", h[:8])
	}
	return tmp
}

// TestSyncFailureReachesEveryWaiter: every Flush already waiting when a
// failure is first reported returns it; a later Flush does not.
func TestSyncFailureReachesEveryWaiter(t *testing.T) {
	s := openStore(t)
	g := hold(t, s)
	s.Put([]byte("x"))
	g.failAll(t, s, errors.New("EIO"))
	errs := make(chan error, 2)
	for range 2 {
		go func() { errs <- s.Flush() }()
	}
	for { // both are waiting (polls state, no timing assumption)
		s.wb.mu.Lock()
		n := s.wb.flushing
		s.wb.mu.Unlock()
		if n == 2 {
			break
		}
		time.Sleep(time.Millisecond)
	}
	g.let()
	for range 2 {
		if err := <-errs; err == nil {
			t.Fatal("a waiting Flush missed the failure")
		}
	}
	if err := s.Flush(); err != nil {
		t.Fatalf("a later Flush = %v", err)
	}
}

func TestGCDuringPending(t *testing.T) {
	s := openStore(t)
	g := hold(t, s)
	data := randBytes(t, chunkSize+1)
	h, _, err := s.PutReader(bytes.NewReader(data))
	if err != nil {
		t.Fatal(err)
	}
	// Make the pending temp file look ancient and collect with no minimum
	// age and no roots: a crashed put's file would go, this one stays.
	tmp := mustPending(t, s, h)
	then := time.Now().Add(-48 * time.Hour)
	os.Chtimes(tmp, then, then)
	stale := filepath.Join(s.Dir(), tmpDir, "put-crashed")
	os.WriteFile(stale, []byte("half"), 0o600)
	os.Chtimes(stale, then, then)
	st, err := s.GC(func(string) bool { return false }, 0)
	if err != nil {
		t.Fatal(err)
	}
	if st.Leftovers != 1 || st.Removed != 0 {
		t.Fatalf("GC stats %+v", st)
	}
	if _, err := os.Stat(tmp); err != nil {
		t.Fatal("GC swept a pending put's temp file")
	}
	// A pending blob is also spared when its file is already in place
	// (renamed by the syncer, not yet settled): put an aged copy there.
	os.MkdirAll(filepath.Dir(s.path(h)), 0o700)
	if err := os.WriteFile(s.path(h), data, 0o600); err != nil {
		t.Fatal(err)
	}
	os.Chtimes(s.path(h), then, then)
	st, err = s.GC(func(string) bool { return false }, 0)
	if err != nil || st.Removed != 0 || !inPlace(s, h) {
		t.Fatalf("GC removed a pending blob: %+v, %v", st, err)
	}
	g.let()
	flush(t, s)
	if got, err := s.Get(h); err != nil || !bytes.Equal(got, data) {
		t.Fatalf("after GC and Flush: %v", err)
	}
	// Settled and unreferenced, it is collected like any blob.
	age(t, s, h, time.Hour)
	if st, _ := s.GC(func(string) bool { return false }, time.Minute); st.Removed != 1 {
		t.Fatalf("GC stats %+v", st)
	}
}

func TestConcurrentPendingPutsOfOneBlob(t *testing.T) {
	s := openStore(t)
	g := hold(t, s)
	data := randBytes(t, chunkSize+17)
	var wg sync.WaitGroup
	for i := range 8 {
		wg.Go(func() {
			var err error
			if i%2 == 0 {
				_, err = s.Put(data)
			} else {
				_, _, err = s.PutReader(bytes.NewReader(data))
			}
			if err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	if n := len(tempFiles(t, s)); n != 1 {
		t.Fatalf("%d temp files for one pending blob, want 1", n)
	}
	g.let()
	flush(t, s)
	h := Sum(data)
	fan, _ := os.ReadDir(filepath.Dir(s.path(h)))
	if len(fan) != 1 || len(tempFiles(t, s)) != 0 {
		t.Fatalf("fan-out holds %d files, tmp %d", len(fan), len(tempFiles(t, s)))
	}
}

func TestDeletePending(t *testing.T) {
	s := openStore(t)
	g := hold(t, s)
	h, _ := s.Put([]byte("deleted before durable"))
	if err := s.Delete(h); err != nil {
		t.Fatal(err)
	}
	if s.Has(h) {
		t.Fatal("deleted pending blob still present")
	}
	g.let()
	flush(t, s)
	if s.Has(h) || inPlace(s, h) || len(tempFiles(t, s)) != 0 {
		t.Fatal("the syncer resurrected a deleted blob")
	}
}

func TestCloseFlushes(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "cas")
	s, err := Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	var hashes []string
	for i := range 10 {
		h, _ := s.Put(randBytes(t, 10+i))
		hashes = append(hashes, h)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	for _, h := range hashes {
		if !inPlace(s, h) {
			t.Fatal("Close left a blob pending")
		}
	}
	// After Close, a put is durable when it returns.
	h, _ := s.Put([]byte("late"))
	if !inPlace(s, h) || s.isPending(h) {
		t.Fatal("put after Close not synced inline")
	}
	s.wb.mu.Lock()
	running := s.wb.running
	s.wb.mu.Unlock()
	if running {
		t.Fatal("syncer still running after Close")
	}
}

// TestCrashLeavesOnlyTempFiles simulates a kernel that dies with puts not
// yet synced: a new store on the same directory does not see them, and
// collection removes their temp files once they are old.
func TestCrashLeavesOnlyTempFiles(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "cas")
	crashed, err := Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	g := hold(t, crashed)
	data := randBytes(t, chunkSize+5)
	h, _, err := crashed.PutReader(bytes.NewReader(data))
	if err != nil {
		t.Fatal(err)
	}
	small, _ := crashed.Put([]byte("small"))
	// The "crash": the first store is never flushed; a restarted kernel
	// opens the directory afresh.
	s, err := Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, x := range []string{h, small} {
		if s.Has(x) || inPlace(s, x) {
			t.Fatal("an unsynced put is visible after the crash")
		}
		_, err := s.Get(x)
		wantCode(t, err, rpc.NotFound)
	}
	left := tempFiles(t, s)
	if len(left) != 2 {
		t.Fatalf("tmp holds %d files, want 2", len(left))
	}
	// Young leftovers are kept (another kernel may be writing them) ...
	if st, _ := s.GC(func(string) bool { return false }, time.Hour); st.Leftovers != 0 {
		t.Fatalf("young temp files swept: %+v", st)
	}
	// ... old ones removed.
	then := time.Now().Add(-2 * time.Hour)
	for _, n := range left {
		os.Chtimes(filepath.Join(dir, tmpDir, n), then, then)
	}
	if st, _ := s.GC(func(string) bool { return false }, time.Hour); st.Leftovers != 2 {
		t.Fatalf("stale temp files kept: %+v", st)
	}
	// Storing the bytes again works as for any missing blob.
	if _, _, err := s.PutReader(bytes.NewReader(data)); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if got, err := s.Get(h); err != nil || !bytes.Equal(got, data) {
		t.Fatalf("after re-put: %v", err)
	}
	// Let the "dead" store's syncer finish so the test leaves nothing
	// running; its temp files are gone, so its renames fail.
	g.let()
	crashed.Close()
}

// pieces is a source that hands its bytes to the writer in irregular
// slices, through WriterTo (so the store sees Write calls of every size).
type pieces struct {
	data  []byte
	sizes []int
}

func (p *pieces) Read([]byte) (int, error) { panic("io.Copy should use WriteTo") }

func (p *pieces) WriteTo(w io.Writer) (int64, error) {
	var n int64
	rest := p.data
	for i := 0; len(rest) > 0; i++ {
		k := min(p.sizes[i%len(p.sizes)], len(rest))
		m, err := w.Write(rest[:k])
		n += int64(m)
		if err != nil {
			return n, err
		}
		rest = rest[k:]
	}
	return n, nil
}

func TestStreamShapes(t *testing.T) {
	s := openStore(t)
	data := randBytes(t, 5*chunkSize+123)
	want := Sum(data)
	sources := map[string]func() io.Reader{
		"irregular writes": func() io.Reader {
			return &pieces{data: data, sizes: []int{1, chunkSize + 7, 100, 3 * chunkSize, chunkSize - 1, 4096}}
		},
		"one large write": func() io.Reader { return bytes.NewReader(data) },
		"short reads":     func() io.Reader { return iotest.HalfReader(bytes.NewReader(data)) },
		"plain reader":    func() io.Reader { return struct{ io.Reader }{bytes.NewReader(data)} },
	}
	for name, src := range sources {
		h, size, err := s.PutReader(src())
		if err != nil || h != want || size != int64(len(data)) {
			t.Fatalf("%s: %s, %d, %v", name, h, size, err)
		}
		flush(t, s)
		got, err := os.ReadFile(s.path(h))
		if err != nil || !bytes.Equal(got, data) {
			t.Fatalf("%s: stored bytes differ: %v", name, err)
		}
		if err := s.Delete(h); err != nil {
			t.Fatal(err)
		}
	}
	// Put of a large slice takes the same path.
	if h, err := s.Put(data); err != nil || h != want {
		t.Fatal(h, err)
	}
	flush(t, s)
	if got, err := s.Get(want); err != nil || !bytes.Equal(got, data) {
		t.Fatalf("Put: %v", err)
	}
}
