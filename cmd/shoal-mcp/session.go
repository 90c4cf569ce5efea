package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"

	"github.com/shoal-sh/shoal/sdk/client"
)

// outboxSize bounds the notifications waiting for the client. A forwarder
// that finds it full waits; the wait reaches the kernel, whose subscriber
// queue then drops and later says how many ({dropped, latest_seq}), so the
// client learns of every gap instead of the facade dropping silently.
const outboxSize = 256

// subscribeTimeout bounds dialing and subscribing one URI.
const subscribeTimeout = 30 * time.Second

// session is one MCP client session: the stdio peer, or one HTTP session.
// It owns the subscriptions of that client and the queue of notifications
// going to it.
type session struct {
	id     string
	f      *Facade
	ctx    context.Context
	cancel context.CancelFunc

	// outbox holds encoded notifications for the transport's writer.
	outbox chan []byte
	// libNotes receives notifications the MCP library sends itself.
	libNotes    chan mcp.JSONRPCNotification
	initialized atomic.Bool

	// subMu serializes subscribe and unsubscribe, so one URI never gets
	// two forwarders.
	subMu sync.Mutex
	mu    sync.Mutex
	subs  map[string]*forwarder
	// inflight cancels intercepted requests on notifications/cancelled.
	inflight map[string]context.CancelFunc
	closed   bool
	wg       sync.WaitGroup

	// caps are the capabilities the client declared at initialize.
	caps    map[string]json.RawMessage
	sawInit atomic.Bool
	// logLevel is the client's logging/setLevel ("" until it says), or
	// for a stateless client the level its last request asked for.
	logLevel mcp.LoggingLevel
	// modern: the client speaks the stateless revision (2026-07-28).
	modern bool
	// asked holds the requests this facade sent the client (roots/list,
	// elicitation/create), by id, until their answers come.
	asked  map[string]chan *message
	nextID atomic.Int64
}

var _ server.ClientSession = (*session)(nil)

func (f *Facade) newSession() *session {
	ctx, cancel := context.WithCancel(context.Background())
	var b [16]byte
	_, _ = rand.Read(b[:])
	s := &session{id: hex.EncodeToString(b[:]), f: f, ctx: ctx, cancel: cancel,
		outbox: make(chan []byte, outboxSize), libNotes: make(chan mcp.JSONRPCNotification, 16),
		subs: map[string]*forwarder{}, inflight: map[string]context.CancelFunc{}, asked: map[string]chan *message{}}
	s.wg.Go(func() {
		for {
			select {
			case n := <-s.libNotes:
				if b, err := json.Marshal(n); err == nil {
					s.send(s.ctx, b)
				}
			case <-s.ctx.Done():
				return
			}
		}
	})
	f.mu.Lock()
	f.sessions[s] = struct{}{}
	f.mu.Unlock()
	return s
}

// SessionID implements server.ClientSession.
func (s *session) SessionID() string { return s.id }

// Initialize implements server.ClientSession.
func (s *session) Initialize() { s.initialized.Store(true) }

// Initialized implements server.ClientSession.
func (s *session) Initialized() bool { return s.initialized.Load() }

// NotificationChannel implements server.ClientSession.
func (s *session) NotificationChannel() chan<- mcp.JSONRPCNotification { return s.libNotes }

// send queues an encoded message for the client, waiting while the queue
// is full; it gives up when ctx (derived from the session's) ends.
func (s *session) send(ctx context.Context, b []byte) bool {
	select {
	case s.outbox <- b:
		return true
	case <-ctx.Done():
		return false
	}
}

// track registers an intercepted request so notifications/cancelled can
// cancel it; done unregisters it.
func (s *session) track(ctx context.Context, id json.RawMessage) (context.Context, func()) {
	ctx, cancel := context.WithCancel(ctx)
	key := string(id)
	s.mu.Lock()
	s.inflight[key] = cancel
	s.mu.Unlock()
	return ctx, func() {
		s.mu.Lock()
		delete(s.inflight, key)
		s.mu.Unlock()
		cancel()
	}
}

func (s *session) cancelRequest(id json.RawMessage) {
	s.mu.Lock()
	cancel := s.inflight[string(id)]
	s.mu.Unlock()
	if cancel != nil {
		cancel()
	}
}

// setClientCaps records the capabilities of an initialize request.
func (s *session) setClientCaps(params json.RawMessage) {
	var p struct {
		Capabilities map[string]json.RawMessage `json:"capabilities"`
	}
	_ = json.Unmarshal(params, &p)
	s.mu.Lock()
	s.caps = p.Capabilities
	s.mu.Unlock()
	s.sawInit.Store(true)
}

