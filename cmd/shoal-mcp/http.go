package main

import (
	"context"
	"crypto/subtle"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"mime"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/mark3labs/mcp-go/mcp"

	"github.com/shoal-sh/shoal/core/statedir"
)

// endpoint is the streamable HTTP path.
const endpoint = "/mcp"

// Streamable HTTP header names.
const (
	headerSession  = "Mcp-Session-Id"
	headerProtocol = "Mcp-Protocol-Version"
)

// httpSessionIdle is how long an HTTP session with no request and no open
// event stream lives on. Its end closes its subscriptions, so a client
// that vanished without DELETE does not keep kernel connections (and so
// the kernel) alive for ever.
const httpSessionIdle = 30 * time.Minute

// keepAlive is the interval of SSE comments on an idle event stream, so
// proxies and clients do not take it for dead.
const keepAlive = 25 * time.Second

// httpListener is the facade's HTTP socket.
type httpListener struct {
	net.Listener
}

// URL is the MCP endpoint clients connect to.
func (l *httpListener) URL() string { return "http://" + l.Addr().String() + endpoint }

// listenHTTP listens on addr. A missing host means 127.0.0.1; a host that
// is not loopback is refused unless allowRemote, because whoever reaches
// the port acts as the facade's principal.
func listenHTTP(addr string, allowRemote bool) (*httpListener, error) {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return nil, fmt.Errorf("%w: --http %q: give HOST:PORT, e.g. 127.0.0.1:8765 (%v)", errUsage, addr, err)
	}
	if host == "" {
		host = "127.0.0.1"
	}
	if !allowRemote && !isLoopbackHost(host) {
		return nil, fmt.Errorf("%w: --http %s is not a loopback address: anyone who reaches it would act as this facade's principal; use 127.0.0.1:%s, or add --allow-remote if that is what you want", errUsage, addr, port)
	}
	l, err := net.Listen("tcp", net.JoinHostPort(host, port))
	if err != nil {
		return nil, fmt.Errorf("listen on %s: %w", addr, err)
	}
	if !allowRemote && !isLoopbackHost(l.Addr().String()) {
		l.Close()
		return nil, fmt.Errorf("%w: --http %s resolved to %s, which is not loopback; add --allow-remote if that is what you want", errUsage, addr, l.Addr())
	}
	return &httpListener{l}, nil
}

// isLoopbackHost reports whether host (optionally with a port) names this
// machine's loopback interface.
func isLoopbackHost(host string) bool {
	if h, _, err := net.SplitHostPort(host); err == nil {
		host = h
	}
	host = strings.Trim(host, "[]")
	if strings.EqualFold(host, "localhost") || strings.HasSuffix(strings.ToLower(host), ".localhost") {
		return true
	}
	ip, err := netip.ParseAddr(host)
	return err == nil && ip.IsLoopback()
}

// httpTransport serves MCP's streamable HTTP transport: POST carries
// client messages and gets the answer as JSON, GET opens the session's
// event stream (SSE) for notifications, DELETE ends the session.
type httpTransport struct {
	f           *Facade
	allowRemote bool
	// token is the bearer token every request must carry ($STATE/http.token).
	token string
	log   *slog.Logger
	idle  time.Duration

	mu       sync.Mutex
	sessions map[string]*httpSession
	// stateless bounds the 2026-07-28 requests served at once (each has
	// a session of its own); more wait.
	stateless *flow
}

type httpSession struct {
	*session
	// flow bounds the session's requests served at once; more wait.
	flow      *flow
	mu        sync.Mutex
	streaming bool
	lastSeen  time.Time
}

func (h *httpSession) touch() {
	h.mu.Lock()
	h.lastSeen = time.Now()
	h.mu.Unlock()
}

func newHTTPTransport(f *Facade, allowRemote bool, token string, log *slog.Logger) *httpTransport {
	return &httpTransport{f: f, allowRemote: allowRemote, token: token, log: log, idle: httpSessionIdle, sessions: map[string]*httpSession{}, stateless: newFlow()}
}

