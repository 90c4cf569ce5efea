package kernel_test

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/shoal-sh/shoal/core/kernel"
	"github.com/shoal-sh/shoal/core/rpc"
	"github.com/shoal-sh/shoal/internal/testkernel"
)

// startWithConfig serves a kernel whose config.toml is cfg.
func startWithConfig(t *testing.T, cfg string) *running {
	t.Helper()
	dir := shortDir(t)
	if err := os.WriteFile(filepath.Join(dir, kernel.ConfigName), []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	return start(t, dir)
}

func attachFrame(token string) string {
	return fmt.Sprintf(`{"jsonrpc":"2.0","id":1,"method":"session.attach","params":{"token":%q}}`, token)
}

// TestConnectionsPerUID: one connection over the peer's cap gets one
// TOO_MANY_CONNECTIONS frame and is closed; once one closes, a new one
// is served.
func TestConnectionsPerUID(t *testing.T) {
	r := startWithConfig(t, "[limits]\nconnections_per_uid = 5\n")
	// Five connections, each attached (so counted). One may be refused
	// while the probe that saw the kernel start is still counted: dial
	// again.
	var held []net.Conn
	for tries := 0; len(held) < 5; tries++ {
		if tries > 100 {
			t.Fatal("could not open five connections")
		}
		c, err := net.Dial("unix", r.k.Socket())
		if err != nil {
			t.Fatal(err)
		}
		fmt.Fprintln(c, attachFrame(r.k.Token()))
		line, err := bufio.NewReader(c).ReadString('\n')
		if err != nil || !strings.Contains(line, `"result"`) {
			c.Close()
			time.Sleep(10 * time.Millisecond)
			continue
		}
		defer c.Close()
		held = append(held, c)
	}
	c, err := net.Dial("unix", r.k.Socket())
	if err != nil {
		t.Fatal(err)
	}
	all, _ := io.ReadAll(c)
	c.Close()
	var m map[string]any
	if err := json.Unmarshal(all, &m); err != nil || errCode(m) != int(rpc.TooManyConnections) {
		t.Fatalf("sixth connection got %q (%v); want one TOO_MANY_CONNECTIONS frame", all, err)
	}
	held[0].Close()
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		ans := rawMaybe(r.k.Socket(), attachFrame(r.k.Token()))
		if ans != nil && errCode(ans) == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no connection admitted after one closed: %v", ans)
		}
	}
}

// rawMaybe is raw for one frame, nil when the connection fails.
func rawMaybe(sock, frame string) map[string]any {
	c, err := net.Dial("unix", sock)
	if err != nil {
		return nil
	}
	defer c.Close()
	fmt.Fprintln(c, frame)
	line, err := bufio.NewReader(c).ReadBytes('\n')
	if err != nil {
		return nil
	}
	var m map[string]any
	if json.Unmarshal(line, &m) != nil {
		return nil
	}
	return m
}

// TestFrameBeforeAttach: before attach a frame over 64 KiB is refused
// (TOO_LARGE) and the connection goes on; after attach the same frame is
// read.
func TestFrameBeforeAttach(t *testing.T) {
	r := start(t, shortDir(t))
	big := `{"jsonrpc":"2.0","id":2,"method":"kernel.status","params":{"pad":"` + strings.Repeat("p", 100<<10) + `"}}`
	ans := raw(t, r.k.Socket(), big, attachFrame(r.k.Token()), big)
	if errCode(ans[0]) != int(rpc.TooLarge) || errCode(ans[1]) != 0 || errCode(ans[2]) == int(rpc.TooLarge) || ans[2]["id"] != 2.0 {
		t.Fatalf("before attach %v, attach %v, after attach %v", ans[0], ans[1], ans[2])
	}
}

