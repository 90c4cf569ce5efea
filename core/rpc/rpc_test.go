package rpc

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"reflect"
	"strings"
	"testing"
	"time"
)

func TestFrameReader(t *testing.T) {
	in := "{\"a\":1}\n\n  \r\n{\"b\":2}\r\n" + strings.Repeat("x", 100) + "\n{\"c\":3}"
	fr := NewFrameReader(strings.NewReader(in), 50)
	var got []string
	var tooLarge int
	for {
		f, err := fr.Next()
		if errors.Is(err, ErrFrameTooLarge) {
			tooLarge++
			continue
		}
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, string(f))
	}
	want := []string{`{"a":1}`, `{"b":2}`, `{"c":3}`}
	if strings.Join(got, "|") != strings.Join(want, "|") || tooLarge != 1 {
		t.Fatalf("frames %q, tooLarge %d", got, tooLarge)
	}
}

var decodeTests = []struct {
	in   string
	code Code // 0 = ok
	kind string
}{
	{`{"jsonrpc":"2.0","id":1,"method":"exec","params":{"source":"ls"}}`, 0, "request"},
	{`{"jsonrpc":"2.0","id":"a","method":"x"}`, 0, "request"},
	{`{"jsonrpc":"2.0","method":"events.event","params":{}}`, 0, "notification"},
	{`{"jsonrpc":"2.0","id":1,"result":{}}`, 0, "response"},
	{`{"jsonrpc":"2.0","id":1,"error":{"code":-32005,"message":"m"}}`, 0, "response"},
	{`{"jsonrpc":"2.0","id":null,"method":"x"}`, 0, "request"},
	{`not json`, ParseError, ""},
	{`{"jsonrpc":"2.0",`, ParseError, ""},
	{`[{"jsonrpc":"2.0","id":1,"method":"x"}]`, InvalidRequest, ""},
	{`42`, InvalidRequest, ""},
	{`{"id":1,"method":"x"}`, InvalidRequest, ""},
	{`{"jsonrpc":"1.0","id":1,"method":"x"}`, InvalidRequest, ""},
	{`{"jsonrpc":"2.0","id":{},"method":"x"}`, InvalidRequest, ""},
	{`{"jsonrpc":"2.0","id":1,"method":""}`, InvalidRequest, ""},
	{`{"jsonrpc":"2.0","id":1,"method":7}`, InvalidRequest, ""},
	{`{"jsonrpc":"2.0","id":1,"method":"x","params":3}`, InvalidRequest, ""},
	{`{"jsonrpc":"2.0"}`, InvalidRequest, ""},
	{`{"jsonrpc":"2.0","id":1}`, InvalidRequest, ""},
	{"{\"jsonrpc\":\"2.0\",\"id\":\"\xff\xfe\",\"method\":\"x\"}", InvalidRequest, ""},
	{"{\"jsonrpc\":\"2.0\",\"id\":\"\xc3\",\"result\":1}", InvalidRequest, ""},
}

func TestDecode(t *testing.T) {
	for _, tt := range decodeTests {
		m, _, err := Decode([]byte(tt.in))
		if tt.code != 0 {
			if err == nil || err.Code != tt.code {
				t.Errorf("Decode(%s) err = %v; want %s", tt.in, err, tt.code.Name())
			}
			continue
		}
		if err != nil {
			t.Errorf("Decode(%s): %v", tt.in, err)
			continue
		}
		kind := map[bool]string{true: "request"}[m.IsRequest()]
		if m.IsNotification() {
			kind = "notification"
		}
		if m.IsResponse() {
			kind = "response"
		}
		if kind != tt.kind {
			t.Errorf("Decode(%s) kind %q; want %q", tt.in, kind, tt.kind)
		}
	}
}

func FuzzDecode(f *testing.F) {
	for _, tt := range decodeTests {
		f.Add([]byte(tt.in))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		// The one-pass decoder agrees with encoding/json wherever it
		// answers at all.
		if json.Valid(b) {
			if fast, ok := decodeFast(bytes.TrimSpace(b)); ok {
				slow, _, serr := decodeSlow(bytes.TrimSpace(b))
				if serr != nil {
					t.Fatalf("%q: fast path accepted what the careful one refuses: %v", b, serr)
				}
				if fast.Method != slow.Method || !bytes.Equal(fast.ID, slow.ID) || !jsonEqual(fast.Params, slow.Params) ||
					!jsonEqual(fast.Result, slow.Result) || (fast.Error == nil) != (slow.Error == nil) {
					t.Fatalf("%q: fast %+v, slow %+v", b, fast, slow)
				}
			}
		}
		m, _, err := Decode(b)
		if err == nil && m == nil {
			t.Fatal("nil message without error")
		}
		if err != nil && err.Code.Name() == "ERROR" {
			t.Fatalf("uncoded error %v", err)
		}
		// Whatever arrives in one line, the frame reader never panics.
		fr := NewFrameReader(strings.NewReader(string(b)), 64)
		for i := 0; i < 100; i++ {
			if _, err := fr.Next(); err == io.EOF {
				break
			}
		}
	})
}

