package cas

import (
	"bytes"
	"io"
	"os"
	"os/exec"
	"syscall"
	"testing"
)

// diskFullChildEnv marks the child process that runs a disk-full test.
// RLIMIT_FSIZE holds for the whole process, so the test that lowers it
// runs in a re-executed copy of the test binary: the go test process
// (its test log, coverage and cache files) never sees the limit.
const diskFullChildEnv = "SHOAL_CAS_DISKFULL_CHILD"

// inDiskFullChild reports whether this process is the child that runs
// the test. In the parent it re-executes the test binary with only that
// test selected, waits for it and fails when the child fails; the caller
// returns when it reports false.
func inDiskFullChild(t *testing.T) bool {
	t.Helper()
	if os.Getenv(diskFullChildEnv) == t.Name() {
		return true
	}
	cmd := exec.Command(os.Args[0], "-test.run=^"+t.Name()+"$", "-test.count=1", "-test.v")
	cmd.Env = append(os.Environ(), diskFullChildEnv+"="+t.Name())
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("disk-full child: %v\n%s", err, out)
	}
	if bytes.Contains(out, []byte("--- SKIP")) {
		t.Skipf("disk-full child skipped:\n%s", out)
	}
	if !bytes.Contains(out, []byte("--- PASS: "+t.Name())) {
		t.Fatalf("disk-full child did not run the test:\n%s", out)
	}
	return false
}

// fileSizeLimit makes writes past limit bytes of any file fail (EFBIG),
// as a full disk would, until the test ends. The Go runtime ignores the
// SIGXFSZ that comes with it. Only call it in a disk-full child.
func fileSizeLimit(t *testing.T, limit uint64) {
	t.Helper()
	if os.Getenv(diskFullChildEnv) == "" {
		t.Fatal("fileSizeLimit outside a disk-full child would limit go test's own files")
	}
	var old syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_FSIZE, &old); err != nil {
		t.Skip(err)
	}
	lim := old
	lim.Cur = limit
	if err := syscall.Setrlimit(syscall.RLIMIT_FSIZE, &lim); err != nil {
		t.Skip(err)
	}
	t.Cleanup(func() { syscall.Setrlimit(syscall.RLIMIT_FSIZE, &old) })
}

// TestWriteErrorLeavesNothing: a put whose write fails midway (the disk
// is full) returns the error and leaves no temp file, no pending or live
// entry and no blob, on every write path; the store works afterwards.
// It runs in a child process (inDiskFullChild).
func TestWriteErrorLeavesNothing(t *testing.T) {
	if !inDiskFullChild(t) {
		return
	}
	s := openStore(t)
	limit := uint64(chunkSize + chunkSize/2)
	fileSizeLimit(t, limit)
	small := randBytes(t, overlapMin-1) // hashed first, written in one call
	large := randBytes(t, 3*chunkSize)  // written while hashed
	puts := map[string]func() (string, error){
		"Put small": func() (string, error) { return s.Put(small) },
		"Put large": func() (string, error) { return s.Put(large) },
		"PutReader lent": func() (string, error) {
			h, _, err := s.PutReader(bytes.NewReader(large))
			return h, err
		},
		"PutReader copied": func() (string, error) {
			h, _, err := s.PutReader(struct{ io.Reader }{bytes.NewReader(large)})
			return h, err
		},
		"PutPiecesSummed": func() (string, error) {
			_, err := s.PutPiecesSummed([][]byte{large[:chunkSize], large[chunkSize:]}, Sum(large))
			if err != nil {
				return "", err
			}
			return Sum(large), nil
		},
		"PutReader irregular writes": func() (string, error) {
			h, _, err := s.PutReader(&pieces{data: large, sizes: []int{100, chunkSize + 1, 7}})
			return h, err
		},
	}
	for name, put := range puts {
		h, err := put()
		if err == nil {
			t.Fatalf("%s: a write past the file size limit succeeded (%s)", name, h)
		}
		if h != "" {
			t.Fatalf("%s: failed put returned a hash", name)
		}
		if s.Has(Sum(small)) || s.Has(Sum(large)) {
			t.Fatalf("%s: a failed put left a blob", name)
		}
		flush(t, s)
		checkSettled(t, s)
	}
	if _, err := s.Put([]byte("fits")); err != nil {
		t.Fatal(err)
	}
	flush(t, s)
	checkSettled(t, s)
}
