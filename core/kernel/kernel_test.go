package kernel_test

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"net"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/shoal-sh/shoal/core"
	"github.com/shoal-sh/shoal/core/kernel"
	"github.com/shoal-sh/shoal/core/rpc"
	"github.com/shoal-sh/shoal/core/uri"
	"github.com/shoal-sh/shoal/core/value"
	"github.com/shoal-sh/shoal/internal/testkernel"
	"github.com/shoal-sh/shoal/sdk/client"
)

// tableProvider serves shoal://fake/{name}: a small typed table.
type tableProvider struct{}

func (tableProvider) Family() string { return "fake" }
func (tableProvider) Templates() []core.Template {
	return []core.Template{{URITemplate: "shoal://fake/{name}{?path,slice,format}", Name: "fake"}}
}
func (tableProvider) List(context.Context, *core.Caller) ([]core.Resource, error) {
	return []core.Resource{{URI: "shoal://fake", Name: "fake", Root: true}}, nil
}
func (tableProvider) Read(_ context.Context, c *core.Caller, u *uri.URI) (*core.Content, error) {
	if len(u.Segments) == 0 {
		return &core.Content{Record: map[string]any{"session": c.Session, "principal": c.Principal}}, nil
	}
	t := &value.Table{Cols: []string{"name", "size"}}
	for i := 0; i < 50; i++ {
		t.Rows = append(t.Rows, []value.Value{value.Str("f" + string(rune('a'+i%26))), value.Int(i)})
	}
	return &core.Content{Value: t, Ref: "fake:" + u.Segments[0]}, nil
}

func shortDir(t testing.TB) string { return testkernel.ShortDir(t) }

type running struct {
	k    *kernel.Kernel
	dir  string
	stop func()
}

// start serves a kernel with only the fake provider.
func start(t testing.TB, dir string) *running {
	t.Helper()
	k, err := kernel.New(kernel.Options{StateDir: dir}, tableProvider{})
	if err != nil {
		t.Fatal(err)
	}
	return &running{k: k, dir: dir, stop: testkernel.Serve(t, k)}
}

func dial(t testing.TB, dir string, o client.Options) *client.Client {
	t.Helper()
	return testkernel.Attach(t, dir, o)
}