func jsonEqual(a, b json.RawMessage) bool {
	if a == nil || b == nil {
		return a == nil && b == nil
	}
	var x, y any
	return json.Unmarshal(a, &x) == nil && json.Unmarshal(b, &y) == nil && reflect.DeepEqual(x, y)
}

func TestConnCallAndErrors(t *testing.T) {
	a, b := net.Pipe()
	server := NewConn(a, ConnOptions{Handler: func(ctx context.Context, method string, params json.RawMessage) (any, error) {
		switch method {
		case "echo":
			return params, nil
		case "fail":
			return nil, Errorf(BadPath, "field %q not found", "x")
		case "boom":
			panic("kaboom")
		}
		return nil, Errorf(MethodNotFound, "no method %s", method)
	}})
	var notes []string
	client := NewConn(b, ConnOptions{OnNotify: func(method string, params json.RawMessage) { notes = append(notes, method) }})
	go server.Run()
	go client.Run()
	defer func() {
		client.Close()
		server.Close()
		<-client.Done()
		<-server.Done()
	}()
	ctx := context.Background()
	var got map[string]int
	if err := client.Call(ctx, "echo", map[string]int{"n": 7}, &got); err != nil || got["n"] != 7 {
		t.Fatalf("echo: %v %v", got, err)
	}
	err := client.Call(ctx, "fail", nil, nil)
	var re *Error
	if !errors.As(err, &re) || re.Code != BadPath || re.Data.(map[string]any)["name"] != "BAD_PATH" {
		t.Fatalf("fail: %#v", err)
	}
	if err := client.Call(ctx, "boom", nil, nil); CodeOf(err) != Internal {
		t.Fatalf("boom: %v", err)
	}
	if err := client.Call(ctx, "nope", nil, nil); CodeOf(err) != MethodNotFound {
		t.Fatalf("nope: %v", err)
	}
}

