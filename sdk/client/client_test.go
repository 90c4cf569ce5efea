package client

import (
	"context"
	"encoding/json"
	"errors"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/shoal-sh/shoal/core/bus"
	"github.com/shoal-sh/shoal/core/rpc"
	"github.com/shoal-sh/shoal/core/statedir"
)

// call is one request the fake kernel received.
type call struct {
	method string
	params string // compact JSON
}

// fakeKernel answers the kernel protocol on a unix socket with a
// handler of the test's choosing and records every call.
type fakeKernel struct {
	dir    string
	answer func(method string, params json.RawMessage) (any, error)

	mu    sync.Mutex
	calls []call
	conns []*rpc.Conn
}

// startFake listens in a fresh short state directory (unix socket paths
// are limited to 108 bytes) holding an agent token "agent-tok" and, when
// operator, an operator token "op-tok".
func startFake(t *testing.T, operator bool, answer func(string, json.RawMessage) (any, error)) *fakeKernel {
	t.Helper()
	dir, err := os.MkdirTemp("", "shc")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	writeToken(t, dir, statedir.TokenName, "agent-tok")
	if operator {
		writeToken(t, dir, statedir.OperatorTokenName, "op-tok")
	}
	ln, err := net.Listen("unix", filepath.Join(dir, statedir.SocketName))
	if err != nil {
		t.Fatal(err)
	}
	k := &fakeKernel{dir: dir, answer: answer}
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			nc, err := ln.Accept()
			if err != nil {
				return
			}
			conn := rpc.NewConn(nc, rpc.ConnOptions{Handler: k.handle})
			k.mu.Lock()
			k.conns = append(k.conns, conn)
			k.mu.Unlock()
			wg.Add(1)
			go func() { defer wg.Done(); conn.Run() }()
		}
	}()
	t.Cleanup(func() {
		ln.Close()
		k.mu.Lock()
		for _, c := range k.conns {
			c.Close()
		}
		k.mu.Unlock()
		wg.Wait()
	})
	return k
}

