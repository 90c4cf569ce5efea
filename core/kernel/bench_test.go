package kernel_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"sort"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/shoal-sh/shoal/core/kernel"
	"github.com/shoal-sh/shoal/core/statedir"
	"github.com/shoal-sh/shoal/sdk/client"
)

// BenchmarkEventsReadRoundTrip measures one events.read over the unix
// socket, reporting p50 next to the round trip of a bare connection echo
// (kernel.status is not free; the baseline is the cheapest attached call
// that touches no channel: events.read of an unknown channel).
func BenchmarkEventsReadRoundTrip(b *testing.B) {
	r := start(b, shortDir(b))
	c := dial(b, r.dir, client.Options{Principal: "agent:bench"})
	ctx := context.Background()
	for i := 0; i < 200; i++ {
		if _, err := c.Publish(ctx, "user.bench", map[string]int{"i": i}); err != nil {
			b.Fatal(err)
		}
	}
	since := uint64(150)
	measure := func(channel string) time.Duration {
		lat := make([]time.Duration, 0, b.N)
		for i := 0; i < b.N; i++ {
			t0 := time.Now()
			if _, err := c.Events(ctx, channel, &since, 10); err != nil {
				b.Fatal(err)
			}
			lat = append(lat, time.Since(t0))
		}
		sort.Slice(lat, func(i, j int) bool { return lat[i] < lat[j] })
		return lat[len(lat)/2]
	}
	b.ResetTimer()
	p50 := measure("user.bench")
	b.StopTimer()
	base := measure("user.none")
	b.ReportMetric(float64(p50.Microseconds()), "p50-µs")
	b.ReportMetric(float64(base.Microseconds()), "empty-read-p50-µs")
}

// BenchmarkEventsPublishOneConn measures events.publish throughput over
// one connection with requests pipelined by 16 and by 64 goroutines.
func BenchmarkEventsPublishOneConn(b *testing.B) {
	for _, callers := range []int{16, 64} {
		b.Run(fmt.Sprintf("callers=%d", callers), func(b *testing.B) { publishOneConn(b, callers) })
	}
}

func publishOneConn(b *testing.B, callers int) {
	r := start(b, shortDir(b))
	c := dial(b, r.dir, client.Options{Principal: "agent:bench"})
	ctx := context.Background()
	payload := json.RawMessage(`{"phase":"test","passed":1310}`)
	var n atomic.Int64
	var wg sync.WaitGroup
	b.ResetTimer()
	t0 := time.Now()
	for w := 0; w < callers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for n.Add(1) <= int64(b.N) {
				if _, err := c.Publish(ctx, "user.bench", payload); err != nil {
					b.Error(err)
					return
				}
			}
		}()
	}
	wg.Wait()
	b.ReportMetric(float64(b.N)/time.Since(t0).Seconds(), "events/s")
}

// rawSubscriber is a subscriber over its own socket connection that only
// counts the frames it reads, so the benchmark measures the kernel's
// fan-out, not a client library's decoding in the same process.
type rawSubscriber struct {
	conn   net.Conn
	frames atomic.Int64
	reads  atomic.Int64 // reads that returned frames
	done   chan struct{}
}

func subscribeRaw(tb testing.TB, dir, channel string) *rawSubscriber {
	tb.Helper()
	token, err := statedir.ReadToken(dir, statedir.TokenName)
	if err != nil {
		tb.Fatal(err)
	}
	conn, err := net.Dial("unix", filepath.Join(dir, kernel.SocketName))
	if err != nil {
		tb.Fatal(err)
	}
	fmt.Fprintf(conn, `{"jsonrpc":"2.0","id":1,"method":"session.attach","params":{"token":%q,"principal":"agent:bench"}}`+"\n", token)
	fmt.Fprintf(conn, `{"jsonrpc":"2.0","id":2,"method":"events.subscribe","params":{"channel":%q}}`+"\n", channel)
	s := &rawSubscriber{conn: conn, done: make(chan struct{})}
	ready := make(chan struct{})
	go func() {
		defer close(s.done)
		buf := make([]byte, 256<<10)
		seen := 0
		for {
			n, err := conn.Read(buf)
			if n > 0 {
				k := bytes.Count(buf[:n], []byte{'\n'})
				if seen < 2 && seen+k >= 2 {
					close(ready)
				}
				seen += k
				s.frames.Add(int64(k))
				s.reads.Add(1)
			}
			if err != nil {
				return
			}
		}
	}()
	select {
	case <-ready:
	case <-time.After(20 * time.Second):
		tb.Fatal("subscribe not answered")
	}
	s.frames.Add(-2) // the two answers
	return s
}