// clientHas reports whether the client declared a capability (roots,
// elicitation, sampling); sub, when given, is a member of it that must
// be there too (elicitation's form).
func (s *session) clientHas(name string, sub ...string) bool {
	s.mu.Lock()
	raw, ok := s.caps[name]
	s.mu.Unlock()
	if !ok || len(sub) == 0 {
		return ok
	}
	var members map[string]json.RawMessage
	if json.Unmarshal(raw, &members) != nil {
		return false
	}
	if len(members) == 0 && name == "elicitation" && sub[0] == "form" {
		return true // {} means form elicitation (before 2025-11-25 it was the only kind)
	}
	_, ok = members[sub[0]]
	return ok
}

// request sends the client a request and waits for its answer: the
// result, or the client's error as an error.
func (s *session) request(ctx context.Context, method string, params any) (json.RawMessage, error) {
	id := fmt.Sprintf(`"shoal-%d"`, s.nextID.Add(1))
	b, err := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": json.RawMessage(id), "method": method, "params": params})
	if err != nil {
		return nil, err
	}
	answer := make(chan *message, 1)
	s.mu.Lock()
	s.asked[id] = answer
	s.mu.Unlock()
	defer func() {
		s.mu.Lock()
		delete(s.asked, id)
		s.mu.Unlock()
	}()
	if !s.send(ctx, b) {
		return nil, ctx.Err()
	}
	select {
	case m := <-answer:
		if len(m.Error) > 0 {
			var e rpcError
			_ = json.Unmarshal(m.Error, &e)
			return nil, fmt.Errorf("the client answered %s with error %d: %s", method, e.Code, e.Message)
		}
		return m.Result, nil
	case <-ctx.Done():
		return nil, ctx.Err()
	case <-s.ctx.Done():
		return nil, context.Canceled
	}
}

// answered hands a response from the client to the request waiting for
// it; a response to nothing asked is dropped.
func (s *session) answered(m *message) {
	s.mu.Lock()
	ch := s.asked[string(m.ID)]
	s.mu.Unlock()
	if ch != nil {
		select {
		case ch <- m:
		default:
		}
	}
}

// close ends the session: every forwarder and its kernel connection, and
// every intercepted request still running.
func (s *session) close() {
	s.subMu.Lock()
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		s.subMu.Unlock()
		return
	}
	s.closed = true
	subs := s.subs
	s.subs = map[string]*forwarder{}
	for _, cancel := range s.inflight {
		cancel()
	}
	s.mu.Unlock()
	for _, fw := range subs {
		fw.stop()
	}
	s.subMu.Unlock()
	s.cancel()
	s.wg.Wait()
	s.f.mu.Lock()
	delete(s.f.sessions, s)
	s.f.mu.Unlock()
}

// Done is closed when the session has ended.
func (s *session) Done() <-chan struct{} { return s.ctx.Done() }

// forwarder carries one subscribed URI's kernel events to the client, on
// a kernel connection of its own.
type forwarder struct {
	uri    string
	conn   *client.Client
	cancel context.CancelFunc
	done   chan struct{}
}

// stop ends the forwarder and closes its kernel connection, which ends
// the kernel-side subscription with it.
func (fw *forwarder) stop() {
	fw.cancel()
	fw.conn.Close()
	<-fw.done
}

// subscribe starts forwarding uri's channel. Subscribing again to a URI
// already forwarded keeps the one forwarder.
func (s *session) subscribe(ctx context.Context, uri string) error {
	s.subMu.Lock()
	defer s.subMu.Unlock()
	s.mu.Lock()
	old := s.subs[uri]
	closed := s.closed
	s.mu.Unlock()
	if old != nil {
		select {
		case <-old.conn.Done():
			// Its kernel went away; replace it.
			s.mu.Lock()
			delete(s.subs, uri)
			s.mu.Unlock()
			old.stop()
		default:
			return nil
		}
	}
	if closed {
		return context.Canceled
	}
	s.mu.Lock()
	n := len(s.subs)
	s.mu.Unlock()
	if n >= maxSessionSubscriptions {
		return errTooManySubscriptions("this session", maxSessionSubscriptions)
	}
	if !s.f.subscriptionSlot() {
		return errTooManySubscriptions("the facade", maxSubscriptions)
	}
	ctx, cancelDial := context.WithTimeout(ctx, subscribeTimeout)
	defer cancelDial()

	fctx, cancel := context.WithCancel(s.ctx)
	events := make(chan client.Event, 64)
	onEvent := func(ev client.Event) {
		// Runs on the connection's reader: waiting here is what pushes
		// back to the kernel when the client reads slowly.
		select {
		case events <- ev:
		case <-fctx.Done():
		}
	}
	conn, err := s.f.dial(ctx, onEvent)
	if err != nil {
		cancel()
		s.f.releaseSubscription()
		return err
	}
	if _, err := conn.SubscribeURI(ctx, uri); err != nil {
		cancel()
		conn.Close()
		s.f.releaseSubscription()
		return err
	}
	fw := &forwarder{uri: uri, conn: conn, cancel: cancel, done: make(chan struct{})}
	// Recorded before it runs, so a connection that dies at once removes
	// this entry rather than leaving a dead one behind.
	s.mu.Lock()
	s.subs[uri] = fw
	s.mu.Unlock()
	go s.forward(fctx, fw, events)
	return nil
}

