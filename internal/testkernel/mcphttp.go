package testkernel

import (
	"bufio"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// ServeMCPHTTP starts the shoal-mcp binary bin over streamable HTTP with
// a kernel of its own (--in-process) in stateDir, and returns the URL it
// serves on and its bearer token. It stops the facade with SIGTERM when
// the test ends.
func ServeMCPHTTP(tb testing.TB, bin, stateDir, principal string) (endpoint, token string) {
	tb.Helper()
	cmd := exec.Command(bin, "--state-dir", stateDir, "--in-process", "--principal", principal, "--http", "127.0.0.1:0")
	cmd.Dir = tb.TempDir()
	stderr, err := cmd.StderrPipe()
	if err != nil {
		tb.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		tb.Fatal(err)
	}
	exited := make(chan error, 1)
	urls := make(chan string, 1)
	var mu sync.Mutex
	var log strings.Builder
	go func() {
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			mu.Lock()
			log.WriteString(sc.Text() + "\n")
			mu.Unlock()
			if _, rest, ok := strings.Cut(sc.Text(), "serving MCP on "); ok {
				urls <- strings.Fields(rest)[0]
				break
			}
		}
		io.Copy(io.Discard, stderr)
		exited <- cmd.Wait()
	}()
	tb.Cleanup(func() {
		cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-exited:
		case <-time.After(time.Minute):
			cmd.Process.Kill()
			tb.Error("facade did not exit on SIGTERM")
		}
	})
	select {
	case endpoint = <-urls:
	case err := <-exited:
		exited <- err
		mu.Lock()
		defer mu.Unlock()
		tb.Fatalf("facade exited: %v\n%s", err, log.String())
	case <-time.After(time.Minute):
		mu.Lock()
		defer mu.Unlock()
		tb.Fatalf("facade did not start serving HTTP:\n%s", log.String())
	}
	// The facade made its bearer token before it said where it serves.
	b, err := os.ReadFile(filepath.Join(stateDir, "http.token"))
	if err != nil {
		tb.Fatal(err)
	}
	return endpoint, strings.TrimSpace(string(b))
}