// httpToken returns the bearer token of the HTTP transport, made (0600)
// in the state directory when it is missing. Whoever can read it can act
// as the facade's principal; confined executions cannot read the state
// directory.
func httpToken(stateDir string) (token, path string, err error) {
	if stateDir, err = filepath.Abs(stateDir); err != nil {
		return "", "", fmt.Errorf("state dir: %w", err)
	}
	if err := os.MkdirAll(stateDir, 0o700); err != nil {
		return "", "", fmt.Errorf("create state dir: %w", err)
	}
	token, err = statedir.EnsureToken(stateDir, statedir.HTTPTokenName)
	if err != nil {
		return "", "", fmt.Errorf("HTTP token: %w", err)
	}
	return token, filepath.Join(stateDir, statedir.HTTPTokenName), nil
}

// printHTTPHelp tells the person starting the facade where the token is
// and how an MCP host sends it. It never prints the token itself: stderr
// often ends up in a host's logs.
func printHTTPHelp(w io.Writer, url, tokenPath string) {
	header := "Authorization: Bearer $(cat " + shellQuote(tokenPath) + ")"
	var entry strings.Builder
	enc := json.NewEncoder(&entry)
	enc.SetEscapeHTML(false)
	type server struct {
		Type    string            `json:"type"`
		URL     string            `json:"url"`
		Headers map[string]string `json:"headers"`
	}
	_ = enc.Encode(map[string]any{"mcpServers": map[string]server{"shoal": {"http", url,
		map[string]string{"Authorization": "Bearer <the contents of " + tokenPath + ">"}}}})
	fmt.Fprintf(w, `shoal-mcp: every request needs the header "Authorization: Bearer <token>"; the token is in %s (mode 0600)
shoal-mcp: Claude Code:
  claude mcp add --transport http shoal %s --header "%s"
shoal-mcp: a host's JSON config:
  %s`, tokenPath, url, header, entry.String())
}

