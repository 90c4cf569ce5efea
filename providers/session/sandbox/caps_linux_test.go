//go:build linux

package sandbox

import (
	"fmt"
	"os"
	"strings"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"
)

// envProbe makes this test binary, started inside a domain, try what the
// dropped capabilities allow, harmlessly, and print the errors.
const envProbe = "SHOAL_SANDBOX_TEST_PROBE"

func init() {
	if os.Getenv(envProbe) == "" {
		return
	}
	// reboot(2) checks CAP_SYS_BOOT before its magic numbers: with the
	// capability these wrong ones give EINVAL, and nothing reboots.
	_, _, boot := syscall.Syscall6(syscall.SYS_REBOOT, 0xdead, 0xbeef, 0, 0, 0, 0)
	// SO_RCVBUFFORCE needs CAP_NET_ADMIN; on a socket of its own it is
	// harmless.
	net := "ok"
	if fd, err := unix.Socket(unix.AF_INET, unix.SOCK_DGRAM, 0); err == nil {
		if err := unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_RCVBUFFORCE, 1<<16); err != nil {
			net = err.Error()
		}
		unix.Close(fd)
	}
	fmt.Printf("reboot: %v\nnet: %s\n", boot, net)
	os.Exit(0)
}

func probe(t *testing.T, d *Domain, dir string) string {
	t.Helper()
	out, st := run(t, d, dir, "/usr/bin/env", envProbe+"=1", os.Args[0])
	if st.ExitStatus() != 0 {
		t.Fatalf("probe: exit %d: %q", st.ExitStatus(), out)
	}
	return out
}

// A root kernel's sessions cannot reboot the machine or change its
// network; a plan approved for that keeps the capabilities.
func TestHostCapabilitiesDropped(t *testing.T) {
	needLandlock(t)
	if !has(capsNow(t), unix.CAP_SYS_BOOT) || !has(capsNow(t), unix.CAP_NET_ADMIN) {
		t.Skip("this process holds no CAP_SYS_BOOT and CAP_NET_ADMIN to drop")
	}
	ws, _, _, d := fixture(t)
	out := probe(t, d, ws)
	if !strings.Contains(out, "reboot: operation not permitted") || !strings.Contains(out, "net: operation not permitted") {
		t.Errorf("in a session: %q", out)
	}
	bnd, _ := run(t, d, ws, "/bin/sh", "-c", "grep CapBnd /proc/self/status")
	for _, c := range HostCapabilities {
		if capBit(t, bnd, c.Num) {
			t.Errorf("%s is still in the bounding set: %q", c.Name, bnd)
		}
	}
	if capBit(t, bnd, unix.CAP_DAC_OVERRIDE) == false || capBit(t, bnd, unix.CAP_CHOWN) == false {
		t.Errorf("a capability ordinary work needs was dropped: %q", bnd)
	}

	r := d.Rules()
	r.HostCaps = true
	wide := NewDomain(r)
	defer wide.Close()
	out = probe(t, wide, ws)
	if !strings.Contains(out, "reboot: invalid argument") || !strings.Contains(out, "net: ok") {
		t.Errorf("in an approved machine plan's run: %q", out)
	}
}

func capsNow(t *testing.T) [2]unix.CapUserData {
	var data [2]unix.CapUserData
	hdr := unix.CapUserHeader{Version: unix.LINUX_CAPABILITY_VERSION_3}
	if err := unix.Capget(&hdr, &data[0]); err != nil {
		t.Fatal(err)
	}
	return data
}

// capBit reads capability c from a /proc status line ("CapBnd:\t…").
func capBit(t *testing.T, line string, c int) bool {
	var v uint64
	_, f, _ := strings.Cut(strings.TrimSpace(line), "\t")
	if _, err := fmt.Sscanf(f, "%x", &v); err != nil {
		t.Fatalf("capability line %q: %v", line, err)
	}
	return v&(1<<c) != 0
}

// What a session runs goes first when memory runs out, and cannot move
// itself back behind the kernel.
func TestSessionsGoFirstOnOOM(t *testing.T) {
	needLandlock(t)
	ws, _, _, d := fixture(t)
	out, _ := run(t, d, ws, "/bin/sh", "-c", "cat /proc/self/oom_score_adj; echo 0 > /proc/self/oom_score_adj; cat /proc/self/oom_score_adj")
	if f := strings.Fields(out); len(f) < 2 || f[0] != "500" || f[len(f)-1] != "500" {
		t.Errorf("oom_score_adj in a session: %q", out)
	}
}
