//go:build linux

package shell

import (
	"io"
	"os"
	"sync"
	"time"

	"golang.org/x/sys/unix"
)

// outputs carries a process's standard output and error to writers that
// are not files (a run's captures). The waiting goroutine reads the pipes
// itself, in one poll(2) loop that also watches the process through a
// pidfd: no copying goroutines and no netpoller round trips, which on a
// short command are a good part of its cost. Writers that are files (a
// pipeline's pipes, redirections) go to the process as they are.
type outputs struct {
	child [2]*os.File // the process's stdout and stderr
	own   []*os.File  // pipe write ends made here; closed once the process has them
	read  [2]int      // read ends, -1 when the stream is a file or done
	dst   [2]io.Writer
}

// readDirect is the output length from which readFD reads into the
// capture's buffer.
const readDirect = 64 << 10

// pidfdWorks reports whether this kernel has pidfd_open (Linux 5.3).
var pidfdWorks = sync.OnceValue(func() bool {
	fd, err := unix.PidfdOpen(os.Getpid(), 0)
	if err != nil {
		return false
	}
	unix.Close(fd)
	return true
})

// newOutputs prepares stdout and stderr for a process. It returns nil
// when the pipes-and-goroutines of os/exec must do instead (no pidfd).
func newOutputs(stdout, stderr io.Writer) (*outputs, error) {
	if !pidfdWorks() {
		return nil, nil
	}
	o := &outputs{read: [2]int{-1, -1}, dst: [2]io.Writer{stdout, stderr}}
	for i, w := range o.dst {
		if f, ok := w.(*os.File); ok {
			o.child[i] = f
			continue
		}
		if w == nil {
			continue // os/exec gives the process /dev/null
		}
		if i == 1 && sameWriter(stderr, stdout) {
			// 2>&1: one pipe keeps the two streams in the order written.
			o.child[1] = o.child[0]
			continue
		}
		var p [2]int
		if err := unix.Pipe2(p[:], unix.O_CLOEXEC); err != nil {
			o.close()
			return nil, err
		}
		o.read[i] = p[0]
		o.child[i] = os.NewFile(uintptr(p[1]), "|1")
		o.own = append(o.own, o.child[i])
	}
	return o, nil
}

// sameWriter is a == b for writers whose dynamic type may not be
// comparable.
func sameWriter(a, b io.Writer) (same bool) {
	defer func() {
		if recover() != nil {
			same = false
		}
	}()
	return a == b
}

// started closes the parent's copies of the write ends: from now on the
// pipes end when the process (and whatever inherited them) closes them.
func (o *outputs) started() {
	for _, f := range o.own {
		f.Close()
	}
	o.own = nil
}

// close releases everything still open.
func (o *outputs) close() {
	o.started()
	for i, fd := range o.read {
		if fd >= 0 {
			unix.Close(fd)
			o.read[i] = -1
		}
	}
}

// pidfdOpen is unix.PidfdOpen; tests replace it to take the fallback.
var pidfdOpen = unix.PidfdOpen

// copy reads the pipes into their writers until the process pid has
// exited and the pipes have ended, or grace after its exit, whichever is
// first: a daemonised grandchild holding a pipe does not hold up the run
// (the pipe is then closed, as os/exec's WaitDelay does). It returns once
// the process has exited; reaping it is the caller's, and then calling
// the returned drain, which is not nil only when the reading had to go on
// in goroutines (no pidfd could be opened, or poll failed).
func (o *outputs) copy(pid int, grace time.Duration) (drain func()) {
	pidfd, err := pidfdOpen(pid, 0)
	if err != nil {
		return o.copyInBackground(grace)
	}
	defer unix.Close(pidfd)
	return o.copyFD(pidfd, pid, grace)
}

