package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"sync"
	"sync/atomic"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"

	"github.com/shoal-sh/shoal/core/render"
	"github.com/shoal-sh/shoal/core/wire"
	"github.com/shoal-sh/shoal/sdk/client"
)

// Facade translates MCP messages into kernel calls. The MCP library
// (mark3labs/mcp-go) answers the handshake, ping and the tools; the
// resource methods are answered here, because their results carry
// structuredContent beside contents (which the library's types cannot)
// and because subscriptions need a kernel connection each.
type Facade struct {
	mcp  *server.MCPServer
	link *link
	dial dialer
	log  *slog.Logger
	// target is where the facade attaches; nil when its dialer decides
	// alone (tests).
	target *target

	mu       sync.Mutex
	sessions map[*session]struct{}
	// subscriptions counts the kernel connections of every session's
	// subscriptions (at most maxSubscriptions).
	subscriptions atomic.Int64
}

func newFacade(d dialer, log *slog.Logger) *Facade {
	f := &Facade{link: &link{dial: d}, dial: d, sessions: map[*session]struct{}{}}
	// The facade's warnings reach the MCP clients too (notices.go).
	f.log = slog.New(&logTee{Handler: log.Handler(), f: f})
	opts := []server.ServerOption{
		server.WithResourceCapabilities(true, false),
		server.WithToolCapabilities(false),
		server.WithLogging(),
		server.WithCompletions(),
		server.WithResourceCompletionProvider(f),
		server.WithRecovery(),
		server.WithInstructions(instructions),
	}
	if os.Getenv(checkOutputEnv) != "" {
		opts = append(opts, server.WithOutputSchemaValidation())
	}
	f.mcp = server.NewMCPServer("shoal", Version, opts...)
	f.addTools()
	return f
}

// checkOutputEnv, when set, makes the facade check every tool result
// against the tool's output schema before sending it. The tests set it,
// so every result they see is checked; a check costs about 80 µs a call,
// which the facade otherwise does not spend on its own output.
const checkOutputEnv = "SHOAL_MCP_CHECK_OUTPUT"

// instructions is what the server tells a model at initialize.
const instructions = `Shoal is a persistent shell session. Run commands with shoal_exec; every run gets a ref (out:N) that keeps its complete value, so read parts of a big result later with shoal_get {target, path, slice} instead of running the command again: grep searches it server-side, slice "-20.." is its tail, and "out 17 | grep -n FAIL" feeds it to new commands. Long commands become tasks (task:N): shoal_wait blocks until they end, shoal://task/N/stdout?since=0 reads their output while they run, shoal_cancel stops them. Risky commands are refused until planned: shoal_plan shows effects and the policy verdict, shoal_apply runs an allowed or approved plan. Interactive programs run in terminals: shoal_pty_open, shoal_pty_write, shoal_pty_read. The same state is readable as shoal:// resources, and shoal://events/{channel} and shoal://task/{id} can be subscribed to.`

// Close ends every MCP session (their forwarders and kernel connections)
// and the request connection.
func (f *Facade) Close() {
	for _, s := range f.openSessions() {
		s.close()
	}
	f.link.close()
}

// openSessions is a snapshot of the MCP sessions.
func (f *Facade) openSessions() []*session {
	f.mu.Lock()
	defer f.mu.Unlock()
	ss := make([]*session, 0, len(f.sessions))
	for s := range f.sessions {
		ss = append(ss, s)
	}
	return ss
}

// message is one JSON-RPC message as it arrives.
type message struct {
	JSONRPC string          `json:"jsonrpc"`
	ID      json.RawMessage `json:"id,omitempty"`
	Method  string          `json:"method,omitempty"`
	Params  json.RawMessage `json:"params,omitempty"`
	Result  json.RawMessage `json:"result,omitempty"`
	Error   json.RawMessage `json:"error,omitempty"`
}

// isRequest reports whether m expects an answer.
func (m *message) isRequest() bool {
	return m.Method != "" && len(m.ID) > 0 && string(m.ID) != "null"
}

// rpcError is a JSON-RPC error object.
type rpcError struct {
	Code    int    `json:"code"`
	Message string `json:"message"`
	Data    any    `json:"data,omitempty"`
}

type response struct {
	JSONRPC string          `json:"jsonrpc"`
	ID      json.RawMessage `json:"id"`
	Result  any             `json:"result,omitempty"`
	Error   *rpcError       `json:"error,omitempty"`
}

func errorResponse(id json.RawMessage, code int, msg string, data any) []byte {
	if len(id) == 0 {
		id = json.RawMessage("null")
	}
	b, _ := json.Marshal(response{JSONRPC: "2.0", ID: id, Error: &rpcError{Code: code, Message: msg, Data: data}})
	return b
}

