package rpc

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"
	"sync"
	"sync/atomic"
)

// Handler serves one incoming request or notification. For a notification
// the result is discarded. An error that is not an *Error is sent as
// INTERNAL.
type Handler func(ctx context.Context, method string, params json.RawMessage) (any, error)

// ConnOptions configure a [Conn]. The zero value is a client that ignores
// notifications and refuses requests.
type ConnOptions struct {
	// Handler serves requests from the peer; nil answers METHOD_NOT_FOUND.
	Handler Handler
	// OnNotify receives notifications from the peer, in arrival order, on
	// the read goroutine: it must not block for long.
	OnNotify func(method string, params json.RawMessage)
	// MaxFrame bounds incoming frames (DefaultMaxFrame if zero).
	MaxFrame int
	// Serial serves requests one at a time in arrival order instead of each
	// in its own goroutine.
	Serial bool
	// Inline reports methods cheap enough to serve on the reading
	// goroutine itself (no hand-off to a worker: a round trip saves a
	// goroutine wake-up). They must never block.
	Inline func(method string) bool
}

// Conn is one JSON-RPC connection. It can serve requests and make calls at
// the same time; writes are serialized, reads happen on the goroutine that
// runs [Conn.Run].
type Conn struct {
	rwc  io.ReadWriteCloser
	opts ConnOptions

	wmu     sync.Mutex
	wcond   *sync.Cond
	writing bool   // a goroutine is in rwc.Write
	pending []byte // frames waiting for the active writer
	spare   []byte
	werr    error

	mu      sync.Mutex
	calls   map[string]chan *Message
	closed  bool
	workers int
	work    chan func(onWorker bool) (released bool)
	nextID  atomic.Uint64

	ctx    context.Context
	cancel context.CancelFunc
	done   chan struct{}
	runErr error
	wg     sync.WaitGroup
}

// ErrClosed is returned by calls on a closed connection.
var ErrClosed = errors.New("connection closed")

// NewConn wraps rwc. Call Run (usually in its own goroutine) to start
// reading.
func NewConn(rwc io.ReadWriteCloser, opts ConnOptions) *Conn {
	ctx, cancel := context.WithCancel(context.Background())
	c := &Conn{rwc: rwc, opts: opts, calls: map[string]chan *Message{}, ctx: ctx, cancel: cancel, done: make(chan struct{}), work: make(chan func(bool) bool)}
	c.wcond = sync.NewCond(&c.wmu)
	return c
}

// Context is cancelled when the connection ends; request handlers get a
// context derived from it.
func (c *Conn) Context() context.Context { return c.ctx }

// Done is closed when Run has returned and every handler has finished.
func (c *Conn) Done() <-chan struct{} { return c.done }

// Run reads frames until the peer closes the stream or Close is called. It
// returns nil on a clean end of stream.
func (c *Conn) Run() error {
	defer func() {
		c.cancel()
		c.wakeWriters()
		c.mu.Lock()
		c.closed = true
		for id, ch := range c.calls {
			close(ch)
			delete(c.calls, id)
		}
		c.mu.Unlock()
		c.wg.Wait()
		c.rwc.Close()
		close(c.done)
	}()
	fr := NewFrameReader(c.rwc, c.opts.MaxFrame)
	for {
		frame, err := fr.Next()
		if errors.Is(err, ErrFrameTooLarge) {
			c.writeError(nil, Errorf(TooLarge, "frame longer than %d bytes was skipped", c.maxFrame()))
			continue
		}
		if err != nil {
			if errors.Is(err, io.EOF) || c.ctx.Err() != nil {
				return nil
			}
			c.runErr = err
			return err
		}
		m, id, rerr := Decode(frame)
		if rerr != nil {
			c.writeError(id, rerr)
			continue
		}
		switch {
		case m.IsResponse():
			c.deliver(m)
		case m.IsNotification():
			if c.opts.OnNotify != nil {
				c.opts.OnNotify(m.Method, m.Params)
			} else if c.opts.Handler != nil {
				c.serve(m)
			}
		default:
			c.serve(m)
		}
	}
}

func (c *Conn) maxFrame() int {
	if c.opts.MaxFrame > 0 {
		return c.opts.MaxFrame
	}
	return DefaultMaxFrame
}