// forward sends each event as notifications/resources/updated {uri, seq,
// payload}. When the kernel connection ends on its own (the kernel
// stopped), the subscription is dropped so a new subscribe can redial.
func (s *session) forward(ctx context.Context, fw *forwarder, events <-chan client.Event) {
	defer close(fw.done)
	defer s.f.releaseSubscription()
	for {
		select {
		case ev := <-events:
			note := notification{JSONRPC: "2.0", Method: mcp.MethodNotificationResourceUpdated,
				Params: updatedParams{URI: fw.uri, Seq: ev.Seq, Payload: ev.Payload,
					// SDKs whose typed handler keeps only uri (the TS SDK)
					// still pass _meta on: the cursor and payload are there too.
					Meta: map[string]any{metaPrefix + "seq": ev.Seq, metaPrefix + "payload": ev.Payload}}}
			b, err := json.Marshal(note)
			if err != nil {
				s.f.log.Warn("drop unencodable event", "uri", fw.uri, "seq", ev.Seq, "err", err)
				continue
			}
			if !s.send(ctx, b) {
				return
			}
		case <-fw.conn.Done():
			s.mu.Lock()
			if s.subs[fw.uri] == fw {
				delete(s.subs, fw.uri)
			}
			s.mu.Unlock()
			s.f.log.Warn("subscription ended with its kernel connection", "uri", fw.uri)
			fw.cancel()
			return
		case <-ctx.Done():
			return
		}
	}
}

// unsubscribe ends uri's forwarder and its kernel connection. A URI not
// subscribed is not an error.
func (s *session) unsubscribe(uri string) {
	s.subMu.Lock()
	defer s.subMu.Unlock()
	s.mu.Lock()
	fw := s.subs[uri]
	delete(s.subs, uri)
	s.mu.Unlock()
	if fw != nil {
		fw.stop()
	}
}

type notification struct {
	JSONRPC string `json:"jsonrpc"`
	Method  string `json:"method"`
	Params  any    `json:"params"`
}

type updatedParams struct {
	URI     string          `json:"uri"`
	Seq     uint64          `json:"seq"`
	Payload json.RawMessage `json:"payload"`
	Meta    map[string]any  `json:"_meta,omitempty"`
}

func uriParam(params json.RawMessage) (string, *rpcError) {
	var p struct {
		URI string `json:"uri"`
	}
	if err := json.Unmarshal(params, &p); err != nil || p.URI == "" {
		return "", &rpcError{Code: -32602, Message: `params must be {"uri": "shoal://events/{channel}" | "shoal://task/{id}" | "shoal://task/{id}/out"}`}
	}
	return p.URI, nil
}

func (s *session) subscribeRequest(ctx context.Context, params json.RawMessage) (any, *rpcError) {
	uri, rerr := uriParam(params)
	if rerr != nil {
		return nil, rerr
	}
	if err := s.subscribe(ctx, uri); err != nil {
		return nil, kernelRPCError(err)
	}
	return struct{}{}, nil
}

// The stateless revision (2026-07-28) subscribes with subscriptions/listen,
// which the MCP library serves; it subscribes and unsubscribes resources
// through these methods, so they run the same forwarders as
// resources/subscribe.
var _ server.SessionWithResourceSubscriptionsErr = (*session)(nil)

// SubscribeToResourceErr implements server.SessionWithResourceSubscriptionsErr.
func (s *session) SubscribeToResourceErr(uri string) error {
	ctx, cancel := context.WithTimeout(s.ctx, subscribeTimeout)
	defer cancel()
	return s.subscribe(ctx, uri)
}

// SubscribeToResource implements server.SessionWithResourceSubscriptions.
func (s *session) SubscribeToResource(uri string) { _ = s.SubscribeToResourceErr(uri) }

// UnsubscribeFromResource implements server.SessionWithResourceSubscriptions.
func (s *session) UnsubscribeFromResource(uri string) { s.unsubscribe(uri) }

// SubscribedResources implements server.SessionWithResourceSubscriptions.
func (s *session) SubscribedResources() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	uris := make([]string, 0, len(s.subs))
	for uri := range s.subs {
		uris = append(uris, uri)
	}
	return uris
}

// IsSubscribedToResource implements server.SessionWithResourceSubscriptions.
func (s *session) IsSubscribedToResource(uri string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	_, ok := s.subs[uri]
	return ok
}

func (s *session) unsubscribeRequest(_ context.Context, params json.RawMessage) (any, *rpcError) {
	uri, rerr := uriParam(params)
	if rerr != nil {
		return nil, rerr
	}
	s.unsubscribe(uri)
	return struct{}{}, nil
}