func resultResponse(id json.RawMessage, result any) []byte {
	if raw, ok := result.(json.RawMessage); ok {
		// Already encoded (a read passed through): splice it in rather
		// than have encoding/json scan it again.
		b := make([]byte, 0, len(raw)+len(id)+40)
		b = append(b, `{"jsonrpc":"2.0","id":`...)
		b = append(b, id...)
		b = append(b, `,"result":`...)
		b = append(b, raw...)
		return append(b, '}')
	}
	b, err := json.Marshal(response{JSONRPC: "2.0", ID: id, Result: result})
	if err != nil {
		return errorResponse(id, -32603, "encode result: "+err.Error(), nil)
	}
	return b
}

// handle answers one raw message (or batch) from session s. It returns
// nil when nothing is to be sent back (notifications and responses).
func (f *Facade) handle(ctx context.Context, s *session, raw []byte) []byte {
	raw = bytes.TrimSpace(raw)
	if len(raw) > 0 && raw[0] == '[' {
		var batch []json.RawMessage
		if err := json.Unmarshal(raw, &batch); err != nil || len(batch) == 0 {
			return errorResponse(nil, -32700, "parse error: a batch must be a non-empty JSON array of messages", nil)
		}
		var out []json.RawMessage
		var mu sync.Mutex
		var wg sync.WaitGroup
		for _, m := range batch {
			wg.Go(func() {
				if r := f.handleOne(ctx, s, m); r != nil {
					mu.Lock()
					out = append(out, r)
					mu.Unlock()
				}
			})
		}
		wg.Wait()
		if len(out) == 0 {
			return nil
		}
		b, _ := json.Marshal(out)
		return b
	}
	return f.handleOne(ctx, s, raw)
}

func (f *Facade) handleOne(ctx context.Context, s *session, raw []byte) []byte {
	var m message
	if err := json.Unmarshal(raw, &m); err != nil {
		return errorResponse(nil, -32700, "parse error: "+err.Error(), nil)
	}
	if m.JSONRPC != "2.0" {
		return errorResponse(m.ID, -32600, `invalid request: "jsonrpc" must be "2.0"`, nil)
	}
	if m.Method == "" {
		// The client's answer to a request of this facade.
		s.answered(&m)
		return nil
	}
	if !m.isRequest() {
		if m.Method == string(mcp.MethodNotificationCancelled) {
			var p struct {
				RequestID json.RawMessage `json:"requestId"`
			}
			if json.Unmarshal(m.Params, &p) == nil {
				s.cancelRequest(p.RequestID)
			}
		}
		f.mcp.HandleMessage(f.mcp.WithContext(ctx, s), raw)
		if m.Method == string(mcp.MethodNotificationInitialized) {
			// Asked on a goroutine of its own: its answer comes through
			// the same reader that delivered this notification.
			go func() {
				f.learnRoots(s)
				f.startupNotices(s.ctx, s)
			}()
		}
		return nil
	}

	s.noteRequest(m.Params)
	if f.target != nil && !s.sawInit.Load() && !handshakeMethods[m.Method] && !f.target.settled() {
		// Work before any handshake: a stateless request (whose roots
		// come by a round trip, workspace.go), or a client that skipped
		// the handshake and offers none.
		if ask := f.rootsStateless(m); ask != nil {
			return ask
		}
	}
	switch m.Method {
	case string(mcp.MethodInitialize):
		s.setClientCaps(m.Params)
	case string(mcp.MethodResourcesSubscribe), string(mcp.MethodResourcesUnsubscribe):
		if isModern(m.Params) {
			return errorResponse(m.ID, -32601, fmt.Sprintf("%s was removed in protocol %s: subscribe with subscriptions/listen {notifications: {resourceSubscriptions: [uri]}}", m.Method, mcp.ProtocolVersion20260728), nil)
		}
	}
	switch m.Method {
	case string(mcp.MethodResourcesList):
		return f.intercept(ctx, s, m, f.resourcesList)
	case string(mcp.MethodResourcesTemplatesList):
		return f.intercept(ctx, s, m, f.resourceTemplates)
	case string(mcp.MethodResourcesRead):
		return f.intercept(ctx, s, m, f.resourcesRead)
	case string(mcp.MethodResourcesSubscribe):
		return f.intercept(ctx, s, m, s.subscribeRequest)
	case string(mcp.MethodResourcesUnsubscribe):
		return f.intercept(ctx, s, m, s.unsubscribeRequest)
	}
	resp := f.mcp.HandleMessage(f.mcp.WithContext(ctx, s), raw)
	if resp == nil {
		return nil
	}
	b, err := json.Marshal(resp)
	if err != nil {
		return errorResponse(m.ID, -32603, "encode response: "+err.Error(), nil)
	}
	return b
}

// handshakeMethods may come before initialize without settling the
// session: a client probing for the stateless revision, or a ping.
var handshakeMethods = map[string]bool{
	string(mcp.MethodInitialize): true, string(mcp.MethodServerDiscover): true, string(mcp.MethodPing): true,
}

// resourceHandler answers one intercepted request: a result, or an error
// already shaped for the client.
type resourceHandler func(ctx context.Context, params json.RawMessage) (any, *rpcError)

