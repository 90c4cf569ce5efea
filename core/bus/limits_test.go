package bus

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/shoal-sh/shoal/core/rpc"
)

func payloadOf(n int, i int) json.RawMessage {
	return json.RawMessage(fmt.Sprintf(`"%d%s"`, i, strings.Repeat("x", n-2-len(fmt.Sprint(i)))))
}

// TestRingBytes: a channel's ring keeps at most its byte budget of
// payload; reads report the oldest seq still held, contiguous to the
// latest, and the newest event is always kept.
func TestRingBytes(t *testing.T) {
	const size = 10 << 10
	b := newTestBus(t, Options{RingBytes: 100 << 10})
	for i := range 600 {
		if _, err := b.Publish("user.big", payloadOf(size, i)); err != nil {
			t.Fatal(err)
		}
		c := b.lookup("user.big")
		c.mu.Lock()
		held := c.bytes
		c.mu.Unlock()
		if held > 100<<10 {
			t.Fatalf("after %d publishes the ring holds %d payload bytes", i+1, held)
		}
	}
	res, err := b.Read("user.big", nil, MaxReadLimit)
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Events) != 10 || *res.OldestSeq != 590 || *res.LatestSeq != 599 {
		t.Fatalf("read %d events, oldest %v latest %v; want the 10 newest (590..599)", len(res.Events), *res.OldestSeq, *res.LatestSeq)
	}
	for i, ev := range res.Events {
		if ev.Seq != uint64(590+i) || string(ev.Payload) != string(payloadOf(size, 590+i)) {
			t.Fatalf("event %d: seq %d payload %.20s", i, ev.Seq, ev.Payload)
		}
	}
	since := uint64(100)
	if res, _ := b.Read("user.big", &since, 5); !res.Truncated || len(res.Events) != 5 {
		t.Fatalf("a read from before the oldest held is not marked truncated: %+v", res)
	}
	// One event larger than the budget is still kept (alone).
	huge := payloadOf(200<<10, 0)
	if _, err := b.Publish("user.big", huge); err != nil {
		t.Fatal(err)
	}
	if res, _ := b.Read("user.big", nil, MaxReadLimit); len(res.Events) != 1 || *res.OldestSeq != 600 {
		t.Fatalf("after a huge event: %d events, oldest %d", len(res.Events), *res.OldestSeq)
	}
}

// TestRingBytesSubscriber: a subscriber that lags behind the byte
// budget's evictions gets exact drop markers: every seq is either
// delivered or counted in a marker, in order.
func TestRingBytesSubscriber(t *testing.T) {
	b := newTestBus(t, Options{RingBytes: 8 << 10})
	block := make(chan struct{})
	var got []Event
	done := make(chan struct{})
	first := true
	sub, err := b.Subscribe("user.s", func(ev Event) error {
		if first {
			first = false
			<-block
		}
		got = append(got, ev)
		if _, _, marker := IsMarker(ev); !marker && ev.Seq == 99 {
			close(done)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Close()
	for i := range 100 {
		if _, err := b.Publish("user.s", payloadOf(1<<10, i)); err != nil {
			t.Fatal(err)
		}
	}
	close(block)
	<-done
	next, markers := uint64(0), 0
	for _, ev := range got {
		if dropped, latest, ok := IsMarker(ev); ok {
			markers++
			if latest+1-next != dropped {
				t.Fatalf("marker {dropped %d, latest_seq %d} after seq %d", dropped, latest, next)
			}
			next = latest + 1
			continue
		}
		if ev.Seq != next {
			t.Fatalf("event %d where %d was due", ev.Seq, next)
		}
		next++
	}
	if markers == 0 {
		t.Fatal("a subscriber lagging 100 KiB behind an 8 KiB ring got no drop marker")
	}
}

// TestMaxPayload: a client payload over the cap is refused with
// TOO_LARGE and takes no seq.
func TestMaxPayload(t *testing.T) {
	b := newTestBus(t, Options{MaxPayload: 1000})
	if _, err := b.PublishClient("user.p", payloadOf(1001, 0)); rpc.CodeOf(err) != rpc.TooLarge {
		t.Fatalf("oversize payload: %v", err)
	}
	ev, err := b.PublishClient("user.p", payloadOf(1000, 0))
	if err != nil || ev.Seq != 0 {
		t.Fatalf("payload at the cap: %+v %v", ev, err)
	}
}
