package main

import (
	"context"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestHTTPTransport(t *testing.T) {
	sd := newStateDir(t)
	h := startHTTP(t, sd, "agent:http")
	if !strings.HasPrefix(h.url, "http://127.0.0.1:") || !strings.HasSuffix(h.url, "/mcp") {
		t.Fatalf("url %q", h.url)
	}
	p := h.connect(t)

	m, text := p.callOK("shoal_exec", map[string]any{"source": `printf '{"k":"v"}' | from json`})
	if m["ok"] != true || !strings.Contains(text, "out:") {
		t.Fatalf("exec over HTTP: %v %q", m, text)
	}
	env := p.read(m["uri"].(string) + "?path=.k")
	if string(env.StructuredContent) != `{"$":"str","v":"v"}` {
		t.Errorf("read over HTTP: %s", env.StructuredContent)
	}
	_, rerr := p.raw("resources/read", map[string]any{"uri": m["uri"].(string) + "?path=.missing"})
	if rerr == nil || !strings.HasPrefix(rerr.Message, "kernel error: BAD_PATH") {
		t.Errorf("bad path over HTTP: %+v", rerr)
	}

	pub := sd.dial(t, "human:test", nil)
	base := sd.status(t, pub).Connections
	const uri = "shoal://events/user.http"
	if _, rerr := p.raw("resources/subscribe", map[string]any{"uri": uri}); rerr != nil {
		t.Fatal(rerr.Message)
	}
	ev, err := pub.Publish(context.Background(), "user.http", map[string]any{"via": "sse"})
	if err != nil {
		t.Fatal(err)
	}
	if up := p.nextUpdate(uri); up.Seq != ev.Seq || string(up.Payload) != `{"via":"sse"}` {
		t.Errorf("update over SSE: %+v", up)
	}

	// A second session of the same facade is independent.
	q := h.connect(t)
	q.callOK("shoal_pty_list", map[string]any{})

	// Closing the client sends DELETE: the session's forwarder and its
	// kernel connection end.
	p.close()
	if !waitFor(waitLong, func() bool { return sd.status(t, pub).Connections == base }) {
		t.Errorf("connections %d after DELETE, want %d", sd.status(t, pub).Connections, base)
	}
}

func TestHTTPGuards(t *testing.T) {
	sd := newStateDir(t)
	h := startHTTP(t, sd, "agent:http")
	init := `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"curl","version":"1"}}}`
	ping := `{"jsonrpc":"2.0","id":2,"method":"ping"}`

	do := func(method, host, origin, session, body string) (*http.Response, string) {
		t.Helper()
		return send(t, h, method, host, origin, session, "Bearer "+h.token, body)
	}

	// DNS rebinding: a foreign Host or Origin is refused before anything runs.
	if resp, _ := do("POST", "evil.example:80", "", "", init); resp.StatusCode != http.StatusForbidden {
		t.Errorf("foreign Host: %d", resp.StatusCode)
	}
	if resp, _ := do("POST", "", "http://evil.example", "", init); resp.StatusCode != http.StatusForbidden {
		t.Errorf("foreign Origin: %d", resp.StatusCode)
	}

	resp, body := do("POST", "localhost", "http://localhost:6274", "", init)
	sid := resp.Header.Get(headerSession)
	if resp.StatusCode != http.StatusOK || sid == "" || !strings.Contains(body, `"protocolVersion"`) {
		t.Fatalf("initialize: %d %q session %q", resp.StatusCode, body, sid)
	}
	if resp, _ := do("POST", "", "", "", ping); resp.StatusCode != http.StatusBadRequest {
		t.Errorf("no session header: %d", resp.StatusCode)
	}
	if resp, _ := do("POST", "", "", "nope", ping); resp.StatusCode != http.StatusNotFound {
		t.Errorf("unknown session: %d", resp.StatusCode)
	}
	if resp, body := do("POST", "", "", sid, ping); resp.StatusCode != http.StatusOK || !strings.Contains(body, `"result"`) {
		t.Errorf("ping: %d %q", resp.StatusCode, body)
	}
	notif := `{"jsonrpc":"2.0","method":"notifications/initialized"}`
	if resp, _ := do("POST", "", "", sid, notif); resp.StatusCode != http.StatusAccepted {
		t.Errorf("notification: %d, want 202", resp.StatusCode)
	}
	if resp, _ := do("PUT", "", "", sid, ping); resp.StatusCode != http.StatusMethodNotAllowed {
		t.Errorf("PUT: %d", resp.StatusCode)
	}

	// One event stream per session; ending the session ends it.
	stream, err := http.NewRequest("GET", h.url, nil)
	if err != nil {
		t.Fatal(err)
	}
	stream.Header.Set("Accept", "text/event-stream")
	stream.Header.Set("Authorization", "Bearer "+h.token)
	stream.Header.Set(headerSession, sid)
	first, err := http.DefaultClient.Do(stream)
	if err != nil {
		t.Fatal(err)
	}
	defer first.Body.Close()
	if first.StatusCode != http.StatusOK || first.Header.Get("Content-Type") != "text/event-stream" {
		t.Fatalf("event stream: %d %q", first.StatusCode, first.Header.Get("Content-Type"))
	}
	second, err := http.DefaultClient.Do(stream.Clone(context.Background()))
	if err != nil {
		t.Fatal(err)
	}
	second.Body.Close()
	if second.StatusCode != http.StatusConflict {
		t.Errorf("second event stream: %d, want 409", second.StatusCode)
	}
	ended := make(chan error, 1)
	go func() {
		_, err := io.Copy(io.Discard, first.Body)
		ended <- err
	}()
	if resp, _ := do("DELETE", "", "", sid, ""); resp.StatusCode != http.StatusOK {
		t.Errorf("DELETE: %d", resp.StatusCode)
	}
	select {
	case <-ended:
	case <-time.After(waitLong):
		t.Fatal("the event stream outlived its session")
	}
	if resp, _ := do("POST", "", "", sid, ping); resp.StatusCode != http.StatusNotFound {
		t.Errorf("after DELETE: %d", resp.StatusCode)
	}
}

// send makes one request to the HTTP facade with the given Host, Origin,
// session and Authorization headers (each left out when empty).
func send(t *testing.T, h *httpFacade, method, host, origin, session, auth, body string) (*http.Response, string) {
	t.Helper()
	req, err := http.NewRequest(method, h.url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if host != "" {
		req.Host = host
	}
	if origin != "" {
		req.Header.Set("Origin", origin)
	}
	if session != "" {
		req.Header.Set(headerSession, session)
	}
	if auth != "" {
		req.Header.Set("Authorization", auth)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	c := &http.Client{Timeout: waitLong}
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp, string(b)
}

// TestHTTPBearerToken: without the state dir's token, or with another,
// nothing runs; with it, it does.
func TestHTTPBearerToken(t *testing.T) {
	sd := newStateDir(t)
	h := startHTTP(t, sd, "agent:http")
	fi, err := os.Stat(filepath.Join(sd.dir, "http.token"))
	if err != nil || fi.Mode().Perm() != 0o600 || len(h.token) != 64 {
		t.Fatalf("http.token: %v %v, %d characters", fi, err, len(h.token))
	}
	for _, want := range []string{"http.token", "claude mcp add --transport http shoal " + h.url + ` --header "Authorization: Bearer $(cat `, `"headers":{"Authorization":"Bearer `} {
		if !waitFor(waitLong, func() bool { return strings.Contains(h.stderr.String(), want) }) {
			t.Errorf("stderr lacks %q:\n%s", want, h.stderr.String())
		}
	}
	if strings.Contains(h.stderr.String(), h.token) {
		t.Error("the facade printed its token")
	}
	init := `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"curl","version":"1"}}}`
	marker := filepath.Join(t.TempDir(), "ran")
	call := `{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"shoal_exec","arguments":{"source":"touch ` + marker + `"}}}`
	wrong := "Bearer " + strings.Repeat("0", 64)
	for _, auth := range []string{"", wrong, "Bearer " + h.token[:63], "Basic " + h.token, h.token} {
		resp, body := send(t, h, "POST", "", "", "", auth, init)
		if resp.StatusCode != http.StatusUnauthorized || !strings.HasPrefix(resp.Header.Get("WWW-Authenticate"), "Bearer") || resp.Header.Get(headerSession) != "" {
			t.Errorf("initialize with %q: %d %q %q", auth, resp.StatusCode, resp.Header.Get("WWW-Authenticate"), body)
		}
	}
	resp, body := send(t, h, "POST", "", "", "", "Bearer "+h.token, init)
	sid := resp.Header.Get(headerSession)
	if resp.StatusCode != http.StatusOK || sid == "" {
		t.Fatalf("initialize with the token: %d %q", resp.StatusCode, body)
	}
	// An existing session's id is not a credential either.
	for _, auth := range []string{"", wrong} {
		if resp, _ := send(t, h, "POST", "", "", sid, auth, call); resp.StatusCode != http.StatusUnauthorized {
			t.Errorf("tools/call with %q: %d", auth, resp.StatusCode)
		}
		if resp, _ := send(t, h, "DELETE", "", "", sid, auth, ""); resp.StatusCode != http.StatusUnauthorized {
			t.Errorf("DELETE with %q: %d", auth, resp.StatusCode)
		}
	}
	pub := sd.dial(t, "human:test", nil)
	var rows struct {
		Rows []map[string]any `json:"rows"`
	}
	if err := pub.Call(context.Background(), "journal.query", map[string]any{"head": "touch"}, &rows); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(marker); !os.IsNotExist(err) || len(rows.Rows) != 0 {
		t.Fatalf("a request without the token ran: %v, %d journal rows", err, len(rows.Rows))
	}
	if resp, body := send(t, h, "POST", "", "", sid, "Bearer "+h.token, call); resp.StatusCode != http.StatusOK || !strings.Contains(body, `"ok":true`) {
		t.Fatalf("tools/call with the token: %d %s", resp.StatusCode, body)
	}
	if _, err := os.Stat(marker); err != nil {
		t.Errorf("the authorized call did not run: %v", err)
	}
	// A restarted facade keeps the token.
	h.stop(t)
	h2 := startHTTP(t, sd, "agent:http")
	if h2.token != h.token {
		t.Error("the token changed across facade restarts")
	}
}
