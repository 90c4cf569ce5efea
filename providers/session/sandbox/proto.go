package sandbox

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"syscall"
)

// The kernel and its worker talk over a SOCK_SEQPACKET socket pair: one
// JSON message a packet, descriptors beside it (SCM_RIGHTS). A message
// longer than one packet (a spawn with a huge environment) goes as a
// first packet holding its length and then continuation packets; only one
// goroutine writes at a time on either side, so they stay together.

const (
	packetSize = 60 << 10
	maxMessage = 16 << 20 // far above ARG_MAX: argv and env of one exec
	maxFDs     = 8
)

// request is what the kernel asks of its worker.
type request struct {
	Op string `json:"op"` // "open", "spawn", "close"
	ID uint64 `json:"id"`

	Path string `json:"path,omitempty"`
	Flag int    `json:"flag,omitempty"`
	Perm uint32 `json:"perm,omitempty"`

	Argv    []string `json:"argv,omitempty"`
	Env     []string `json:"env,omitempty"`
	Dir     string   `json:"dir,omitempty"`
	Setpgid bool     `json:"setpgid,omitempty"`
	Setsid  bool     `json:"setsid,omitempty"`
	Setctty bool     `json:"setctty,omitempty"`
	Ctty    int      `json:"ctty,omitempty"`
}

// reply is what the worker sends: answers to requests, exits of the
// processes it started, and its readiness once confined.
type reply struct {
	Op     string  `json:"op"` // "reply", "exit", "ready"
	ID     uint64  `json:"id,omitempty"`
	Errno  int     `json:"errno,omitempty"`
	Err    string  `json:"err,omitempty"`
	Pid    int     `json:"pid,omitempty"`
	Status int     `json:"status,omitempty"` // a wait status
	Ready  *Status `json:"ready,omitempty"`
}

// err is the reply's failure as an error that errors.Is recognises by
// errno (ENOEXEC, ETXTBSY, EACCES…).
func (r *reply) err() error {
	if r.Errno != 0 {
		return syscall.Errno(r.Errno)
	}
	if r.Err != "" {
		return errors.New(r.Err)
	}
	return nil
}

// msgConn is a packet connection that carries descriptors: a
// *net.UnixConn in the kernel, a blocking descriptor in the worker.
type msgConn interface {
	WriteMsgUnix(b, oob []byte, addr *net.UnixAddr) (n, oobn int, err error)
	Write(b []byte) (int, error)
	ReadMsgUnix(b, oob []byte) (n, oobn, flags int, addr *net.UnixAddr, err error)
	Read(b []byte) (int, error)
}

// send writes one message with fds attached to its first packet.
func send(c msgConn, v any, fds []int) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	if len(b) > maxMessage {
		return fmt.Errorf("sandbox message of %d bytes is over the %d limit", len(b), maxMessage)
	}
	first := make([]byte, 4, 4+min(len(b), packetSize))
	binary.BigEndian.PutUint32(first, uint32(len(b)))
	n := min(len(b), packetSize)
	first = append(first, b[:n]...)
	var oob []byte
	if len(fds) > 0 {
		oob = syscall.UnixRights(fds...)
	}
	if _, _, err := c.WriteMsgUnix(first, oob, nil); err != nil {
		return err
	}
	for b = b[n:]; len(b) > 0; b = b[n:] {
		n = min(len(b), packetSize)
		if _, err := c.Write(b[:n]); err != nil {
			return err
		}
	}
	return nil
}

// receiver reads messages; one per connection, used by one goroutine.
type receiver struct {
	c   msgConn
	buf []byte
	oob []byte
}

func newReceiver(c msgConn) *receiver {
	return &receiver{c: c, buf: make([]byte, packetSize+4), oob: make([]byte, syscall.CmsgSpace(4*maxFDs))}
}

// next reads one message into v and returns the descriptors that came
// with it (the caller owns them).
func (r *receiver) next(v any) (fds []int, err error) {
	n, oobn, _, _, err := r.c.ReadMsgUnix(r.buf, r.oob)
	if oobn > 0 {
		fds = parseRights(r.oob[:oobn])
	}
	if err != nil {
		closeAll(fds)
		return nil, err
	}
	if n == 0 {
		closeAll(fds)
		return nil, errEOF
	}
	if n < 4 {
		closeAll(fds)
		return nil, errors.New("sandbox: short packet")
	}
	total := int(binary.BigEndian.Uint32(r.buf[:4]))
	if total > maxMessage {
		closeAll(fds)
		return nil, errors.New("sandbox: message over the limit")
	}
	msg := make([]byte, 0, total)
	msg = append(msg, r.buf[4:n]...)
	for len(msg) < total {
		m, err := r.c.Read(r.buf)
		if err != nil {
			closeAll(fds)
			return nil, err
		}
		if m == 0 {
			closeAll(fds)
			return nil, errEOF
		}
		msg = append(msg, r.buf[:m]...)
	}
	if err := json.Unmarshal(msg, v); err != nil {
		closeAll(fds)
		return nil, fmt.Errorf("sandbox: bad message: %w", err)
	}
	return fds, nil
}

var errEOF = errors.New("sandbox: connection closed")

func parseRights(oob []byte) []int {
	msgs, err := syscall.ParseSocketControlMessage(oob)
	if err != nil {
		return nil
	}
	var fds []int
	for i := range msgs {
		if got, err := syscall.ParseUnixRights(&msgs[i]); err == nil {
			fds = append(fds, got...)
		}
	}
	for _, fd := range fds {
		syscall.CloseOnExec(fd)
	}
	return fds
}

func closeAll(fds []int) {
	for _, fd := range fds {
		syscall.Close(fd)
	}
}

// blockingConn is a SOCK_SEQPACKET descriptor used with plain blocking
// system calls, for the worker: its one reader sits in recvmsg on its own
// thread and wakes straight from the kernel, without the runtime's poller
// in between (a round trip fewer per request on a busy machine).
type blockingConn int

func (c blockingConn) WriteMsgUnix(b, oob []byte, _ *net.UnixAddr) (int, int, error) {
	for {
		err := syscall.Sendmsg(int(c), b, oob, nil, 0)
		if err == syscall.EINTR {
			continue
		}
		return len(b), len(oob), err
	}
}

func (c blockingConn) Write(b []byte) (int, error) {
	n, _, err := c.WriteMsgUnix(b, nil, nil)
	return n, err
}

func (c blockingConn) ReadMsgUnix(b, oob []byte) (int, int, int, *net.UnixAddr, error) {
	for {
		n, oobn, flags, _, err := syscall.Recvmsg(int(c), b, oob, syscall.MSG_CMSG_CLOEXEC)
		if err == syscall.EINTR {
			continue
		}
		return n, oobn, flags, nil, err
	}
}

func (c blockingConn) Read(b []byte) (int, error) {
	n, _, _, _, err := c.ReadMsgUnix(b, nil)
	return n, err
}
