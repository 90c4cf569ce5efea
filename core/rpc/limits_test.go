package rpc

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// unixPair is a connected pair of unix stream sockets (half-close and
// kernel buffering, as the kernel's clients have them).
func unixPair(t *testing.T) (*net.UnixConn, *net.UnixConn) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "s")
	l, err := net.Listen("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	accepted := make(chan net.Conn, 1)
	go func() {
		c, _ := l.Accept()
		accepted <- c
	}()
	client, err := net.Dial("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	server := <-accepted
	if server == nil {
		t.Fatal("accept failed")
	}
	t.Cleanup(func() { client.Close(); server.Close() })
	return server.(*net.UnixConn), client.(*net.UnixConn)
}

// TestBackpressure: a peer that sends many requests and reads nothing
// gets only a bounded number served (their answers wait, the rest stay
// unread); once it reads, every request is answered, in full.
func TestBackpressure(t *testing.T) {
	const answer = 16 << 10
	const maxUnwritten = 64 << 10
	const maxInflight = 8
	const requests = 1000
	sc, cc := unixPair(t)
	var served atomic.Int64
	server := NewConn(sc, ConnOptions{MaxUnwritten: maxUnwritten, MaxInflight: maxInflight,
		Handler: func(ctx context.Context, method string, params json.RawMessage) (any, error) {
			served.Add(1)
			return strings.Repeat("x", answer), nil
		}})
	go server.Run()
	defer func() { server.Close(); <-server.Done() }()

	sent := make(chan error, 1)
	go func() {
		w := bufio.NewWriter(cc)
		for i := range requests {
			fmt.Fprintf(w, `{"jsonrpc":"2.0","id":%d,"method":"big"}`+"\n", i)
		}
		sent <- w.Flush()
	}()
	// Wait until the server holds back, then give it time to (wrongly)
	// read on.
	for {
		server.wmu.Lock()
		held := server.unwritten > maxUnwritten || server.inflight >= maxInflight
		server.wmu.Unlock()
		if held {
			break
		}
		time.Sleep(time.Millisecond)
	}
	time.Sleep(100 * time.Millisecond)
	// What the socket buffers took before the writer blocked, plus the
	// answers the bound lets through, plus the ones being served.
	bound := int64(maxUnwritten/answer + maxInflight + 2 + (1<<20)/answer*2)
	if n := served.Load(); n > bound || n >= requests {
		t.Fatalf("%d of %d requests served while the peer read nothing (bound %d)", n, requests, bound)
	}
	r := bufio.NewReaderSize(cc, 64<<10)
	seen := map[int]bool{}
	for len(seen) < requests {
		line, err := r.ReadBytes('\n')
		if err != nil {
			t.Fatalf("after %d answers: %v", len(seen), err)
		}
		var m struct {
			ID     int    `json:"id"`
			Result string `json:"result"`
		}
		if err := json.Unmarshal(line, &m); err != nil || len(m.Result) != answer {
			t.Fatalf("answer %q…: %v", line[:min(len(line), 80)], err)
		}
		seen[m.ID] = true
	}
	if err := <-sent; err != nil {
		t.Fatal(err)
	}
}

// TestHalfClose: a peer that sends a request and shuts down its writing
// side still gets the answer.
func TestHalfClose(t *testing.T) {
	sc, cc := unixPair(t)
	release := make(chan struct{})
	server := NewConn(sc, ConnOptions{Handler: func(ctx context.Context, method string, params json.RawMessage) (any, error) {
		<-release
		return "ran", nil
	}})
	go server.Run()
	defer func() { server.Close(); <-server.Done() }()
	if _, err := cc.Write([]byte(`{"jsonrpc":"2.0","id":1,"method":"exec"}` + "\n")); err != nil {
		t.Fatal(err)
	}
	if err := cc.CloseWrite(); err != nil {
		t.Fatal(err)
	}
	close(release)
	line, err := bufio.NewReader(cc).ReadString('\n')
	if err != nil || line != `{"jsonrpc":"2.0","id":1,"result":"ran"}`+"\n" {
		t.Fatalf("answer %q, %v", line, err)
	}
	<-server.Done()
}

// TestInvalidUTF8ID: a request whose id is not UTF-8 is refused with an
// answer that is valid JSON (id null).
func TestInvalidUTF8ID(t *testing.T) {
	sc, cc := unixPair(t)
	server := NewConn(sc, ConnOptions{Handler: func(ctx context.Context, method string, params json.RawMessage) (any, error) {
		return "ran", nil
	}})
	go server.Run()
	defer func() { server.Close(); <-server.Done() }()
	cc.Write([]byte("{\"jsonrpc\":\"2.0\",\"id\":\"a\xffb\",\"method\":\"x\"}\n"))
	line, err := bufio.NewReader(cc).ReadBytes('\n')
	if err != nil || !json.Valid(line) || !strings.Contains(string(line), `"id":null`) || !strings.Contains(string(line), "INVALID_REQUEST") {
		t.Fatalf("answer %q, %v", line, err)
	}
}

// TestSetMaxFrame: the frame bound changes from the next frame on.
func TestSetMaxFrame(t *testing.T) {
	sc, cc := unixPair(t)
	var server *Conn
	server = NewConn(sc, ConnOptions{MaxFrame: 100, Inline: func(string) bool { return true },
		Handler: func(ctx context.Context, method string, params json.RawMessage) (any, error) {
			if method == "grow" {
				server.SetMaxFrame(1000)
			}
			return "ok", nil
		}})
	go server.Run()
	defer func() { server.Close(); <-server.Done() }()
	big := `{"jsonrpc":"2.0","id":2,"method":"x","params":{"pad":"` + strings.Repeat("p", 200) + `"}}` + "\n"
	r := bufio.NewReader(cc)
	for i, step := range []struct{ send, want string }{
		{big, "TOO_LARGE"},
		{`{"jsonrpc":"2.0","id":1,"method":"grow"}` + "\n", `"result":"ok"`},
		{big, `"result":"ok"`},
	} {
		cc.Write([]byte(step.send))
		line, err := r.ReadString('\n')
		if err != nil || !strings.Contains(line, step.want) {
			t.Fatalf("step %d: answer %q, %v; want %s", i, line, err, step.want)
		}
	}
}

// TestWaitingUncounted: requests of Waiting methods do not count against
// MaxInflight, so a client's many waits leave room for its other
// requests.
func TestWaitingUncounted(t *testing.T) {
	sc, cc := unixPair(t)
	release := make(chan struct{})
	server := NewConn(sc, ConnOptions{MaxInflight: 2, Waiting: func(m string) bool { return m == "wait" },
		Handler: func(ctx context.Context, method string, params json.RawMessage) (any, error) {
			if method == "wait" {
				<-release
			}
			return method, nil
		}})
	go server.Run()
	defer func() { server.Close(); <-server.Done() }()
	defer close(release)
	for i := range 5 {
		fmt.Fprintf(cc, `{"jsonrpc":"2.0","id":%d,"method":"wait"}`+"\n", i)
	}
	fmt.Fprintln(cc, `{"jsonrpc":"2.0","id":9,"method":"ping"}`)
	line, err := bufio.NewReader(cc).ReadString('\n')
	if err != nil || line != `{"jsonrpc":"2.0","id":9,"result":"ping"}`+"\n" {
		t.Fatalf("with five waits in flight: %q %v", line, err)
	}
}
