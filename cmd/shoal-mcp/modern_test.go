package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/shoal-sh/shoal/internal/testkernel"
)

// connectModern starts a facade in dir and connects the official Go SDK
// to it at protocol 2026-07-28; the session is closed when the test ends.
func connectModern(t *testing.T, sd *stateDir, dir string, opts *sdk.ClientOptions) *sdk.ClientSession {
	t.Helper()
	cmd := exec.Command(facadeBin, "--state-dir", sd.dir, "--principal", "agent:sdk", "--idle-exit", "1m")
	cmd.Dir = dir
	stderr := &syncBuffer{}
	cmd.Stderr = stderr
	c := sdk.NewClient(&sdk.Implementation{Name: "shoal-modern-test", Version: "1"}, opts)
	ctx, cancel := context.WithTimeout(context.Background(), waitLong)
	defer cancel()
	cs, err := c.Connect(ctx, &sdk.CommandTransport{Command: cmd}, &sdk.ClientSessionOptions{ProtocolVersion: "2026-07-28"})
	if err != nil {
		t.Fatalf("connect: %v\n%s", err, stderr.String())
	}
	t.Cleanup(func() {
		cs.Close()
		if t.Failed() {
			t.Logf("facade stderr:\n%s", stderr.String())
		}
	})
	return cs
}

// connectModernHTTP connects the official Go SDK at 2026-07-28 to an
// HTTP facade, with its bearer token; the session is closed when the test
// ends.
func connectModernHTTP(t *testing.T, h *httpFacade, opts *sdk.ClientOptions) *sdk.ClientSession {
	t.Helper()
	c := sdk.NewClient(&sdk.Implementation{Name: "shoal-modern-http", Version: "1"}, opts)
	ctx, cancel := context.WithTimeout(context.Background(), waitLong)
	defer cancel()
	cs, err := c.Connect(ctx, &sdk.StreamableClientTransport{Endpoint: h.url, MaxRetries: -1,
		HTTPClient: &http.Client{Transport: bearer{h.token, http.DefaultTransport}}},
		&sdk.ClientSessionOptions{ProtocolVersion: "2026-07-28"})
	if err != nil {
		t.Fatalf("connect over HTTP: %v", err)
	}
	t.Cleanup(func() { cs.Close() })
	return cs
}

// TestModernApproval: a 2026-07-28 client has no server-to-client
// requests; shoal_apply of a pending plan answers input_required with the
// approval form, the SDK asks the person (its elicitation handler) and
// calls again with the answer, and the approved plan runs. Over stdio and
// over stateless HTTP.
func TestModernApproval(t *testing.T) {
	for _, transport := range []string{"stdio", "http"} {
		t.Run(transport, func(t *testing.T) { modernApproval(t, transport) })
	}
}

func modernApproval(t *testing.T, transport string) {
	sd := newStateDir(t)
	var shown []string
	opts := &sdk.ClientOptions{
		ElicitationHandler: func(_ context.Context, req *sdk.ElicitRequest) (*sdk.ElicitResult, error) {
			shown = append(shown, req.Params.Message)
			return &sdk.ElicitResult{Action: "accept", Content: map[string]any{"decision": "approve", "reason": "ok"}}, nil
		},
	}
	var cs *sdk.ClientSession
	if transport == "http" {
		cs = connectModernHTTP(t, startHTTP(t, sd, "agent:http"), opts)
	} else {
		cs = connectModern(t, sd, t.TempDir(), opts)
	}
	ctx, cancel := context.WithTimeout(context.Background(), waitLong)
	defer cancel()
	call := func(name string, args map[string]any) map[string]any {
		t.Helper()
		res, err := cs.CallTool(ctx, &sdk.CallToolParams{Name: name, Arguments: args})
		if err != nil || res.IsError {
			t.Fatalf("%s: %v %+v", name, err, res)
		}
		b, _ := json.Marshal(res.StructuredContent)
		var m map[string]any
		_ = json.Unmarshal(b, &m)
		return m
	}
	// Outside the session's writable paths, so the plan asks.
	build := filepath.Join(testkernel.ShortDir(t), "build")
	os.MkdirAll(build, 0o755)
	plan := call("shoal_plan", map[string]any{"source": "rm -rf " + build})
	call("shoal_apply", map[string]any{"plan": plan["ref"]})
	if len(shown) != 1 || !strings.Contains(shown[0], "rm -rf "+build) {
		t.Fatalf("the person saw %q", shown)
	}
	if m := call("shoal_exec", map[string]any{"source": "test -e " + build + " && echo there || echo gone"}); !strings.Contains(fmt.Sprint(m), "gone") {
		t.Errorf("the approved plan did not run: %v", m)
	}
}

