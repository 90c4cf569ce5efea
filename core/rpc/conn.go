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
	"time"
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
	// MaxFrame bounds incoming frames (DefaultMaxFrame if zero);
	// [Conn.SetMaxFrame] changes it later (after authentication, say).
	MaxFrame int
	// MaxUnwritten bounds the bytes of answers and notifications encoded
	// but not yet written to the peer (DefaultMaxUnwritten if zero). Past
	// it the connection stops reading requests until the peer has read
	// enough: a peer that sends and never reads holds this much, not an
	// answer per request.
	MaxUnwritten int
	// MaxInflight bounds the requests of this connection being served at
	// once (DefaultMaxInflight if zero); more wait unread.
	MaxInflight int
	// Waiting reports methods that mostly wait (for an event, a task)
	// and answer briefly: they do not count against MaxInflight, so a
	// client's many waits never hold up its other requests.
	Waiting func(method string) bool
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
	// unwritten counts the bytes of frames encoded and not yet written;
	// inflight the requests handed to workers and not yet answered. The
	// reader waits on wcond while either is over its bound.
	unwritten int
	inflight  int
	waiting   int // of inflight, requests of Waiting methods
	maxFrame  atomic.Int64

	mu      sync.Mutex
	calls   map[string]chan *Message
	serving map[string]*replySlot // requests on workers, by id, for CancelMethod
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
	c.maxFrame.Store(int64(opts.MaxFrame))
	return c
}

// Defaults for [ConnOptions] bounds left zero.
const (
	DefaultMaxUnwritten = 4 << 20
	DefaultMaxInflight  = 64
)

