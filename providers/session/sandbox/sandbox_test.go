//go:build linux

package sandbox

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

func needLandlock(t *testing.T) {
	t.Helper()
	if ABI() < 1 {
		t.Skip("no Landlock in this kernel")
	}
}

// refused reports whether err is the OS refusing a write: EACCES from
// Landlock, or EROFS where the worker's read-only mounts answer first.
func refused(err error) bool {
	return errors.Is(err, syscall.EACCES) || errors.Is(err, syscall.EROFS)
}

// fixture: a workspace, a canary dir outside it and a denied dir.
func fixture(t *testing.T) (ws, outside, denied string, d *Domain) {
	t.Helper()
	root := t.TempDir()
	ws, outside, denied = filepath.Join(root, "ws"), filepath.Join(root, "outside"), filepath.Join(root, "state")
	for _, dir := range []string{ws, outside, denied} {
		if err := os.Mkdir(dir, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	os.WriteFile(filepath.Join(outside, "canary"), []byte("canary"), 0o644)
	os.WriteFile(filepath.Join(denied, "token"), []byte("secret"), 0o600)
	d = NewDomain(Rules{Writable: []string{ws}, Denied: []string{denied}, Devices: DefaultDevices, Required: true})
	t.Cleanup(func() { d.Close() })
	return ws, outside, denied, d
}

func TestOpenIsConfined(t *testing.T) {
	needLandlock(t)
	ws, outside, denied, d := fixture(t)
	f, err := d.Open(filepath.Join(ws, "a"), os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o644)
	if err != nil {
		t.Fatalf("write in workspace: %v", err)
	}
	f.WriteString("hi")
	f.Close()
	if b, _ := os.ReadFile(filepath.Join(ws, "a")); string(b) != "hi" {
		t.Fatalf("workspace file = %q", b)
	}
	for _, p := range []string{filepath.Join(outside, "canary"), filepath.Join(outside, "new")} {
		if _, err := d.Open(p, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o644); !refused(err) {
			t.Errorf("write %s: err %v, want EACCES or EROFS", p, err)
		}
	}
	if _, err := d.Open(filepath.Join(denied, "token"), os.O_RDONLY, 0); !errors.Is(err, syscall.EACCES) {
		t.Errorf("read denied: err %v, want EACCES", err)
	}
	if f, err := d.Open(filepath.Join(outside, "canary"), os.O_RDONLY, 0); err != nil {
		t.Errorf("read outside: %v", err)
	} else {
		f.Close()
	}
	if b, _ := os.ReadFile(filepath.Join(outside, "canary")); string(b) != "canary" {
		t.Fatalf("canary = %q", b)
	}
	if _, err := os.Stat(filepath.Join(outside, "new")); err == nil {
		t.Fatal("a file was created outside the workspace")
	}
}

func run(t *testing.T, d *Domain, dir string, argv ...string) (string, syscall.WaitStatus) {
	t.Helper()
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	null, _ := os.Open(os.DevNull)
	defer null.Close()
	p, err := d.Start(Spec{Path: argv[0], Argv: argv, Dir: dir, Env: []string{"PATH=/usr/bin:/bin"},
		Files: []*os.File{null, w, w}, Setpgid: true})
	w.Close()
	if err != nil {
		r.Close()
		t.Fatalf("start %v: %v", argv, err)
	}
	defer p.Release()
	var sb strings.Builder
	buf := make([]byte, 4096)
	for {
		n, err := r.Read(buf)
		sb.Write(buf[:n])
		if err != nil {
			break
		}
	}
	r.Close()
	st, err := p.Wait()
	if err != nil {
		t.Fatalf("wait: %v", err)
	}
	return sb.String(), st
}

func TestProcessesAreConfined(t *testing.T) {
	needLandlock(t)
	ws, outside, denied, d := fixture(t)
	out, st := run(t, d, ws, "/bin/sh", "-c", "echo ok > in && cat in && echo x > "+outside+"/canary; cat "+denied+"/token; ln -s "+outside+"/canary l && echo y > l; exit 3")
	if st.ExitStatus() != 3 {
		t.Fatalf("exit %d, out %q", st.ExitStatus(), out)
	}
	if !strings.HasPrefix(out, "ok\n") || !strings.Contains(out, "Permission denied") {
		t.Errorf("output %q", out)
	}
	if b, _ := os.ReadFile(filepath.Join(outside, "canary")); string(b) != "canary" {
		t.Fatalf("canary = %q", b)
	}
	if strings.Contains(out, "secret") {
		t.Fatal("the denied file was read")
	}
}

func TestCloseEndsEscapedProcesses(t *testing.T) {
	needLandlock(t)
	ws, _, _, d := fixture(t)
	// A setsid'd, double-forked sleep that writes its pid down.
	out, st := run(t, d, ws, "/bin/sh", "-c", "setsid sh -c 'sleep 300 >/dev/null 2>&1 & echo $! > pid' >/dev/null 2>&1 & sleep 0.2; cat pid")
	if st.ExitStatus() != 0 {
		t.Fatalf("exit %d: %q", st.ExitStatus(), out)
	}
	pid, err := strconv.Atoi(strings.TrimSpace(out))
	if err != nil {
		t.Fatalf("pid %q", out)
	}
	if syscall.Kill(pid, 0) != nil {
		t.Fatal("the escaped sleep is not running")
	}
	d.Close()
	deadline := time.Now().Add(10 * time.Second)
	for syscall.Kill(pid, 0) == nil && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if syscall.Kill(pid, 0) == nil {
		syscall.Kill(pid, syscall.SIGKILL)
		t.Fatal("the escaped sleep outlived its domain")
	}
}

func TestWorkerDeathFailsRequests(t *testing.T) {
	needLandlock(t)
	ws, _, _, d := fixture(t)
	w, err := d.worker()
	if err != nil {
		t.Fatal(err)
	}
	w.cmd.Process.Kill()
	<-w.done
	// The next use starts a new worker.
	if out, st := run(t, d, ws, "/bin/echo", "again"); out != "again\n" || st.ExitStatus() != 0 {
		t.Fatalf("after restart: %q %d", out, st.ExitStatus())
	}
}

func TestRulesExplain(t *testing.T) {
	r := Rules{Writable: []string{"/w", "/tmp/s"}, Denied: []string{"/w/state"}, Devices: DefaultDevices}
	for p, want := range map[string]bool{"/w/a": true, "/w": true, "/wx": false, "/w/state/x": false, "/etc/passwd": false, "/dev/null": true} {
		if got := r.WritablePath(p); got != want {
			t.Errorf("WritablePath(%s) = %v", p, got)
		}
	}
	if r.ReadablePath("/w/state/token") || !r.ReadablePath("/etc/passwd") {
		t.Error("ReadablePath")
	}
	w := r.Widen("/etc/passwd", "relative")
	if !w.WritablePath("/etc/passwd") || r.WritablePath("/etc/passwd") {
		t.Error("Widen")
	}
}

// A writable tree holding a denied one: the denied one stays out of reach.
func TestWritableAroundDenied(t *testing.T) {
	needLandlock(t)
	root := t.TempDir()
	state, other := filepath.Join(root, "state"), filepath.Join(root, "other")
	os.Mkdir(state, 0o700)
	os.Mkdir(other, 0o700)
	os.WriteFile(filepath.Join(state, "policy.toml"), []byte("orig"), 0o600)
	d := NewDomain(Rules{Writable: []string{root}, Denied: []string{state}, Devices: DefaultDevices, Required: true})
	defer d.Close()
	if f, err := d.Open(filepath.Join(other, "ok"), os.O_WRONLY|os.O_CREATE, 0o644); err != nil {
		t.Fatalf("write beside the denied dir: %v", err)
	} else {
		f.Close()
	}
	for _, p := range []string{filepath.Join(state, "policy.toml"), filepath.Join(state, "new")} {
		if _, err := d.Open(p, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o644); !refused(err) {
			t.Errorf("write %s: %v, want EACCES or EROFS", p, err)
		}
	}
	out, _ := run(t, d, other, "/bin/sh", "-c", "mv "+state+" "+root+"/moved; rm -rf "+state+"; echo x > "+state+"/policy.toml; echo done")
	if !strings.HasSuffix(out, "done\n") {
		t.Fatalf("out %q", out)
	}
	if b, _ := os.ReadFile(filepath.Join(state, "policy.toml")); string(b) != "orig" {
		t.Fatalf("policy = %q", b)
	}
}

func TestRequestEncoding(t *testing.T) {
	in := request{Op: "spawn", ID: 1 << 40, Path: "/bin/sh", Flag: os.O_WRONLY | os.O_CREATE, Perm: 0o644,
		Argv: []string{"sh", "-c", "echo é"}, Env: []string{"A=1", "B="}, Dir: "/w", Setsid: true, Setctty: true, Ctty: 2}
	b, err := in.MarshalBinary()
	if err != nil {
		t.Fatal(err)
	}
	var out request
	if err := out.UnmarshalBinary(b); err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(in) != fmt.Sprint(out) {
		t.Fatalf("%+v != %+v", out, in)
	}
	for i := range b {
		var r request
		if err := r.UnmarshalBinary(b[:i]); err == nil {
			t.Fatalf("a request cut at %d of %d decoded", i, len(b))
		}
	}
}