func (c *Conn) serve(m *Message) {
	// run serves m. On a worker (onWorker) a request's handler may answer
	// early (ReplyNow); run then reports that the worker's count in c.wg
	// was released. On the reading goroutine it cannot.
	run := func(onWorker bool) (released bool) {
		ctx := c.ctx
		var slot *replySlot
		if onWorker && m.ID != nil {
			slot = &replySlot{c: c, id: m.ID}
			ctx = context.WithValue(ctx, replyKey{}, slot)
		}
		var result any
		var err error
		if c.opts.Handler == nil {
			err = Errorf(MethodNotFound, "this peer serves no methods")
		} else {
			result, err = c.safeHandle(ctx, m)
		}
		if slot != nil && !slot.take() {
			return true
		}
		if m.ID != nil {
			c.answer(m, result, err)
		}
		return false
	}
	if c.opts.Serial || (c.opts.Inline != nil && c.opts.Inline(m.Method)) {
		run(false)
		return
	}
	// Hand the request to an idle worker; workers are kept (up to
	// maxWorkers) so their grown stacks are reused, and a request finding
	// none idle gets a goroutine of its own, so a slow handler never holds
	// up the rest.
	select {
	case c.work <- run:
		return
	default:
	}
	c.wg.Add(1)
	c.mu.Lock()
	keep := c.workers < maxWorkers
	if keep {
		c.workers++
	}
	c.mu.Unlock()
	go func() {
		released := run(true)
		defer func() {
			if keep {
				c.mu.Lock()
				c.workers--
				c.mu.Unlock()
			}
			if !released {
				c.wg.Done()
			}
		}()
		if !keep || released {
			return
		}
		for {
			select {
			case next := <-c.work:
				if released = next(true); released {
					return // answered early; its handler ran on without the connection
				}
			case <-c.ctx.Done():
				return
			}
		}
	}()
}

// answer sends a handler's result or error for request m.
func (c *Conn) answer(m *Message, result any, err error) {
	if err != nil {
		c.writeError(m.ID, AsError(err))
		return
	}
	raw, merr := Marshal(result)
	if merr != nil {
		c.writeError(m.ID, Errorf(Internal, "encode result of %s: %v", m.Method, merr))
		return
	}
	_ = c.write(&Message{JSONRPC: "2.0", ID: m.ID, Result: raw})
}

type replyKey struct{}

// replySlot is the answer of one request served on a worker: it goes out
// once, from the handler's return or earlier from [ReplyNow].
type replySlot struct {
	c    *Conn
	id   json.RawMessage
	mu   sync.Mutex
	sent bool
}

// take claims the answer for the handler's return; false when ReplyNow
// sent it already (and released the worker's count in c.wg).
func (s *replySlot) take() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	ok := !s.sent
	s.sent = true
	return ok
}

// ReplyNow answers the request ctx belongs to with result at once, while
// its handler goes on; what the handler returns afterwards is dropped.
// The handler then no longer holds up the connection's end: Run and Done
// do not wait for it. ReplyNow reports false, and sends nothing, when ctx
// is not a request's that can still be answered this way (a notification,
// an inline or serial method, a call made in Go, one answered already).
// A long-running handler uses it to say "started" and keep working.
func ReplyNow(ctx context.Context, result any) bool {
	s, _ := ctx.Value(replyKey{}).(*replySlot)
	if s == nil {
		return false
	}
	s.mu.Lock()
	if s.sent {
		s.mu.Unlock()
		return false
	}
	s.sent = true
	s.mu.Unlock()
	s.c.answer(&Message{ID: s.id}, result, nil)
	s.c.wg.Done() // the worker's count: the connection no longer waits for this handler
	return true
}

