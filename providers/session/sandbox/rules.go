package sandbox

import (
	"errors"
	"path/filepath"
	"slices"
	"strings"
)

// Rules say what a domain may touch. Paths are absolute; a path that does
// not exist is left out when the rules are applied.
type Rules struct {
	// Writable directories get every file-system right: the session's
	// workspace, its temp dir, the tool caches, what the policy adds and,
	// for one applied plan, that plan's targets.
	Writable []string `json:"writable,omitempty"`
	// Denied paths are neither readable nor writable: the state directory
	// and the credential files. Everything else is readable.
	Denied []string `json:"denied,omitempty"`
	// FileRW directories allow reading and writing the files already in
	// them, and nothing else (no creating, linking or removing): the
	// interpreter's own FIFO directory for process substitution.
	FileRW []string `json:"file_rw,omitempty"`
	// Entries are directories in which entries may be made and removed
	// (an applied plan's targets' directories), without write access to
	// the files already there.
	Entries []string `json:"entries,omitempty"`
	// Devices are files always open for reading and writing: /dev/null,
	// terminals and the like.
	Devices []string `json:"devices,omitempty"`
	// ConnectTCP, when RestrictConnect is set, lists the TCP ports a
	// process may connect to; otherwise connecting is not restricted.
	RestrictConnect bool     `json:"restrict_connect,omitempty"`
	ConnectTCP      []uint16 `json:"connect_tcp,omitempty"`
	// BindTCP, when RestrictBind is set, lists the TCP ports a process may
	// bind.
	RestrictBind bool     `json:"restrict_bind,omitempty"`
	BindTCP      []uint16 `json:"bind_tcp,omitempty"`
	// MaxTasks bounds the processes and threads the domain holds at once
	// (0: DefaultMaxTasks), where a pids cgroup can be made for it.
	MaxTasks int `json:"max_tasks,omitempty"`
	// HostCaps keeps the capabilities a domain otherwise drops (see
	// HostCapabilities): for one approved plan with a whole-machine
	// effect.
	HostCaps bool `json:"host_caps,omitempty"`
	// Required makes a domain refuse to start when Landlock cannot be
	// applied; otherwise it starts unconfined and says so in its Status.
	Required bool `json:"required,omitempty"`
}

// DefaultDevices are the device files every program expects to open for
// writing.
var DefaultDevices = []string{
	"/dev/null", "/dev/zero", "/dev/full", "/dev/random", "/dev/urandom",
	"/dev/tty", "/dev/ptmx", "/dev/pts", "/dev/shm",
}

// Widen returns a copy of r that also lets one run write paths (an
// approved plan's write and delete targets): a directory target becomes
// writable as a whole; a file target becomes writable itself; and the
// directory holding each target may have entries made and removed in it
// (creating, renaming or deleting the target needs that), without its
// other files becoming writable.
func (r Rules) Widen(paths ...string) Rules {
	w := r
	w.Writable = slices.Clone(r.Writable)
	w.Entries = slices.Clone(r.Entries)
	for _, p := range paths {
		if p == "" || !filepath.IsAbs(p) {
			continue
		}
		p = filepath.Clean(p)
		if !slices.Contains(w.Writable, p) {
			w.Writable = append(w.Writable, p)
		}
		if parent := filepath.Dir(p); parent != p && !slices.Contains(w.Entries, parent) {
			w.Entries = append(w.Entries, parent)
		}
	}
	return w
}

// Status says how a domain is confined.
type Status struct {
	// Confined is true when the worker runs under Landlock.
	Confined bool `json:"confined"`
	// ABI is the Landlock ABI version of the running kernel (0: none).
	ABI int `json:"abi"`
	// Scoped is true when signals and abstract unix sockets are scoped to
	// the domain (ABI 6 and later).
	Scoped bool `json:"scoped"`
	// Net is true when TCP rules could be applied (ABI 4 and later).
	Net bool `json:"net"`
	// ReadOnlyMounts is true when the worker has a mount namespace of its
	// own in which everything but the writable paths is mounted
	// read-only, so metadata changes (chmod, chown, utimes), which
	// Landlock does not govern, fail outside them too.
	ReadOnlyMounts bool `json:"read_only_mounts"`
	// MaxTasks is the limit on the processes and threads the domain holds
	// at once; 0 when no pids cgroup could be made for it.
	MaxTasks int `json:"max_tasks,omitempty"`
	// Reason says why the domain is not (fully) confined; empty when it is.
	Reason string `json:"reason,omitempty"`
}

// joinReason adds why to a status reason.
func joinReason(reason, why string) string {
	if reason == "" {
		return why
	}
	return reason + "; " + why
}

// ErrWorkerGone is returned for requests a worker could not answer
// because it exited (or was killed) first.
var ErrWorkerGone = errors.New("the session's confined worker exited; the command did not complete (the next command starts a new worker)")

// ErrUnavailable wraps the reason confinement cannot be had when the
// rules require it.
var ErrUnavailable = errors.New("confinement unavailable")

// within reports whether p is base or lies below it.
func within(p, base string) bool {
	if base == "/" {
		return true
	}
	return p == base || strings.HasPrefix(p, base+"/")
}

// Writable reports whether the rules let a process write p (an absolute,
// cleaned path): p lies in a writable directory and not in a denied one.
// The OS has the last word; this is for explaining, up front.
func (r Rules) WritablePath(p string) bool {
	p = filepath.Clean(p)
	for _, d := range r.Denied {
		if within(p, d) {
			return false
		}
	}
	for _, d := range r.Devices {
		if within(p, d) {
			return true
		}
	}
	for _, w := range r.Writable {
		if within(p, w) {
			return true
		}
	}
	return false
}

// ReadablePath reports whether the rules let a process read p.
func (r Rules) ReadablePath(p string) bool {
	p = filepath.Clean(p)
	for _, d := range r.Denied {
		if within(p, d) {
			return false
		}
	}
	return true
}