// TestModernGoSDK: the official Go SDK (v1.8.0) speaking the stateless
// 2026-07-28 revision gets answers without falling back to the handshake:
// server/discover, tools, resources, completion, and a resource
// subscription over subscriptions/listen.
func TestModernGoSDK(t *testing.T) {
	sd := newStateDir(t)
	dir := t.TempDir()
	updated := make(chan string, 16)
	cs := connectModern(t, sd, dir, &sdk.ClientOptions{
		ResourceUpdatedHandler: func(_ context.Context, req *sdk.ResourceUpdatedNotificationRequest) {
			select {
			case updated <- req.Params.URI:
			default:
			}
		},
	})
	ctx, cancel := context.WithTimeout(context.Background(), waitLong)
	defer cancel()
	init := cs.InitializeResult()
	if init.ProtocolVersion != "2026-07-28" || init.ServerInfo == nil || init.ServerInfo.Name != "shoal" {
		t.Fatalf("negotiated %q with %+v; want 2026-07-28 through server/discover", init.ProtocolVersion, init.ServerInfo)
	}
	//lint:ignore SA1019 the facade still offers logging in the deprecation window; this checks it does
	if init.Capabilities.Logging == nil || init.Capabilities.Completions == nil || init.Capabilities.Resources == nil || !init.Capabilities.Resources.Subscribe {
		t.Errorf("capabilities %+v", init.Capabilities)
	}

	res, err := cs.CallTool(ctx, &sdk.CallToolParams{Name: "shoal_exec", Arguments: map[string]any{"source": "pwd"}})
	if err != nil || res.IsError {
		t.Fatalf("shoal_exec: %v %+v", err, res)
	}
	if b, _ := json.Marshal(res.StructuredContent); !strings.Contains(string(b), dir) {
		t.Errorf("a stateless client's session runs in %s; want its launch dir %s", b, dir)
	}
	tools, err := cs.ListTools(ctx, nil)
	if err != nil || len(tools.Tools) == 0 {
		t.Fatalf("tools/list: %v", err)
	}
	read, err := cs.ReadResource(ctx, &sdk.ReadResourceParams{URI: "shoal://session/cwd"})
	if err != nil || len(read.Contents) == 0 || !strings.Contains(read.Contents[0].Text, dir) {
		t.Fatalf("resources/read: %v %+v", err, read)
	}
	list, err := cs.ListResources(ctx, nil)
	if err != nil || !slices.ContainsFunc(list.Resources, func(r *sdk.Resource) bool { return r.URI == "shoal://session/cwd" }) {
		t.Fatalf("resources/list: %v", err)
	}
	views, err := cs.Complete(ctx, &sdk.CompleteParams{Ref: &sdk.CompleteReference{Type: "ref/resource", URI: "shoal://session/{view}"},
		Argument: sdk.CompleteParamsArgument{Name: "view", Value: "e"}})
	if err != nil || strings.Join(views.Completion.Values, ",") != "env" {
		t.Fatalf("complete view e: %v %+v", err, views)
	}

	// A subscription is a subscriptions/listen stream that stays open.
	subCtx, stopSub := context.WithCancel(ctx)
	subDone := make(chan error, 1)
	go func() { subDone <- cs.Subscribe(subCtx, &sdk.SubscribeParams{URI: "shoal://events/user.modern"}) }()
	deadline := time.Now().Add(waitLong)
	for published := false; !published; {
		if _, err := cs.CallTool(ctx, &sdk.CallToolParams{Name: "shoal_exec", Arguments: map[string]any{"source": `emit user.modern '{"n":1}'`}}); err != nil {
			t.Fatal(err)
		}
		select {
		case uri := <-updated:
			if uri != "shoal://events/user.modern" {
				t.Errorf("update for %s", uri)
			}
			published = true
		case <-time.After(100 * time.Millisecond):
			// The stream may not be open yet: publish again.
		}
		if time.Now().After(deadline) {
			t.Fatal("no notifications/resources/updated on the subscriptions/listen stream")
		}
	}
	stopSub()
	<-subDone
}

