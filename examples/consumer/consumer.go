// Command consumer is a robust Shoal event consumer: it processes every
// event of a channel exactly once across pauses, restarts and reconnects,
// and notices — instead of silently skipping — events it can no longer get.
//
// It follows the eight steps every consumer of Shoal events should:
//
//  1. Load the last processed seq from the cursor file (none on a first run).
//  2. Pull the channel after that cursor (events.read since=cursor).
//  3. Process the returned events in ascending seq order.
//  4. Persist the cursor only after an event's work is done.
//  5. Subscribe to the channel for low-latency delivery.
//  6. For each pushed event, drop duplicates (seq ≤ cursor) and notice
//     jumps (seq > cursor+1, or a drop marker).
//  7. After a jump or a reconnect, pull again from the persisted cursor.
//  8. When the events after the cursor are gone (older than the channel
//     retains, or the channel restarted under a new epoch), reconcile from
//     an authoritative snapshot and move the cursor past the gap.
//
// Usage:
//
//	consumer -channel user.build -cursor build.cursor [-state-dir DIR]
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/shoal-sh/shoal/sdk/client"
)

// Cursor is the persisted position: the last processed seq of one channel
// in one epoch. A cursor of another epoch is stale (the channel restarted
// from 0 after a kernel restart).
type Cursor struct {
	Epoch string  `json:"epoch"`
	Seq   *uint64 `json:"seq"`
}

// Consumer processes one channel.
type Consumer struct {
	// Dial opens an attached kernel connection whose pushed events go to
	// onEvent.
	Dial func(ctx context.Context, onEvent func(client.Event)) (*client.Client, error)
	// Channel to consume.
	Channel string
	// CursorFile persists the cursor.
	CursorFile string
	// Handle processes one event; the cursor moves past it only when Handle
	// returns nil. Handle should be idempotent: after a crash between the
	// work and the cursor write the event is handled again.
	Handle func(ev client.Event) error
	// Reconcile is called when events after the cursor cannot be had any
	// more: from..to are the missing seqs (to is the newest seq known).
	// It should rebuild state from an authoritative snapshot.
	Reconcile func(from, to uint64, reason string) error
	// Log receives progress lines; nil discards them.
	Log func(format string, args ...any)

	cur Cursor
}

func (c *Consumer) logf(format string, args ...any) {
	if c.Log != nil {
		c.Log(format, args...)
	}
}

// loadCursor is step 1.
func (c *Consumer) loadCursor() error {
	b, err := os.ReadFile(c.CursorFile)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("read cursor: %w", err)
	}
	if err := json.Unmarshal(b, &c.cur); err != nil {
		return fmt.Errorf("cursor file %s is not a cursor (%v); move it away to start over", c.CursorFile, err)
	}
	return nil
}

// saveCursor is step 4: write-then-rename, so a crash leaves the old or
// the new cursor, never a torn one.
func (c *Consumer) saveCursor() error {
	b, _ := json.Marshal(c.cur)
	tmp := c.CursorFile + ".tmp"
	f, err := os.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o600)
	if err != nil {
		return err
	}
	if _, err := f.Write(b); err != nil {
		f.Close()
		return err
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	return os.Rename(tmp, c.CursorFile)
}

// process is steps 3, 4 and 6 for one event.
func (c *Consumer) process(ev client.Event) error {
	if c.cur.Seq != nil && ev.Seq <= *c.cur.Seq {
		return nil // duplicate: already processed
	}
	if err := c.Handle(ev); err != nil {
		return fmt.Errorf("handle %s #%d: %w", ev.Channel, ev.Seq, err)
	}
	s := ev.Seq
	c.cur.Seq = &s
	return c.saveCursor()
}

// next is the seq the consumer expects next.
func (c *Consumer) next() uint64 {
	if c.cur.Seq == nil {
		return 0
	}
	return *c.cur.Seq + 1
}

