//go:build linux

package pty

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/shoal-sh/shoal/providers/session/sandbox"
)

// BenchmarkOpenConfined compares pty.open (program started, first screen
// settled, then closed) in a session's Landlock domain with the same open
// unconfined, interleaved in one run (target: ≤ 1.25×).
func BenchmarkOpenConfined(b *testing.B) {
	if sandbox.ABI() < 1 {
		b.Skip("no Landlock in this kernel")
	}
	root := b.TempDir()
	ws := filepath.Join(root, "ws")
	os.Mkdir(ws, 0o700)
	d := sandbox.NewDomain(sandbox.Rules{Writable: []string{ws}, Denied: []string{filepath.Join(root, "state")},
		Devices: sandbox.DefaultDevices, Required: true})
	defer d.Close()
	confined, plain := New(), New()
	confined.DomainOf = func(string) *sandbox.Domain { return d }
	defer confined.Close()
	defer plain.Close()
	ctx := context.Background()
	open := func(m *Manager) time.Duration {
		t0 := time.Now()
		s, err := m.Open(ctx, alice, OpenOptions{Command: "echo ready", Cols: 80, Rows: 24, Cwd: ws, Settle: 0})
		if err != nil {
			b.Fatal(err)
		}
		el := time.Since(t0)
		if _, err := m.ClosePTY(alice.Session, s.PTY); err != nil {
			b.Fatal(err)
		}
		return el
	}
	open(confined) // the worker starts once per session
	var c, u []time.Duration
	b.ResetTimer()
	for range b.N {
		c = append(c, open(confined))
		u = append(u, open(plain))
	}
	b.StopTimer()
	slices.Sort(c)
	slices.Sort(u)
	mc, mu := c[len(c)/2], u[len(u)/2]
	b.ReportMetric(float64(mc.Microseconds()), "confined-p50-µs")
	b.ReportMetric(float64(mu.Microseconds()), "unconfined-p50-µs")
	b.ReportMetric(float64(mc)/float64(mu), "ratio")
}