func (f *Facade) intercept(ctx context.Context, s *session, m message, h resourceHandler) []byte {
	ctx, done := s.track(ctx, m.ID)
	defer done()
	result, rerr := h(ctx, m.Params)
	if rerr != nil {
		return errorResponse(m.ID, rerr.Code, rerr.Message, rerr.Data)
	}
	if isModern(m.Params) {
		result = modernResult(result, m.Method != string(mcp.MethodResourcesSubscribe) && m.Method != string(mcp.MethodResourcesUnsubscribe))
	}
	return resultResponse(m.ID, result)
}

// kernelRPCError turns a failed kernel call into the request error a
// resource method answers: the message begins "kernel error:" and the
// data keeps the kernel's code and name.
func kernelRPCError(err error) *rpcError {
	return &rpcError{Code: mcpCode(err), Message: kernelError(err), Data: errorData(err)}
}

func (f *Facade) resourcesList(ctx context.Context, _ json.RawMessage) (any, *rpcError) {
	var r wire.ResourceList
	if err := f.link.call(ctx, "resources.list", struct{}{}, &r); err != nil {
		return nil, kernelRPCError(err)
	}
	out := map[string]any{"resources": nonNil(r.Resources)}
	for _, w := range r.Warnings {
		f.notify(mcp.LoggingLevelWarning, "shoal-kernel", w)
	}
	if len(r.Warnings) > 0 {
		// A family that failed to list must not hide the others; say which.
		out["_meta"] = map[string]any{metaPrefix + "warnings": r.Warnings}
	}
	return out, nil
}

func (f *Facade) resourceTemplates(ctx context.Context, _ json.RawMessage) (any, *rpcError) {
	var r wire.TemplateList
	if err := f.link.call(ctx, "resources.templates", struct{}{}, &r); err != nil {
		return nil, kernelRPCError(err)
	}
	return map[string]any{"resourceTemplates": nonNil(r.ResourceTemplates)}, nil
}

// metaPrefix namespaces the facade's keys in MCP _meta objects.
const metaPrefix = "sh.shoal/"

type readContent = client.Content

// kernelRead is the kernel's answer to resources.read and value.get.
type kernelRead = client.ReadResult

// kernelReadRaw is kernelRead with the contents left encoded.
type kernelReadRaw struct {
	Contents          json.RawMessage `json:"contents"`
	StructuredContent json.RawMessage `json:"structuredContent"`
	Elided            bool            `json:"elided"`
	Marks             []string        `json:"marks"`
	Meta              map[string]any  `json:"meta"`
}

// resourcesRead passes the kernel's envelope through. The kernel bounds
// each text at 64 KiB; the facade checks that again only when the encoded
// contents are longer than that (an encoded string is never shorter than
// its text), so a normal read is spliced, not re-encoded.
func (f *Facade) resourcesRead(ctx context.Context, params json.RawMessage) (any, *rpcError) {
	var p struct {
		URI string `json:"uri"`
	}
	if err := json.Unmarshal(params, &p); err != nil || p.URI == "" {
		return nil, &rpcError{Code: -32602, Message: `resources/read needs params {"uri": "shoal://…"}`}
	}
	var r kernelReadRaw
	if err := f.link.call(ctx, "resources.read", map[string]string{"uri": p.URI}, &r); err != nil {
		return nil, kernelRPCError(err)
	}
	contents := r.Contents
	if len(contents) == 0 || string(contents) == "null" {
		contents = json.RawMessage("[]")
	} else if len(contents) > render.TextLimit {
		var cs []readContent
		if err := json.Unmarshal(contents, &cs); err != nil {
			return nil, &rpcError{Code: -32603, Message: "kernel error: unreadable contents in the kernel's answer: " + err.Error()}
		}
		for i := range cs {
			cs[i].Text = capText(cs[i].Text)
		}
		contents, _ = json.Marshal(cs)
	}
	b := make([]byte, 0, len(contents)+len(r.StructuredContent)+64)
	b = append(b, `{"contents":`...)
	b = append(b, contents...)
	if len(r.StructuredContent) > 0 {
		b = append(b, `,"structuredContent":`...)
		b = append(b, r.StructuredContent...)
	}
	if meta := readMeta(r.Elided, r.Marks, r.Meta); meta != nil {
		mb, _ := json.Marshal(meta)
		b = append(b, `,"_meta":`...)
		b = append(b, mb...)
	}
	return json.RawMessage(append(b, '}')), nil
}

// readMeta carries what the kernel says about a read beyond the envelope
// (elision, marks such as secret-derived values) in _meta, so the
// envelope itself stays contents plus structuredContent.
func readMeta(elided bool, marks []string, about map[string]any) map[string]any {
	if !elided && len(marks) == 0 && len(about) == 0 {
		return nil
	}
	m := map[string]any{}
	if elided {
		m[metaPrefix+"elided"] = true
	}
	if len(marks) > 0 {
		m[metaPrefix+"marks"] = marks
	}
	if len(about) > 0 {
		// A live output read: where the bytes start, where to read next.
		m[metaPrefix+"output"] = about
	}
	return m
}

// nonNil is v, or an empty list for nil, so the answer shows [].
func nonNil[T any](v []T) []T {
	if v == nil {
		return []T{}
	}
	return v
}