func (s *rawSubscriber) close() {
	s.conn.Close()
	<-s.done
}

// BenchmarkPublishFanout publishes b.N events over the socket (16
// goroutines pipelining on one connection) with 0, 1, 10, 100 and 1,000
// subscribers, each on its own connection, and reports the publish rate
// of each next to the rate with none, in the same run (targets: ≥ 10k/s
// and ≥ 0.3× with 100). It also reports, per count, the share of events
// the subscribers received (frames, drop markers included) by the last
// publish's answer plus up to 10 s: a subscriber that falls behind gets a
// drop marker instead of what it missed, by design.
func BenchmarkPublishFanout(b *testing.B) {
	dir := shortDir(b)
	if err := os.WriteFile(filepath.Join(dir, kernel.ConfigName), []byte("[limits]\nconnections_per_uid = 2000\n"), 0o600); err != nil {
		b.Fatal(err)
	}
	r := start(b, dir)
	pub := dial(b, r.dir, client.Options{Principal: "agent:bench"})
	ctx := context.Background()
	payload := json.RawMessage(`{"phase":"test","passed":1310}`)
	var base float64
	for round, subs := range []int{0, 1, 10, 100, 1000} {
		channel := fmt.Sprintf("user.fan%d", round)
		subsList := make([]*rawSubscriber, 0, subs)
		for range subs {
			subsList = append(subsList, subscribeRaw(b, r.dir, channel))
		}
		received := func() int64 {
			var t int64
			for _, s := range subsList {
				t += s.frames.Load()
			}
			return t
		}
		var n atomic.Int64
		var wg sync.WaitGroup
		cpu0 := cpuTime()
		t0 := time.Now()
		for range 16 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for n.Add(1) <= int64(b.N) {
					if _, err := pub.Publish(ctx, channel, payload); err != nil {
						b.Error(err)
						return
					}
				}
			}()
		}
		wg.Wait()
		rate := float64(b.N) / time.Since(t0).Seconds()
		want := int64(b.N) * int64(subs)
		for deadline := time.Now().Add(10 * time.Second); received() < want && time.Now().Before(deadline); {
			time.Sleep(5 * time.Millisecond)
		}
		// CPU of the whole process (kernel, publisher and subscribers)
		// per event until the subscribers had it: less at the mercy of
		// other load on the machine than the rate.
		b.ReportMetric(float64(cpuTime()-cpu0)/float64(time.Microsecond)/float64(b.N), fmt.Sprintf("cpu-µs/event-%d", subs))
		if subs == 0 {
			base = rate
		} else {
			b.ReportMetric(float64(received())/float64(want), fmt.Sprintf("received-share-%d", subs))
			var reads int64
			for _, s := range subsList {
				reads += s.reads.Load()
			}
			// How many events a write carried, roughly (a read may
			// take more than one write).
			b.ReportMetric(float64(received())/float64(max(reads, 1)), fmt.Sprintf("frames/read-%d", subs))
			b.ReportMetric(rate/base, fmt.Sprintf("ratio-%d-vs-0", subs))
		}
		b.ReportMetric(rate, fmt.Sprintf("events/s-%d", subs))
		for _, s := range subsList {
			s.close()
		}
	}
}

// cpuTime is the user and system CPU time the process has used.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
