//go:build !linux

package pty

import "os/exec"

// awaitExit reaps the leader as soon as it exits: without waitid's WNOWAIT
// the pid is not pinned, so on these systems a process group whose leader
// is gone is signalled only while the PTY's output is still open.
func awaitExit(cmd *exec.Cmd) (status exitStatus, reaped bool) {
	return reap(cmd), true
}
