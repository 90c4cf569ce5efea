package main

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/shoal-sh/shoal/core/kernel"
	"github.com/shoal-sh/shoal/core/render"
	"github.com/shoal-sh/shoal/core/rpc"
	"github.com/shoal-sh/shoal/core/wire"
)

func TestIsLoopbackHost(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want bool
	}{
		{"localhost", true},
		{"LOCALHOST:8080", true},
		{"app.localhost:3000", true},
		{"127.0.0.1", true},
		{"127.3.4.5:99", true},
		{"[::1]:8080", true},
		{"::1", true},
		{"0.0.0.0", false},
		{"10.0.0.1:80", false},
		{"evil.example", false},
		{"localhost.evil.example", false},
		{"", false},
	} {
		if got := isLoopbackHost(tc.in); got != tc.want {
			t.Errorf("isLoopbackHost(%q) = %v, want %v", tc.in, got, tc.want)
		}
	}
}

func TestCheckRequestOrigin(t *testing.T) {
	for _, tc := range []struct {
		host, origin string
		remote       bool
		ok           bool
	}{
		{"127.0.0.1:8765", "", false, true},
		{"localhost:8765", "http://localhost:6274", false, true},
		{"127.0.0.1:8765", "http://127.0.0.1:6274", false, true},
		{"evil.example:8765", "", false, false},
		{"127.0.0.1:8765", "http://evil.example", false, false},
		{"127.0.0.1:8765", "null", false, false},
		{"box.lan:8765", "", true, true},
		{"box.lan:8765", "http://box.lan:8765", true, true},
		{"box.lan:8765", "http://evil.example", true, false},
	} {
		tr := &httpTransport{allowRemote: tc.remote}
		r := httptest.NewRequest("POST", "/mcp", nil)
		r.Host = tc.host
		if tc.origin != "" {
			r.Header.Set("Origin", tc.origin)
		}
		if err := tr.checkRequestOrigin(r); (err == nil) != tc.ok {
			t.Errorf("host %q origin %q remote %v: err %v, want ok=%v", tc.host, tc.origin, tc.remote, err, tc.ok)
		}
	}
}

func TestListenHTTP(t *testing.T) {
	for _, tc := range []struct {
		addr   string
		remote bool
		ok     bool
	}{
		{"127.0.0.1:0", false, true},
		{":0", false, true},
		{"localhost:0", false, true},
		{"0.0.0.0:0", false, false},
		{"0.0.0.0:0", true, true},
		{"nonsense", false, false},
	} {
		l, err := listenHTTP(tc.addr, tc.remote)
		if (err == nil) != tc.ok {
			t.Errorf("listenHTTP(%q, %v): %v", tc.addr, tc.remote, err)
		}
		if err == nil {
			if !tc.remote && !isLoopbackHost(l.Addr().String()) {
				t.Errorf("%q listens on %s", tc.addr, l.Addr())
			}
			l.Close()
		} else if !errors.Is(err, errUsage) {
			t.Errorf("listenHTTP(%q): %v is not a usage error", tc.addr, err)
		}
	}
}

func TestCapText(t *testing.T) {
	short := "hello"
	if capText(short) != short {
		t.Error("short text changed")
	}
	long := strings.Repeat("é", render.TextLimit) // 2 bytes each
	got := capText(long)
	if len(got) > render.TextLimit || !utf8.ValidString(got) || !strings.Contains(got, "cut at 64 KiB") {
		t.Errorf("capText: %d bytes, valid %v", len(got), utf8.ValidString(got))
	}
}

