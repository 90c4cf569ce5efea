package kernel_test

import (
	"context"
	"encoding/json"
	"fmt"
	"sort"
	"sync"
	"sync/atomic"
	"testing"
	"time"

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