// raw sends one frame on a fresh connection and returns the answer.
func raw(t *testing.T, sock string, frames ...string) []map[string]any {
	t.Helper()
	c, err := net.Dial("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	br := bufio.NewReader(c)
	var out []map[string]any
	for _, f := range frames {
		if _, err := c.Write([]byte(f + "\n")); err != nil {
			t.Fatal(err)
		}
		line, err := br.ReadBytes('\n')
		if err != nil {
			t.Fatalf("after %s: %v", f, err)
		}
		var m map[string]any
		if err := json.Unmarshal(line, &m); err != nil {
			t.Fatalf("answer %s: %v", line, err)
		}
		out = append(out, m)
	}
	return out
}

func errCode(m map[string]any) int {
	e, _ := m["error"].(map[string]any)
	if e == nil {
		return 0
	}
	return int(e["code"].(float64))
}

func TestTokenAndAttach(t *testing.T) {
	r := start(t, shortDir(t))
	tok := r.k.Token()
	sock := r.k.Socket()
	for _, f := range []string{"token", "operator.token", "kernel.sock"} {
		fi, err := os.Stat(filepath.Join(r.dir, f))
		if err != nil {
			t.Fatal(err)
		}
		if fi.Mode().Perm() != 0o600 {
			t.Errorf("%s mode %v; want 0600", f, fi.Mode().Perm())
		}
	}
	ans := raw(t, sock,
		`{"jsonrpc":"2.0","id":1,"method":"events.read","params":{"channel":"journal"}}`,
		`{"jsonrpc":"2.0","id":2,"method":"session.attach","params":{"token":"wrong"}}`,
		`{"jsonrpc":"2.0","id":3,"method":"session.attach","params":{}}`,
		`{"jsonrpc":"2.0","id":4,"method":"no.such"}`,
		`{"jsonrpc":"2.0","id":5,"method":"session.attach","params":{"token":"`+tok+`","principal":"agent:t"}}`,
		`{"jsonrpc":"2.0","id":6,"method":"no.such"}`,
		`{"jsonrpc":"2.0","id":7,"method":"events.read","params":{"channel":7}}`,
		`{"jsonrpc":"2.0","id":8,"method":"events.read","params":{"channel":"journal","bogus":1}}`,
		`not json`,
		`{"jsonrpc":"2.0","id":9,"method":"session.attach","params":{"token":"`+tok+`","principal":"no colon"}}`,
	)
	want := []int{int(rpc.NotAttached), int(rpc.Unauthorized), int(rpc.Unauthorized), int(rpc.MethodNotFound), 0,
		int(rpc.MethodNotFound), int(rpc.InvalidParams), int(rpc.InvalidParams), int(rpc.ParseError), int(rpc.AlreadyAttached)}
	for i, m := range ans {
		if got := errCode(m); got != want[i] {
			t.Errorf("frame %d: code %d; want %d (%v)", i, got, want[i], m)
		}
	}
	bad := raw(t, sock, `{"jsonrpc":"2.0","id":1,"method":"session.attach","params":{"token":"`+tok+`","principal":"no colon"}}`)
	if got := errCode(bad[0]); got != int(rpc.InvalidParams) {
		t.Errorf("principal without a kind: code %d; want %d", got, rpc.InvalidParams)
	}
	res := ans[4]["result"].(map[string]any)
	if res["session"] != "main" || res["principal"] != "agent:t" {
		t.Errorf("attach answered %v", res)
	}
	chans := res["channels"].([]any)
	if len(chans) != 4 || chans[0] != "journal" || chans[3] != "session.transcript" {
		t.Errorf("channels %v", chans)
	}
	if name := ans[0]["error"].(map[string]any)["data"].(map[string]any)["name"]; name != "NOT_ATTACHED" {
		t.Errorf("error data name %v", name)
	}
}

func TestPublishRules(t *testing.T) {
	r := start(t, shortDir(t))
	c := dial(t, r.dir, client.Options{Principal: "agent:a"})
	ctx := context.Background()
	for _, ch := range []string{"journal", "approval", "render", "session.transcript", "task.1", "task.x", "user", "user.", "random"} {
		_, err := c.Publish(ctx, ch, map[string]int{"n": 1})
		if client.Code(err) != int(rpc.InvalidParams) {
			t.Errorf("publish to %q: %v; want -32602", ch, err)
		}
	}
	p, err := c.Publish(ctx, "user.build", map[string]int{"n": 1})
	if err != nil || p.Seq != 0 {
		t.Fatalf("publish user.build: %+v %v", p, err)
	}
	p, err = c.Publish(ctx, "user.build", map[string]int{"n": 2})
	if err != nil || p.Seq != 1 {
		t.Fatalf("second publish: %+v %v", p, err)
	}
	zero := uint64(0)
	page, err := c.Events(ctx, "user.build", &zero, 0)
	if err != nil || len(page.Events) != 1 || page.Events[0].Seq != 1 {
		t.Fatalf("read since 0: %+v %v", page, err)
	}
	page, err = c.Events(ctx, "user.nothing", nil, 0)
	if err != nil || len(page.Events) != 0 || page.LatestSeq != nil {
		t.Fatalf("unknown channel: %+v %v", page, err)
	}
}

func TestSubscribeFramesAndSharedSession(t *testing.T) {
	r := start(t, shortDir(t))
	var mu sync.Mutex
	var got []client.Event
	arrived := make(chan struct{}, 16)
	sub := dial(t, r.dir, client.Options{Principal: "agent:sub", OnEvent: func(ev client.Event) {
		mu.Lock()
		got = append(got, ev)
		mu.Unlock()
		arrived <- struct{}{}
	}})
	ctx := context.Background()
	if _, err := sub.Subscribe(ctx, "user.x"); err != nil {
		t.Fatal(err)
	}
	if _, err := sub.SubscribeURI(ctx, "shoal://fake/1"); client.Code(err) != int(rpc.InvalidParams) {
		t.Fatalf("subscribe to a non-subscribable URI: %v", err)
	}
	pub := dial(t, r.dir, client.Options{Principal: "agent:pub"})
	for i := 0; i < 3; i++ {
		if _, err := pub.Publish(ctx, "user.x", map[string]int{"i": i}); err != nil {
			t.Fatal(err)
		}
	}
	for i := 0; i < 3; i++ {
		select {
		case <-arrived:
		case <-time.After(10 * time.Second):
			t.Fatal("event frame never arrived")
		}
	}
	mu.Lock()
	for i, ev := range got {
		if ev.Channel != "user.x" || ev.Seq != uint64(i) || ev.TS == 0 || string(ev.Payload) != `{"i":`+string(rune('0'+i))+`}` {
			t.Errorf("frame %d = %+v", i, ev)
		}
	}
	mu.Unlock()
	if err := sub.Unsubscribe(ctx, "user.x"); err != nil {
		t.Fatal(err)
	}
	if _, err := pub.Publish(ctx, "user.x", map[string]int{"i": 9}); err != nil {
		t.Fatal(err)
	}
	// A round trip on the subscriber's connection orders after any frame
	// the kernel would still have sent it.
	if _, err := sub.Events(ctx, "user.x", nil, 1); err != nil {
		t.Fatal(err)
	}
	time.Sleep(50 * time.Millisecond)
	mu.Lock()
	if len(got) != 3 {
		t.Errorf("got %d frames after unsubscribe; want 3", len(got))
	}
	mu.Unlock()
}

func TestReadThroughRouter(t *testing.T) {
	r := start(t, shortDir(t))
	c := dial(t, r.dir, client.Options{Principal: "agent:r", Session: "s1"})
	ctx := context.Background()
	res, err := c.Read(ctx, "shoal://fake/t?path=[3].size")
	if err != nil {
		t.Fatal(err)
	}
	if string(res.StructuredContent) != `{"$":"int","v":3}` || res.Contents[0].MimeType != "application/json" || res.Contents[0].URI != "shoal://fake/t?path=[3].size" {
		t.Errorf("read = %s %+v", res.StructuredContent, res.Contents)
	}
	res, err = c.Read(ctx, "shoal://fake/t?path=.name&slice=0..2&format=render")
	if err != nil || res.Contents[0].MimeType != "text/plain" {
		t.Fatalf("render: %+v %v", res, err)
	}
	if _, err := c.Read(ctx, "shoal://fake/t?path=[3].nope"); client.Code(err) != int(rpc.BadPath) {
		t.Errorf("bad field: %v", err)
	}
	if _, err := c.Read(ctx, "shoal://fake/t?slice=5..2"); client.Code(err) != int(rpc.BadSlice) {
		t.Errorf("bad slice: %v", err)
	}
	// A tail slice counts from the end.
	res, err = c.Read(ctx, "shoal://fake/t?path=.size&slice=-2..")
	if err != nil || string(res.StructuredContent) != `{"$":"list","v":[{"$":"int","v":48},{"$":"int","v":49}]}` {
		t.Errorf("tail slice: %s %v", res.StructuredContent, err)
	}
	// grep searches rows; the slice pages the matches.
	res, err = c.Read(ctx, "shoal://fake/t?grep=%5Efz%09&slice=-1..")
	if err != nil || !strings.Contains(string(res.StructuredContent), `"total":{"$":"int","v":1}`) ||
		!strings.Contains(string(res.StructuredContent), `{"$":"int","v":25}`) {
		t.Errorf("grep: %s %v", res.StructuredContent, err)
	}
	if _, err := c.Read(ctx, "shoal://fake/t?grep=("); client.Code(err) != int(rpc.InvalidParams) {
		t.Errorf("bad grep: %v", err)
	}
	if _, err := c.Read(ctx, "shoal://fake/t?context=2"); client.Code(err) != int(rpc.InvalidParams) {
		t.Errorf("context without grep: %v", err)
	}
	// A kernel record is searchable too.
	res, err = c.Read(ctx, "shoal://fake?path=.principal&grep=agent")
	if err != nil || !strings.Contains(string(res.StructuredContent), `"total":1`) {
		t.Errorf("record grep: %s %v", res.StructuredContent, err)
	}
	if _, err := c.Read(ctx, "shoal://nope/1"); client.Code(err) != int(rpc.NotFound) {
		t.Errorf("unknown family: %v", err)
	}
	if _, err := c.Read(ctx, "shoal://fake/t?path=.rows[0"); client.Code(err) != int(rpc.BadPath) {
		t.Errorf("malformed path: %v", err)
	}
	res, err = c.Read(ctx, "shoal://fake")
	if err != nil || !strings.Contains(string(res.StructuredContent), `"session":"s1"`) {
		t.Errorf("record read: %+v %v", res, err)
	}
	var list struct {
		Resources []core.Resource `json:"resources"`
	}
	if err := c.Call(ctx, "resources.list", nil, &list); err != nil || len(list.Resources) != 1 || list.Resources[0].MimeType != "application/json" {
		t.Errorf("list: %+v %v", list, err)
	}
}

func TestSocketRestartSafety(t *testing.T) {
	dir := shortDir(t)
	r := start(t, dir)
	// A second kernel on the same state dir refuses with a clear error.
	_, err := kernel.New(kernel.Options{StateDir: dir})
	var already *kernel.AlreadyRunningError
	if !errors.As(err, &already) {
		t.Fatalf("second kernel: %v", err)
	}
	// A second kernel on another state dir but the same live socket too.
	k2, err := kernel.New(kernel.Options{StateDir: shortDir(t), Socket: r.k.Socket()})
	if err != nil {
		t.Fatal(err)
	}
	if err := k2.Serve(context.Background()); !errors.As(err, &already) {
		t.Fatalf("serve on a live socket: %v", err)
	}
	tok, op := r.k.Token(), r.k.OperatorToken()
	r.stop()
	// A stale socket file (as a killed kernel leaves) is replaced.
	l, err := net.Listen("unix", filepath.Join(dir, kernel.SocketName))
	if err != nil {
		t.Fatal(err)
	}
	l.(*net.UnixListener).SetUnlinkOnClose(false)
	l.Close()
	if _, err := os.Stat(filepath.Join(dir, kernel.SocketName)); err != nil {
		t.Fatalf("stale socket not left behind: %v", err)
	}
	r2 := start(t, dir)
	if r2.k.Token() != tok || r2.k.OperatorToken() != op {
		t.Error("a token changed across restart")
	}
	c := dial(t, dir, client.Options{})
	if c.Attached.Session != "main" || c.Attached.Principal != "agent:default" {
		t.Errorf("defaults: %+v", c.Attached)
	}
}

func TestMethodsListed(t *testing.T) {
	r := start(t, shortDir(t))
	names := r.k.MethodNames()
	if !sort.StringsAreSorted(names) {
		t.Error("unsorted")
	}
	for _, m := range []string{"session.attach", "events.read", "events.publish", "events.subscribe", "events.unsubscribe",
		"resources.list", "resources.templates", "resources.read", "value.get", "wait"} {
		if !contains(names, m) {
			t.Errorf("method %s missing", m)
		}
	}
}

func contains(xs []string, x string) bool {
	for _, y := range xs {
		if y == x {
			return true
		}
	}
	return false
}

func TestAttachWorkspace(t *testing.T) {
	r := start(t, shortDir(t))
	a, b := t.TempDir(), t.TempDir()
	file := filepath.Join(a, "f")
	if err := os.WriteFile(file, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	tok := r.k.Token()
	for _, bad := range []string{"/", "//", "relative/dir", file, filepath.Join(a, "missing")} {
		ans := raw(t, r.k.Socket(), `{"jsonrpc":"2.0","id":1,"method":"session.attach","params":{"token":"`+tok+`","workspace":"`+bad+`"}}`)
		if errCode(ans[0]) != int(rpc.InvalidParams) {
			t.Errorf("workspace %q: %v; want INVALID_PARAMS", bad, ans[0])
		}
	}
	ans := raw(t, r.k.Socket(), `{"jsonrpc":"2.0","id":1,"method":"session.attach","params":{"token":"`+tok+`","workspace":"/"}}`)
	if msg := ans[0]["error"].(map[string]any)["message"].(string); !strings.Contains(msg, "whole machine") {
		t.Errorf("refusing / says %q; want why", msg)
	}

	c1 := dial(t, r.dir, client.Options{Session: "p1", Workspace: a})
	if c1.Attached.Workspace != a {
		t.Errorf("new session's workspace %q; want %q", c1.Attached.Workspace, a)
	}
	// The session exists: another workspace does not move it.
	c2 := dial(t, r.dir, client.Options{Session: "p1", Workspace: b})
	if c2.Attached.Workspace != a {
		t.Errorf("existing session's workspace %q; want it kept (%q)", c2.Attached.Workspace, a)
	}
	c3 := dial(t, r.dir, client.Options{Session: "p2", Workspace: b})
	if c3.Attached.Workspace != b || r.k.Workspace("p2") != b || r.k.Workspace("p1") != a {
		t.Errorf("p2 workspace %q (kernel: p1 %q, p2 %q)", c3.Attached.Workspace, r.k.Workspace("p1"), r.k.Workspace("p2"))
	}
	if c4 := dial(t, r.dir, client.Options{Session: "p3"}); c4.Attached.Workspace == "" || c4.Attached.Workspace == "/" {
		t.Errorf("a session without a workspace got %q", c4.Attached.Workspace)
	}
}

// TestEventsReadNegativeLimit: zero or a negative limit means the default,
// as docs/events.md says, not an error.
func TestEventsReadNegativeLimit(t *testing.T) {
	r := start(t, shortDir(t))
	c := dial(t, r.dir, client.Options{Principal: "agent:a"})
	ctx := context.Background()
	for i := 0; i < 3; i++ {
		if _, err := c.Publish(ctx, "user.lim", map[string]int{"n": i}); err != nil {
			t.Fatal(err)
		}
	}
	for _, limit := range []int{-1, -1000, 0} {
		var res struct {
			Events []json.RawMessage `json:"events"`
		}
		if err := c.Call(ctx, "events.read", map[string]any{"channel": "user.lim", "limit": limit}, &res); err != nil {
			t.Fatalf("limit %d: %v", limit, err)
		}
		if len(res.Events) != 3 {
			t.Errorf("limit %d: %d events; want all 3 (the default limit)", limit, len(res.Events))
		}
	}
}

// slowClose is the fake provider with a Close that waits, as a session's
// workers take a moment to exit.
type slowClose struct {
	tableProvider
	closing, release chan struct{}
}

func (p slowClose) Close() error {
	close(p.closing)
	<-p.release
	return nil
}

// TestSocketOutlivesProviders: while a provider is still closing, the
// socket stays (refusing connections) and the state dir stays held; the
// socket is gone only once everything has closed, and then the state dir
// is free for the next kernel.
func TestSocketOutlivesProviders(t *testing.T) {
	dir := shortDir(t)
	p := slowClose{closing: make(chan struct{}), release: make(chan struct{})}
	k, err := kernel.New(kernel.Options{StateDir: dir}, p)
	if err != nil {
		t.Fatal(err)
	}
	stop := testkernel.Serve(t, k)
	sock := k.Socket()
	stopped := make(chan struct{})
	go func() {
		stop()
		close(stopped)
	}()
	<-p.closing
	if _, err := os.Lstat(sock); err != nil {
		t.Errorf("socket gone while a provider was still closing: %v", err)
	}
	var already *kernel.AlreadyRunningError
	if _, err := kernel.New(kernel.Options{StateDir: dir}); !errors.As(err, &already) {
		t.Errorf("state dir not held while a provider was closing: %v", err)
	}
	close(p.release)
	<-stopped
	if _, err := os.Lstat(sock); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("socket left after the kernel stopped: %v", err)
	}
	start(t, dir)
}
