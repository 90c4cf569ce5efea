//go:build linux

package sandbox

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

// Process limits
//
// A fork bomb inside a domain is contained by nothing above: Landlock
// does not count processes, RLIMIT_NPROC does not bind root, and this
// machine's pid_max is 32,768. Where the kernel may create a pids cgroup
// (cgroup v1's pids hierarchy, or cgroup v2 with the pids controller
// enabled for the kernel's own group, as root typically may), each
// worker is moved into a group of its own right after it starts, before
// it runs anything, with pids.max set: forks past the limit fail with
// EAGAIN inside the domain, and the rest of the machine does not notice.
// When the worker goes, whatever is left in its group is killed and the
// group removed.

// DefaultMaxTasks is the most processes and threads a domain may hold at
// once, its worker included, when Rules.MaxTasks is 0.
const DefaultMaxTasks = 4096

// pidsGroup is one worker's cgroup.
type pidsGroup struct {
	dir  string
	once sync.Once
}

var groupSeq atomic.Uint64

// pidsBase finds the pids hierarchy directory of this process's own
// cgroup: cgroup v1's pids mount, or cgroup v2 when pids may be used for
// children there.
func pidsBase() (string, error) {
	mounts, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		return "", err
	}
	own, err := os.ReadFile("/proc/self/cgroup")
	if err != nil {
		return "", err
	}
	var v1, v2, v1Path, v2Path string
	for line := range strings.Lines(string(mounts)) {
		pre, post, ok := strings.Cut(line, " - ")
		f, g := strings.Fields(pre), strings.Fields(post)
		if !ok || len(f) < 5 || len(g) < 3 {
			continue
		}
		switch {
		case g[0] == "cgroup" && slices.Contains(strings.Split(g[2], ","), "pids") && f[3] == "/":
			v1 = unescapeMountinfo(f[4])
		case g[0] == "cgroup2" && f[3] == "/" && v2 == "":
			v2 = unescapeMountinfo(f[4])
		}
	}
	for line := range strings.Lines(string(own)) {
		parts := strings.SplitN(strings.TrimSpace(line), ":", 3)
		if len(parts) != 3 {
			continue
		}
		switch {
		case slices.Contains(strings.Split(parts[1], ","), "pids"):
			v1Path = parts[2]
		case parts[0] == "0" && parts[1] == "":
			v2Path = parts[2]
		}
	}
	if v1 != "" && v1Path != "" {
		return filepath.Join(v1, v1Path), nil
	}
	if v2 != "" && v2Path != "" {
		base := filepath.Join(v2, v2Path)
		ctl, err := os.ReadFile(filepath.Join(base, "cgroup.subtree_control"))
		if err != nil {
			return "", err
		}
		if !slices.Contains(strings.Fields(string(ctl)), "pids") {
			if err := os.WriteFile(filepath.Join(base, "cgroup.subtree_control"), []byte("+pids"), 0); err != nil {
				return "", fmt.Errorf("enable the pids controller below %s: %w", base, err)
			}
		}
		return base, nil
	}
	return "", errors.New("no pids cgroup hierarchy")
}

// sweepOnce removes, once per process, the empty groups that workers of
// kernels no longer running left behind (a kernel killed with -9).
var sweepOnce sync.Once

func sweep(base string) {
	ents, _ := os.ReadDir(base)
	for _, e := range ents {
		name, ok := strings.CutPrefix(e.Name(), "shoal-")
		if !ok || !e.IsDir() {
			continue
		}
		pid, err := strconv.Atoi(strings.SplitN(name, "-", 2)[0])
		if err != nil || pid == os.Getpid() || syscall.Kill(pid, 0) == nil {
			continue
		}
		os.Remove(filepath.Join(base, e.Name())) // only when empty
	}
}

// joinPidsGroup makes a group limited to max tasks and moves pid into it.
func joinPidsGroup(pid, max int) (*pidsGroup, error) {
	base, err := pidsBase()
	if err != nil {
		return nil, err
	}
	sweepOnce.Do(func() { sweep(base) })
	dir := filepath.Join(base, fmt.Sprintf("shoal-%d-%d", os.Getpid(), groupSeq.Add(1)))
	if err := os.Mkdir(dir, 0o755); err != nil {
		return nil, err
	}
	g := &pidsGroup{dir: dir}
	if err := os.WriteFile(filepath.Join(dir, "pids.max"), []byte(strconv.Itoa(max)), 0); err != nil {
		g.remove()
		return nil, err
	}
	if err := os.WriteFile(filepath.Join(dir, "cgroup.procs"), []byte(strconv.Itoa(pid)), 0); err != nil {
		g.remove()
		return nil, err
	}
	return g, nil
}

// remove kills what is left in the group (what its worker left behind
// when it was killed) and removes it.
func (g *pidsGroup) remove() {
	if g == nil {
		return
	}
	g.once.Do(func() {
		for range 100 {
			b, err := os.ReadFile(filepath.Join(g.dir, "cgroup.procs"))
			if err != nil {
				return
			}
			pids := strings.Fields(string(b))
			if len(pids) == 0 {
				if err := os.Remove(g.dir); err == nil || !errors.Is(err, syscall.EBUSY) {
					return
				}
			}
			for _, p := range pids {
				if n, err := strconv.Atoi(p); err == nil {
					syscall.Kill(n, syscall.SIGKILL)
				}
			}
			time.Sleep(10 * time.Millisecond)
		}
	})
}
