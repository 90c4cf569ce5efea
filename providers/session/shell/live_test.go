package shell

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"
)

// TestCaptureReadFrom: every offset reads what was written there, except
// the middle a full capture no longer keeps, which is skipped to the
// oldest byte kept.
func TestCaptureReadFrom(t *testing.T) {
	for _, limit := range []int{10, 64, 1 << 12} {
		for _, step := range []int{1, 3, 7, 100} {
			c := newCapture(limit)
			var all bytes.Buffer
			for i := 0; all.Len() < 3*limit; i++ {
				chunk := strings.Repeat(string(rune('a'+i%26)), step)
				c.Write([]byte(chunk))
				all.WriteString(chunk)
			}
			data := all.Bytes()
			total := int64(len(data))
			tailStart := total - int64(c.tailLimit)
			for since := int64(0); since <= total; since++ {
				ch := c.readFrom(since, 5)
				from := since
				if since >= int64(len(c.buf)) && since < tailStart {
					from = tailStart
				}
				if ch.From != from || ch.Size != total {
					t.Fatalf("limit %d step %d since %d: from %d size %d, want %d %d", limit, step, since, ch.From, ch.Size, from, total)
				}
				end := min(from+5, total)
				if from < int64(len(c.buf)) {
					end = min(end, int64(len(c.buf)))
				}
				if !bytes.Equal(ch.Data, data[from:end]) {
					t.Fatalf("limit %d step %d since %d: %q, want %q", limit, step, since, ch.Data, data[from:end])
				}
			}
		}
	}
}

func TestLiveFollowsARun(t *testing.T) {
	e, _ := newTestEvaluator(t, nil, Options{})
	live := &Live{}
	done := make(chan *Result, 1)
	go func() {
		res, _ := e.RunWith(context.Background(), "for i in 1 2 3; do echo line $i; sleep 0.1; done; echo oops >&2", RunOptions{Live: live})
		done <- res
	}()
	var got []byte
	var next int64
	deadline := time.Now().Add(30 * time.Second)
	for !bytes.Contains(got, []byte("line 3\n")) && time.Now().Before(deadline) {
		ch := live.Read(StreamStdout, next, 4)
		got = append(got, ch.Data...)
		next = ch.From + int64(len(ch.Data))
		if len(ch.Data) == 0 {
			time.Sleep(10 * time.Millisecond)
		}
	}
	res := <-done
	if string(got) != "line 1\nline 2\nline 3\n" || res.Stdout != string(got) {
		t.Fatalf("followed %q, run printed %q", got, res.Stdout)
	}
	if ch := live.Read(StreamStdout, 0, 10); ch.Open || len(ch.Data) != 0 {
		t.Fatalf("after the run: %+v", ch)
	}
}

func TestProgressOf(t *testing.T) {
	c := newCapture(64)
	c.Write([]byte("one\ntwo\nthree par"))
	p := progressOf(c)
	if p.Bytes != 17 || p.Lines != 2 || p.Last != "three par" {
		t.Fatalf("progress %+v", p)
	}
}
