//go:build linux

package shell

import (
	"context"
	"os"
	"path/filepath"
	"sort"
	"testing"
	"time"

	"github.com/shoal-sh/shoal/providers/session/sandbox"
)

// BenchmarkConfined runs the same sources in a confined and an unconfined
// evaluator, interleaved in one run so that machine noise hits both alike,
// and reports the confined/unconfined ratio of the medians (target:
// ≤ 1.25×). `/bin/true` is a process the worker forks; `echo hi` is a
// builtin that touches nothing; the redirection opens a file through the
// worker.
func BenchmarkConfined(b *testing.B) {
	if sandbox.ABI() < 1 {
		b.Skip("no Landlock in this kernel")
	}
	for _, src := range []string{"/bin/true", "echo hi", "echo hi > out.txt"} {
		b.Run(src, func(b *testing.B) {
			root := b.TempDir()
			ws, tmp, fifo := filepath.Join(root, "ws"), filepath.Join(root, "tmp"), filepath.Join(root, "fifo")
			for _, d := range []string{ws, tmp, fifo} {
				os.Mkdir(d, 0o700)
			}
			d := sandbox.NewDomain(sandbox.Rules{Writable: []string{ws, tmp}, FileRW: []string{fifo},
				Denied: []string{filepath.Join(root, "state")}, Devices: sandbox.DefaultDevices, Required: true})
			defer d.Close()
			confined, err := New(Options{Dir: ws, Domain: d, FifoDir: fifo, TempDir: tmp})
			if err != nil {
				b.Fatal(err)
			}
			defer confined.Close()
			plain, err := New(Options{Dir: ws, TempDir: tmp})
			if err != nil {
				b.Fatal(err)
			}
			defer plain.Close()
			ctx := context.Background()
			run := func(e *Evaluator) time.Duration {
				t0 := time.Now()
				res, err := e.Run(ctx, src)
				if err != nil || res.Exit != 0 {
					b.Fatalf("%s: %v %+v", src, err, res)
				}
				return time.Since(t0)
			}
			run(confined) // the worker starts once per session
			var c, u []time.Duration
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				c = append(c, run(confined))
				u = append(u, run(plain))
			}
			b.StopTimer()
			mc, mu := median(c), median(u)
			b.ReportMetric(float64(mc.Microseconds()), "confined-p50-µs")
			b.ReportMetric(float64(mu.Microseconds()), "unconfined-p50-µs")
			b.ReportMetric(float64(mc)/float64(mu), "ratio")
		})
	}
}

func median(d []time.Duration) time.Duration {
	sort.Slice(d, func(i, j int) bool { return d[i] < d[j] })
	return d[len(d)/2]
}
