package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/shoal-sh/shoal/sdk/client"
)

func noKernel(context.Context, func(client.Event)) (*client.Client, error) {
	return nil, errors.New("no kernel in this test")
}

// stdioPeer runs serveStdio on pipes.
type stdioPeer struct {
	in   *io.PipeWriter
	out  *bufio.Reader
	done chan error
}

func startStdioPipes(t *testing.T) *stdioPeer {
	t.Helper()
	f := newFacade(noKernel, slog.New(slog.DiscardHandler))
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	p := &stdioPeer{in: inW, out: bufio.NewReaderSize(outR, 1<<20), done: make(chan error, 1)}
	ctx, cancel := context.WithCancel(context.Background())
	go func() { p.done <- serveStdio(ctx, f, inR, outW) }()
	t.Cleanup(func() {
		cancel()
		inW.Close()
		outR.Close()
		<-p.done
	})
	return p
}

func (p *stdioPeer) answer(t *testing.T) map[string]any {
	t.Helper()
	line, err := p.out.ReadBytes('\n')
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(line, &m); err != nil {
		t.Fatalf("answer %q: %v", line, err)
	}
	return m
}

// TestStdioOversize: a message over the limit is answered with an error
// naming its id, and the next message is served.
func TestStdioOversize(t *testing.T) {
	p := startStdioPipes(t)
	go func() {
		big := `{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"pad":"` + strings.Repeat("x", maxMessage+10) + `"}}` + "\n"
		io.WriteString(p.in, big)
		io.WriteString(p.in, `{"jsonrpc":"2.0","id":8,"method":"ping"}`+"\n")
	}()
	m := p.answer(t)
	e, _ := m["error"].(map[string]any)
	if m["id"] != 7.0 || e == nil || e["code"] != -32600.0 {
		t.Fatalf("oversize answered %v", m)
	}
	if m := p.answer(t); m["id"] != 8.0 || m["result"] == nil {
		t.Fatalf("after the oversize: %v", m)
	}
}

func TestHeadID(t *testing.T) {
	for _, tt := range []struct{ head, id string }{
		{`{"jsonrpc":"2.0","id":7,"method":"x","params":{"a":"bbbb`, "7"},
		{`{"id":"a-1","params":{"a":"b`, `"a-1"`},
		{`{"jsonrpc":"2.0","method":"x","params":{"a":"bbb`, ""},
		{`{"params":{"a":1},"id":3`, ""}, // the value of id may be cut
		{`{"params":{"a":1},"id":3,`, "3"},
		{`{"id":{"x":1},"method":"x"`, ""},
		{`[1,2`, ""},
	} {
		if got := string(headID([]byte(tt.head))); got != tt.id {
			t.Errorf("headID(%s) = %q; want %q", tt.head, got, tt.id)
		}
	}
}

// TestStdioBackpressure: a client that writes requests and reads no
// answer is read only up to the in-flight bound; once it reads, every
// request is answered.
func TestStdioBackpressure(t *testing.T) {
	p := startStdioPipes(t)
	const requests = 2000
	pad := strings.Repeat("p", 1<<10)
	var written atomic.Int64
	go func() {
		for i := range requests {
			if _, err := fmt.Fprintf(p.in, `{"jsonrpc":"2.0","id":%d,"method":"ping","params":{"_meta":{"pad":%q}}}`+"\n", i, pad); err != nil {
				return
			}
			written.Add(1)
		}
	}()
	// Wait until the writer stops making progress, then check how far
	// it got.
	last := int64(-1)
	for n := written.Load(); n != last; n = written.Load() {
		last = n
		time.Sleep(200 * time.Millisecond)
	}
	// The slots, the reader's 64 KiB buffer, and the one in hand.
	if bound := int64(maxInflight + (64<<10)/len(pad) + 2); last > bound || last >= requests {
		t.Fatalf("%d requests read while no answer was read (bound %d)", last, bound)
	}
	seen := map[float64]bool{}
	for len(seen) < requests {
		m := p.answer(t)
		if m["result"] == nil {
			t.Fatalf("answer %v", m)
		}
		seen[m["id"].(float64)] = true
	}
}

// TestSubscriptionCap: a session holds at most maxSessionSubscriptions
// subscriptions (one kernel connection each); one more is refused, and
// unsubscribing frees a place.
func TestSubscriptionCap(t *testing.T) {
	sd := newStateDir(t)
	p := startStdio(t, sd, "agent:test")
	for i := range maxSessionSubscriptions {
		if _, rerr := p.raw("resources/subscribe", map[string]any{"uri": fmt.Sprintf("shoal://events/user.c%d", i)}); rerr != nil {
			t.Fatalf("subscribe %d: %s", i, rerr.Message)
		}
	}
	_, rerr := p.raw("resources/subscribe", map[string]any{"uri": "shoal://events/user.over"})
	if rerr == nil || !strings.Contains(rerr.Message, "TOO_MANY_CONNECTIONS") {
		t.Fatalf("subscription over the cap: %+v", rerr)
	}
	if _, rerr := p.raw("resources/unsubscribe", map[string]any{"uri": "shoal://events/user.c0"}); rerr != nil {
		t.Fatal(rerr.Message)
	}
	if _, rerr := p.raw("resources/subscribe", map[string]any{"uri": "shoal://events/user.over"}); rerr != nil {
		t.Fatalf("subscribe after an unsubscribe: %s", rerr.Message)
	}
}
