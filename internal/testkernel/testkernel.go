// Package testkernel runs kernels for tests: in process, on a short state
// directory (unix socket paths are limited to 108 bytes), stopped and
// removed when the test ends.
package testkernel

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/shoal-sh/shoal/core/kernel"
	"github.com/shoal-sh/shoal/internal/boot"
	"github.com/shoal-sh/shoal/sdk/client"
)

// StateParent is where tests make state directories: outside the system
// temp dir when it can be. A state directory is never readable from a
// session, so Landlock rules grant read (and, under [TestPolicy], write)
// around it entry by entry; in /tmp, the test's own temp dirs made after
// a session started would then be out of its reach.
func StateParent() string {
	if fi, err := os.Stat("/var/tmp"); err == nil && fi.IsDir() && filepath.Clean(os.TempDir()) != "/var/tmp" {
		return "/var/tmp"
	}
	return ""
}

// ShortDir returns a fresh directory for a state directory (see
// [StateParent]), removed at cleanup.
func ShortDir(tb testing.TB) string {
	tb.Helper()
	d, err := os.MkdirTemp(StateParent(), "shk")
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
	AllowTempWrites(tb, opts.StateDir)
	k, err := boot.NewKernel(opts)
	if err != nil {
		tb.Fatal(err)
	}
	Serve(tb, k)
	return k
}

// TestPolicy is the policy tests run under unless they write their own:
// the default rules, and a sandbox that also lets sessions write in the
// system temp dir, where tests keep their files. The state directory,
// though it lies there too, stays unreachable (the rules grant around it).
func TestPolicy() string {
	q, _ := json.Marshal(os.TempDir())
	return "[sandbox]\nwritable = [" + string(q) + "]\n"
}

// AllowTempWrites writes [TestPolicy] as stateDir's policy.toml unless
// the directory already has one.
func AllowTempWrites(tb testing.TB, stateDir string) {
	tb.Helper()
	p := filepath.Join(stateDir, "policy.toml")
	if _, err := os.Stat(p); err == nil {
		return
	}
	if err := os.MkdirAll(stateDir, 0o700); err != nil {
		tb.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(TestPolicy()), 0o600); err != nil {
		tb.Fatal(err)
	}
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

// Running reports whether process pid exists and has not exited. A
// zombie (exited, not yet reaped) has exited: it holds no file, socket
// or lock any more. Waiting for it to disappear instead waits for its
// parent to reap it, and a reparented process's parent is init, which
// on some machines (a firecracker VM's process_api) reaps only every
// second or two: a test that waited for that spent ~1.7 s per kernel it
// stopped.
func Running(pid int) bool {
	if err := syscall.Kill(pid, 0); err != nil && !errors.Is(err, syscall.EPERM) {
		return false
	}
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return !errors.Is(err, fs.ErrNotExist) // no /proc: trust kill
	}
	// The state follows the parenthesised command name, which may hold
	// spaces and parentheses itself.
	if i := bytes.LastIndexByte(b, ')'); i >= 0 && i+2 < len(b) {
		return b[i+2] != 'Z' && b[i+2] != 'X'
	}
	return true
}
