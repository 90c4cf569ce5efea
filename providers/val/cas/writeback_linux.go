package cas

import (
	"os"

	"golang.org/x/sys/unix"
)

// startWriteback (a variable for tests) asks the kernel to begin writing n bytes of f from off to
// the disk and returns without waiting for them (sync_file_range(2) with
// SYNC_FILE_RANGE_WRITE). It is a hint: the fsync that makes the blob
// durable still follows, and an error here is left for that fsync to
// report.
var startWriteback = func(f *os.File, off, n int64) {
	rc, err := f.SyscallConn()
	if err != nil {
		return
	}
	_ = rc.Control(func(fd uintptr) {
		_ = unix.SyncFileRange(int(fd), off, n, unix.SYNC_FILE_RANGE_WRITE)
	})
}