// shellQuote quotes s for a POSIX shell when it needs it.
func shellQuote(s string) string {
	if s != "" && strings.Trim(s, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789/._-+:@") == "" {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

// authorized reports whether r carries the bearer token. The comparison
// takes the same time wherever the first wrong byte is.
func (t *httpTransport) authorized(r *http.Request) bool {
	scheme, tok, ok := strings.Cut(r.Header.Get("Authorization"), " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") || t.token == "" {
		return false
	}
	return subtle.ConstantTimeCompare([]byte(strings.TrimSpace(tok)), []byte(t.token)) == 1
}

// serveHTTP serves the endpoint on ln until ctx ends; every request must
// carry token as a bearer token.
func serveHTTP(ctx context.Context, f *Facade, ln *httpListener, allowRemote bool, token string, log *slog.Logger) error {
	t := newHTTPTransport(f, allowRemote, token, log)
	srv := &http.Server{Handler: t, ReadHeaderTimeout: 10 * time.Second}
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()
	sweep := time.NewTicker(time.Minute)
	defer sweep.Stop()
	for {
		select {
		case err := <-served:
			t.closeAll()
			return fmt.Errorf("serve HTTP: %w", err)
		case <-sweep.C:
			t.sweep(time.Now())
		case <-ctx.Done():
			// Ending the sessions ends their event streams, so Shutdown
			// does not wait on them.
			t.closeAll()
			sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			if err := srv.Shutdown(sctx); err != nil {
				srv.Close()
			}
			return nil
		}
	}
}

func (t *httpTransport) closeAll() {
	t.mu.Lock()
	ss := t.sessions
	t.sessions = map[string]*httpSession{}
	t.mu.Unlock()
	for _, s := range ss {
		s.close()
	}
}

// sweep ends sessions idle past t.idle with no event stream open.
func (t *httpTransport) sweep(now time.Time) {
	t.mu.Lock()
	var stale []*httpSession
	for id, s := range t.sessions {
		s.mu.Lock()
		idle := !s.streaming && now.Sub(s.lastSeen) > t.idle
		s.mu.Unlock()
		if idle {
			stale = append(stale, s)
			delete(t.sessions, id)
		}
	}
	t.mu.Unlock()
	for _, s := range stale {
		t.log.Info("ending idle HTTP session", "session", s.id)
		s.close()
	}
}

func (t *httpTransport) lookup(w http.ResponseWriter, r *http.Request) *httpSession {
	id := r.Header.Get(headerSession)
	if id == "" {
		http.Error(w, "Bad Request: the "+headerSession+" header is required (send initialize first to get one)", http.StatusBadRequest)
		return nil
	}
	t.mu.Lock()
	s := t.sessions[id]
	t.mu.Unlock()
	if s == nil {
		http.Error(w, "Not Found: unknown or ended session; initialize a new one", http.StatusNotFound)
		return nil
	}
	return s
}

// checkRequestOrigin blocks DNS rebinding: a browser page from elsewhere
// that resolves its own name to 127.0.0.1 sends its own Host and Origin,
// which are not loopback names.
func (t *httpTransport) checkRequestOrigin(r *http.Request) error {
	if !t.allowRemote && !isLoopbackHost(r.Host) {
		return fmt.Errorf("host %q is not a loopback name", r.Host)
	}
	origin := r.Header.Get("Origin")
	if origin == "" {
		return nil
	}
	u, err := url.Parse(origin)
	if err != nil || u.Host == "" {
		return fmt.Errorf("origin %q is not a URL", origin)
	}
	if isLoopbackHost(u.Host) {
		return nil
	}
	if t.allowRemote && strings.EqualFold(u.Host, r.Host) {
		return nil
	}
	return fmt.Errorf("origin %q is not allowed", origin)
}

func (t *httpTransport) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.URL.Path != endpoint {
		http.NotFound(w, r)
		return
	}
	if err := t.checkRequestOrigin(r); err != nil {
		http.Error(w, "Forbidden: "+err.Error(), http.StatusForbidden)
		return
	}
	if !t.authorized(r) {
		challenge := `Bearer realm="shoal"`
		if r.Header.Get("Authorization") != "" {
			challenge += `, error="invalid_token"`
		}
		w.Header().Set("WWW-Authenticate", challenge)
		http.Error(w, "Unauthorized: send the header \"Authorization: Bearer <token>\" with the token in the state directory's "+statedir.HTTPTokenName, http.StatusUnauthorized)
		return
	}
	if r.Method != http.MethodPost && mcp.IsModernProtocol(r.Header.Get(headerProtocol)) {
		// 2026-07-28 has neither the GET stream nor sessions to end:
		// notifications come on subscriptions/listen.
		w.Header().Set("Allow", "POST")
		http.Error(w, "Method Not Allowed: protocol "+r.Header.Get(headerProtocol)+" sends everything by POST; notifications come on subscriptions/listen", http.StatusMethodNotAllowed)
		return
	}
	switch r.Method {
	case http.MethodPost:
		t.post(w, r)
	case http.MethodGet:
		t.get(w, r)
	case http.MethodDelete:
		t.delete(w, r)
	default:
		w.Header().Set("Allow", "GET, POST, DELETE")
		http.Error(w, "Method Not Allowed", http.StatusMethodNotAllowed)
	}
}

func writeJSON(w http.ResponseWriter, status int, b []byte) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	w.Write(b)
}

// hasRequest reports whether body (a message or a batch) holds at least
// one request, and whether it is a lone initialize.
func hasRequest(body []byte) (requests, init bool, err error) {
	var msgs []message
	if trimmed := strings.TrimSpace(string(body)); strings.HasPrefix(trimmed, "[") {
		err = json.Unmarshal(body, &msgs)
	} else {
		var m message
		err = json.Unmarshal(body, &m)
		msgs = []message{m}
	}
	if err != nil {
		return false, false, err
	}
	for _, m := range msgs {
		if m.isRequest() {
			requests = true
		}
	}
	init = len(msgs) == 1 && msgs[0].Method == string(mcp.MethodInitialize) && msgs[0].isRequest()
	return requests, init, nil
}

