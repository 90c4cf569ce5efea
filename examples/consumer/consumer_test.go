package main

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/shoal-sh/shoal/core/kernel"
	"github.com/shoal-sh/shoal/internal/testkernel"
	"github.com/shoal-sh/shoal/sdk/client"
)

type harness struct {
	dir string
	k   *kernel.Kernel
	pub *client.Client

	mu        sync.Mutex
	handled   []uint64
	reconcile [][2]uint64
}

func (h *harness) consumer(cursor string) *Consumer {
	return &Consumer{
		Channel:    "user.orders",
		CursorFile: cursor,
		Dial: func(ctx context.Context, on func(client.Event)) (*client.Client, error) {
			return client.Dial(ctx, client.Options{StateDir: h.dir, Principal: "agent:consumer", OnEvent: on})
		},
		Handle: func(ev client.Event) error {
			h.mu.Lock()
			h.handled = append(h.handled, ev.Seq)
			h.mu.Unlock()
			return nil
		},
		Reconcile: func(from, to uint64, reason string) error {
			h.mu.Lock()
			h.reconcile = append(h.reconcile, [2]uint64{from, to})
			h.mu.Unlock()
			return nil
		},
	}
}

func (h *harness) publish(t *testing.T, n int) {
	t.Helper()
	for i := 0; i < n; i++ {
		if _, err := h.pub.Publish(context.Background(), "user.orders", map[string]int{"i": i}); err != nil {
			t.Fatal(err)
		}
	}
}

func (h *harness) waitHandled(t *testing.T, last uint64) {
	t.Helper()
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(5 * time.Millisecond) {
		h.mu.Lock()
		n := len(h.handled)
		done := n > 0 && h.handled[n-1] == last
		h.mu.Unlock()
		if done {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("consumer never reached seq %d", last)
		}
	}
}

// run starts a consumer and returns its stop function.
func run(c *Consumer) (stop func()) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { c.Run(ctx); close(done) }()
	return func() { cancel(); <-done }
}

func TestConsumerExactlyOnceAcrossRestartsAndGaps(t *testing.T) {
	k := testkernel.Start(t, kernel.Options{})
	dir := k.StateDir()
	pub, err := client.Dial(context.Background(), client.Options{StateDir: dir, Principal: "agent:shop"})
	if err != nil {
		t.Fatal(err)
	}
	defer pub.Close()
	h := &harness{dir: dir, k: k, pub: pub}
	cursor := filepath.Join(t.TempDir(), "orders.cursor")

	// Events before the first start are caught up; live ones follow.
	h.publish(t, 10)
	stop := run(h.consumer(cursor))
	h.waitHandled(t, 9)
	h.publish(t, 5)
	h.waitHandled(t, 14)
	stop()

	// Paused: what is published meanwhile is processed once after restart.
	h.publish(t, 20)
	stop = run(h.consumer(cursor))
	h.waitHandled(t, 34)
	stop()

	// Paused past retention (the ring keeps 1,024): a gap is reconciled,
	// never skipped silently, and the newest events are processed.
	h.publish(t, 1500)
	stop = run(h.consumer(cursor))
	h.waitHandled(t, 1534)
	stop()

	h.mu.Lock()
	defer h.mu.Unlock()
	seen := map[uint64]bool{}
	for i, s := range h.handled {
		if seen[s] {
			t.Fatalf("seq %d handled twice", s)
		}
		seen[s] = true
		if i > 0 && s < h.handled[i-1] {
			t.Fatalf("out of order: %d after %d", s, h.handled[i-1])
		}
	}
	if len(h.reconcile) != 1 || h.reconcile[0][0] != 35 {
		t.Fatalf("reconciles %v; want one starting at 35", h.reconcile)
	}
	gap := h.reconcile[0]
	for s := uint64(0); s <= 1534; s++ {
		inGap := s >= gap[0] && s <= gap[1]
		if seen[s] == inGap {
			t.Fatalf("seq %d: handled=%v, in reconciled gap %v", s, seen[s], gap)
		}
	}
	b, _ := os.ReadFile(cursor)
	var cur Cursor
	if json.Unmarshal(b, &cur) != nil || cur.Seq == nil || *cur.Seq != 1534 {
		t.Errorf("cursor file %s", b)
	}
}