// catchUp is steps 2, 7 and 8: pull from the cursor, reconcile what is
// gone, process the rest in order.
func (c *Consumer) catchUp(ctx context.Context, cl *client.Client) error {
	for {
		page, err := cl.Events(ctx, c.Channel, c.cur.Seq, client.MaxReadLimit)
		if err != nil {
			return err
		}
		if c.cur.Epoch != "" && page.Epoch != c.cur.Epoch {
			// The channel restarted from 0 (a ring-only channel after a
			// kernel restart): the old cursor means nothing now.
			c.logf("epoch changed %s → %s: reconciling and starting over", c.cur.Epoch, page.Epoch)
			to := uint64(0)
			if page.LatestSeq != nil {
				to = *page.LatestSeq
			}
			if err := c.Reconcile(c.next(), to, "epoch changed"); err != nil {
				return err
			}
			c.cur = Cursor{Epoch: page.Epoch}
			if err := c.saveCursor(); err != nil {
				return err
			}
			continue
		}
		c.cur.Epoch = page.Epoch
		if len(page.Events) == 0 {
			return nil
		}
		if first := page.Events[0].Seq; first > c.next() {
			// Reads keep the newest tail: either retention dropped the
			// missing events (truncated), or more than one read's worth is
			// pending and the middle cannot be paged. Both are a gap.
			reason := "backlog larger than one read (1024 events)"
			if page.Truncated {
				reason = "events older than the channel retains"
			}
			c.logf("gap: seqs %d..%d (%s)", c.next(), first-1, reason)
			if err := c.Reconcile(c.next(), first-1, reason); err != nil {
				return err
			}
			s := first - 1
			c.cur.Seq = &s
			if err := c.saveCursor(); err != nil {
				return err
			}
		}
		for _, ev := range page.Events {
			if err := c.process(ev); err != nil {
				return err
			}
		}
		if len(page.Events) < client.MaxReadLimit {
			return nil
		}
	}
}

// Run consumes until ctx ends, reconnecting when the kernel goes away.
func (c *Consumer) Run(ctx context.Context) error {
	if err := c.loadCursor(); err != nil {
		return err
	}
	backoff := 100 * time.Millisecond
	for ctx.Err() == nil {
		err := c.session(ctx)
		if ctx.Err() != nil {
			return nil
		}
		c.logf("connection lost (%v); reconnecting in %v", err, backoff)
		select {
		case <-time.After(backoff):
		case <-ctx.Done():
			return nil
		}
		if backoff < 5*time.Second {
			backoff *= 2
		}
	}
	return nil
}

// session is one connection's life: subscribe, catch up, follow.
func (c *Consumer) session(ctx context.Context) error {
	var mu sync.Mutex
	var pushed []client.Event
	wake := make(chan struct{}, 1)
	cl, err := c.Dial(ctx, func(ev client.Event) {
		mu.Lock()
		pushed = append(pushed, ev)
		mu.Unlock()
		select {
		case wake <- struct{}{}:
		default:
		}
	})
	if err != nil {
		return err
	}
	defer cl.Close()
	// Subscribe first (step 5), then pull (step 2): an event published in
	// between arrives both ways and the duplicate check drops one.
	if _, err := cl.Subscribe(ctx, c.Channel); err != nil {
		return err
	}
	if err := c.catchUp(ctx, cl); err != nil {
		return err
	}
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-cl.Done():
			return errors.New("kernel connection closed")
		case <-wake:
		}
		mu.Lock()
		batch := pushed
		pushed = nil
		mu.Unlock()
		for _, ev := range batch {
			if _, isDrop := ev.IsDrop(); isDrop || ev.Seq > c.next() {
				// Step 6/7: a jump — pull from the persisted cursor.
				if err := c.catchUp(ctx, cl); err != nil {
					return err
				}
				continue
			}
			if err := c.process(ev); err != nil {
				return err
			}
		}
	}
}

func main() {
	channel := flag.String("channel", "", "channel to consume, e.g. user.build")
	cursor := flag.String("cursor", "", "cursor file (default CHANNEL.cursor)")
	stateDir := flag.String("state-dir", client.DefaultStateDir(), "kernel state directory")
	principal := flag.String("principal", "agent:consumer", "principal")
	flag.Parse()
	if *channel == "" {
		fmt.Fprintln(os.Stderr, "consumer: -channel is required")
		os.Exit(2)
	}
	if *cursor == "" {
		*cursor = strings.ReplaceAll(*channel, "/", "_") + ".cursor"
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	c := &Consumer{
		Channel:    *channel,
		CursorFile: *cursor,
		Dial: func(ctx context.Context, on func(client.Event)) (*client.Client, error) {
			return client.Dial(ctx, client.Options{StateDir: *stateDir, Principal: *principal, OnEvent: on})
		},
		Handle: func(ev client.Event) error {
			fmt.Printf("%s #%d %s\n", ev.Channel, ev.Seq, ev.Payload)
			return nil
		},
		Reconcile: func(from, to uint64, reason string) error {
			fmt.Printf("reconcile %s: seqs %d..%d lost (%s); re-read your source of truth\n", *channel, from, to, reason)
			return nil
		},
		Log: func(format string, args ...any) { fmt.Fprintf(os.Stderr, "consumer: "+format+"\n", args...) },
	}
	if err := c.Run(ctx); err != nil {
		fmt.Fprintln(os.Stderr, "consumer:", err)
		os.Exit(1)
	}
}
