package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"github.com/shoal-sh/shoal/internal/testkernel"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	mcpclient "github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/client/transport"
	"github.com/mark3labs/mcp-go/mcp"

	"github.com/shoal-sh/shoal/sdk/client"
)

// facadeBin is the shoal-mcp binary built once for the tests. The
// end-to-end tests talk to it as an MCP client would: as a subprocess.
var facadeBin string

func TestMain(m *testing.M) {
	// Every facade of these tests, in process or started as a binary,
	// checks its tool results against their output schemas.
	os.Setenv(checkOutputEnv, "1")
	dir, err := os.MkdirTemp("", "shoal-mcp-bin")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	facadeBin = filepath.Join(dir, "shoal-mcp")
	args := []string{"build", "-o", facadeBin}
	if raceEnabled {
		args = append(args, "-race")
	}
	if out, err := exec.Command("go", append(args, ".")...).CombinedOutput(); err != nil {
		fmt.Fprintf(os.Stderr, "build shoal-mcp: %v\n%s", err, out)
		os.RemoveAll(dir)
		os.Exit(1)
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// waitLong bounds every wait in these tests. It is a safety net against a
// hang, never an assertion about speed.
const waitLong = 60 * time.Second

// stateDir is one kernel state directory for a test, short enough for a
// unix socket path. Its cleanup stops any kernel still serving it.
type stateDir struct {
	dir string
}

func newStateDir(t testing.TB) *stateDir {
	t.Helper()
	dir, err := os.MkdirTemp(testkernel.StateParent(), "shl")
	if err != nil {
		t.Fatal(err)
	}
	sd := &stateDir{dir: dir}
	testkernel.AllowTempWrites(t, dir)
	t.Cleanup(func() {
		sd.stopKernel(t)
		os.RemoveAll(dir)
	})
	return sd
}

func (sd *stateDir) socket() string { return filepath.Join(sd.dir, "kernel.sock") }

// dial attaches to the state dir's kernel directly, as the shoal CLI does.
func (sd *stateDir) dial(t testing.TB, principal string, onEvent func(client.Event)) *client.Client {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), waitLong)
	defer cancel()
	c, err := client.Dial(ctx, client.Options{StateDir: sd.dir, Principal: principal, OnEvent: onEvent})
	if err != nil {
		t.Fatalf("dial kernel: %v", err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

type kernelStatus struct {
	PID         int `json:"pid"`
	Connections int `json:"connections"`
}

func (sd *stateDir) status(t testing.TB, c *client.Client) kernelStatus {
	t.Helper()
	var st kernelStatus
	if err := c.Call(context.Background(), "kernel.status", struct{}{}, &st); err != nil {
		t.Fatalf("kernel.status: %v", err)
	}
	return st
}

// stopKernel ends a kernel still serving the state dir: SIGTERM to the pid
// kernel.status names, then waiting for the socket to go.
func (sd *stateDir) stopKernel(t testing.TB) {
	if !socketAnswers(sd.socket()) {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	c, err := client.Dial(ctx, client.Options{StateDir: sd.dir, Principal: "human:test"})
	if err != nil {
		t.Errorf("kernel left running on %s and unreachable: %v", sd.dir, err)
		return
	}
	var st kernelStatus
	err = c.Call(ctx, "kernel.status", struct{}{}, &st)
	c.Close()
	if err != nil || st.PID <= 0 {
		t.Errorf("kernel.status: %v", err)
		return
	}
	if st.PID == os.Getpid() {
		return // an in-process kernel of this test binary; its owner stops it
	}
	_ = syscall.Kill(st.PID, syscall.SIGTERM)
	if !waitFor(30*time.Second, func() bool { return !socketAnswers(sd.socket()) && !processAlive(st.PID) }) {
		_ = syscall.Kill(st.PID, syscall.SIGKILL)
		t.Errorf("kernel %d did not stop on SIGTERM", st.PID)
	}
}

// processAlive reports whether pid runs (a zombie has exited).
func processAlive(pid int) bool { return testkernel.Running(pid) }

// waitFor polls cond until it holds or d passes.
func waitFor(d time.Duration, cond func() bool) bool {
	deadline := time.Now().Add(d)
	for {
		if cond() {
			return true
		}
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// syncBuffer collects a subprocess's stderr for failure reports.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// mcpPeer is an MCP client of a facade, with what it received.
type mcpPeer struct {
	t      testing.TB
	c      *mcpclient.Client
	stderr *syncBuffer
	notes  chan mcp.JSONRPCNotification
	// pending holds updates received while waiting for another URI.
	pending []updatedParams
	rawID   atomic.Int64
	closed  bool
}

// facadeArgs are the flags every test facade gets. The session is main
// unless extra names one, so the tests' direct kernel connections (which
// attach to main, as the CLI does) see what the facade did.
func (sd *stateDir) facadeArgs(principal string, extra ...string) []string {
	args := []string{"--state-dir", sd.dir, "--principal", principal, "--idle-exit", "1m", "--log-level", "info"}
	if !slices.Contains(extra, "--session") {
		args = append(args, "--session", "main")
	}
	return append(args, extra...)
}

// startStdio starts a facade as a subprocess and connects to it over
// stdio, as an MCP host does.
func startStdio(t testing.TB, sd *stateDir, principal string, extra ...string) *mcpPeer {
	t.Helper()
	stderr := &syncBuffer{}
	p, err := connectStdio(sd, principal, stderr, extra...)
	if err != nil {
		t.Fatalf("start facade: %v\nfacade stderr:\n%s", err, stderr.String())
	}
	p.adopt(t)
	return p
}

// connectStdio is startStdio for goroutines, which must not call Fatal.
func connectStdio(sd *stateDir, principal string, stderr *syncBuffer, extra ...string) (*mcpPeer, error) {
	c, err := mcpclient.NewStdioMCPClientWithOptions(facadeBin, nil, sd.facadeArgs(principal, extra...),
		transport.WithCommandStderrWriter(stderr))
	if err != nil {
		return nil, err
	}
	return initialize(c, stderr)
}

func initialize(c *mcpclient.Client, stderr *syncBuffer) (*mcpPeer, error) {
	return initializeWith(c, stderr, nil)
}

// initializeWith is initialize with the request adjusted by edit (the
// client's capabilities, the protocol version).
func initializeWith(c *mcpclient.Client, stderr *syncBuffer, edit func(*mcp.InitializeRequest)) (*mcpPeer, error) {
	p := &mcpPeer{c: c, stderr: stderr, notes: make(chan mcp.JSONRPCNotification, 1024)}
	c.OnNotification(func(n mcp.JSONRPCNotification) {
		select {
		case p.notes <- n:
		default:
		}
	})
	ctx, cancel := context.WithTimeout(context.Background(), waitLong)
	defer cancel()
	// Start wires the notification handlers (the stdio constructor
	// started only the transport). Its context must outlive this call: the
	// HTTP transport's event stream lives on it.
	if err := c.Start(context.Background()); err != nil {
		c.Close()
		return nil, fmt.Errorf("start: %w", err)
	}
	init := mcp.InitializeRequest{}
	init.Params.ClientInfo = mcp.Implementation{Name: "shoal-mcp-test", Version: "1"}
	// The handshake revision: these tests see subscriptions, roots and
	// elicitation as 2025-11-25 clients do (modern_test.go speaks
	// 2026-07-28).
	init.Params.ProtocolVersion = mcp.LATEST_LEGACY_PROTOCOL_VERSION
	if edit != nil {
		edit(&init)
	}
	if _, err := c.Initialize(ctx, init); err != nil {
		c.Close()
		return nil, fmt.Errorf("initialize: %w", err)
	}
	return p, nil
}

// adopt ties the peer to a test: failures report to t, and the peer is
// closed (its facade ended) when the test ends.
func (p *mcpPeer) adopt(t testing.TB) {
	p.t = t
	t.Cleanup(func() {
		p.close()
		if t.Failed() && p.stderr != nil {
			t.Logf("facade stderr:\n%s", p.stderr.String())
		}
	})
}

func (p *mcpPeer) close() {
	if !p.closed {
		p.closed = true
		p.c.Close()
	}
}

func (p *mcpPeer) ctx() (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.Background(), waitLong)
}

// call calls a tool and returns its result, failing the test on a
// protocol error.
func (p *mcpPeer) call(name string, args map[string]any) *mcp.CallToolResult {
	p.t.Helper()
	ctx, cancel := p.ctx()
	defer cancel()
	req := mcp.CallToolRequest{}
	req.Params.Name = name
	req.Params.Arguments = args
	res, err := p.c.CallTool(ctx, req)
	if err != nil {
		p.t.Fatalf("tools/call %s: %v", name, err)
	}
	return res
}

// callOK calls a tool that must succeed and decodes its structuredContent.
func (p *mcpPeer) callOK(name string, args map[string]any) (map[string]any, string) {
	p.t.Helper()
	res := p.call(name, args)
	text := resultText(res)
	if res.IsError {
		p.t.Fatalf("%s %v: isError: %s", name, args, text)
	}
	var m map[string]any
	if err := json.Unmarshal(res.RawStructuredContent, &m); err != nil {
		p.t.Fatalf("%s: structuredContent %s: %v", name, res.RawStructuredContent, err)
	}
	return m, text
}

func resultText(res *mcp.CallToolResult) string {
	var parts []string
	for _, c := range res.Content {
		if tc, ok := c.(mcp.TextContent); ok {
			parts = append(parts, tc.Text)
		}
	}
	return strings.Join(parts, "\n")
}

// raw sends one request and returns the response as it came, so tests see
// fields the library's result types drop (structuredContent of a read).
func (p *mcpPeer) raw(method string, params any) (json.RawMessage, *mcp.JSONRPCErrorDetails) {
	p.t.Helper()
	ctx, cancel := p.ctx()
	defer cancel()
	resp, err := p.c.GetTransport().SendRequest(ctx, transport.JSONRPCRequest{
		JSONRPC: "2.0", ID: mcp.NewRequestId(fmt.Sprintf("raw-%d", p.rawID.Add(1))), Method: method, Params: params})
	if err != nil {
		p.t.Fatalf("%s: %v", method, err)
	}
	return resp.Result, resp.Error
}

// readEnvelope is a resources/read result as the client sees it.
type readEnvelope struct {
	Contents          []readContent   `json:"contents"`
	StructuredContent json.RawMessage `json:"structuredContent,omitempty"`
	Meta              map[string]any  `json:"_meta,omitempty"`
}

// read is a resources/read that must succeed.
func (p *mcpPeer) read(uri string) readEnvelope {
	p.t.Helper()
	res, rerr := p.raw("resources/read", map[string]any{"uri": uri})
	if rerr != nil {
		p.t.Fatalf("read %s: %d %s", uri, rerr.Code, rerr.Message)
	}
	var env readEnvelope
	if err := json.Unmarshal(res, &env); err != nil {
		p.t.Fatalf("read %s: %v in %s", uri, err, res)
	}
	if len(env.Contents) != 1 {
		p.t.Fatalf("read %s: %d contents, want 1: %s", uri, len(env.Contents), res)
	}
	return env
}

// nextUpdate waits for the next notifications/resources/updated whose uri
// is uri, keeping those of other URIs for later.
func (p *mcpPeer) nextUpdate(uri string) updatedParams {
	p.t.Helper()
	for i, up := range p.pending {
		if up.URI == uri {
			p.pending = slices.Delete(p.pending, i, i+1)
			return up
		}
	}
	deadline := time.After(waitLong)
	for {
		select {
		case n := <-p.notes:
			if n.Method != mcp.MethodNotificationResourceUpdated {
				continue
			}
			up := decodeUpdate(p.t, n)
			if up.URI == uri {
				return up
			}
			p.pending = append(p.pending, up)
		case <-deadline:
			p.t.Fatalf("no notifications/resources/updated for %s\nfacade stderr:\n%s", uri, p.stderr.String())
		}
	}
}

func decodeUpdate(t testing.TB, n mcp.JSONRPCNotification) updatedParams {
	t.Helper()
	b, err := json.Marshal(n.Params)
	if err != nil {
		t.Fatal(err)
	}
	var up updatedParams
	if err := json.Unmarshal(b, &up); err != nil {
		t.Fatalf("updated params %s: %v", b, err)
	}
	return up
}

// drainUpdates returns the resources/updated notifications received so far.
func (p *mcpPeer) drainUpdates() []updatedParams {
	out := p.pending
	p.pending = nil
	for {
		select {
		case n := <-p.notes:
			if n.Method == mcp.MethodNotificationResourceUpdated {
				out = append(out, decodeUpdate(p.t, n))
			}
		default:
			return out
		}
	}
}

// httpFacade is a facade serving streamable HTTP as a subprocess.
type httpFacade struct {
	cmd    *exec.Cmd
	url    string
	token  string // the bearer token, read from the state dir's http.token
	stderr *syncBuffer
	done   chan error
}

// startHTTP starts a facade with --http on a free loopback port and waits
// for it to say where it listens.
func startHTTP(t testing.TB, sd *stateDir, principal string, extra ...string) *httpFacade {
	t.Helper()
	args := sd.facadeArgs(principal, append([]string{"--http", "127.0.0.1:0"}, extra...)...)
	cmd := exec.Command(facadeBin, args...)
	pr, pw := io.Pipe()
	buf := &syncBuffer{}
	cmd.Stderr = io.MultiWriter(pw, buf)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	h := &httpFacade{cmd: cmd, stderr: buf, done: make(chan error, 1)}
	go func() { h.done <- cmd.Wait(); pw.Close() }()
	urls := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(pr)
		for sc.Scan() {
			line := sc.Text()
			if i := strings.Index(line, "serving MCP on "); i >= 0 {
				rest := line[i+len("serving MCP on "):]
				urls <- strings.Fields(rest)[0]
				break
			}
		}
		io.Copy(io.Discard, pr)
	}()
	t.Cleanup(func() {
		h.stop(t)
		if t.Failed() {
			t.Logf("facade stderr:\n%s", buf.String())
		}
	})
	select {
	case h.url = <-urls:
		tok, err := os.ReadFile(filepath.Join(sd.dir, "http.token"))
		if err != nil {
			t.Fatalf("the HTTP facade made no token: %v", err)
		}
		h.token = strings.TrimSpace(string(tok))
	case err := <-h.done:
		h.done <- err
		t.Fatalf("facade exited: %v\n%s", err, buf.String())
	case <-time.After(waitLong):
		t.Fatalf("facade did not start serving HTTP\n%s", buf.String())
	}
	return h
}

// stop ends the facade with SIGTERM, as a supervisor would.
func (h *httpFacade) stop(t testing.TB) {
	if h.cmd.ProcessState != nil {
		return
	}
	_ = h.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case err := <-h.done:
		h.done <- err
		if err != nil {
			t.Errorf("facade exit after SIGTERM: %v", err)
		}
	case <-time.After(waitLong):
		_ = h.cmd.Process.Kill()
		t.Errorf("facade did not exit on SIGTERM")
	}
}

// bearer adds the Authorization header to every request, DELETE included
// (the client's own header option leaves DELETE out).
type bearer struct {
	token string
	next  http.RoundTripper
}

func (b bearer) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+b.token)
	return b.next.RoundTrip(r)
}

// connect opens an MCP session on the HTTP facade with an event stream
// for notifications.
func (h *httpFacade) connect(t testing.TB) *mcpPeer {
	t.Helper()
	//lint:ignore SA1019 the facade serves the standalone GET stream of the protocol versions current clients speak; this test drives it
	c, err := mcpclient.NewStreamableHttpClient(h.url, transport.WithContinuousListening(),
		transport.WithHTTPBasicClient(&http.Client{Transport: bearer{h.token, http.DefaultTransport}}))
	if err != nil {
		t.Fatal(err)
	}
	p, err := initialize(c, h.stderr)
	if err != nil {
		t.Fatal(err)
	}
	p.adopt(t)
	return p
}
