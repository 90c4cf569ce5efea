// Package testkernel runs kernels for tests: in process, on a short state
// directory (unix socket paths are limited to 108 bytes), stopped and
// removed when the test ends.
package testkernel

import (
	"context"
	"net"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/shoal-sh/shoal/core/kernel"
	"github.com/shoal-sh/shoal/internal/boot"
	"github.com/shoal-sh/shoal/sdk/client"
)

// ShortDir returns a fresh directory under the system temp dir, removed
// at cleanup.
func ShortDir(tb testing.TB) string {
	tb.Helper()
	d, err := os.MkdirTemp("", "shk")
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { os.RemoveAll(d) })
	return d
}

// Serve serves k until the test ends and returns once it answers on its
// socket. The returned stop function stops it early (it is safe to call
// twice).
func Serve(tb testing.TB, k *kernel.Kernel) (stop func()) {
	tb.Helper()
	done := make(chan error, 1)
	go func() { done <- k.Serve(context.Background()) }()
	var once sync.Once
	stop = func() {
		once.Do(func() {
			k.Stop()
			<-done
		})
	}
	tb.Cleanup(stop)
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(5 * time.Millisecond) {
		if c, err := net.Dial("unix", k.Socket()); err == nil {
			c.Close()
			return stop
		}
		if time.Now().After(deadline) {
			tb.Fatalf("kernel never answered on %s", k.Socket())
		}
	}
}

// Start runs a full kernel (every built-in family, and the plugins of
// opts.PluginDirs) on opts.StateDir, a fresh short directory when empty.
func Start(tb testing.TB, opts kernel.Options) *kernel.Kernel {
	tb.Helper()
	if opts.StateDir == "" {
		opts.StateDir = ShortDir(tb)
	}
	k, err := boot.NewKernel(opts)
	if err != nil {
		tb.Fatal(err)
	}
	Serve(tb, k)
	return k
}

// Attach connects to the kernel of stateDir; the client closes at cleanup.
func Attach(tb testing.TB, stateDir string, o client.Options) *client.Client {
	tb.Helper()
	o.StateDir = stateDir
	c, err := client.Dial(context.Background(), o)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { c.Close() })
	return c
}