// copyFD is copy with a pidfd already open (a confined process's, which
// its worker opened at fork); -1 opens one for pid.
func (o *outputs) copyFD(pidfd, pid int, grace time.Duration) (drain func()) {
	if pidfd < 0 {
		return o.copy(pid, grace)
	}
	fds := []unix.PollFd{{Fd: int32(pidfd), Events: unix.POLLIN}}
	streams := []int{-1} // fds[i] reads o.dst[streams[i]]
	for s, fd := range o.read {
		if fd >= 0 {
			fds = append(fds, unix.PollFd{Fd: int32(fd), Events: unix.POLLIN})
			streams = append(streams, s)
		}
	}
	buf := make([]byte, 32<<10)
	open := len(fds) - 1
	var deadline time.Time // set once the process exited
	for open > 0 || deadline.IsZero() {
		timeout := -1
		if !deadline.IsZero() {
			left := time.Until(deadline)
			if left <= 0 {
				o.close()
				return nil
			}
			timeout = int(left/time.Millisecond) + 1
		}
		if _, err := unix.Poll(fds, timeout); err != nil {
			if err == unix.EINTR {
				continue
			}
			return o.copyInBackground(grace)
		}
		for i := range fds {
			f := &fds[i]
			if f.Fd < 0 || f.Revents == 0 {
				continue
			}
			if i == 0 {
				deadline = time.Now().Add(grace)
				f.Fd = -1 // poll skips negative descriptors
				continue
			}
			s := streams[i]
			var n int
			var err error
			if c, ok := o.dst[s].(*capture); ok {
				n, err = c.readFD(int(f.Fd), buf, len(buf))
			} else if n, err = unix.Read(int(f.Fd), buf); n > 0 {
				o.dst[s].Write(buf[:n])
			}
			if n > 0 {
				continue
			}
			if err == unix.EINTR || err == unix.EAGAIN {
				continue
			}
			unix.Close(int(f.Fd)) // end of stream, or an error that ends it
			o.read[s] = -1
			f.Fd = -1
			open--
		}
	}
	return nil
}

// copyInBackground copies the pipes still open with a goroutine each, as
// os/exec does. The returned drain, called once the process is reaped,
// waits for them up to grace, then closes the pipes.
func (o *outputs) copyInBackground(grace time.Duration) (drain func()) {
	var wg sync.WaitGroup
	var files []*os.File
	for s, fd := range o.read {
		if fd < 0 {
			continue
		}
		o.read[s] = -1 // the file owns it now
		// Non-blocking, so the file is pollable and Close interrupts a
		// read that a grandchild holding the pipe would keep waiting.
		if err := unix.SetNonblock(fd, true); err != nil {
			unix.Close(fd)
			continue
		}
		f := os.NewFile(uintptr(fd), "|0")
		files = append(files, f)
		dst := o.dst[s]
		wg.Go(func() { io.Copy(dst, f) })
	}
	return func() {
		done := make(chan struct{})
		go func() {
			wg.Wait()
			close(done)
		}()
		t := time.NewTimer(grace)
		defer t.Stop()
		select {
		case <-done:
		case <-t.C:
		}
		for _, f := range files {
			f.Close()
		}
		<-done
	}
}

// readFD reads what fd has into the capture: straight into its buffer,
// up to direct bytes, once the output is long (readDirect) while it fits
// the budget, which spares copying a long output once more; otherwise up
// to len(scratch) bytes through scratch and Write (a short output then
// gets a buffer of its own size). The filter sees each read as it sees
// each Write; when it rewrites one read straight into the buffer, the
// rewritten bytes are kept instead. poll said fd is readable, so the
// read does not block while it holds the lock.
func (c *capture) readFD(fd int, scratch []byte, direct int) (int, error) {
	c.mu.Lock()
	if c.released || c.tail != nil || len(c.buf) < readDirect || len(c.buf)+direct > c.headLimit+c.tailLimit {
		c.mu.Unlock()
		n, err := unix.Read(fd, scratch)
		if n > 0 {
			c.Write(scratch[:n])
		}
		return n, err
	}
	defer c.mu.Unlock()
	c.grow(direct)
	at := len(c.buf)
	n, err := unix.Read(fd, c.buf[at:at+direct])
	if n <= 0 {
		return n, err
	}
	p := c.buf[at : at+n]
	if c.filter != nil {
		if q := c.filter(p); len(q) != n || &q[0] != &p[0] {
			c.keep(q) // over p's bytes, which are not part of buf
			return n, err
		}
	}
	c.count(p)
	c.buf = c.buf[:at+n]
	c.feedAhead()
	return n, err
}