// CanReplyNow reports whether ReplyNow may answer for ctx.
func CanReplyNow(ctx context.Context) bool {
	s, _ := ctx.Value(replyKey{}).(*replySlot)
	if s == nil {
		return false
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return !s.sent
}

// maxWorkers is how many request goroutines a connection keeps idle.
const maxWorkers = 16

func (c *Conn) safeHandle(ctx context.Context, m *Message) (result any, err error) {
	defer func() {
		if p := recover(); p != nil {
			err = Errorf(Internal, "method %s panicked: %v", m.Method, p)
		}
	}()
	return c.opts.Handler(ctx, m.Method, m.Params)
}

func (c *Conn) deliver(m *Message) {
	key := string(m.ID)
	c.mu.Lock()
	ch, ok := c.calls[key]
	delete(c.calls, key)
	c.mu.Unlock()
	if ok {
		ch <- m
	}
}

func (c *Conn) writeError(id json.RawMessage, e *Error) {
	if id == nil {
		id = json.RawMessage("null")
	}
	_ = c.write(&Message{JSONRPC: "2.0", ID: id, Error: e})
}

// maxPending bounds the frames queued behind a write in progress; past it
// writers wait, so a peer that stops reading slows its writers down (the
// bus counts that as a stalled subscriber) instead of growing memory.
const maxPending = 1 << 20

// write queues a frame. Frames queued while another goroutine is writing
// go out together in its next write: concurrent answers and event frames
// share system calls.
func (c *Conn) write(m *Message) error {
	b, err := Encode(m)
	if err != nil {
		return err
	}
	c.wmu.Lock()
	defer c.wmu.Unlock()
	for c.writing && len(c.pending) >= maxPending && c.werr == nil && c.ctx.Err() == nil {
		c.wcond.Wait()
	}
	if c.werr != nil {
		return c.werr
	}
	if c.ctx.Err() != nil {
		return ErrClosed
	}
	c.pending = append(c.pending, b...)
	if c.writing {
		return nil // the active writer sends it
	}
	c.writing = true
	for len(c.pending) > 0 && c.werr == nil {
		buf := c.pending
		c.pending = c.spare[:0]
		c.wmu.Unlock()
		_, err := c.rwc.Write(buf)
		c.wmu.Lock()
		c.spare = buf
		c.wcond.Broadcast()
		if err != nil {
			c.werr = fmt.Errorf("write frame: %w", err)
			c.cancel()
		}
	}
	c.writing = false
	c.wcond.Broadcast()
	return c.werr
}

// Notify sends a notification.
func (c *Conn) Notify(method string, params any) error {
	raw, err := Marshal(params)
	if err != nil {
		return fmt.Errorf("encode params of %s: %w", method, err)
	}
	return c.write(&Message{JSONRPC: "2.0", Method: method, Params: raw})
}

// Call sends a request and waits for its response, decoding the result
// into result (unless result is nil). A peer error is returned as *Error.
func (c *Conn) Call(ctx context.Context, method string, params, result any) error {
	var raw json.RawMessage
	if params != nil {
		b, err := json.Marshal(params)
		if err != nil {
			return fmt.Errorf("encode params of %s: %w", method, err)
		}
		raw = b
	}
	id := json.RawMessage(strconv.FormatUint(c.nextID.Add(1), 10))
	ch := make(chan *Message, 1)
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return ErrClosed
	}
	c.calls[string(id)] = ch
	c.mu.Unlock()
	if err := c.write(&Message{JSONRPC: "2.0", ID: id, Method: method, Params: raw}); err != nil {
		c.mu.Lock()
		delete(c.calls, string(id))
		c.mu.Unlock()
		return err
	}
	select {
	case m, ok := <-ch:
		if !ok {
			return ErrClosed
		}
		if m.Error != nil {
			return m.Error
		}
		if result != nil {
			if err := json.Unmarshal(m.Result, result); err != nil {
				return fmt.Errorf("decode result of %s: %w", method, err)
			}
		}
		return nil
	case <-ctx.Done():
		c.mu.Lock()
		delete(c.calls, string(id))
		c.mu.Unlock()
		return ctx.Err()
	case <-c.ctx.Done():
		return ErrClosed
	}
}

// Close ends the connection; Run returns soon after.
func (c *Conn) Close() error {
	c.cancel()
	c.wakeWriters()
	return c.rwc.Close()
}

// wakeWriters releases writers waiting for queue space once the
// connection is ending.
func (c *Conn) wakeWriters() {
	c.wmu.Lock()
	c.wcond.Broadcast()
	c.wmu.Unlock()
}

// ErrClosedError is the coded form of ErrClosed, for handlers whose
// connection ended under them.
func ErrClosedError() *Error { return Errorf(Unavailable, "the connection is closing") }

// Encoded is a result that [Marshal] already encoded: a handler that
// encodes its answer ahead (off its critical path) returns it, and the
// connection sends it as it is.
type Encoded json.RawMessage

// MarshalJSON keeps an Encoded value that sits inside another result
// the JSON it is.
func (e Encoded) MarshalJSON() ([]byte, error) {
	if len(e) == 0 {
		return []byte("null"), nil
	}
	return e, nil
}

// Marshal is json.Marshal without HTML escaping: sources such as
// "make && make test" travel as written, not as "make \u0026\u0026 …".
func Marshal(v any) (json.RawMessage, error) {
	if enc, ok := v.(Encoded); ok && len(enc) > 0 {
		return json.RawMessage(enc), nil
	}
	if raw, ok := v.(json.RawMessage); ok && raw != nil {
		// Pre-encoded by the kernel; still compact it so no newline can
		// split the frame.
		var buf bytes.Buffer
		if err := json.Compact(&buf, raw); err != nil {
			return nil, err
		}
		return buf.Bytes(), nil
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimRight(buf.Bytes(), "\n"), nil
}
