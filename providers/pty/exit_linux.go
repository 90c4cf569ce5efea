//go:build linux

package pty

import (
	"errors"
	"os/exec"
	"unsafe"

	"golang.org/x/sys/unix"
)

// si_code values for SIGCHLD (sigaction(2)); x/sys does not export them.
const (
	cldExited = 1
	cldKilled = 2
	cldDumped = 3
)

// sigchld overlays the head of Linux's siginfo_t for a child event: three
// ints, then the union aligned like a pointer, whose _sigchld arm starts
// with pid, uid, status. unix.Siginfo names only the first three fields.
type sigchld struct {
	_      [3]int32
	_      [0]uintptr
	Pid    int32
	UID    uint32
	Status int32
}

// awaitExit blocks until the process leader exits and reports how, without
// reaping it: the zombie keeps its pid, and with it the process group id,
// from being reused, so a later kill(-pgid) can only reach this PTY's own
// processes. The caller reaps with cmd.Wait when the PTY closes.
func awaitExit(cmd *exec.Cmd) (status exitStatus, reaped bool) {
	var si unix.Siginfo
	for {
		err := unix.Waitid(unix.P_PID, cmd.Process.Pid, &si, unix.WEXITED|unix.WNOWAIT, nil)
		if errors.Is(err, unix.EINTR) {
			continue
		}
		if err != nil {
			// Not waitable (should not happen for our own child): fall
			// back to reaping, which still tells us the status.
			return reap(cmd), true
		}
		break
	}
	raw := (*sigchld)(unsafe.Pointer(&si))
	switch si.Code {
	case cldExited:
		return exitStatus{code: int(raw.Status)}, false
	case cldKilled, cldDumped:
		sig := unix.Signal(raw.Status)
		return exitStatus{code: 128 + int(sig), signal: unix.SignalName(sig)}, false
	default:
		return reap(cmd), true
	}
}
