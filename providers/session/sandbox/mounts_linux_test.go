//go:build linux

package sandbox

import (
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

func needMounts(t *testing.T) {
	t.Helper()
	needLandlock(t)
	if !mayUnshareMounts() {
		t.Skip("no CAP_SYS_ADMIN here: workers get no read-only mounts")
	}
}

// Metadata changes reach outside the workspace through a link made in
// it, which Landlock does not govern; the read-only mounts refuse them,
// and keep them working in the workspace.
func TestMetadataOutsideIsRefused(t *testing.T) {
	needMounts(t)
	ws, outside, denied, d := fixture(t)
	st, err := d.Status()
	if err != nil || !st.ReadOnlyMounts || st.Reason != "" {
		t.Fatalf("status %+v, %v", st, err)
	}
	canary, token := filepath.Join(outside, "canary"), filepath.Join(denied, "token")
	before := map[string]os.FileInfo{}
	for _, p := range []string{canary, token, outside} {
		before[p], _ = os.Stat(p)
	}
	script := strings.Join([]string{
		"ln -s " + outside + " d", "ln -s " + canary + " l", "ln -s " + token + " k",
		"chmod -R 000 d/", "chown 65534:65534 l", "touch -d 2001-02-03 l", "chmod 777 k",
		"python3 -c 'import os; os.chmod(\"" + canary + "\", 0o777)' 2>/dev/null",
		"python3 -c 'import os; os.setxattr(\"l\", \"user.pwned\", b\"1\")'",
		"touch mine && chmod 600 mine && touch -d 2001-02-03 mine && stat -c %a:%Y mine",
		"mount -o remount,rw / 2>/dev/null || echo no-remount",
		"grep CapEff /proc/self/status",
	}, "; ")
	out, _ := run(t, d, ws, "/bin/sh", "-c", script)
	for p, fi := range before {
		now, err := os.Stat(p)
		if err != nil || now.Mode() != fi.Mode() || !now.ModTime().Equal(fi.ModTime()) {
			t.Errorf("%s changed: %v %v → %v %v (%v)", p, fi.Mode(), fi.ModTime(), now.Mode(), now.ModTime(), err)
		}
	}
	if n, err := syscall.Listxattr(canary, make([]byte, 256)); err != nil || n != 0 {
		t.Errorf("the canary's extended attributes changed: %d bytes, %v", n, err)
	}
	if !strings.Contains(out, "Read-only file system") {
		t.Errorf("no EROFS in %q", out)
	}
	if want := "600:" + strconv.FormatInt(time.Date(2001, 2, 3, 0, 0, 0, 0, time.Local).Unix(), 10); !strings.Contains(out, want) {
		t.Errorf("metadata in the workspace: want %s in %q", want, out)
	}
	if !strings.Contains(out, "no-remount") {
		t.Errorf("a remount went through: %q", out)
	}
	// Nothing the domain runs holds CAP_SYS_ADMIN (bit 21).
	for line := range strings.Lines(out) {
		if strings.HasPrefix(line, "CapEff:") && capBit(t, line, capSysAdmin) {
			t.Errorf("a process in the domain holds CAP_SYS_ADMIN: %s", line)
		}
	}
	// The kernel's own mounts are as they were: it can still change the
	// canary's mode.
	if err := os.Chmod(canary, 0o600); err != nil {
		t.Fatalf("the test's own namespace was changed: %v", err)
	}
}

// The domain's / is read-only, its workspace writable, and the test's
// own mounts are untouched.
func TestDomainRootIsReadOnly(t *testing.T) {
	needMounts(t)
	ws, _, _, d := fixture(t)
	out, _ := run(t, d, ws, "/bin/sh", "-c", "echo x > a && cat a; awk '$5 == \"/\" {print $6}' /proc/self/mountinfo")
	if !strings.HasPrefix(out, "x\n") {
		t.Fatalf("workspace not writable: %q", out)
	}
	if opts := strings.Fields(strings.TrimPrefix(out, "x\n")); len(opts) == 0 || !strings.HasPrefix(opts[len(opts)-1], "ro,") {
		t.Errorf("/ is not read-only in the domain: %q", out)
	}
	mounts, err := readOnlyNow()
	if err != nil || slices.Contains(mounts, "/") {
		t.Errorf("the test's / became read-only: %v %v", mounts, err)
	}
}

func TestUnescapeMountinfo(t *testing.T) {
	for in, want := range map[string]string{`/a\040b`: "/a b", `/plain`: "/plain", `/t\011x\134`: "/t\tx\\", `/cut\04`: `/cut\04`} {
		if got := unescapeMountinfo(in); got != want {
			t.Errorf("unescape(%q) = %q, want %q", in, got, want)
		}
	}
}

// BenchmarkWorkerStart starts a worker for the default-like rules and
// runs /bin/true in it, with read-only mounts and without, interleaved,
// reporting the ratio of the medians.
func BenchmarkWorkerStart(b *testing.B) {
	if ABI() < 1 || !mayUnshareMounts() {
		b.Skip("needs Landlock and CAP_SYS_ADMIN")
	}
	root := b.TempDir()
	ws, state := filepath.Join(root, "ws"), filepath.Join(root, "state")
	os.Mkdir(ws, 0o755)
	os.Mkdir(state, 0o700)
	rules := Rules{Writable: []string{ws, b.TempDir()}, Denied: []string{state}, Devices: DefaultDevices, Required: true}
	null, _ := os.Open(os.DevNull)
	defer null.Close()
	defer func() { wantMounts = mayUnshareMounts }()
	start := func(mounts bool) time.Duration {
		wantMounts = func() bool { return mounts }
		t0 := time.Now()
		w, err := StartWorker(rules)
		if err != nil {
			b.Fatal(err)
		}
		p, err := w.Start(Spec{Path: "/bin/true", Argv: []string{"true"}, Dir: ws, Files: []*os.File{null, null, null}})
		if err != nil {
			b.Fatal(err)
		}
		p.Wait()
		p.Release()
		d := time.Since(t0)
		if w.Status().ReadOnlyMounts != mounts {
			b.Fatalf("status %+v, want read-only mounts %v", w.Status(), mounts)
		}
		w.Close()
		return d
	}
	var with, without []time.Duration
	for i := 0; i < b.N; i++ {
		with = append(with, start(true))
		without = append(without, start(false))
	}
	median := func(d []time.Duration) time.Duration {
		slices.Sort(d)
		return d[len(d)/2]
	}
	b.ReportMetric(float64(median(with).Microseconds()), "mounts-µs")
	b.ReportMetric(float64(median(without).Microseconds()), "plain-µs")
	b.ReportMetric(float64(median(with))/float64(median(without)), "ratio")
}

// A writable path inside a denied one gets no writable mount: its
// files' metadata stays out of reach too.
func TestWritableInsideDeniedStaysReadOnly(t *testing.T) {
	needMounts(t)
	ws, _, denied, _ := fixture(t)
	inner := filepath.Join(denied, "inner")
	os.Mkdir(inner, 0o755)
	f := filepath.Join(inner, "f")
	os.WriteFile(f, []byte("x"), 0o644)
	d := NewDomain(Rules{Writable: []string{ws, inner}, Denied: []string{denied}, Devices: DefaultDevices, Required: true})
	defer d.Close()
	out, _ := run(t, d, ws, "/bin/sh", "-c", "chmod 777 "+f+"; echo done")
	if fi, err := os.Stat(f); err != nil || fi.Mode().Perm() != 0o644 {
		t.Errorf("the file inside the denied dir changed: %v %v (%q)", fi.Mode(), err, out)
	}
}