// TestConnPipelined: many callers on one connection, each answer matched to
// its own call (frames must not alias the reader's buffer).
func TestConnPipelined(t *testing.T) {
	a, b := net.Pipe()
	server := NewConn(a, ConnOptions{Handler: func(ctx context.Context, method string, params json.RawMessage) (any, error) {
		return params, nil
	}})
	client := NewConn(b, ConnOptions{})
	go server.Run()
	go client.Run()
	defer func() {
		client.Close()
		server.Close()
		<-client.Done()
		<-server.Done()
	}()
	errs := make(chan error, 16)
	for w := 0; w < 16; w++ {
		go func() {
			for i := 0; i < 200; i++ {
				want := map[string]int{"w": w, "i": i}
				var got map[string]int
				if err := client.Call(context.Background(), "echo", want, &got); err != nil {
					errs <- err
					return
				}
				if got["w"] != w || got["i"] != i {
					errs <- fmt.Errorf("call (%d,%d) answered %v", w, i, got)
					return
				}
			}
			errs <- nil
		}()
	}
	for w := 0; w < 16; w++ {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
}

// TestMarshalPreEncoded: a result the handler encoded with Marshal goes
// out as it is; other raw JSON is compacted so no newline splits a frame.
func TestMarshalPreEncoded(t *testing.T) {
	enc, err := Marshal(map[string]any{"source": "make && make test", "n": 1})
	if err != nil {
		t.Fatal(err)
	}
	if got, err := Marshal(Encoded(enc)); err != nil || string(got) != string(enc) || string(enc) != `{"n":1,"source":"make && make test"}` {
		t.Fatalf("Marshal(Encoded) = %s, %v (encoded %s)", got, err, enc)
	}
	if got, err := Marshal(map[string]any{"r": Encoded(enc)}); err != nil || string(got) != `{"r":`+string(enc)+`}` {
		t.Fatalf("nested Encoded = %s, %v", got, err)
	}
	if got, err := Marshal(json.RawMessage("{\n \"a\": 1\n}")); err != nil || string(got) != `{"a":1}` {
		t.Fatalf("raw JSON not compacted: %q, %v", got, err)
	}
}

// TestReplyNow: a handler answers early and runs on; its later return is
// dropped, and the connection's end does not wait for it.
func TestReplyNow(t *testing.T) {
	a, b := net.Pipe()
	release := make(chan struct{})
	returned := make(chan bool, 1)
	server := NewConn(a, ConnOptions{
		Handler: func(ctx context.Context, method string, params json.RawMessage) (any, error) {
			switch method {
			case "long":
				if !CanReplyNow(ctx) || !ReplyNow(ctx, "started") {
					return nil, Errorf(Internal, "could not answer early")
				}
				if ReplyNow(ctx, "twice") || CanReplyNow(ctx) {
					return nil, Errorf(Internal, "answered twice")
				}
				<-release
				returned <- true
				return "finished", nil // dropped: the answer went out
			case "inline":
				return CanReplyNow(ctx), nil
			}
			return "plain", nil
		},
		Inline: func(method string) bool { return method == "inline" },
	})
	client := NewConn(b, ConnOptions{})
	go server.Run()
	go client.Run()
	ctx := context.Background()
	var got string
	if err := client.Call(ctx, "long", nil, &got); err != nil || got != "started" {
		t.Fatalf("long: %q %v", got, err)
	}
	// The connection goes on serving while the handler runs.
	if err := client.Call(ctx, "other", nil, &got); err != nil || got != "plain" {
		t.Fatalf("other: %q %v", got, err)
	}
	var inline bool
	if err := client.Call(ctx, "inline", nil, &inline); err != nil || inline {
		t.Fatalf("an inline method may answer early: %v %v", inline, err)
	}
	if ReplyNow(ctx, "x") || CanReplyNow(ctx) {
		t.Fatal("a context of no request answers early")
	}
	// The connection ends while the handler still runs.
	client.Close()
	server.Close()
	<-client.Done()
	<-server.Done()
	select {
	case <-returned:
		t.Fatal("the handler returned before it was released")
	default:
	}
	close(release)
	<-returned
}

// TestNotifyEncoded: pre-encoded params go out as the frames Encode makes
// for the same notifications, in one write.
func TestNotifyEncoded(t *testing.T) {
	a, b := net.Pipe()
	conn := NewConn(a, ConnOptions{})
	go conn.Run()
	defer func() {
		conn.Close()
		<-conn.Done()
	}()
	params := [][]byte{[]byte(`{"seq":1}`), nil, []byte(`"x"`)}
	go func() { _ = conn.NotifyEncoded("events.event", params...) }()
	var want []byte
	for _, p := range params {
		if p == nil {
			p = []byte("null")
		}
		f, err := Encode(&Message{JSONRPC: "2.0", Method: "events.event", Params: p})
		if err != nil {
			t.Fatal(err)
		}
		want = append(want, f...)
	}
	got := make([]byte, len(want))
	if _, err := io.ReadFull(b, got); err != nil {
		t.Fatal(err)
	}
	if string(got) != string(want) {
		t.Fatalf("frames\n%s\nwant\n%s", got, want)
	}
	b.Close()
}

// TestCallCancelled: a call whose context ends first tells the peer,
// whose handler's context is cancelled with cause ErrCancelled; the
// connection goes on serving.
func TestCallCancelled(t *testing.T) {
	a, b := net.Pipe()
	causes := make(chan error, 1)
	server := NewConn(a, ConnOptions{Handler: func(ctx context.Context, method string, params json.RawMessage) (any, error) {
		if method == "wait" {
			<-ctx.Done()
			causes <- context.Cause(ctx)
			return nil, ctx.Err()
		}
		return "pong", nil
	}})
	client := NewConn(b, ConnOptions{})
	go server.Run()
	go client.Run()
	defer func() {
		client.Close()
		server.Close()
		<-client.Done()
		<-server.Done()
	}()
	ctx, cancel := context.WithCancel(context.Background())
	errc := make(chan error, 1)
	go func() { errc <- client.Call(ctx, "wait", nil, nil) }()
	// Cancel once the request is being served.
	for !func() bool { server.mu.Lock(); defer server.mu.Unlock(); return len(server.serving) == 1 }() {
		time.Sleep(time.Millisecond)
	}
	cancel()
	if err := <-errc; !errors.Is(err, context.Canceled) {
		t.Fatalf("call: %v", err)
	}
	select {
	case cause := <-causes:
		if !errors.Is(cause, ErrCancelled) {
			t.Fatalf("handler's cause %v", cause)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the handler was not cancelled")
	}
	var got string
	if err := client.Call(context.Background(), "ping", nil, &got); err != nil || got != "pong" {
		t.Fatalf("after a cancel: %q %v", got, err)
	}
}
