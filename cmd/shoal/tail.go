package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/shoal-sh/shoal/sdk/client"
)

// reconnectDelay is the longest wait between two attempts of a tail to
// reach a kernel that went away.
const reconnectDelay = 2 * time.Second

func eventsTailCommand() *command {
	var since int64
	var cursor string
	var noFollow bool
	return &command{name: "events tail", args: "CHANNEL", short: "print a channel's events and follow it (across kernel restarts)",
		flags: func(fs *flag.FlagSet) {
			fs.Int64Var(&since, "since", -1, "start after this seq (exclusive)")
			fs.StringVar(&cursor, "cursor", "", "file holding the last processed seq; read at start, written after each event")
			fs.BoolVar(&noFollow, "no-follow", false, "print what is retained and exit")
		},
		run: func(x *invocation, pos []string) error {
			if len(pos) != 1 {
				return usageErr("events tail needs one CHANNEL")
			}
			t := &tail{x: x, channel: pos[0], cursor: cursor}
			if since >= 0 {
				s := uint64(since)
				t.last = &s
			} else {
				t.load()
			}
			if noFollow {
				c, err := x.dial()
				if err != nil {
					return err
				}
				defer c.Close()
				return t.catchUp(c)
			}
			return t.follow()
		}}
}

// tail prints a channel's events and follows it. With a cursor file it
// resumes after the seq saved there (with the channel's epoch, so a
// channel that restarted from 0 is noticed) and saves each printed seq,
// so a restarted tail neither repeats nor skips. Gaps and drop markers
// are reported on stderr, never skipped silently. When the kernel goes
// away, the tail waits for one to answer again and goes on from its
// cursor.
type tail struct {
	x       *invocation
	channel string
	cursor  string
	last    *uint64
	epoch   string
}

// load reads the cursor file, when there is one.
func (t *tail) load() {
	if t.cursor == "" {
		return
	}
	b, err := os.ReadFile(t.cursor)
	if err != nil {
		return
	}
	f := strings.Fields(string(b))
	if len(f) >= 1 {
		if n, err := strconv.ParseUint(f[0], 10, 64); err == nil {
			t.last = &n
		}
	}
	if len(f) >= 2 {
		t.epoch = f[1]
	}
}

func (t *tail) save() error {
	if t.cursor == "" || t.last == nil {
		return nil
	}
	tmp := t.cursor + ".tmp"
	if err := os.WriteFile(tmp, fmt.Appendf(nil, "%d %s\n", *t.last, t.epoch), 0o600); err != nil {
		return err
	}
	return os.Rename(tmp, t.cursor)
}

func (t *tail) emit(ev client.Event) error {
	if t.last != nil && ev.Seq <= *t.last {
		return nil // duplicate
	}
	if *t.x.cf.json {
		b, _ := json.Marshal(ev)
		fmt.Fprintln(t.x.stdout, string(b))
	} else {
		fmt.Fprintf(t.x.stdout, "%s #%d %s %s\n", ev.Channel, ev.Seq, time.Unix(0, ev.TS).Format("15:04:05.000"), ev.Payload)
	}
	s := ev.Seq
	t.last = &s
	return t.save()
}

// catchUp prints what the kernel retains after the cursor.
func (t *tail) catchUp(c *client.Client) error {
	for {
		page, err := c.Events(t.x.ctx, t.channel, t.last, client.MaxReadLimit)
		if err != nil {
			return err
		}
		if t.epoch != "" && page.Epoch != t.epoch {
			fmt.Fprintf(t.x.stderr, "%s restarted (epoch %s → %s): its seqs began again at 0; reading from the start\n", t.channel, t.epoch, page.Epoch)
			t.last = nil
			t.epoch = page.Epoch
			continue
		}
		t.epoch = page.Epoch
		if len(page.Events) > 0 {
			t.reportGap(page.Events[0].Seq, page.Truncated)
		}
		for _, ev := range page.Events {
			if err := t.emit(ev); err != nil {
				return err
			}
		}
		if len(page.Events) < client.MaxReadLimit {
			return t.save()
		}
	}
}

func (t *tail) reportGap(first uint64, truncated bool) {
	next := uint64(0)
	if t.last != nil {
		next = *t.last + 1
	}
	if first <= next {
		return
	}
	if truncated {
		fmt.Fprintf(t.x.stderr, "gap: seq %d..%d are older than what %s retains\n", next, first-1, t.channel)
	} else {
		fmt.Fprintf(t.x.stderr, "gap: seq %d..%d not shown: more than %d events were waiting (events.read keeps the newest; for the journal, 'shoal journal' has them all)\n", next, first-1, client.MaxReadLimit)
	}
}

// follow subscribes and prints until interrupted, reconnecting when the
// kernel's connection ends.
func (t *tail) follow() error {
	first := true
	for {
		connected, err := t.followOnce(first)
		if t.x.ctx.Err() != nil {
			return nil
		}
		if first && !connected {
			return err // never reached a kernel: say so and stop
		}
		first = false
		fmt.Fprintf(t.x.stderr, "lost the kernel (%v); reconnecting\n", err)
		if err := t.redial(); err != nil {
			return nil // interrupted while waiting
		}
	}
}

// redial waits until a kernel answers again.
func (t *tail) redial() error {
	delay := 50 * time.Millisecond
	for {
		select {
		case <-t.x.ctx.Done():
			return t.x.ctx.Err()
		case <-time.After(delay):
		}
		c, err := t.x.dial()
		if err == nil {
			c.Close()
			return nil
		}
		delay = min(delay*2, reconnectDelay)
	}
}

// followOnce follows on one connection until it ends; it returns whether
// it got subscribed, and why it ended.
func (t *tail) followOnce(first bool) (bool, error) {
	live := make(chan client.Event, 1024)
	c, err := client.Dial(t.x.ctx, t.x.cf.options(func(ev client.Event) {
		select {
		case live <- ev:
		default: // the kernel's own drop marker will tell us
		}
	}))
	if err != nil {
		return false, err
	}
	defer c.Close()
	if _, err := c.Subscribe(t.x.ctx, t.channel); err != nil {
		return false, err
	}
	if !first {
		fmt.Fprintf(t.x.stderr, "reconnected; resuming %s after seq %s\n", t.channel, seqString(t.last))
	}
	if err := t.catchUp(c); err != nil {
		return true, err
	}
	for {
		select {
		case <-t.x.ctx.Done():
			return true, nil
		case <-c.Done():
			return true, fmt.Errorf("the kernel closed the connection")
		case ev := <-live:
			if err := t.onLive(c, ev); err != nil {
				return true, err
			}
		}
	}
}

func (t *tail) onLive(c *client.Client, ev client.Event) error {
	if d, ok := ev.IsDrop(); ok {
		fmt.Fprintf(t.x.stderr, "dropped %d events up to seq %d (slow consumer); catching up\n", d.Dropped, d.LatestSeq)
		return t.catchUp(c)
	}
	if t.last != nil && ev.Seq > *t.last+1 {
		return t.catchUp(c) // a jump: read what lies between
	}
	return t.emit(ev)
}

func seqString(s *uint64) string {
	if s == nil {
		return "none"
	}
	return strconv.FormatUint(*s, 10)
}
