package main

import (
	"context"
	"io"
	"net/http"
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