func TestParseFlags(t *testing.T) {
	t.Setenv("SHOAL_STATE_DIR", "/tmp/from-env")
	t.Setenv("SHOAL_SESSION", "work")
	t.Setenv("SHOAL_PRINCIPAL", "agent:env")
	cfg, err := parseFlags(nil, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if cfg.stateDir != "/tmp/from-env" || cfg.session != "work" || cfg.principal != "agent:env" || cfg.idleExit != kernel.IdleExitFromConfig {
		t.Errorf("defaults from env: %+v", cfg)
	}
	cfg, err = parseFlags([]string{"--state-dir", "/x", "--principal", "agent:flag", "--plugin-dir", "a", "--plugin-dir", "b", "--idle-exit", "3s", "--in-process"}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if cfg.stateDir != "/x" || cfg.principal != "agent:flag" || len(cfg.pluginDirs) != 2 || cfg.idleExit != 3*time.Second || !cfg.inProcess {
		t.Errorf("flags: %+v", cfg)
	}
	for _, bad := range [][]string{{"--idle-exit", "-1s"}, {"--allow-remote"}, {"--log-level", "loud"}, {"x"}} {
		if _, err := parseFlags(bad, io.Discard); !errors.Is(err, errUsage) {
			t.Errorf("%v: %v, want a usage error", bad, err)
		}
	}
}

func TestExecText(t *testing.T) {
	for _, tc := range []struct {
		reply string
		want  []string
	}{
		{`{"ref":"out:3","ok":true,"exit":0,"state":"completed","duration_ns":1500000,"effects":["proc.spawn"],"preview_text":"hi"}`,
			[]string{"out:3 ok, exit 0", "effects: proc.spawn", "\nhi"}},
		{`{"ref":"out:4","ok":false,"exit":2,"state":"failed","preview_text":"boom"}`, []string{"out:4 failed, exit 2", "boom"}},
		{`{"ref":"out:5","ok":null,"exit":null,"state":"running","task":"task:2"}`, []string{"out:5 running as task:2", `"target":"out:5"`}},
		{`{"ref":"out:6","ok":true,"exit":0,"val_ref":"val:blake3:ab","marks":["env"]}`, []string{"out:6 ok", "val:blake3:ab", "marks: env"}},
	} {
		var r wire.ExecReply
		if err := json.Unmarshal([]byte(tc.reply), &r); err != nil {
			t.Fatal(err)
		}
		got := execText(&r)
		for _, w := range tc.want {
			if !strings.Contains(got, w) {
				t.Errorf("execText(%s) = %q, lacks %q", tc.reply, got, w)
			}
		}
	}
}

func TestKernelErrorShapes(t *testing.T) {
	re := &rpc.Error{Code: rpc.BadPath, Message: "no field nope", Data: map[string]any{"path": ".nope"}}
	if got := kernelError(re); got != "kernel error: BAD_PATH (-32005): no field nope" {
		t.Errorf("kernelError = %q", got)
	}
	d := errorData(re)
	if d["code"] != -32005 || d["name"] != "BAD_PATH" || d["path"] != ".nope" {
		t.Errorf("errorData = %v", d)
	}
	if mcpCode(re) != -32602 || mcpCode(&rpc.Error{Code: rpc.NotFound}) != codeResourceNotFound || mcpCode(errors.New("x")) != -32603 {
		t.Error("mcpCode mapping")
	}
	if !strings.HasPrefix(kernelError(context.Canceled), "kernel error:") || !strings.HasPrefix(kernelError(errors.New("eof")), "kernel error:") {
		t.Error("non-kernel errors lack the prefix")
	}
	res := (&Facade{}).toolFailure(&rpc.Error{Code: rpc.PolicyRefused, Message: "plan it"})
	if !res.IsError || !strings.Contains(resultText(res), "shoal_plan") {
		t.Errorf("policy refusal: %+v", res)
	}
}

func TestHasRequest(t *testing.T) {
	for _, tc := range []struct {
		body      string
		req, init bool
		err       bool
	}{
		{`{"jsonrpc":"2.0","id":1,"method":"initialize"}`, true, true, false},
		{`{"jsonrpc":"2.0","id":1,"method":"ping"}`, true, false, false},
		{`{"jsonrpc":"2.0","method":"notifications/initialized"}`, false, false, false},
		{`{"jsonrpc":"2.0","id":1,"result":{}}`, false, false, false},
		{`[{"jsonrpc":"2.0","method":"notifications/initialized"},{"jsonrpc":"2.0","id":2,"method":"ping"}]`, true, false, false},
		{`{nope`, false, false, true},
	} {
		req, init, err := hasRequest([]byte(tc.body))
		if req != tc.req || init != tc.init || (err != nil) != tc.err {
			t.Errorf("hasRequest(%s) = %v %v %v", tc.body, req, init, err)
		}
	}
}

func TestHTTPMethodsWithoutKernel(t *testing.T) {
	tr := newHTTPTransport(&Facade{}, false, "s3cret", nil)
	for _, tc := range []struct {
		method, ctype, accept string
		want                  int
	}{
		{"POST", "text/plain", "", http.StatusUnsupportedMediaType},
		{"GET", "", "application/json", http.StatusNotAcceptable},
		{"GET", "", "text/event-stream", http.StatusBadRequest},
		{"DELETE", "", "", http.StatusBadRequest},
		{"PATCH", "", "", http.StatusMethodNotAllowed},
	} {
		r := httptest.NewRequest(tc.method, "http://127.0.0.1/mcp", strings.NewReader("{}"))
		r.Host = "127.0.0.1:1"
		r.Header.Set("Authorization", "Bearer s3cret")
		if tc.ctype != "" {
			r.Header.Set("Content-Type", tc.ctype)
		}
		if tc.accept != "" {
			r.Header.Set("Accept", tc.accept)
		}
		w := httptest.NewRecorder()
		tr.ServeHTTP(w, r)
		if w.Code != tc.want {
			t.Errorf("%s %s: %d, want %d", tc.method, tc.ctype, w.Code, tc.want)
		}
	}
	w := httptest.NewRecorder()
	tr.ServeHTTP(w, httptest.NewRequest("GET", "http://127.0.0.1/other", nil))
	if w.Code != http.StatusNotFound {
		t.Errorf("other path: %d", w.Code)
	}
}

// TestHTTPBearer: a request without the token, or with another, is
// answered 401 with a Bearer challenge before any handler sees it; an
// empty configured token lets nothing in.
func TestHTTPBearer(t *testing.T) {
	tr := newHTTPTransport(&Facade{}, false, "s3cret", nil)
	for _, tc := range []struct {
		auth      string
		want      int
		challenge string
	}{
		{"", http.StatusUnauthorized, `Bearer realm="shoal"`},
		{"Bearer", http.StatusUnauthorized, `Bearer realm="shoal", error="invalid_token"`},
		{"Bearer ", http.StatusUnauthorized, `Bearer realm="shoal", error="invalid_token"`},
		{"Bearer s3cre", http.StatusUnauthorized, `Bearer realm="shoal", error="invalid_token"`},
		{"Bearer s3cret0", http.StatusUnauthorized, `Bearer realm="shoal", error="invalid_token"`},
		{"Basic s3cret", http.StatusUnauthorized, `Bearer realm="shoal", error="invalid_token"`},
		{"s3cret", http.StatusUnauthorized, `Bearer realm="shoal", error="invalid_token"`},
		// A right token reaches the handler, which refuses the body's type.
		{"Bearer s3cret", http.StatusUnsupportedMediaType, ""},
		{"bearer s3cret", http.StatusUnsupportedMediaType, ""},
	} {
		for _, method := range []string{"POST", "GET", "DELETE"} {
			r := httptest.NewRequest(method, "http://127.0.0.1/mcp", strings.NewReader("{}"))
			r.Host = "127.0.0.1:1"
			if tc.auth != "" {
				r.Header.Set("Authorization", tc.auth)
			}
			r.Header.Set("Content-Type", "text/plain")
			w := httptest.NewRecorder()
			tr.ServeHTTP(w, r)
			want := tc.want
			if want != http.StatusUnauthorized && method != "POST" {
				want = map[string]int{"GET": http.StatusNotAcceptable, "DELETE": http.StatusBadRequest}[method]
			}
			if w.Code != want || w.Header().Get("WWW-Authenticate") != tc.challenge {
				t.Errorf("%s with %q: %d %q; want %d %q", method, tc.auth, w.Code, w.Header().Get("WWW-Authenticate"), want, tc.challenge)
			}
		}
	}
	open := newHTTPTransport(&Facade{}, false, "", nil)
	r := httptest.NewRequest("POST", "http://127.0.0.1/mcp", nil)
	r.Host = "127.0.0.1:1"
	r.Header.Set("Authorization", "Bearer ")
	w := httptest.NewRecorder()
	open.ServeHTTP(w, r)
	if w.Code != http.StatusUnauthorized {
		t.Errorf("an empty token let a request in: %d", w.Code)
	}
}

func TestHTTPHelp(t *testing.T) {
	var b strings.Builder
	printHTTPHelp(&b, "http://127.0.0.1:8765/mcp", "/st ate/it's/http.token")
	out := b.String()
	for _, want := range []string{
		`claude mcp add --transport http shoal http://127.0.0.1:8765/mcp --header "Authorization: Bearer $(cat '/st ate/it'\''s/http.token')"`,
		`"headers":{"Authorization":"Bearer <the contents of /st ate/it's/http.token>"}`,
		`the token is in /st ate/it's/http.token`,
	} {
		if !strings.Contains(out, want) {
			t.Errorf("help lacks %s:\n%s", want, out)
		}
	}
}

func TestHTTPSweep(t *testing.T) {
	f := &Facade{sessions: map[*session]struct{}{}, log: slog.New(slog.DiscardHandler)}
	tr := newHTTPTransport(f, false, "", f.log)
	now := time.Now()
	idle := &httpSession{session: f.newSession(), lastSeen: now.Add(-2 * tr.idle)}
	streaming := &httpSession{session: f.newSession(), lastSeen: now.Add(-2 * tr.idle), streaming: true}
	recent := &httpSession{session: f.newSession(), lastSeen: now}
	for _, s := range []*httpSession{idle, streaming, recent} {
		tr.sessions[s.id] = s
	}
	tr.sweep(now)
	select {
	case <-idle.Done():
	default:
		t.Error("idle session not ended")
	}
	if _, ok := tr.sessions[idle.id]; ok || len(tr.sessions) != 2 {
		t.Errorf("sessions after sweep: %d", len(tr.sessions))
	}
	tr.closeAll()
	for _, s := range []*httpSession{streaming, recent} {
		select {
		case <-s.Done():
		default:
			t.Error("closeAll left a session running")
		}
	}
	if len(f.sessions) != 0 {
		t.Errorf("facade still tracks %d sessions", len(f.sessions))
	}
}

func TestExecObject(t *testing.T) {
	raw := json.RawMessage(`{"ref":"out:7","uri":"shoal://out/7","ok":false,"exit":1,"state":"failed","duration_ns":12345678,"effects":["proc.spawn"],` +
		`"preview":{"$":"record","v":{"exit":{"$":"int","v":1},"stdout":{"$":"str","v":"line 1\n","elided":{"total_bytes":5000000,"shown_chars":7,"budget":"max_string","next":{"path":".stdout","slice":"7..263"}}},"stderr":{"$":"str","v":"boom\n"}}},` +
		`"preview_text":"exit: 1\nstdout: …"}`)
	o, next, err := execObject(execReply(t, raw), false)
	if err != nil {
		t.Fatal(err)
	}
	got, _ := compactJSON(o)
	want := `{"ref":"out:7","uri":"shoal://out/7","ok":false,"exit":1,"ms":12.3,"effects":["proc.spawn"],"stdout":"line 1\n","stderr":"boom\n",` +
		`"cut":[".stdout: 7 characters shown of 5000000 bytes"],"next":"shoal_get {\"target\":\"out:7\",\"path\":\".stdout\",\"slice\":\"-2000..\"} shows the end; add \"grep\":\"RE\" to search it instead (or run: out 7 | grep -n RE)"}`
	if string(got) != want {
		t.Fatalf("execObject:\n got %s\nwant %s", got, want)
	}
	if !strings.HasPrefix(next, "shoal_get ") {
		t.Fatalf("next %q", next)
	}
	// A builtin's value is previewed as its rendered text; typed adds the typed preview.
	raw = json.RawMessage(`{"ref":"out:8","uri":"shoal://out/8","ok":true,"exit":0,"duration_ns":2000000,"preview":{"$":"list","v":[{"$":"int","v":1}]},"preview_text":"1"}`)
	o, _, _ = execObject(execReply(t, raw), true)
	if got, _ := compactJSON(o); string(got) != `{"ref":"out:8","uri":"shoal://out/8","ok":true,"exit":0,"ms":2.0,"preview":"1","value":{"$":"list","v":[{"$":"int","v":1}]}}` {
		t.Fatalf("builtin value: %s", got)
	}
}

// execReply decodes an execution reply as the facade gets it.
func execReply(t *testing.T, raw json.RawMessage) *wire.ExecReply {
	t.Helper()
	var r wire.ExecReply
	if err := json.Unmarshal(raw, &r); err != nil {
		t.Fatal(err)
	}
	return &r
}

func TestFit(t *testing.T) {
	o := newObj().set("ref", "out:1").set("stdout", strings.Repeat("a\"b\n", 4000)).set("stderr", strings.Repeat("é", 100))
	fit(o, 1000)
	if n := size(o); n > 1000 || n < 800 {
		t.Fatalf("fitted to %d bytes", n)
	}
	if o.get("ref") != "out:1" || o.get("cut") == nil || !utf8.ValidString(o.get("stderr").(string)) {
		t.Fatalf("fit: %v", o.vals)
	}
	// Structure only: the value is replaced by a note.
	o = newObj().set("ref", "out:2").set("value", []any{strings.Repeat("x", 50), strings.Repeat("y", 3000)})
	fit(o, 500)
	if size(o) > 500 {
		t.Fatalf("structure not fitted: %d", size(o))
	}
}