func writeToken(t *testing.T, dir, name, tok string) {
	t.Helper()
	if err := os.WriteFile(filepath.Join(dir, name), []byte(tok+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
}

func (k *fakeKernel) handle(_ context.Context, method string, params json.RawMessage) (any, error) {
	var buf strings.Builder
	if len(params) > 0 {
		var v any
		if err := json.Unmarshal(params, &v); err != nil {
			return nil, rpc.Errorf(rpc.InvalidParams, "%v", err)
		}
		b, _ := json.Marshal(v) // canonical: sorted keys
		buf.Write(b)
	}
	k.mu.Lock()
	k.calls = append(k.calls, call{method, buf.String()})
	k.mu.Unlock()
	if method == "session.attach" {
		var p struct {
			Token     string `json:"token"`
			Session   string `json:"session"`
			Principal string `json:"principal"`
		}
		json.Unmarshal(params, &p)
		if p.Token != "agent-tok" && p.Token != "op-tok" {
			return nil, rpc.Errorf(rpc.Unauthorized, "wrong token")
		}
		cred := "agent"
		if p.Token == "op-tok" {
			cred = "operator"
		}
		return map[string]any{"session": p.Session, "principal": p.Principal, "credential": cred,
			"cwd": "/w", "epoch": "e1", "kernel": map[string]any{"version": "test", "pid": 7}}, nil
	}
	if k.answer == nil {
		return nil, rpc.Errorf(rpc.MethodNotFound, "no method %s", method)
	}
	return k.answer(method, params)
}

// last returns the calls after session.attach.
func (k *fakeKernel) after() []call {
	k.mu.Lock()
	defer k.mu.Unlock()
	var out []call
	for _, c := range k.calls {
		if c.method != "session.attach" {
			out = append(out, c)
		}
	}
	return out
}

func (k *fakeKernel) attachParams() string {
	k.mu.Lock()
	defer k.mu.Unlock()
	for _, c := range k.calls {
		if c.method == "session.attach" {
			return c.params
		}
	}
	return ""
}

// TestDialCredential: which token Dial attaches with, and what it asks
// session.attach for.
func TestDialCredential(t *testing.T) {
	for _, tc := range []struct {
		name     string
		operator bool // the state dir holds an operator token
		opts     Options
		cred     string
		params   string
	}{
		{"agent by default", true, Options{Session: "s1", Principal: "agent:a"}, "agent",
			`{"principal":"agent:a","session":"s1","token":"agent-tok"}`},
		{"operator asked for", true, Options{Operator: true}, "operator",
			`{"principal":"","session":"","token":"op-tok"}`},
		{"operator asked for, not readable", false, Options{Operator: true}, "agent",
			`{"principal":"","session":"","token":"agent-tok"}`},
		{"a person's principal needs the operator's", true, Options{Principal: "user:bob"}, "operator",
			`{"principal":"user:bob","session":"","token":"op-tok"}`},
		{"explicit token", true, Options{Token: "agent-tok", Principal: "user:bob"}, "agent",
			`{"principal":"user:bob","session":"","token":"agent-tok"}`},
		{"workspace sent when set", false, Options{Workspace: "/src/p"}, "agent",
			`{"principal":"","session":"","token":"agent-tok","workspace":"/src/p"}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			k := startFake(t, tc.operator, nil)
			o := tc.opts
			o.StateDir = k.dir
			c, err := Dial(context.Background(), o)
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			if c.Attached.Credential != tc.cred {
				t.Errorf("credential %q, want %q", c.Attached.Credential, tc.cred)
			}
			if got := k.attachParams(); got != tc.params {
				t.Errorf("session.attach params %s, want %s", got, tc.params)
			}
			if c.Attached.Kernel.Version != "test" || c.Attached.Kernel.PID != 7 || c.Attached.Cwd != "/w" {
				t.Errorf("attached %+v", c.Attached)
			}
		})
	}
}

// TestDialFailures: each way Dial fails says why, with a kernel error's
// code kept.
func TestDialFailures(t *testing.T) {
	k := startFake(t, false, nil)
	empty, err := os.MkdirTemp("", "shc")
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(empty)
	for _, tc := range []struct {
		name   string
		opts   Options
		is     error
		code   rpc.Code
		substr string
	}{
		{"nothing listens", Options{StateDir: empty}, ErrNoKernel, 0, empty},
		{"no token file", Options{StateDir: empty, Socket: filepath.Join(k.dir, statedir.SocketName)}, nil, 0, "read kernel token"},
		{"wrong token", Options{StateDir: k.dir, Token: "nope"}, nil, rpc.Unauthorized, "wrong token"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, err := Dial(context.Background(), tc.opts)
			if err == nil {
				c.Close()
				t.Fatal("Dial succeeded")
			}
			if tc.is != nil && !errors.Is(err, tc.is) {
				t.Errorf("error %v is not %v", err, tc.is)
			}
			if Code(err) != int(tc.code) {
				t.Errorf("Code(%v) = %d, want %d", err, Code(err), tc.code)
			}
			if !strings.Contains(err.Error(), tc.substr) {
				t.Errorf("error %q lacks %q", err, tc.substr)
			}
		})
	}
}

// TestMethods: every typed wrapper sends its method with the params the
// kernel documents (optional members left out when unset) and decodes
// the answer.
func TestMethods(t *testing.T) {
	answers := map[string]any{
		"exec":               map[string]any{"ref": "out:3", "uri": "shoal://out/3", "ok": true, "exit": 0},
		"resources.read":     map[string]any{"contents": []any{map[string]any{"uri": "shoal://out/3", "mimeType": "application/json", "text": "[]"}}},
		"events.read":        map[string]any{"channel": "user.x", "events": []any{map[string]any{"channel": "user.x", "seq": 5, "ts": 9, "payload": map[string]any{"a": 1}}}, "oldest_seq": 5, "latest_seq": 5, "next_seq": 6, "epoch": "e1", "truncated": true},
		"events.publish":     map[string]any{"channel": "user.x", "seq": 6, "ts": 10},
		"events.subscribe":   map[string]any{"channel": "user.x", "next_seq": 6, "epoch": "e1"},
		"events.unsubscribe": map[string]any{},
	}
	k := startFake(t, false, func(method string, _ json.RawMessage) (any, error) {
		if a, ok := answers[method]; ok {
			return a, nil
		}
		return nil, rpc.Errorf(rpc.MethodNotFound, "no method %s", method)
	})
	c, err := Dial(context.Background(), Options{StateDir: k.dir})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ctx := context.Background()
	zero := uint64(0)
	for _, tc := range []struct {
		name   string
		do     func() (any, error)
		method string
		params string
		check  func(any) bool
	}{
		{"exec", func() (any, error) { return c.Exec(ctx, "ls", ExecOptions{}) }, "exec",
			`{"background":false,"source":"ls","timeout_ms":0}`,
			func(v any) bool { r := v.(*ExecReply); return r.Ref == "out:3" && r.OK != nil && *r.OK }},
		{"exec background", func() (any, error) { return c.Exec(ctx, "sleep 9", ExecOptions{TimeoutMS: 5, Background: true}) }, "exec",
			`{"background":true,"source":"sleep 9","timeout_ms":5}`, nil},
		{"read", func() (any, error) { return c.Read(ctx, "out:3?path=[0]") }, "resources.read",
			`{"uri":"out:3?path=[0]"}`,
			func(v any) bool { r := v.(*ReadResult); return len(r.Contents) == 1 && r.Contents[0].Text == "[]" }},
		{"events from the oldest", func() (any, error) { return c.Events(ctx, "user.x", nil, 0) }, "events.read",
			`{"channel":"user.x"}`,
			func(v any) bool {
				p := v.(*Page)
				return len(p.Events) == 1 && p.Events[0].Seq == 5 && string(p.Events[0].Payload) == `{"a":1}` &&
					*p.OldestSeq == 5 && *p.LatestSeq == 5 && p.NextSeq == 6 && p.Truncated
			}},
		{"events after seq 0 with a limit", func() (any, error) { return c.Events(ctx, "user.x", &zero, 10) }, "events.read",
			`{"channel":"user.x","limit":10,"since":0}`, nil},
		{"publish", func() (any, error) { return c.Publish(ctx, "user.x", map[string]int{"b": 2}) }, "events.publish",
			`{"channel":"user.x","payload":{"b":2}}`,
			func(v any) bool { p := v.(*Published); return p.Seq == 6 && p.TS == 10 }},
		{"subscribe", func() (any, error) { return c.Subscribe(ctx, "user.x") }, "events.subscribe",
			`{"channel":"user.x"}`,
			func(v any) bool { s := v.(*Subscribed); return s.NextSeq == 6 && s.Epoch == "e1" }},
		{"subscribe by URI", func() (any, error) { return c.SubscribeURI(ctx, "shoal://task/4") }, "events.subscribe",
			`{"uri":"shoal://task/4"}`, nil},
		{"unsubscribe", func() (any, error) { return nil, c.Unsubscribe(ctx, "user.x") }, "events.unsubscribe",
			`{"channel":"user.x"}`, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			n := len(k.after())
			v, err := tc.do()
			if err != nil {
				t.Fatal(err)
			}
			calls := k.after()[n:]
			if len(calls) != 1 || calls[0].method != tc.method || calls[0].params != tc.params {
				t.Fatalf("sent %+v, want %s %s", calls, tc.method, tc.params)
			}
			if tc.check != nil && !tc.check(v) {
				t.Errorf("decoded %+v", v)
			}
		})
	}
}

// TestErrorCodes: a kernel error reaches the caller as an *rpc.Error
// whose code Code reports; anything else has code 0.
func TestErrorCodes(t *testing.T) {
	k := startFake(t, false, func(method string, _ json.RawMessage) (any, error) {
		switch method {
		case "exec":
			return nil, rpc.Errorf(rpc.PolicyRefused, "plan it first")
		case "resources.read":
			return nil, rpc.Errorf(rpc.NotFound, "no out:99")
		}
		return nil, errors.New("plain failure")
	})
	c, err := Dial(context.Background(), Options{StateDir: k.dir})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ctx := context.Background()
	_, execErr := c.Exec(ctx, "rm -rf /", ExecOptions{})
	_, readErr := c.Read(ctx, "out:99")
	_, evErr := c.Events(ctx, "user.x", nil, 0)
	for _, tc := range []struct {
		err    error
		code   int
		substr string
	}{
		{execErr, int(rpc.PolicyRefused), "plan it first"},
		{readErr, int(rpc.NotFound), "no out:99"},
		{evErr, int(rpc.Internal), "plain failure"},
		{errors.New("local"), 0, "local"},
		{nil, 0, ""},
	} {
		if got := Code(tc.err); got != tc.code {
			t.Errorf("Code(%v) = %d, want %d", tc.err, got, tc.code)
		}
		if tc.err != nil && !strings.Contains(tc.err.Error(), tc.substr) {
			t.Errorf("error %q lacks %q", tc.err, tc.substr)
		}
	}
}

// TestPushedEvents: events.event notifications reach OnEvent in order,
// other notifications do not, and a drop marker is told apart.
func TestPushedEvents(t *testing.T) {
	k := startFake(t, false, nil)
	got := make(chan Event, 8)
	c, err := Dial(context.Background(), Options{StateDir: k.dir, OnEvent: func(ev Event) { got <- ev }})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	k.mu.Lock()
	server := k.conns[0]
	k.mu.Unlock()
	marker := bus.Marker("user.x", 3, 9, 11)
	for _, n := range []struct {
		method string
		params any
	}{
		{"other.note", map[string]any{"channel": "user.x", "seq": 1}},
		{EventMethod, Event{Channel: "user.x", Seq: 6, TS: 1, Payload: json.RawMessage(`{"n":1}`)}},
		{EventMethod, Event{Channel: marker.Channel, Seq: marker.Seq, TS: marker.TS, Payload: marker.Payload}},
		{EventMethod, Event{Channel: "user.x", Seq: 10, TS: 2, Payload: json.RawMessage(`{"n":2}`)}},
	} {
		if err := server.Notify(n.method, n.params); err != nil {
			t.Fatal(err)
		}
	}
	var seqs []uint64
	var drops []Drop
	for range 3 {
		select {
		case ev := <-got:
			seqs = append(seqs, ev.Seq)
			if d, ok := ev.IsDrop(); ok {
				drops = append(drops, d)
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("events so far %v", seqs)
		}
	}
	if len(seqs) != 3 || seqs[0] != 6 || seqs[1] != 9 || seqs[2] != 10 {
		t.Errorf("seqs %v, want [6 9 10]", seqs)
	}
	if len(drops) != 1 || drops[0] != (Drop{Dropped: 3, LatestSeq: 9}) {
		t.Errorf("drops %+v", drops)
	}
}

// TestClose: Close ends the connection (Done closes, calls fail) and is
// safe twice; a kernel that goes away closes Done too.
func TestClose(t *testing.T) {
	k := startFake(t, false, func(string, json.RawMessage) (any, error) { return map[string]any{}, nil })
	c, err := Dial(context.Background(), Options{StateDir: k.dir})
	if err != nil {
		t.Fatal(err)
	}
	c.Close()
	c.Close()
	select {
	case <-c.Done():
	default:
		t.Fatal("Done not closed after Close")
	}
	if err := c.Unsubscribe(context.Background(), "user.x"); err == nil {
		t.Error("a call after Close succeeded")
	}

	c2, err := Dial(context.Background(), Options{StateDir: k.dir})
	if err != nil {
		t.Fatal(err)
	}
	defer c2.Close()
	k.mu.Lock()
	server := k.conns[len(k.conns)-1]
	k.mu.Unlock()
	server.Close()
	select {
	case <-c2.Done():
	case <-time.After(10 * time.Second):
		t.Fatal("Done not closed after the kernel hung up")
	}
}
