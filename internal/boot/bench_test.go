package boot_test

import (
	"context"
	"os/exec"
	"sort"
	"sync"
	"testing"
	"time"

	"github.com/shoal-sh/shoal/core"
	"github.com/shoal-sh/shoal/sdk/client"
)

func p50(lat []time.Duration) time.Duration {
	sort.Slice(lat, func(i, j int) bool { return lat[i] < lat[j] })
	return lat[len(lat)/2]
}

// BenchmarkExecEcho measures `exec echo hi` over the kernel socket, the
// durable journal commit included, and beside it the journal commit alone
// (one Append, fsync included) in the same run.
func BenchmarkExecEcho(b *testing.B) {
	dir := shortDir(b)
	k := startKernel(b, dir)
	c := attach(b, dir, client.Options{Principal: "agent:bench"})
	ctx := context.Background()
	j, err := core.Lookup[core.Journal](k.Host(), core.ServiceJournal)
	if err != nil {
		b.Fatal(err)
	}
	execLat := make([]time.Duration, 0, b.N)
	commitLat := make([]time.Duration, 0, b.N)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		t0 := time.Now()
		if _, err := c.Exec(ctx, "echo hi", client.ExecOptions{}); err != nil {
			b.Fatal(err)
		}
		execLat = append(execLat, time.Since(t0))
	}
	b.StopTimer()
	for i := 0; i < b.N; i++ {
		t0 := time.Now()
		if _, err := j.Append(ctx, core.JournalRow{Session: "bench", Principal: "agent:bench", Kind: "exec", Head: "echo", Source: "echo hi", OK: true, Ref: "out:1", DurationNS: 1, Transcript: true}); err != nil {
			b.Fatal(err)
		}
		commitLat = append(commitLat, time.Since(t0))
	}
	e, cm := p50(execLat), p50(commitLat)
	b.ReportMetric(float64(e.Microseconds()), "exec-p50-µs")
	b.ReportMetric(float64(cm.Microseconds()), "commit-p50-µs")
	b.ReportMetric(float64((e - cm).Microseconds()), "exec-minus-commit-µs")
}

// BenchmarkExecConcurrent runs 16 sessions' executions at once: their
// journal rows share group commits, so throughput is far above one
// execution per fsync.
func BenchmarkExecConcurrent(b *testing.B) {
	dir := shortDir(b)
	startKernel(b, dir)
	const workers = 16
	clients := make([]*client.Client, workers)
	for i := range clients {
		clients[i] = attach(b, dir, client.Options{Principal: "agent:bench", Session: "s" + string(rune('a'+i))})
	}
	b.ResetTimer()
	t0 := time.Now()
	var wg sync.WaitGroup
	per := (b.N + workers - 1) / workers
	for _, c := range clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < per; i++ {
				if _, err := c.Exec(context.Background(), "echo hi", client.ExecOptions{}); err != nil {
					b.Error(err)
					return
				}
			}
		}()
	}
	wg.Wait()
	b.ReportMetric(float64(per*workers)/time.Since(t0).Seconds(), "execs/s")
}

// BenchmarkExecTrue compares exec of the external /bin/true through the
// kernel (socket, evaluator, process group, capture, journal) with os/exec
// running /bin/true directly in the same run. The reply waits for one
// durable journal commit; the same row committed alone is timed in the same
// loop, interleaved with the other two so that machine noise hits all three
// alike, and "ratio-minus-commit" leaves it out.
func BenchmarkExecTrue(b *testing.B) {
	dir := shortDir(b)
	kern := startKernel(b, dir)
	j, err := core.Lookup[core.Journal](kern.Host(), core.ServiceJournal)
	if err != nil {
		b.Fatal(err)
	}
	c := attach(b, dir, client.Options{Principal: "agent:bench"})
	ctx := context.Background()
	kernelLat := make([]time.Duration, 0, b.N)
	directLat := make([]time.Duration, 0, b.N)
	commitLat := make([]time.Duration, 0, b.N)
	row := core.JournalRow{Session: "bench", Principal: "agent:bench", Kind: "exec", Head: "true",
		Source: "/bin/true", Effects: []string{"proc.spawn"}, OK: true, Ref: "out:1", DurationNS: 1, Transcript: true}
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		t0 := time.Now()
		if _, err := c.Exec(ctx, "/bin/true", client.ExecOptions{}); err != nil {
			b.Fatal(err)
		}
		kernelLat = append(kernelLat, time.Since(t0))
		t0 = time.Now()
		if err := exec.Command("/bin/true").Run(); err != nil {
			b.Fatal(err)
		}
		directLat = append(directLat, time.Since(t0))
		t0 = time.Now()
		if _, err := j.Append(ctx, row); err != nil {
			b.Fatal(err)
		}
		commitLat = append(commitLat, time.Since(t0))
	}
	b.StopTimer()
	k, d, cm := p50(kernelLat), p50(directLat), p50(commitLat)
	b.ReportMetric(float64(k.Microseconds()), "kernel-p50-µs")
	b.ReportMetric(float64(d.Microseconds()), "osexec-p50-µs")
	b.ReportMetric(float64(cm.Microseconds()), "commit-p50-µs")
	b.ReportMetric(float64(k)/float64(d), "ratio")
	b.ReportMetric(float64(k-cm)/float64(d), "ratio-minus-commit")
}