func (t *httpTransport) post(w http.ResponseWriter, r *http.Request) {
	if mt, _, err := mime.ParseMediaType(r.Header.Get("Content-Type")); err != nil || mt != "application/json" {
		http.Error(w, "Unsupported Media Type: send application/json", http.StatusUnsupportedMediaType)
		return
	}
	body, err := io.ReadAll(io.LimitReader(r.Body, maxMessage+1))
	if err != nil {
		http.Error(w, "Bad Request: "+err.Error(), http.StatusBadRequest)
		return
	}
	if len(body) > maxMessage {
		http.Error(w, fmt.Sprintf("Request Entity Too Large: at most %d bytes", maxMessage), http.StatusRequestEntityTooLarge)
		return
	}
	if header, meta, modern := modernPost(r.Header, body); modern {
		t.postModern(w, r, body, header, meta)
		return
	}
	requests, isInit, err := hasRequest(body)
	if err != nil {
		writeJSON(w, http.StatusBadRequest, errorResponse(nil, -32700, "parse error: "+err.Error(), nil))
		return
	}

	if isInit {
		s := &httpSession{session: t.f.newSession(), flow: newFlow(), lastSeen: time.Now()}
		resp := t.f.handle(r.Context(), s.session, body)
		var m struct {
			Error json.RawMessage `json:"error"`
		}
		if json.Unmarshal(resp, &m) == nil && len(m.Error) > 0 {
			s.close()
			writeJSON(w, http.StatusOK, resp)
			return
		}
		t.mu.Lock()
		t.sessions[s.id] = s
		t.mu.Unlock()
		w.Header().Set(headerSession, s.id)
		writeJSON(w, http.StatusOK, resp)
		return
	}

	s := t.lookup(w, r)
	if s == nil {
		return
	}
	if v := r.Header.Get(headerProtocol); v != "" && !mcp.IsValidProtocolVersion(v) {
		http.Error(w, fmt.Sprintf("Bad Request: unsupported %s %q", headerProtocol, v), http.StatusBadRequest)
		return
	}
	s.touch()
	defer s.touch()
	// A request ends with its HTTP request or with its session.
	ctx, cancel := context.WithCancel(r.Context())
	defer cancel()
	stop := context.AfterFunc(s.ctx, cancel)
	defer stop()
	if err := s.flow.admit(ctx); err != nil {
		http.Error(w, "Service Unavailable: the session ended or the request was cancelled", http.StatusServiceUnavailable)
		return
	}
	defer s.flow.done()
	resp := t.f.handle(ctx, s.session, body)
	if !requests || resp == nil {
		w.WriteHeader(http.StatusAccepted)
		return
	}
	writeJSON(w, http.StatusOK, resp)
}

// get streams the session's notifications as server-sent events. One
// stream per session: a second one would split the notifications.
func (t *httpTransport) get(w http.ResponseWriter, r *http.Request) {
	if !strings.Contains(r.Header.Get("Accept"), "text/event-stream") {
		http.Error(w, "Not Acceptable: GET opens an event stream; send Accept: text/event-stream", http.StatusNotAcceptable)
		return
	}
	s := t.lookup(w, r)
	if s == nil {
		return
	}
	rc := http.NewResponseController(w)
	s.mu.Lock()
	if s.streaming {
		s.mu.Unlock()
		http.Error(w, "Conflict: this session already has an open event stream", http.StatusConflict)
		return
	}
	s.streaming = true
	s.mu.Unlock()
	defer func() {
		s.mu.Lock()
		s.streaming = false
		s.lastSeen = time.Now()
		s.mu.Unlock()
	}()

	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-cache")
	w.WriteHeader(http.StatusOK)
	if err := rc.Flush(); err != nil {
		return
	}
	tick := time.NewTicker(keepAlive)
	defer tick.Stop()
	for {
		var err error
		select {
		case b := <-s.outbox:
			_, err = fmt.Fprintf(w, "event: message\ndata: %s\n\n", b)
		case <-tick.C:
			_, err = io.WriteString(w, ": keep-alive\n\n")
		case <-r.Context().Done():
			return
		case <-s.Done():
			return
		}
		if err == nil {
			err = rc.Flush()
		}
		if err != nil {
			return
		}
	}
}

func (t *httpTransport) delete(w http.ResponseWriter, r *http.Request) {
	s := t.lookup(w, r)
	if s == nil {
		return
	}
	t.mu.Lock()
	delete(t.sessions, s.id)
	t.mu.Unlock()
	s.close()
	w.WriteHeader(http.StatusOK)
}