// SetMaxFrame changes the bound on incoming frames from the next frame
// on (n <= 0: DefaultMaxFrame).
func (c *Conn) SetMaxFrame(n int) { c.maxFrame.Store(int64(n)) }

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
	fr := NewFrameReader(c.rwc, c.maxFrameBytes())
	for {
		fr.SetMax(c.maxFrameBytes())
		frame, err := fr.Next()
		if errors.Is(err, ErrFrameTooLarge) {
			c.writeError(nil, Errorf(TooLarge, "frame longer than %d bytes was skipped", c.maxFrameBytes()))
			continue
		}
		if err != nil {
			if errors.Is(err, io.EOF) && c.ctx.Err() == nil {
				// The peer closed its sending side; it may still read.
				// The requests it sent are answered before the end.
				c.drain()
				return nil
			}
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
		if m.IsNotification() && m.Method == CancelMethod {
			c.cancelRequest(m.Params)
			continue
		}
		if !m.IsResponse() {
			c.waitRoom()
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

// eofGrace bounds how long the requests of a peer that closed its
// sending side may take to answer before they are cancelled.
const eofGrace = 30 * time.Second

// drain waits, after the peer's end of stream, for the requests still
// being served to answer (up to eofGrace): a client that sends a request
// and shuts its writing side down still gets the answer.
func (c *Conn) drain() {
	t := time.AfterFunc(eofGrace, func() {
		c.cancel()
		c.wakeWriters()
	})
	defer t.Stop()
	c.wmu.Lock()
	for c.inflight > 0 && c.ctx.Err() == nil {
		c.wcond.Wait()
	}
	c.wmu.Unlock()
}

func (c *Conn) maxFrameBytes() int {
	if n := c.maxFrame.Load(); n > 0 {
		return int(n)
	}
	return DefaultMaxFrame
}

// waitRoom holds the reader back while the peer has not read enough of
// what it was sent, or too many of its requests are being served: the
// next request stays unread (in the socket) instead of growing memory.
// Other connections are not affected.
func (c *Conn) waitRoom() {
	maxUnwritten, maxInflight := c.opts.MaxUnwritten, c.opts.MaxInflight
	if maxUnwritten <= 0 {
		maxUnwritten = DefaultMaxUnwritten
	}
	if maxInflight <= 0 {
		maxInflight = DefaultMaxInflight
	}
	c.wmu.Lock()
	for (c.unwritten > maxUnwritten || c.inflight-c.waiting >= maxInflight) && c.werr == nil && c.ctx.Err() == nil {
		c.wcond.Wait()
	}
	c.wmu.Unlock()
}

// waitUnwritten waits while the peer has more than MaxUnwritten bytes
// unread (or the connection ends).
func (c *Conn) waitUnwritten() {
	maxUnwritten := c.opts.MaxUnwritten
	if maxUnwritten <= 0 {
		maxUnwritten = DefaultMaxUnwritten
	}
	c.wmu.Lock()
	for c.unwritten > maxUnwritten && c.werr == nil && c.ctx.Err() == nil {
		c.wcond.Wait()
	}
	c.wmu.Unlock()
}

// started and finished count a request handed to a worker; waiting
// says it is of a Waiting method.
func (c *Conn) started(waiting bool) {
	c.wmu.Lock()
	c.inflight++
	if waiting {
		c.waiting++
	}
	c.wmu.Unlock()
}

func (c *Conn) finished(waiting bool) {
	c.wmu.Lock()
	c.inflight--
	if waiting {
		c.waiting--
	}
	c.wcond.Broadcast()
	c.wmu.Unlock()
}

func (c *Conn) serve(m *Message) {
	waiting := c.opts.Waiting != nil && c.opts.Waiting(m.Method)
	// run serves m. On a worker (onWorker) a request's handler may answer
	// early (ReplyNow); run then reports that the worker's count in c.wg
	// was released. On the reading goroutine it cannot.
	run := func(onWorker bool) (released bool) {
		ctx := c.ctx
		var slot *replySlot
		if onWorker && m.ID != nil {
			slot = &replySlot{c: c, id: m.ID, waiting: waiting}
			ctx, slot.cancel = context.WithCancelCause(ctx)
			ctx = context.WithValue(ctx, replyKey{}, slot)
			c.track(slot)
			defer func() {
				c.untrack(slot)
				slot.cancel(nil)
			}()
		}
		var result any
		var err error
		if c.opts.Handler == nil {
			err = Errorf(MethodNotFound, "this peer serves no methods")
		} else {
			result, err = c.safeHandle(ctx, m)
		}
		if slot != nil && !slot.take() {
			return true // ReplyNow answered, and counted it finished
		}
		if m.ID != nil {
			c.answer(m, result, err)
		}
		if onWorker {
			c.finished(waiting)
		}
		return false
	}
	if c.opts.Serial || (c.opts.Inline != nil && c.opts.Inline(m.Method)) {
		run(false)
		return
	}
	c.started(waiting)
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

// answer sends a handler's result or error for request m. While the
// peer has more than its bound unread, it waits before encoding: an
// answer waiting for its turn holds its result, not also its encoding.
func (c *Conn) answer(m *Message, result any, err error) {
	if err != nil {
		c.writeError(m.ID, AsError(err))
		return
	}
	c.waitUnwritten()
	raw, merr := Marshal(result)
	if merr != nil {
		c.writeError(m.ID, Errorf(Internal, "encode result of %s: %v", m.Method, merr))
		return
	}
	_ = c.write(&Message{JSONRPC: "2.0", ID: m.ID, Result: raw})
}

type replyKey struct{}

// CancelMethod is the notification by which a caller cancels one of its
// requests still being served: params {"id": <the request's id>}. The
// handler's context is cancelled with cause [ErrCancelled]; a handler
// that does not look at its context runs on, and its answer, if any, is
// still sent. [Conn.Call] sends it when its context ends first.
const CancelMethod = "$/cancelRequest"

// ErrCancelled is the cause of a request context cancelled by its caller
// (CancelMethod), as opposed to the connection ending.
var ErrCancelled = errors.New("the caller cancelled the request")

// track and untrack keep the requests being served on workers by id.
func (c *Conn) track(s *replySlot) {
	c.mu.Lock()
	if c.serving == nil {
		c.serving = map[string]*replySlot{}
	}
	c.serving[string(s.id)] = s
	c.mu.Unlock()
}

func (c *Conn) untrack(s *replySlot) {
	c.mu.Lock()
	if c.serving[string(s.id)] == s {
		delete(c.serving, string(s.id))
	}
	c.mu.Unlock()
}

// cancelRequest serves CancelMethod.
func (c *Conn) cancelRequest(params json.RawMessage) {
	var p struct {
		ID json.RawMessage `json:"id"`
	}
	if json.Unmarshal(params, &p) != nil || len(p.ID) == 0 {
		return
	}
	c.mu.Lock()
	s := c.serving[string(p.ID)]
	c.mu.Unlock()
	if s != nil {
		s.cancel(ErrCancelled)
	}
}

// replySlot is the answer of one request served on a worker: it goes out
// once, from the handler's return or earlier from [ReplyNow].
type replySlot struct {
	c      *Conn
	id     json.RawMessage
	cancel context.CancelCauseFunc
	// waiting: the request is of a Waiting method (see Conn.started).
	waiting bool
	mu      sync.Mutex
	sent    bool
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
	// Answered: the caller can no longer cancel it.
	s.c.untrack(s)
	s.c.answer(&Message{ID: s.id}, result, nil)
	s.c.finished(s.waiting)
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

// maxSpare is the largest write buffer a connection keeps between bursts.
const maxSpare = 2 * maxPending

// write queues a frame. Frames queued while another goroutine is writing
// go out together in its next write: concurrent answers and event frames
// share system calls.
func (c *Conn) write(m *Message) error {
	b, err := Encode(m)
	if err != nil {
		return err
	}
	return c.queue(len(b), func(dst []byte) []byte { return append(dst, b...) })
}

// queue queues n bytes of frames, which fill appends straight to the
// pending buffer (a notification is a shared prefix, an encoding shared
// by every subscriber, and a suffix: nothing is built per connection).
func (c *Conn) queue(n int, fill func(dst []byte) []byte) error {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	c.unwritten += n
	for c.writing && len(c.pending) >= maxPending && c.werr == nil && c.ctx.Err() == nil {
		c.wcond.Wait()
	}
	if c.werr != nil || c.ctx.Err() != nil {
		c.unwritten -= n
		c.wcond.Broadcast()
		if c.werr != nil {
			return c.werr
		}
		return ErrClosed
	}
	c.pending = fill(c.pending)
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
		c.unwritten -= len(buf)
		if cap(buf) > maxSpare {
			buf = nil // a burst's buffer is not kept for the connection's life
		}
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

// NotifyEncoded sends notifications of one method, one per params, each
// already compact JSON (one value, no newline), in one write: the bus's
// shared encodings of a subscriber's waiting events go out together,
// without being encoded again per connection.
func (c *Conn) NotifyEncoded(method string, params ...[]byte) error {
	notifyPrefixes.RLock()
	pre, ok := notifyPrefixes.m[method]
	notifyPrefixes.RUnlock()
	if !ok {
		name, err := json.Marshal(method)
		if err != nil {
			return fmt.Errorf("encode method %s: %w", method, err)
		}
		pre = []byte(`{"jsonrpc":"2.0","method":` + string(name) + `,"params":`)
		notifyPrefixes.Lock()
		notifyPrefixes.m[method] = pre
		notifyPrefixes.Unlock()
	}
	n := 0
	for _, p := range params {
		n += len(pre) + max(len(p), len(jsonNull)) + len(notifySuffix)
	}
	return c.queue(n, func(dst []byte) []byte {
		for _, p := range params {
			if len(p) == 0 {
				p = jsonNull
			}
			dst = append(dst, pre...)
			dst = append(dst, p...)
			dst = append(dst, notifySuffix...)
		}
		return dst
	})
}

// notifyPrefixes holds the encoded frame start of each notification
// method in use (a handful).
var notifyPrefixes = struct {
	sync.RWMutex
	m map[string][]byte
}{m: map[string][]byte{}}

var notifySuffix, jsonNull = []byte("}\n"), []byte("null")

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
		if raw, ok := result.(*json.RawMessage); ok {
			// The frame was checked to be valid JSON when it was read.
			*raw = append((*raw)[:0], m.Result...)
			return nil
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
		// Tell the peer, so work done only for this call stops.
		_ = c.Notify(CancelMethod, map[string]json.RawMessage{"id": id})
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
