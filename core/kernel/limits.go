package kernel

import (
	"errors"
	"net"
	"syscall"
	"time"

	"github.com/shoal-sh/shoal/core/rpc"
)

// acceptBackoff is how long Serve waits after a failed accept, doubling
// up to acceptBackoffMax while accept keeps failing. Running out of file
// descriptors (EMFILE, ENFILE) is the common cause: the kernel waits for
// connections to close instead of exiting.
const (
	acceptBackoff    = 5 * time.Millisecond
	acceptBackoffMax = time.Second
)

// acceptFailed handles a failed accept that is not the listener being
// closed: it logs the first failure of a run of them, waits, and returns
// the next wait.
func (k *Kernel) acceptFailed(err error, wait time.Duration) time.Duration {
	if wait == 0 {
		// Logged once a minute at most, however often it recurs.
		if now := time.Now(); now.Sub(k.acceptLogged) >= time.Minute {
			k.acceptLogged = now
			k.log.Warn("accept failed; backing off and serving the open connections", "err", err,
				"fd_exhausted", errors.Is(err, syscall.EMFILE) || errors.Is(err, syscall.ENFILE))
		}
		wait = acceptBackoff
	} else if wait *= 2; wait > acceptBackoffMax {
		wait = acceptBackoffMax
	}
	select {
	case <-time.After(wait):
	case <-k.stopped:
	}
	return wait
}

// peerUID is the user id of the process at the other end of a unix
// socket connection (SO_PEERCRED), or false when it cannot be read.
func peerUID(nc net.Conn) (uint32, bool) {
	sc, ok := nc.(syscall.Conn)
	if !ok {
		return 0, false
	}
	raw, err := sc.SyscallConn()
	if err != nil {
		return 0, false
	}
	var cred *syscall.Ucred
	var cerr error
	if err := raw.Control(func(fd uintptr) {
		cred, cerr = syscall.GetsockoptUcred(int(fd), syscall.SOL_SOCKET, syscall.SO_PEERCRED)
	}); err != nil || cerr != nil {
		return 0, false
	}
	return cred.Uid, true
}

// admit counts a new connection against its peer's cap; it reports false
// (and counts nothing) when the peer has as many open as allowed.
func (k *Kernel) admit(c *conn, nc net.Conn) bool {
	uid, ok := peerUID(nc)
	if !ok {
		return true
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.perUID[uid] >= k.cfg.Limits.ConnectionsPerUID {
		return false
	}
	k.perUID[uid]++
	c.uid, c.counted = uid, true
	return true
}

// release uncounts a connection admitted by admit.
func (k *Kernel) release(c *conn) {
	if !c.counted {
		return
	}
	k.mu.Lock()
	if k.perUID[c.uid]--; k.perUID[c.uid] <= 0 {
		delete(k.perUID, c.uid)
	}
	k.mu.Unlock()
}

// refuse answers a connection over its peer's cap with one coded error
// frame and closes it, without reading from it.
func (k *Kernel) refuse(nc net.Conn) {
	k.log.Warn("connection refused: the peer has too many open", "limit", k.cfg.Limits.ConnectionsPerUID)
	b, err := rpc.Encode(&rpc.Message{JSONRPC: "2.0", ID: []byte("null"), Error: rpc.Errorf(rpc.TooManyConnections,
		"this user has %d connections open to the kernel, the limit (limits.connections_per_uid); close some and retry",
		k.cfg.Limits.ConnectionsPerUID)})
	if err == nil {
		nc.SetWriteDeadline(time.Now().Add(100 * time.Millisecond))
		nc.Write(b)
	}
	nc.Close()
}

// connOptions are the bounds of a new connection: the small frame limit
// until it attaches, and its backpressure bounds.
func (k *Kernel) connOptions() rpc.ConnOptions {
	l := k.cfg.Limits
	return rpc.ConnOptions{MaxFrame: l.FrameBeforeAttach, MaxUnwritten: l.UnwrittenBytes, MaxInflight: l.RequestsInFlight,
		// A wait holds little until it answers, and its answer is small.
		Waiting: func(method string) bool { return method == "wait" }}
}

// attachDeadline closes c if it has not attached in time, so a peer that
// connects and never authenticates holds nothing for long.
func (k *Kernel) attachDeadline(c *conn) *time.Timer {
	d, err := k.cfg.Limits.AttachDeadline()
	if err != nil {
		d = 10 * time.Second
	}
	return time.AfterFunc(d, func() {
		c.mu.Lock()
		attached := c.caller != nil
		c.mu.Unlock()
		if !attached {
			k.log.Info("connection closed: no session.attach in time", "conn", c.id, "timeout", d)
			c.rc.Close()
		}
	})
}

// attached lifts the connection's frame limit to the documented one.
func (k *Kernel) attached(c *conn) {
	c.rc.SetMaxFrame(k.cfg.Limits.MaxFrame)
}