// TestModernRoots: a 2026-07-28 client that declares roots is asked for
// them by a round trip (input_required with roots/list) on its first
// tool call, and its session starts in its first root, not where the host
// launched the facade.
func TestModernRoots(t *testing.T) {
	sd := newStateDir(t)
	launch, root := t.TempDir(), t.TempDir()
	c := sdk.NewClient(&sdk.Implementation{Name: "shoal-roots-test", Version: "1"}, nil)
	//lint:ignore SA1019 roots stay supported in the deprecation window; this test is about them
	c.AddRoots(&sdk.Root{URI: "file://" + root, Name: "project"})
	cmd := exec.Command(facadeBin, "--state-dir", sd.dir, "--principal", "agent:sdk", "--idle-exit", "1m")
	cmd.Dir = launch
	stderr := &syncBuffer{}
	cmd.Stderr = stderr
	ctx, cancel := context.WithTimeout(context.Background(), waitLong)
	defer cancel()
	cs, err := c.Connect(ctx, &sdk.CommandTransport{Command: cmd}, &sdk.ClientSessionOptions{ProtocolVersion: "2026-07-28"})
	if err != nil {
		t.Fatalf("connect: %v\n%s", err, stderr.String())
	}
	defer cs.Close()
	if _, err := cs.ListTools(ctx, nil); err != nil {
		t.Fatal(err)
	}
	res, err := cs.CallTool(ctx, &sdk.CallToolParams{Name: "shoal_exec", Arguments: map[string]any{"source": "pwd"}})
	if err != nil || res.IsError {
		t.Fatalf("shoal_exec: %v %+v\n%s", err, res, stderr.String())
	}
	if b, _ := json.Marshal(res.StructuredContent); !strings.Contains(string(b), root) {
		t.Errorf("the session runs in %s; want the client's root %s (launched in %s)", b, root, launch)
	}
}