// TestAttachTimeout: a connection that does not attach in time is closed.
func TestAttachTimeout(t *testing.T) {
	r := startWithConfig(t, "[limits]\nattach_timeout = \"100ms\"\n")
	c, err := net.Dial("unix", r.k.Socket())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, err := c.Read(make([]byte, 1)); err != io.EOF {
		t.Fatalf("unattached connection: read %v; want EOF (closed by the kernel)", err)
	}
	// An attached one stays.
	c2, err := net.Dial("unix", r.k.Socket())
	if err != nil {
		t.Fatal(err)
	}
	defer c2.Close()
	br := bufio.NewReader(c2)
	fmt.Fprintln(c2, attachFrame(r.k.Token()))
	if _, err := br.ReadString('\n'); err != nil {
		t.Fatal(err)
	}
	time.Sleep(300 * time.Millisecond)
	fmt.Fprintln(c2, `{"jsonrpc":"2.0","id":2,"method":"kernel.status"}`)
	if line, err := br.ReadString('\n'); err != nil || !strings.Contains(line, `"result"`) {
		t.Fatalf("attached connection after the attach timeout: %q %v", line, err)
	}
}

const fdChildEnv = "SHOAL_TEST_FD_CHILD"

// TestFDExhaustionChild is the kernel process of TestFDExhaustion: it
// lowers its own descriptor limit, serves a kernel on the state directory
// named by the environment and stops when its stdin closes.
func TestFDExhaustionChild(t *testing.T) {
	dir := os.Getenv(fdChildEnv)
	if dir == "" {
		t.Skip("run by TestFDExhaustion")
	}
	lim := syscall.Rlimit{Cur: 128, Max: 128}
	if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
		t.Fatal(err)
	}
	k, err := kernel.New(kernel.Options{StateDir: dir}, tableProvider{})
	if err != nil {
		t.Fatal(err)
	}
	testkernel.Serve(t, k)
	fmt.Println("serving")
	io.Copy(io.Discard, os.Stdin)
}

// TestFDExhaustion: a kernel with 128 descriptors gets 400 connections
// held open and 20,000 connection attempts; it stays up, and serves once
// the held connections close.
func TestFDExhaustion(t *testing.T) {
	if os.Getenv(fdChildEnv) != "" {
		t.Skip("in the child")
	}
	if testing.Short() {
		t.Skip("20,000 connections")
	}
	dir := shortDir(t)
	os.WriteFile(filepath.Join(dir, kernel.ConfigName), []byte("[limits]\nconnections_per_uid = 100000\n"), 0o600)
	cmd := exec.Command(os.Args[0], "-test.run=^TestFDExhaustionChild$", "-test.count=1")
	cmd.Env = append(os.Environ(), fdChildEnv+"="+dir)
	stdin, _ := cmd.StdinPipe()
	stdout, _ := cmd.StdoutPipe()
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	defer func() {
		stdin.Close()
		select {
		case <-exited:
		case <-time.After(20 * time.Second):
			cmd.Process.Kill()
		}
	}()
	br := bufio.NewReader(stdout)
	if line, err := br.ReadString('\n'); err != nil || line != "serving\n" {
		t.Fatalf("child: %q %v", line, err)
	}
	go func() {
		io.Copy(io.Discard, br)
		exited <- cmd.Wait()
	}()
	sock := filepath.Join(dir, kernel.SocketName)
	var held []net.Conn
	for range 400 {
		if c, err := net.Dial("unix", sock); err == nil {
			held = append(held, c)
		}
	}
	connected := 0
	for range 20000 {
		c, err := net.Dial("unix", sock)
		if err != nil {
			continue // the backlog is full while the kernel waits for descriptors
		}
		connected++
		c.Close()
	}
	for _, c := range held {
		c.Close()
	}
	tok, err := os.ReadFile(filepath.Join(dir, kernel.TokenName))
	if err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		select {
		case err := <-exited:
			t.Fatalf("the kernel exited: %v", err)
		default:
		}
		if ans := rawMaybe(sock, attachFrame(strings.TrimSpace(string(tok)))); ans != nil && errCode(ans) == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the kernel does not serve after the held connections closed")
		}
	}
	t.Logf("%d held, 20000 attempts (%d connected, the rest refused by a full backlog); the kernel serves", len(held), connected)
}
