//go:build unix

package cas

import (
	"io"
	"os"

	"golang.org/x/sys/unix"
)

// writeBuffers writes the slices one after the other with writev(2), at
// most maxBatch of them a call (IOV_MAX bounds one), going on after a
// short write.
func writeBuffers(f *os.File, bs [][]byte) error {
	rc, err := f.SyscallConn()
	if err != nil {
		return err
	}
	for {
		for len(bs) > 0 && len(bs[0]) == 0 {
			bs = bs[1:]
		}
		if len(bs) == 0 {
			return nil
		}
		var n int
		var werr error
		if err := rc.Write(func(fd uintptr) bool {
			n, werr = unix.Writev(int(fd), bs[:min(len(bs), maxBatch)])
			return werr != unix.EAGAIN
		}); err != nil {
			return err
		}
		if werr == unix.EINTR {
			continue
		}
		if werr != nil {
			return &os.PathError{Op: "writev", Path: f.Name(), Err: werr}
		}
		if n == 0 {
			return &os.PathError{Op: "writev", Path: f.Name(), Err: io.ErrShortWrite}
		}
		for n >= len(bs[0]) {
			n -= len(bs[0])
			bs = bs[1:]
			if len(bs) == 0 {
				return nil
			}
		}
		if n > 0 {
			// A short write: the rest of the first slice first, without
			// touching the caller's list.
			bs = append([][]byte{bs[0][n:]}, bs[1:]...)
		}
	}
}
