package bus

import (
	"encoding/json"
	"runtime"
	"sync/atomic"
	"testing"
	"time"
)

var benchPayload = json.RawMessage(`{"phase":"test","passed":1310}`)

// loadedBus is a bus with fast subscribers (a sink that accepts at once)
// and stalled ones (a sink that blocks until release) on one channel.
type loadedBus struct {
	bus     *Bus
	release chan struct{}
	fast    []*Subscription
	stalled []*Subscription
}

func newLoadedBus(tb testing.TB, channel string, fast, stalled int) *loadedBus {
	tb.Helper()
	l := &loadedBus{bus: New(Options{}), release: make(chan struct{})}
	for range fast {
		s, err := l.bus.Subscribe(channel, func(Event) error { return nil })
		if err != nil {
			tb.Fatal(err)
		}
		l.fast = append(l.fast, s)
	}
	for range stalled {
		s, err := l.bus.Subscribe(channel, func(Event) error {
			<-l.release
			return nil
		})
		if err != nil {
			tb.Fatal(err)
		}
		l.stalled = append(l.stalled, s)
	}
	return l
}

// settle waits until every fast subscriber has accounted for next events
// (delivered or dropped), so their writers do not eat the CPU of whatever
// is measured next.
func (l *loadedBus) settle(next uint64) {
	for _, s := range l.fast {
		for s.Delivered()+s.Dropped() < next {
			runtime.Gosched()
		}
	}
}

func (l *loadedBus) close() {
	close(l.release)
	for _, s := range append(l.fast, l.stalled...) {
		s.Close()
	}
}

func publishN(tb testing.TB, b *Bus, channel string, n int) {
	for range n {
		if _, err := b.Publish(channel, benchPayload); err != nil {
			tb.Fatal(err)
		}
	}
}

// BenchmarkPublish measures in-process publish throughput on one channel
// with no subscriber and with 100 subscribers of which one is stalled.
// Compare the two events/s figures, or see BenchmarkPublishStalledRatio.
func BenchmarkPublish(b *testing.B) {
	for _, tc := range []struct {
		name          string
		fast, stalled int
	}{
		{"subscribers=0", 0, 0},
		{"subscribers=100,stalled=1", 99, 1},
	} {
		b.Run(tc.name, func(b *testing.B) {
			l := newLoadedBus(b, "user.bench", tc.fast, tc.stalled)
			defer l.close()
			b.ReportAllocs()
			b.ResetTimer()
			publishN(b, l.bus, "user.bench", b.N)
			b.StopTimer()
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "events/s")
		})
	}
}

// BenchmarkPublishStalledRatio alternates rounds of publishing on a bus
// without subscribers and on one with 100 subscribers (one stalled), in
// the same run, and reports both rates and their ratio (target ≥ 0.5).
func BenchmarkPublishStalledRatio(b *testing.B) {
	base := New(Options{})
	loaded := newLoadedBus(b, "user.bench", 99, 1)
	defer loaded.close()
	const round = 1 << 14
	var baseTime, loadedTime time.Duration
	var next uint64
	b.ResetTimer()
	for done := 0; done < b.N; done += round {
		n := min(round, b.N-done)

		t0 := time.Now()
		publishN(b, base, "user.bench", n)
		baseTime += time.Since(t0)

		t0 = time.Now()
		publishN(b, loaded.bus, "user.bench", n)
		loadedTime += time.Since(t0)

		next += uint64(n)
		b.StopTimer()
		loaded.settle(next)
		b.StartTimer()
	}
	b.StopTimer()
	baseRate := float64(b.N) / baseTime.Seconds()
	loadedRate := float64(b.N) / loadedTime.Seconds()
	b.ReportMetric(baseRate, "base-events/s")
	b.ReportMetric(loadedRate, "loaded-events/s")
	b.ReportMetric(loadedRate/baseRate, "ratio")
}

// BenchmarkPublishParallel measures publishers on all CPUs, each on its own
// channel and all on one shared channel.
func BenchmarkPublishParallel(b *testing.B) {
	b.Run("own-channel", func(b *testing.B) {
		bus := New(Options{})
		var id atomic.Int64
		b.RunParallel(func(pb *testing.PB) {
			channel := "user.bench." + string(rune('a'+id.Add(1)%26))
			for pb.Next() {
				if _, err := bus.Publish(channel, benchPayload); err != nil {
					b.Error(err)
					return
				}
			}
		})
	})
	b.Run("shared-channel", func(b *testing.B) {
		bus := New(Options{})
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				if _, err := bus.Publish("user.bench", benchPayload); err != nil {
					b.Error(err)
					return
				}
			}
		})
	})
}
