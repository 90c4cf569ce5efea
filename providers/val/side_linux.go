package val

import (
	"io"
	"net"
	"os"
	"syscall"

	"golang.org/x/sys/unix"
)

// sendFile sends n bytes of f from offset off to c with sendfile(2),
// leaving f's own offset alone.
func sendFile(c net.Conn, f *os.File, off, n int64) error {
	sc, ok := c.(syscall.Conn)
	if !ok {
		return copyRange(c, f, off, n)
	}
	rc, err := sc.SyscallConn()
	if err != nil {
		return err
	}
	src := int(f.Fd())
	var serr error
	err = rc.Write(func(fd uintptr) bool {
		for n > 0 {
			m, e := unix.Sendfile(int(fd), src, &off, int(min(n, 1<<30)))
			if m > 0 {
				n -= int64(m)
			}
			switch {
			case e == unix.EAGAIN:
				return false // wait until the socket takes more
			case e == unix.EINTR:
			case e != nil:
				serr = e
				return true
			case m == 0:
				serr = io.ErrUnexpectedEOF // the file is shorter than it was
				return true
			}
		}
		return true
	})
	if err != nil {
		return err
	}
	return serr
}

// sideFiles says a put on the side socket may hand over a file's
// descriptor (see wire.StreamTicket.File).
const sideFiles = true
