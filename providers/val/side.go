package val

import (
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/shoal-sh/shoal/core/wire"
	"github.com/shoal-sh/shoal/internal/fdpass"
	"github.com/shoal-sh/shoal/providers/val/cas"
)

// The blob side channel: a unix socket beside the kernel's, on which the
// raw bytes of one blob.put or blob.get travel unframed, at the speed of
// the disk. An attached connection asks blob.put {"stream": true} or
// blob.get {"hash", "stream": true} for a ticket; the client connects to
// the side socket, sends the ticket and a newline, then (put) the bytes
// and a half-close, and reads one JSON line with the ref; or (get) reads
// the blob to the end. A ticket is good once, for 60 seconds, for one
// direction (and one blob for get): knowing the socket gives nothing.
const (
	SideSocketName = "blob.sock"
	ticketTTL      = 60 * time.Second
	maxSide        = 16 // transfers at once
)

type ticket struct {
	put     bool
	hash    string // get
	expires time.Time
}

type side struct {
	store *cas.Store
	path  string
	ln    net.Listener
	slots chan struct{}
	wg    sync.WaitGroup

	mu      sync.Mutex
	tickets map[string]ticket
}

func openSide(store *cas.Store, stateDir string) (*side, error) {
	path := filepath.Join(stateDir, SideSocketName)
	_ = os.Remove(path) // a socket left by a kernel that died; the state dir lock is held
	ln, err := net.Listen("unix", path)
	if err != nil {
		return nil, fmt.Errorf("blob side socket: %w", err)
	}
	if err := os.Chmod(path, 0o600); err != nil {
		ln.Close()
		return nil, fmt.Errorf("blob side socket: %w", err)
	}
	s := &side{store: store, path: path, ln: ln, slots: make(chan struct{}, maxSide), tickets: map[string]ticket{}}
	s.wg.Add(1)
	go s.accept()
	return s, nil
}

func (s *side) close() {
	s.ln.Close()
	s.wg.Wait()
	_ = os.Remove(s.path)
}

// issue returns a fresh ticket for one transfer.
func (s *side) issue(t ticket) wire.StreamTicket {
	var b [24]byte
	rand.Read(b[:])
	id := hex.EncodeToString(b[:])
	t.expires = time.Now().Add(ticketTTL)
	s.mu.Lock()
	now := time.Now()
	for k, old := range s.tickets {
		if now.After(old.expires) {
			delete(s.tickets, k)
		}
	}
	s.tickets[id] = t
	s.mu.Unlock()
	return wire.StreamTicket{Socket: s.path, Ticket: id}
}

func (s *side) take(id string) (ticket, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	t, ok := s.tickets[id]
	delete(s.tickets, id)
	if !ok || time.Now().After(t.expires) {
		return ticket{}, false
	}
	return t, true
}

func (s *side) accept() {
	defer s.wg.Done()
	for {
		c, err := s.ln.Accept()
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				return
			}
			time.Sleep(10 * time.Millisecond) // fd exhaustion and the like
			continue
		}
		select {
		case s.slots <- struct{}{}:
		default:
			c.Close() // too many at once; the client falls back to chunks
			continue
		}
		s.wg.Add(1)
		go func() {
			defer s.wg.Done()
			defer func() { <-s.slots }()
			defer c.Close()
			s.serve(c)
		}()
	}
}

// serve runs one transfer.
func (s *side) serve(c net.Conn) {
	_ = c.SetReadDeadline(time.Now().Add(10 * time.Second))
	id, rest, src, err := readTicketLine(c)
	if err != nil {
		return
	}
	if src != nil {
		defer src.Close()
	}
	t, ok := s.take(id)
	if !ok {
		return
	}
	_ = c.SetReadDeadline(time.Time{})
	reply := func(v any) {
		b, _ := json.Marshal(v)
		_, _ = c.Write(append(b, '\n'))
	}
	if !t.put {
		if src != nil {
			return
		}
		s.sendBlob(c, t.hash)
		return
	}
	var r io.Reader = io.MultiReader(bytes.NewReader(rest), c)
	if src != nil { // anything sent after the line is not read
		if fi, err := src.Stat(); err != nil || !fi.Mode().IsRegular() {
			reply(map[string]any{"error": "blob.put: the descriptor handed over is not a regular file; send its bytes instead"})
			return
		}
		r = src
	}
	hash, size, err := s.store.PutReaderDurable(r)
	if err != nil {
		reply(map[string]any{"error": err.Error()})
		return
	}
	reply(BlobPutResult{Ref: cas.Ref(hash), Hash: hash, Size: size})
}

// maxTicketLine bounds the first line of a transfer.
const maxTicketLine = 256

// readTicketLine reads a transfer's first line: the ticket, and " fd"
// when a descriptor came with it. It returns the bytes that followed the
// line in the same reads, and the file handed over, if any. Descriptors
// that came on a line that does not announce one, or more than one, are
// closed and the transfer refused.
func readTicketLine(c net.Conn) (id string, rest []byte, src *os.File, err error) {
	uc, ok := c.(*net.UnixConn)
	if !ok {
		return "", nil, nil, errors.New("not a unix socket")
	}
	buf := make([]byte, 4<<10)
	oob := make([]byte, 64) // room for a few descriptors' control message
	var fds []int
	n := 0
	for {
		k, ko, _, _, rerr := uc.ReadMsgUnix(buf[n:], oob)
		n += k
		if ko > 0 {
			fds = append(fds, fdpass.Rights(oob[:ko])...)
		}
		if i := bytes.IndexByte(buf[:n], '\n'); i >= 0 {
			line, fdMode := strings.CutSuffix(string(buf[:i]), " fd")
			if fdMode && len(fds) == 1 {
				return line, buf[i+1 : n], os.NewFile(uintptr(fds[0]), "blob source"), nil
			}
			fdpass.Close(fds)
			if fdMode || len(fds) > 0 {
				return "", nil, nil, errors.New("a descriptor was announced and not sent, or sent and not announced")
			}
			return line, buf[i+1 : n], nil, nil
		}
		if rerr != nil || n >= maxTicketLine {
			fdpass.Close(fds)
			return "", nil, nil, errors.New("no ticket line")
		}
	}
}

// sendBlob writes blob hash to c, by sendfile(2). A file the store knows
// to be right goes unhashed; any other is hashed meanwhile, on a second
// goroutine, and its last part is sent only if it matched: a damaged blob
// arrives short, which the client refuses (the kernel has quarantined it).
func (s *side) sendBlob(c net.Conn, hash string) {
	f, size, checked, err := s.store.OpenSend(hash)
	if err != nil {
		return
	}
	defer f.Close()
	if checked {
		_ = sendFile(c, f, 0, size)
		return
	}
	res := make(chan error, 1)
	go func() { res <- s.store.Check(hash, f) }()
	head := max(0, size-sideTail)
	if sendFile(c, f, 0, head) != nil {
		<-res
		return
	}
	if <-res != nil {
		return
	}
	_ = sendFile(c, f, head, size-head)
}

// sideTail is how much of an unchecked blob is held back until its check.
const sideTail = 1 << 20

// copyRange sends n bytes of f from offset off to c through a buffer.
func copyRange(c net.Conn, f *os.File, off, n int64) error {
	_, err := io.CopyBuffer(c, io.NewSectionReader(f, off, n), make([]byte, 1<<20))
	return err
}
