package cas

import (
	"bytes"
	"crypto/rand"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
	"unsafe"

	"github.com/shoal-sh/shoal/core/rpc"
)

func openStore(t testing.TB) *Store {
	t.Helper()
	s, err := Open(filepath.Join(t.TempDir(), "cas"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// flush makes every put so far durable, failing the test on an error.
func flush(t testing.TB, s *Store) {
	t.Helper()
	if err := s.Flush(); err != nil {
		t.Fatal(err)
	}
}

func randBytes(t testing.TB, n int) []byte {
	t.Helper()
	b := make([]byte, n)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	return b
}

func wantCode(t *testing.T, err error, code rpc.Code) {
	t.Helper()
	if err == nil {
		t.Fatalf("got no error, want %s", code.Name())
	}
	if got := rpc.CodeOf(err); got != code {
		t.Fatalf("got %v, want code %s", err, code.Name())
	}
}

func TestPutGetRoundTrip(t *testing.T) {
	s := openStore(t)
	for _, n := range []int{0, 1, 100, chunkSize - 1, chunkSize, chunkSize + 1, 3*chunkSize + 5} {
		data := randBytes(t, n)
		h, err := s.Put(data)
		if err != nil {
			t.Fatal(err)
		}
		if h != Sum(data) {
			t.Fatalf("size %d: Put returned %s, want %s", n, h, Sum(data))
		}
		h2, size, err := s.PutReader(bytes.NewReader(data))
		if err != nil {
			t.Fatal(err)
		}
		if h2 != h || size != int64(n) {
			t.Fatalf("size %d: PutReader = %s, %d; want %s, %d", n, h2, size, h, n)
		}
		got, err := s.Get(h)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, data) {
			t.Fatalf("size %d: Get returned different bytes", n)
		}
		if sz, err := s.Size(h); err != nil || sz != int64(n) {
			t.Fatalf("size %d: Size = %d, %v", n, sz, err)
		}
		rc, sz, err := s.Open(h)
		if err != nil {
			t.Fatal(err)
		}
		streamed, err := io.ReadAll(rc)
		rc.Close()
		if err != nil || !bytes.Equal(streamed, data) || sz != int64(n) {
			t.Fatalf("size %d: Open streamed %d bytes (size %d), err %v", n, len(streamed), sz, err)
		}
	}
	flush(t, s)
	if left, _ := os.ReadDir(filepath.Join(s.Dir(), tmpDir)); len(left) != 0 {
		t.Fatalf("temp files left behind: %d", len(left))
	}
}

func TestLayout(t *testing.T) {
	s := openStore(t)
	h, err := s.Put([]byte("shoal"))
	if err != nil {
		t.Fatal(err)
	}
	flush(t, s)
	if _, err := os.Stat(filepath.Join(s.Dir(), h[:2], h[2:4], h)); err != nil {
		t.Fatalf("blob not at its fan-out path: %v", err)
	}
}

func TestSurvivesReopen(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "cas")
	s, err := Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	data := randBytes(t, 5000)
	h, err := s.Put(data)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s2, err := Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	got, err := s2.Get(h)
	if err != nil || !bytes.Equal(got, data) {
		t.Fatalf("after reopen: %v", err)
	}
}

func TestParseRef(t *testing.T) {
	h := Sum([]byte("x"))
	tests := []struct {
		in      string
		want    string
		wantErr bool
	}{
		{in: h, want: h},
		{in: "blake3:" + h, want: h},
		{in: "val:blake3:" + h, want: h},
		{in: "", wantErr: true},
		{in: "blake3:", wantErr: true},
		{in: h[:63], wantErr: true},
		{in: h + "0", wantErr: true},
		{in: "sha256:" + h, wantErr: true},
		{in: "A" + h[1:], wantErr: true},
		{in: "g" + h[1:], wantErr: true},
		{in: "../" + h[3:], wantErr: true},
	}
	for _, tt := range tests {
		got, err := ParseRef(tt.in)
		if tt.wantErr {
			if err == nil {
				t.Errorf("ParseRef(%q) = %q, want error", tt.in, got)
			} else if rpc.CodeOf(err) != rpc.InvalidParams {
				t.Errorf("ParseRef(%q): %v, want INVALID_PARAMS", tt.in, err)
			}
			continue
		}
		if err != nil || got != tt.want {
			t.Errorf("ParseRef(%q) = %q, %v; want %q", tt.in, got, err, tt.want)
		}
	}
}

func TestInvalidHashRefused(t *testing.T) {
	s := openStore(t)
	_, err := s.Get("../../etc/passwd")
	wantCode(t, err, rpc.InvalidParams)
	_, _, err = s.Open("ABC")
	wantCode(t, err, rpc.InvalidParams)
	if s.Has("nope") {
		t.Fatal("Has accepted an invalid hash")
	}
}

func TestMissingBlob(t *testing.T) {
	s := openStore(t)
	h := Sum([]byte("never stored"))
	_, err := s.Get(h)
	wantCode(t, err, rpc.NotFound)
	_, _, err = s.Open(h)
	wantCode(t, err, rpc.NotFound)
	_, err = s.Size(h)
	wantCode(t, err, rpc.NotFound)
	if s.Has(h) {
		t.Fatal("Has reports a blob never stored")
	}
	if err := s.Delete(h); err != nil {
		t.Fatalf("Delete of a missing blob: %v", err)
	}
}

func TestDelete(t *testing.T) {
	s := openStore(t)
	h, _ := s.Put([]byte("gone soon"))
	if err := s.Delete(h); err != nil {
		t.Fatal(err)
	}
	if s.Has(h) {
		t.Fatal("blob still present after Delete")
	}
}

func TestCorruptionRefused(t *testing.T) {
	damage := []struct {
		name string
		do   func(path string, data []byte) error
	}{
		{"flipped byte", func(p string, data []byte) error {
			b := bytes.Clone(data)
			b[len(b)/2] ^= 0x40
			return os.WriteFile(p, b, 0o600)
		}},
		{"truncated", func(p string, data []byte) error { return os.Truncate(p, int64(len(data)-1)) }},
		{"emptied", func(p string, data []byte) error { return os.Truncate(p, 0) }},
		{"extended", func(p string, data []byte) error { return os.WriteFile(p, append(bytes.Clone(data), 0), 0o600) }},
	}
	for _, d := range damage {
		t.Run(d.name, func(t *testing.T) {
			for _, read := range []string{"get", "stream"} {
				s := openStore(t)
				data := randBytes(t, 3*chunkSize/2)
				h, err := s.Put(data)
				if err != nil {
					t.Fatal(err)
				}
				flush(t, s)
				os.Chmod(s.path(h), 0o600)
				if err := d.do(s.path(h), data); err != nil {
					t.Fatal(err)
				}
				switch read {
				case "get":
					got, err := s.Get(h)
					wantCode(t, err, rpc.Corrupt)
					if got != nil {
						t.Fatal("corrupt bytes returned")
					}
				case "stream":
					rc, _, err := s.Open(h)
					if err != nil {
						t.Fatal(err)
					}
					_, err = io.ReadAll(rc)
					rc.Close()
					wantCode(t, err, rpc.Corrupt)
				}
				if s.Has(h) {
					t.Fatal("damaged blob still served from its path")
				}
				q, _ := os.ReadDir(filepath.Join(s.Dir(), quarantineDir))
				if len(q) != 1 {
					t.Fatalf("quarantine holds %d files, want 1", len(q))
				}
				// Storing the right bytes again repairs the blob.
				if _, err := s.Put(data); err != nil {
					t.Fatal(err)
				}
				if got, err := s.Get(h); err != nil || !bytes.Equal(got, data) {
					t.Fatalf("after re-put: %v", err)
				}
			}
		})
	}
}

func TestPutReplacesWrongSizedBlob(t *testing.T) {
	s := openStore(t)
	data := []byte("the whole value")
	h, _ := s.Put(data)
	flush(t, s)
	if err := os.Truncate(s.path(h), 3); err != nil {
		t.Fatal(err)
	}
	if _, _, err := s.PutReader(bytes.NewReader(data)); err != nil {
		t.Fatal(err)
	}
	if got, err := s.Get(h); err != nil || !bytes.Equal(got, data) {
		t.Fatalf("truncated blob not replaced: %v", err)
	}
}

func TestConcurrentPutsOfOneBlob(t *testing.T) {
	s := openStore(t)
	data := randBytes(t, 2*chunkSize+17)
	want := Sum(data)
	var wg sync.WaitGroup
	errs := make(chan error, 16)
	for i := range 16 {
		wg.Go(func() {
			var h string
			var err error
			if i%2 == 0 {
				h, err = s.Put(data)
			} else {
				h, _, err = s.PutReader(bytes.NewReader(data))
			}
			if err == nil && h != want {
				err = errors.New("wrong hash " + h)
			}
			errs <- err
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	flush(t, s)
	fan, _ := os.ReadDir(filepath.Dir(s.path(want)))
	if len(fan) != 1 {
		t.Fatalf("fan-out directory holds %d files, want 1", len(fan))
	}
	if left, _ := os.ReadDir(filepath.Join(s.Dir(), tmpDir)); len(left) != 0 {
		t.Fatalf("temp files left behind: %d", len(left))
	}
	if got, err := s.Get(want); err != nil || !bytes.Equal(got, data) {
		t.Fatalf("after concurrent puts: %v", err)
	}
}

type failingReader struct{ n int }

func (r *failingReader) Read(p []byte) (int, error) {
	if r.n <= 0 {
		return 0, errors.New("source went away")
	}
	n := min(len(p), r.n)
	r.n -= n
	return n, nil
}

func TestPutReaderInputError(t *testing.T) {
	s := openStore(t)
	_, _, err := s.PutReader(&failingReader{n: chunkSize + 10})
	if err == nil {
		t.Fatal("PutReader ignored the input error")
	}
	if left, _ := os.ReadDir(filepath.Join(s.Dir(), tmpDir)); len(left) != 0 {
		t.Fatalf("temp files left behind: %d", len(left))
	}
}

// age makes a blob look as if it was last put d ago.
func age(t *testing.T, s *Store, h string, d time.Duration) {
	t.Helper()
	flush(t, s)
	then := time.Now().Add(-d)
	if err := os.Chtimes(s.path(h), then, then); err != nil {
		t.Fatal(err)
	}
}

func TestGC(t *testing.T) {
	s := openStore(t)
	put := func(v string) string {
		h, err := s.Put([]byte(v))
		if err != nil {
			t.Fatal(err)
		}
		return h
	}
	referenced := put("referenced")
	oldOrphan := put("old orphan")
	youngOrphan := put("young orphan")
	reput := put("re-put")
	age(t, s, referenced, 48*time.Hour)
	age(t, s, oldOrphan, 48*time.Hour)
	age(t, s, reput, 48*time.Hour)
	put("re-put") // storing it again makes it young

	stale := filepath.Join(s.Dir(), tmpDir, "put-stale")
	os.WriteFile(stale, []byte("half a blob"), 0o600)
	then := time.Now().Add(-48 * time.Hour)
	os.Chtimes(stale, then, then)
	fresh := filepath.Join(s.Dir(), tmpDir, "put-fresh")
	os.WriteFile(fresh, []byte("in flight"), 0o600)
	stranger := filepath.Join(s.Dir(), "notes.txt")
	os.WriteFile(stranger, []byte("not a blob"), 0o600)
	os.Chtimes(stranger, then, then)

	st, err := s.GC(func(h string) bool { return h == referenced }, 24*time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	want := GCStats{Scanned: 4, Kept: 1, Young: 2, Removed: 1, FreedBytes: int64(len("old orphan")), Leftovers: 1}
	if st != want {
		t.Fatalf("GC stats = %+v, want %+v", st, want)
	}
	for h, present := range map[string]bool{referenced: true, oldOrphan: false, youngOrphan: true, reput: true} {
		if s.Has(h) != present {
			t.Errorf("blob %s present=%v, want %v", h[:8], !present, present)
		}
	}
	for p, present := range map[string]bool{stale: false, fresh: true, stranger: true} {
		if _, err := os.Stat(p); (err == nil) != present {
			t.Errorf("%s present=%v, want %v", filepath.Base(p), !present, present)
		}
	}
}

func TestCollectUsesRoots(t *testing.T) {
	s := openStore(t)
	a, _ := s.Put([]byte("a"))
	b, _ := s.Put([]byte("b"))
	c, _ := s.Put([]byte("c"))
	for _, h := range []string{a, b, c} {
		age(t, s, h, time.Hour)
	}
	s.AddRoots("transcript", func(yield func(string)) error { yield(a); return nil })
	broken := func(yield func(string)) error { return errors.New("journal closed") }
	if _, err := s.Collect(0, broken); err == nil {
		t.Fatal("Collect ran although a root failed")
	}
	if !s.Has(a) || !s.Has(b) || !s.Has(c) {
		t.Fatal("a failed Collect removed blobs")
	}
	st, err := s.Collect(0, func(yield func(string)) error { yield(b); return nil })
	if err != nil {
		t.Fatal(err)
	}
	if st.Removed != 1 || !s.Has(a) || !s.Has(b) || s.Has(c) {
		t.Fatalf("Collect: %+v; has a=%v b=%v c=%v", st, s.Has(a), s.Has(b), s.Has(c))
	}
}

// BenchmarkPutReader compares streaming a 100 MiB blob into the store with
// hashing the same bytes in memory, in one run so the ratios compare like
// with like:
//
//   - put: PutReader returns once the bytes are written and hashed; the
//     fsync happens behind it. Each iteration starts with the previous
//     blob settled and deleted (outside the timer);
//   - put+flush: the same followed by Flush, i.e. durable;
//   - put-nosync: a store with syncing off;
//   - write-only and write-fsync-only: writing the bytes without hashing,
//     to the page cache and then to the disk, the floors no put beats.
//
// Each iteration's blob (or file) is deleted outside the timer before the
// next one. Keeping them instead makes every case write into page-cache
// pages the machine never touched, which on the VM these numbers come from
// is 2-3× slower than the store itself and would measure the VM.
func BenchmarkPutReader(b *testing.B) {
	const size = 100 << 20
	data := randBytes(b, size)
	// rates holds each case's MB/s, one per run (-count runs each case that
	// many times in a row): run i of a case is compared with run i of the
	// hashing baseline, and also reported as the metric x-hash.
	rates := map[string][]float64{}
	report := func(b *testing.B) {
		name := b.Name()[len("BenchmarkPutReader/"):]
		if i := strings.LastIndexByte(name, '#'); i >= 0 {
			name = name[:i] // the -count suffix
		}
		mbs := float64(size) * float64(b.N) / b.Elapsed().Seconds() / 1e6
		b.ReportMetric(mbs, "MB/s")
		if hash := rates["hash-in-memory"]; name != "hash-in-memory" && len(rates[name]) < len(hash) {
			b.ReportMetric(mbs/hash[len(rates[name])], "x-hash")
		}
		rates[name] = append(rates[name], mbs)
	}
	defer func() {
		ratio := func(name, base string) string {
			var rs []float64
			for i, r := range rates[name] {
				if i < len(rates[base]) {
					rs = append(rs, r/rates[base][i])
				}
			}
			if len(rs) == 0 {
				return "-"
			}
			slices.Sort(rs)
			return fmt.Sprintf("%.2f× (%.2f–%.2f)", rs[len(rs)/2], rs[0], rs[len(rs)-1])
		}
		h := "hash-in-memory"
		b.Logf("vs hashing in memory, median (range) of %d paired runs: put %s, put+flush %s, put-nosync %s; put+flush vs write+fsync alone %s",
			len(rates[h]), ratio("put", h), ratio("put+flush", h), ratio("put-nosync", h), ratio("put+flush", "write-fsync-only"))
	}()
	b.Run("hash-in-memory", func(b *testing.B) {
		b.SetBytes(size)
		for b.Loop() {
			Sum(data)
		}
		report(b)
	})
	for _, tc := range []struct {
		name   string
		noSync bool
		flush  bool
	}{{"put", false, false}, {"put+flush", false, true}, {"put-nosync", true, false}} {
		b.Run(tc.name, func(b *testing.B) {
			s, err := OpenWith(b.TempDir(), Options{NoSync: tc.noSync})
			if err != nil {
				b.Fatal(err)
			}
			defer s.Close()
			b.SetBytes(size)
			for b.Loop() {
				h, _, err := s.PutReader(bytes.NewReader(data))
				if err != nil {
					b.Fatal(err)
				}
				if tc.flush {
					if err := s.Flush(); err != nil {
						b.Fatal(err)
					}
				}
				b.StopTimer()
				if err := s.Flush(); err != nil {
					b.Fatal(err)
				}
				s.Delete(h)
				b.StartTimer()
			}
			report(b)
		})
	}
	for _, sync := range []bool{false, true} {
		name := "write-only"
		if sync {
			name = "write-fsync-only"
		}
		b.Run(name, func(b *testing.B) {
			dir := b.TempDir()
			b.SetBytes(size)
			for b.Loop() {
				f, err := os.CreateTemp(dir, "raw-*")
				if err != nil {
					b.Fatal(err)
				}
				for off := 0; off < size; off += chunkSize {
					f.Write(data[off : off+chunkSize])
				}
				if sync {
					f.Sync()
				}
				f.Close()
				b.StopTimer()
				os.Remove(f.Name())
				b.StartTimer()
			}
			report(b)
		})
	}
}

// TestPutPieces: a blob stored from pieces (empty ones, small ones, ones
// larger than a chunk, more than a batch holds) is the blob of their
// concatenation, and the pieces are left as they were.
func TestPutPieces(t *testing.T) {
	s := openStore(t)
	for _, sizes := range [][]int{{}, {0}, {5}, {0, 3, 0}, {chunkSize + 7, 1, chunkSize - 1, 0, 2 * chunkSize}} {
		pieces := make([][]byte, len(sizes))
		for i, n := range sizes {
			pieces[i] = randBytes(t, n)
		}
		check := func(pieces [][]byte) {
			t.Helper()
			want := bytes.Join(pieces, nil)
			kept := slices.Clone(pieces)
			h, size, err := s.PutPieces(pieces)
			if err != nil || h != Sum(want) || size != int64(len(want)) {
				t.Fatalf("PutPieces = %s, %d, %v; want %s, %d", h, size, err, Sum(want), len(want))
			}
			for i := range pieces {
				if unsafe.SliceData(pieces[i]) != unsafe.SliceData(kept[i]) || len(pieces[i]) != len(kept[i]) {
					t.Fatal("PutPieces changed its pieces")
				}
			}
			if got, err := s.Get(h); err != nil || !bytes.Equal(got, want) {
				t.Fatalf("Get after PutPieces: %v", err)
			}
		}
		check(pieces)
	}
	many := make([][]byte, 3*maxBatch+1)
	for i := range many {
		many[i] = randBytes(t, i%100+1)
	}
	h, _, err := s.PutPieces(many)
	if err != nil || h != Sum(bytes.Join(many, nil)) {
		t.Fatalf("PutPieces of %d pieces: %s, %v", len(many), h, err)
	}
	flush(t, s)
}

// TestPutPiecesSummed: pieces put with the hash their caller computed are
// stored as PutPieces stores them, in batches past IOV_MAX too; a blob
// already there is not written again (pieces of the same size under its
// hash leave its bytes as they were); a malformed hash is refused.
// 5*maxBatch+1 pieces are more than one writev takes (IOV_MAX, 1024).
func TestPutPiecesSummed(t *testing.T) {
	s := openStore(t)
	for _, sizes := range [][]int{{}, {0}, {5}, {0, 3, 0}, {chunkSize + 7, 1, chunkSize - 1, 0, 2 * chunkSize}, slices.Repeat([]int{3}, 5*maxBatch+1)} {
		pieces := make([][]byte, len(sizes))
		for i, n := range sizes {
			pieces[i] = randBytes(t, n)
		}
		want := bytes.Join(pieces, nil)
		size, err := s.PutPiecesSummed(pieces, Sum(want))
		if err != nil || size != int64(len(want)) {
			t.Fatalf("PutPiecesSummed of %d pieces = %d, %v; want %d", len(pieces), size, err, len(want))
		}
		if got, err := s.Get(Sum(want)); err != nil || !bytes.Equal(got, want) {
			t.Fatalf("Get after PutPiecesSummed: %v", err)
		}
		if len(want) == 0 {
			continue
		}
		other := [][]byte{randBytes(t, len(want))}
		if _, err := s.PutPiecesSummed(other, Sum(want)); err != nil {
			t.Fatal(err)
		}
		if got, err := s.Get(Sum(want)); err != nil || !bytes.Equal(got, want) {
			t.Fatalf("a summed put over a stored blob rewrote it: %v", err)
		}
	}
	if _, err := s.PutPiecesSummed([][]byte{[]byte("x")}, "not-a-hash"); err == nil {
		t.Fatal("a malformed hash was accepted")
	}
	flush(t, s)
	if n := len(tempFiles(t, s)); n != 0 {
		t.Fatalf("%d temp files left", n)
	}
}
