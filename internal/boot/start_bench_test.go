package boot_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/shoal-sh/shoal/core"
	"github.com/shoal-sh/shoal/core/kernel"
	"github.com/shoal-sh/shoal/internal/boot"
	"github.com/shoal-sh/shoal/internal/testkernel"
	"github.com/shoal-sh/shoal/providers/journal"
	"github.com/shoal-sh/shoal/sdk/client"
)

// BenchmarkKernelStartJournal starts a whole kernel (every built-in
// family), until it answers a first session.attach on its socket, over
// a state directory whose journal is empty and over one whose journal
// holds 1M rows, interleaved, and reports the medians and their ratio
// (held figure: 1.11×). Each kernel is stopped before the next starts.
// Both directories were started once before (token, policy, content
// store made), so they differ only in the journal. The 1M rows are
// appended once per run, through the journal's own API (without fsync),
// like BenchmarkQuery1M's: 50 principals, 40 heads, a few effects each.
func BenchmarkKernelStartJournal(b *testing.B) {
	empty, big := shortDir(b), shortDir(b)
	for _, dir := range []string{empty, big} {
		testkernel.AllowTempWrites(b, dir)
		startStop(b, dir) // makes the token, the content store, the journal
	}
	t0 := time.Now()
	path := filepath.Join(big, journal.FileName)
	fillJournal(b, path, 1_000_000)
	fi, err := os.Stat(path)
	if err != nil {
		b.Fatal(err)
	}
	b.Logf("appended 1M journal rows in %v (%d MiB)", time.Since(t0).Round(time.Millisecond), fi.Size()>>20)
	startStop(b, big) // the first open after the appends, not timed
	var bigT, emptyT []time.Duration
	for b.Loop() {
		bigT = append(bigT, startStop(b, big))
		emptyT = append(emptyT, startStop(b, empty))
	}
	bm, em := p50(bigT), p50(emptyT)
	b.ReportMetric(float64(bm.Microseconds()), "1M-rows-µs")
	b.ReportMetric(float64(em.Microseconds()), "empty-µs")
	b.ReportMetric(float64(bm)/float64(em), "1M-vs-empty")
}

// startStop starts a kernel on dir, times it until it has answered a
// session.attach, and stops it.
func startStop(b *testing.B, dir string) time.Duration {
	b.Helper()
	t0 := time.Now()
	k, err := boot.NewKernel(kernel.Options{StateDir: dir})
	if err != nil {
		b.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- k.Serve(context.Background()) }()
	var c *client.Client
	for deadline := t0.Add(20 * time.Second); ; time.Sleep(50 * time.Microsecond) {
		if c, err = client.Dial(context.Background(), client.Options{StateDir: dir}); err == nil {
			break
		}
		if !errors.Is(err, client.ErrNoKernel) || time.Now().After(deadline) {
			b.Fatalf("kernel on %s: %v", dir, err)
		}
	}
	d := time.Since(t0)
	c.Close()
	k.Stop()
	if err := <-done; err != nil {
		b.Fatal(err)
	}
	return d
}

// fillJournal appends n execution rows to the journal at path, from
// enough goroutines at once that the writer commits them in large
// batches.
func fillJournal(b *testing.B, path string, n int) {
	b.Helper()
	j, err := journal.Open(path, journal.Options{NoSync: true, MaxBatch: 4096})
	if err != nil {
		b.Fatal(err)
	}
	effects := []string{"fs.read", "fs.write", "fs.delete", "proc.spawn", "net", "env.write", "pty", "event.publish"}
	var next atomic.Int64
	var wg sync.WaitGroup
	errs := make(chan error, 1)
	for range 512 {
		wg.Go(func() {
			for i := int(next.Add(1)); i <= n; i = int(next.Add(1)) {
				var eff []string
				for k, e := range effects {
					if (i*7+k*13)%5 == 0 {
						eff = append(eff, e)
					}
				}
				_, err := j.Append(context.Background(), core.JournalRow{
					Session: "main", Kind: "exec",
					Principal: fmt.Sprintf("agent:%d", i%50), Head: fmt.Sprintf("cmd%d", i%40),
					Source: "some command --with flags | and a pipe", Effects: eff, OK: i%5 != 0,
					Ref: fmt.Sprintf("out:%d", i),
				})
				if err != nil {
					select {
					case errs <- err:
					default:
					}
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	if err := <-errs; err != nil {
		b.Fatal(err)
	}
	if err := j.Close(); err != nil {
		b.Fatal(err)
	}
}
