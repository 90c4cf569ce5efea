//go:build !linux

package sandbox

import (
	"errors"
	"os"
	"syscall"
)

// Domain is a session's confinement; on this system there is none.
type Domain struct{ rules Rules }

// NewDomain makes a domain; it can only say that confinement is missing.
func NewDomain(rules Rules) *Domain { return &Domain{rules: rules} }

// Rules returns the domain's rules.
func (d *Domain) Rules() Rules { return d.rules }

var errNotLinux = errors.New("confinement needs Linux Landlock; this system has none")

// Status says that nothing is confined.
func (d *Domain) Status() (Status, error) {
	return Status{Reason: errNotLinux.Error()}, nil
}

// Open is not available.
func (d *Domain) Open(path string, flag int, perm os.FileMode) (*os.File, error) {
	return nil, &os.PathError{Op: "open", Path: path, Err: errNotLinux}
}

// Start is not available.
func (d *Domain) Start(Spec) (*Proc, error) { return nil, errNotLinux }

// Close does nothing.
func (d *Domain) Close() error { return nil }

// Spec is one process to start.
type Spec struct {
	Path                     string
	Argv, Env                []string
	Dir                      string
	Files                    []*os.File
	Setpgid, Setsid, Setctty bool
	Ctty                     int
}

// Proc is a process started in a domain.
type Proc struct {
	Pid, PidFD int
	exited     chan struct{}
}

// Exited is closed once the process has been reaped.
func (p *Proc) Exited() <-chan struct{} { return p.exited }

// Wait is never reached on this system.
func (p *Proc) Wait() (syscall.WaitStatus, error) { return 0, errNotLinux }

// Release does nothing.
func (p *Proc) Release() {}

// ABI is 0: no Landlock here.
func ABI() int { return 0 }
