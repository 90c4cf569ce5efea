//go:build linux

package sandbox

import (
	"strings"
	"testing"
)

// A process in the domain holds its three standard descriptors and no
// other: not the worker's socket to the kernel, nor anything the worker
// inherited.
func TestNoDescriptorLeaks(t *testing.T) {
	needLandlock(t)
	ws, _, _, d := fixture(t)
	out, _ := run(t, d, ws, "/bin/sh", "-c", "exec ls -l /proc/self/fd")
	var fds []string
	for line := range strings.Lines(out) {
		f := strings.Fields(line)
		if len(f) >= 3 && f[len(f)-2] == "->" {
			fds = append(fds, f[len(f)-3]+" "+f[len(f)-1])
		}
	}
	for _, fd := range fds {
		n, target, _ := strings.Cut(fd, " ")
		if n != "0" && n != "1" && n != "2" && !strings.HasPrefix(target, "/proc/") {
			t.Errorf("descriptor %s reaches the domain's processes: %q", fd, out)
		}
	}
	if len(fds) < 3 {
		t.Fatalf("listing %q", out)
	}
}
