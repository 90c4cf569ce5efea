package sandbox

import (
	"encoding"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"syscall"

	"github.com/shoal-sh/shoal/internal/fdpass"
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
	var b []byte
	var err error
	if m, ok := v.(encoding.BinaryMarshaler); ok {
		b, err = m.MarshalBinary()
	} else {
		b, err = json.Marshal(v)
	}
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
		fds = fdpass.Rights(r.oob[:oobn])
	}
	if err != nil {
		fdpass.Close(fds)
		return nil, err
	}
	if n == 0 {
		fdpass.Close(fds)
		return nil, errEOF
	}
	if n < 4 {
		fdpass.Close(fds)
		return nil, errors.New("sandbox: short packet")
	}
	total := int(binary.BigEndian.Uint32(r.buf[:4]))
	if total > maxMessage {
		fdpass.Close(fds)
		return nil, errors.New("sandbox: message over the limit")
	}
	msg := make([]byte, 0, total)
	msg = append(msg, r.buf[4:n]...)
	for len(msg) < total {
		m, err := r.c.Read(r.buf)
		if err != nil {
			fdpass.Close(fds)
			return nil, err
		}
		if m == 0 {
			fdpass.Close(fds)
			return nil, errEOF
		}
		msg = append(msg, r.buf[:m]...)
	}
	if u, ok := v.(encoding.BinaryUnmarshaler); ok {
		err = u.UnmarshalBinary(msg)
	} else {
		err = json.Unmarshal(msg, v)
	}
	if err != nil {
		fdpass.Close(fds)
		return nil, fmt.Errorf("sandbox: bad message: %w", err)
	}
	return fds, nil
}

var errEOF = errors.New("sandbox: connection closed")

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

// A request goes in a compact binary form (a spawn carries the whole
// environment, and JSON costs tens of microseconds each way): the
// numbers as uvarints, strings and lists length-prefixed, in the order
// of the struct. Replies are small and stay JSON.

// MarshalBinary implements encoding.BinaryMarshaler.
func (r *request) MarshalBinary() ([]byte, error) {
	size := 64 + len(r.Op) + len(r.Path) + len(r.Dir)
	for _, l := range [][]string{r.Argv, r.Env} {
		for _, x := range l {
			size += len(x) + binary.MaxVarintLen32
		}
	}
	b := make([]byte, 0, size)
	str := func(s string) {
		b = binary.AppendUvarint(b, uint64(len(s)))
		b = append(b, s...)
	}
	list := func(l []string) {
		b = binary.AppendUvarint(b, uint64(len(l)))
		for _, x := range l {
			str(x)
		}
	}
	flag := func(v bool) {
		if v {
			b = append(b, 1)
		} else {
			b = append(b, 0)
		}
	}
	str(r.Op)
	b = binary.AppendUvarint(b, r.ID)
	str(r.Path)
	b = binary.AppendUvarint(b, uint64(uint32(r.Flag)))
	b = binary.AppendUvarint(b, uint64(r.Perm))
	list(r.Argv)
	list(r.Env)
	str(r.Dir)
	flag(r.Setpgid)
	flag(r.Setsid)
	flag(r.Setctty)
	b = binary.AppendUvarint(b, uint64(r.Ctty))
	return b, nil
}

var errShortRequest = errors.New("sandbox: truncated request")

// UnmarshalBinary implements encoding.BinaryUnmarshaler.
func (r *request) UnmarshalBinary(b []byte) error {
	var bad bool
	num := func() uint64 {
		v, n := binary.Uvarint(b)
		if n <= 0 {
			bad = true
			return 0
		}
		b = b[n:]
		return v
	}
	str := func() string {
		n := num()
		if bad || n > uint64(len(b)) {
			bad = true
			return ""
		}
		s := string(b[:n])
		b = b[n:]
		return s
	}
	list := func() []string {
		n := num()
		if bad || n > uint64(len(b)) {
			bad = true
			return nil
		}
		out := make([]string, 0, n)
		for i := uint64(0); i < n && !bad; i++ {
			out = append(out, str())
		}
		return out
	}
	flag := func() bool {
		if len(b) == 0 {
			bad = true
			return false
		}
		v := b[0] == 1
		b = b[1:]
		return v
	}
	r.Op = str()
	r.ID = num()
	r.Path = str()
	r.Flag = int(int32(uint32(num())))
	r.Perm = uint32(num())
	r.Argv = list()
	r.Env = list()
	r.Dir = str()
	r.Setpgid = flag()
	r.Setsid = flag()
	r.Setctty = flag()
	r.Ctty = int(num())
	if bad {
		return errShortRequest
	}
	return nil
}