// TestModernHTTP: the official Go SDK speaking 2026-07-28 over streamable
// HTTP, with the bearer token, gets server/discover and every request
// answered without falling back to the handshake and without a protocol
// session; a subscription is a subscriptions/listen POST whose event
// stream stays open. Without the token nothing is answered.
func TestModernHTTP(t *testing.T) {
	sd := newStateDir(t)
	h := startHTTP(t, sd, "agent:http")
	updates, logs := make(chan string, 16), make(chan string, 16)
	connect := func(token string) (*sdk.ClientSession, error) {
		c := sdk.NewClient(&sdk.Implementation{Name: "shoal-modern-http", Version: "1"}, &sdk.ClientOptions{
			ResourceUpdatedHandler: func(_ context.Context, req *sdk.ResourceUpdatedNotificationRequest) {
				select {
				case updates <- req.Params.URI:
				default:
				}
			},
			//lint:ignore SA1019 logging stays supported in the deprecation window; this test is about it
			LoggingMessageHandler: func(_ context.Context, req *sdk.LoggingMessageRequest) {
				select {
				case logs <- fmt.Sprintf("%s %s %v", req.Params.Level, req.Params.Logger, req.Params.Data):
				default:
				}
			},
		})
		ctx, cancel := context.WithTimeout(context.Background(), waitLong)
		defer cancel()
		return c.Connect(ctx, &sdk.StreamableClientTransport{Endpoint: h.url, MaxRetries: -1,
			HTTPClient: &http.Client{Transport: bearer{token, http.DefaultTransport}}},
			&sdk.ClientSessionOptions{ProtocolVersion: "2026-07-28"})
	}
	if cs, err := connect(strings.Repeat("0", 64)); err == nil {
		cs.Close()
		t.Fatal("a client with a wrong token connected")
	}
	cs, err := connect(h.token)
	if err != nil {
		t.Fatalf("connect: %v", err)
	}
	defer cs.Close()
	ctx, cancel := context.WithTimeout(context.Background(), waitLong)
	defer cancel()
	init := cs.InitializeResult()
	if init.ProtocolVersion != "2026-07-28" || init.ServerInfo == nil || init.ServerInfo.Name != "shoal" {
		t.Fatalf("negotiated %q with %+v; want 2026-07-28 through server/discover", init.ProtocolVersion, init.ServerInfo)
	}
	if cs.ID() != "" {
		t.Errorf("a stateless client got the protocol session %q", cs.ID())
	}
	res, err := cs.CallTool(ctx, &sdk.CallToolParams{Name: "shoal_exec", Arguments: map[string]any{"source": "echo over-http"}})
	if err != nil || res.IsError {
		t.Fatalf("shoal_exec: %v %+v", err, res)
	}
	if b, _ := json.Marshal(res.StructuredContent); !strings.Contains(string(b), "over-http") {
		t.Errorf("shoal_exec over stateless HTTP: %s", b)
	}
	if tools, err := cs.ListTools(ctx, nil); err != nil || len(tools.Tools) == 0 {
		t.Fatalf("tools/list: %v", err)
	}
	if read, err := cs.ReadResource(ctx, &sdk.ReadResourceParams{URI: "shoal://session/cwd"}); err != nil || len(read.Contents) == 0 {
		t.Fatalf("resources/read: %v %+v", err, read)
	}
	views, err := cs.Complete(ctx, &sdk.CompleteParams{Ref: &sdk.CompleteReference{Type: "ref/resource", URI: "shoal://session/{view}"},
		Argument: sdk.CompleteParamsArgument{Name: "view", Value: "c"}})
	if err != nil || strings.Join(views.Completion.Values, ",") != "cwd" {
		t.Fatalf("complete view c: %v %+v", err, views)
	}
	if _, err := cs.CallTool(ctx, &sdk.CallToolParams{Name: "shoal_nope", Arguments: map[string]any{}}); err == nil {
		t.Error("an unknown tool was not an error")
	}

	// A confinement notice comes on the call's own event stream, before
	// its answer, at the level the request asks for in _meta.
	token := filepath.Join(sd.dir, "token")
	res, err = cs.CallTool(ctx, &sdk.CallToolParams{Name: "shoal_exec", Arguments: map[string]any{"source": "read x < " + token},
		Meta: sdk.Meta{"io.modelcontextprotocol/logLevel": "warning"}})
	if err != nil {
		t.Fatal(err)
	}
	if b, _ := json.Marshal(res.StructuredContent); strings.Contains(string(b), `"confined"`) {
		select {
		case msg := <-logs:
			if !strings.HasPrefix(msg, "warning shoal-kernel out:") || !strings.Contains(msg, "refused: "+token) {
				t.Errorf("confinement notice %q", msg)
			}
		case <-time.After(waitLong):
			t.Error("no notifications/message for a confined run over stateless HTTP")
		}
	} else {
		t.Logf("sessions are not confined here, so no confinement notice: %s", b)
	}

	subCtx, stopSub := context.WithCancel(ctx)
	subDone := make(chan error, 1)
	go func() { subDone <- cs.Subscribe(subCtx, &sdk.SubscribeParams{URI: "shoal://events/user.http"}) }()
	pub := sd.dial(t, "human:test", nil)
	deadline := time.Now().Add(waitLong)
	for got := false; !got; {
		if _, err := pub.Publish(ctx, "user.http", map[string]any{"n": 1}); err != nil {
			t.Fatal(err)
		}
		select {
		case uri := <-updates:
			if uri != "shoal://events/user.http" {
				t.Errorf("update for %s", uri)
			}
			got = true
		case <-time.After(100 * time.Millisecond):
			// The listen stream may not be open yet: publish again.
		}
		if time.Now().After(deadline) {
			t.Fatal("no notifications/resources/updated on the subscriptions/listen stream")
		}
	}
	stopSub()
	<-subDone
}

