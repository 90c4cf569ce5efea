//go:build !linux

package shell

import (
	"io"
	"os"
	"time"
)

// outputs is the Linux poll(2) reader of a process's output (see
// outputs_linux.go); elsewhere os/exec's pipes and goroutines do the work.
type outputs struct{ child [2]*os.File }

func newOutputs(stdout, stderr io.Writer) (*outputs, error) { return nil, nil }

func (*outputs) started()                                          {}
func (*outputs) close()                                            {}
func (*outputs) copy(pid int, grace time.Duration) func()          { return nil }
func (*outputs) copyFD(pidfd, pid int, grace time.Duration) func() { return nil }