// TestModernHTTPGuards: the transport rules of 2026-07-28 — the version
// in the header and in _meta must agree, Mcp-Method and Mcp-Name must
// match the body, GET and DELETE are not part of it, an unknown method
// is a 404 — and the bearer token is checked before any of them.
func TestModernHTTPGuards(t *testing.T) {
	sd := newStateDir(t)
	h := startHTTP(t, sd, "agent:http")
	const meta = `"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientInfo":{"name":"curl","version":"1"},"io.modelcontextprotocol/clientCapabilities":{}}`
	post := func(auth string, headers map[string]string, body string) (int, string, http.Header) {
		t.Helper()
		req, err := http.NewRequest("POST", h.url, strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		if auth != "" {
			req.Header.Set("Authorization", auth)
		}
		for k, v := range headers {
			req.Header.Set(k, v)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b), resp.Header
	}
	ok := "Bearer " + h.token
	modern := map[string]string{"Mcp-Protocol-Version": "2026-07-28", "Mcp-Method": "server/discover"}
	discover := `{"jsonrpc":"2.0","id":1,"method":"server/discover","params":{` + meta + `}}`
	marker := filepath.Join(t.TempDir(), "ran")
	call := `{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"shoal_exec","arguments":{"source":"touch ` + marker + `"},` + meta + `}}`
	callHeaders := map[string]string{"Mcp-Protocol-Version": "2026-07-28", "Mcp-Method": "tools/call", "Mcp-Name": "shoal_exec"}

	for _, auth := range []string{"", "Bearer " + strings.Repeat("0", 64)} {
		if code, body, _ := post(auth, callHeaders, call); code != http.StatusUnauthorized {
			t.Errorf("stateless tools/call with %q: %d %s", auth, code, body)
		}
	}
	if _, err := os.Stat(marker); !os.IsNotExist(err) {
		t.Fatal("a stateless request without the token ran")
	}
	code, body, hdr := post(ok, modern, discover)
	if code != http.StatusOK || !strings.Contains(body, `"supportedVersions"`) || !strings.Contains(body, `"2026-07-28"`) || hdr.Get(headerSession) != "" {
		t.Fatalf("server/discover: %d %s (session %q)", code, body, hdr.Get(headerSession))
	}
	if code, body, _ := post(ok, callHeaders, call); code != http.StatusOK || !strings.Contains(body, `"ok":true`) {
		t.Fatalf("stateless tools/call: %d %s", code, body)
	}
	if _, err := os.Stat(marker); err != nil {
		t.Errorf("the stateless call did not run: %v", err)
	}
	for _, tc := range []struct {
		name    string
		headers map[string]string
		body    string
		status  int
		code    string
	}{
		{"no version header", map[string]string{"Mcp-Method": "server/discover"}, discover, 400, "-32020"},
		{"versions disagree", map[string]string{"Mcp-Protocol-Version": "2025-11-25", "Mcp-Method": "server/discover"}, discover, 400, "-32020"},
		{"wrong Mcp-Method", map[string]string{"Mcp-Protocol-Version": "2026-07-28", "Mcp-Method": "tools/list"}, discover, 400, "-32020"},
		{"wrong Mcp-Name", map[string]string{"Mcp-Protocol-Version": "2026-07-28", "Mcp-Method": "tools/call", "Mcp-Name": "shoal_get"}, call, 400, "-32020"},
		{"no _meta version", modern, `{"jsonrpc":"2.0","id":3,"method":"server/discover","params":{}}`, 400, "-32602"},
		{"Last-Event-ID", map[string]string{"Mcp-Protocol-Version": "2026-07-28", "Mcp-Method": "server/discover", "Last-Event-ID": "1"}, discover, 400, "-32020"},
		{"unknown method", map[string]string{"Mcp-Protocol-Version": "2026-07-28", "Mcp-Method": "frob/nicate"}, `{"jsonrpc":"2.0","id":4,"method":"frob/nicate","params":{` + meta + `}}`, 404, "-32601"},
		{"a batch", modern, "[" + discover + "]", 400, "-32600"},
	} {
		code, body, _ := post(ok, tc.headers, tc.body)
		if code != tc.status || !strings.Contains(body, `"code":`+tc.code) {
			t.Errorf("%s: %d %s; want %d with code %s", tc.name, code, body, tc.status, tc.code)
		}
	}
	for _, method := range []string{"GET", "DELETE"} {
		req, _ := http.NewRequest(method, h.url, nil)
		req.Header.Set("Authorization", ok)
		req.Header.Set("Accept", "text/event-stream")
		req.Header.Set("Mcp-Protocol-Version", "2026-07-28")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusMethodNotAllowed || resp.Header.Get("Allow") != "POST" {
			t.Errorf("%s at 2026-07-28: %d Allow %q", method, resp.StatusCode, resp.Header.Get("Allow"))
		}
	}
}
