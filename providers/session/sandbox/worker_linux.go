//go:build linux

package sandbox

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
	"unsafe"

	"github.com/shoal-sh/shoal/internal/fdpass"
	"golang.org/x/sys/unix"
)

// envWorker marks the re-executed binary as a worker; its value is the
// JSON of the rules.
const envWorker = "SHOAL_SANDBOX_WORKER"

// workerFD is the worker's end of the socket pair (the first extra file).
const workerFD = 3

// The worker is this binary started again with envWorker set: whichever
// program runs a kernel (shoal, shoal-mcp --in-process, a test binary)
// imports this package, so this init takes over before main (or the test
// framework) starts.
func init() {
	spec, ok := os.LookupEnv(envWorker)
	if !ok {
		return
	}
	os.Unsetenv(envWorker)
	os.Exit(workerMain(spec))
}

// worker is the confined side.
type worker struct {
	conn blockingConn
	wmu  sync.Mutex // one message at a time

	mu      sync.Mutex // spawning and reaping
	tracked map[int]bool
	scoped  bool
}

func workerMain(spec string) int {
	var rules Rules
	if err := json.Unmarshal([]byte(spec), &rules); err != nil {
		fmt.Fprintf(os.Stderr, "shoal sandbox worker: bad rules: %v\n", err)
		return 2
	}
	// No descriptor of the worker's own, its socket to the kernel above
	// all, reaches what it starts: a process holding that socket could
	// read the kernel's requests, take the output pipes they carry and
	// answer in the worker's name.
	closeOnExecAbove(2)
	// When memory runs out, what the session runs goes before the kernel
	// (children inherit this; lowering it needs CAP_SYS_RESOURCE, which
	// dropCaps takes away).
	_ = os.WriteFile("/proc/self/oom_score_adj", []byte(strconv.Itoa(oomScoreAdj)), 0)
	if err := syscall.SetNonblock(workerFD, false); err != nil {
		fmt.Fprintf(os.Stderr, "shoal sandbox worker: %v\n", err)
		return 2
	}
	w := &worker{conn: blockingConn(workerFD), tracked: map[int]bool{}}
	// Orphans of what this worker starts (setsid, double forks) become
	// its children, so it can reap them and end them at the close.
	_ = unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)
	// Children are reaped here only; SIGCHLD tells when.
	sigch := make(chan os.Signal, 16)
	signal.Notify(sigch, syscall.SIGCHLD)
	// The kernel's terminal signals are not the worker's to act on.
	signal.Ignore(syscall.SIGINT, syscall.SIGQUIT, syscall.SIGHUP, syscall.SIGPIPE)

	var mounts error
	if os.Getenv(envMounts) == "1" {
		os.Unsetenv(envMounts)
		mounts = readOnlyMounts(rules)
	} else {
		mounts = errors.New("the kernel lacks CAP_SYS_ADMIN for a mount namespace of the session's own")
	}
	caps := dropCaps(capsToDrop(rules, mounts == nil))
	st := confine(rules)
	st.ReadOnlyMounts = mounts == nil && caps == nil
	if !st.ReadOnlyMounts && st.Confined {
		if mounts == nil {
			mounts = caps
		}
		st.Reason = joinReason(st.Reason, "metadata changes (chmod, chown, touch) outside the writable paths are not refused: "+mounts.Error())
	}
	if caps != nil {
		st.Reason = joinReason(st.Reason, "the machine-wide capabilities of a root kernel were not dropped: "+caps.Error())
	}
	w.scoped = st.Scoped
	if !st.Confined && rules.Required {
		w.write(&reply{Op: "ready", Ready: &st, Err: st.Reason})
		return 3
	}
	if err := w.write(&reply{Op: "ready", Ready: &st}); err != nil {
		return 2
	}
	go w.reap(sigch)
	w.serve()
	w.killAll()
	return 0
}

func (w *worker) write(r *reply, fds ...int) error {
	w.wmu.Lock()
	defer w.wmu.Unlock()
	return send(w.conn, r, fds)
}

// serve answers requests until the kernel closes its end (or asks).
func (w *worker) serve() {
	runtime.LockOSThread() // a thread of its own, blocked in recvmsg
	rcv := newReceiver(w.conn)
	for {
		var req request
		fds, err := rcv.next(&req)
		if err != nil {
			return
		}
		switch req.Op {
		case "open":
			fdpass.Close(fds)
			w.open(&req)
		case "spawn":
			w.spawn(&req, fds)
			fdpass.Close(fds)
		case "close":
			fdpass.Close(fds)
			return
		default:
			fdpass.Close(fds)
			w.write(&reply{Op: "reply", ID: req.ID, Err: "unknown request " + strconv.Quote(req.Op)})
		}
	}
}

func (w *worker) open(req *request) {
	fd, err := unix.Open(req.Path, req.Flag|unix.O_CLOEXEC, req.Perm)
	if err != nil {
		w.write(&reply{Op: "reply", ID: req.ID, Errno: int(err.(syscall.Errno))})
		return
	}
	w.write(&reply{Op: "reply", ID: req.ID}, fd)
	unix.Close(fd)
}

func (w *worker) spawn(req *request, fds []int) {
	if len(fds) < 3 {
		w.write(&reply{Op: "reply", ID: req.ID, Err: "spawn needs three descriptors"})
		return
	}
	files := make([]uintptr, len(fds))
	for i, fd := range fds {
		files[i] = uintptr(fd)
	}
	pidfd := -1
	attr := &syscall.ProcAttr{
		Dir:   req.Dir,
		Env:   req.Env,
		Files: files,
		Sys: &syscall.SysProcAttr{
			Setpgid: req.Setpgid,
			Setsid:  req.Setsid,
			Setctty: req.Setctty,
			Ctty:    req.Ctty,
			PidFD:   &pidfd,
		},
	}
	// Fork and record under mu, and answer before unlocking: the reaper
	// (which also holds mu) can then neither reap an untracked child of
	// ours nor report an exit before the kernel knows the pid.
	w.mu.Lock()
	defer w.mu.Unlock()
	pid, err := syscall.ForkExec(req.Path, req.Argv, attr)
	if err != nil {
		var errno syscall.Errno
		if errors.As(err, &errno) {
			w.write(&reply{Op: "reply", ID: req.ID, Errno: int(errno)})
		} else {
			w.write(&reply{Op: "reply", ID: req.ID, Err: err.Error()})
		}
		return
	}
	w.tracked[pid] = true
	if pidfd >= 0 {
		w.write(&reply{Op: "reply", ID: req.ID, Pid: pid}, pidfd)
		syscall.Close(pidfd)
	} else {
		w.write(&reply{Op: "reply", ID: req.ID, Pid: pid})
	}
	// A thread blocked in wait4 on this child wakes the moment it exits:
	// quicker than SIGCHLD through the runtime's signal loop, which stays
	// for the orphans (and leaves tracked children to this goroutine).
	go w.await(pid)
}

// await reaps one tracked child and reports its exit.
func (w *worker) await(pid int) {
	var ws syscall.WaitStatus
	for {
		_, err := syscall.Wait4(pid, &ws, 0, nil)
		if err == syscall.EINTR {
			continue
		}
		if err != nil {
			return // reaped elsewhere (killAll)
		}
		break
	}
	w.mu.Lock()
	mine := w.tracked[pid]
	delete(w.tracked, pid)
	w.mu.Unlock()
	if mine {
		w.write(&reply{Op: "exit", Pid: pid, Status: int(ws)})
	}
}

// reap collects every child that exits, tracked or orphaned, and reports
// the tracked ones.
func (w *worker) reap(sigch <-chan os.Signal) {
	for range sigch {
		w.reapOrphans()
	}
}

// reapOrphans reaps the exited children nobody awaits: orphans that came
// to this subreaper. It looks before it reaps (WNOWAIT), so a tracked
// child's status stays for its own await.
func (w *worker) reapOrphans() {
	for {
		var si unix.Siginfo
		err := unix.Waitid(unix.P_ALL, 0, &si, unix.WEXITED|unix.WNOHANG|unix.WNOWAIT, nil)
		if err == syscall.EINTR {
			continue
		}
		pid := siginfoPid(&si)
		if err != nil || pid <= 0 {
			return
		}
		w.mu.Lock()
		mine := w.tracked[pid]
		w.mu.Unlock()
		if mine {
			// Its await reaps it. Another exited orphan may wait behind
			// it; the next SIGCHLD (or the close) collects it.
			return
		}
		var ws syscall.WaitStatus
		syscall.Wait4(pid, &ws, syscall.WNOHANG, nil)
	}
}

// siginfoPid is si_pid of a child's siginfo: after three ints, the union
// aligned like a pointer starts with the pid.
func siginfoPid(si *unix.Siginfo) int {
	type head struct {
		_   [3]int32
		_   [0]uintptr
		Pid int32
	}
	return int((*head)(unsafe.Pointer(si)).Pid)
}

// killAll ends every process the worker started and every orphan that
// came to it, and reaps them, before the worker exits. With signal
// scoping, kill(-1) reaches exactly the domain (never the kernel or
// anything else of the user); without it, the worker walks its children.
func (w *worker) killAll() {
	deadline := time.Now().Add(5 * time.Second)
	for time.Now().Before(deadline) {
		if w.scoped {
			_ = syscall.Kill(-1, syscall.SIGKILL)
		} else {
			w.mu.Lock()
			for pid := range w.tracked {
				_ = syscall.Kill(-pid, syscall.SIGKILL)
				_ = syscall.Kill(pid, syscall.SIGKILL)
			}
			w.mu.Unlock()
			for _, pid := range children() {
				_ = syscall.Kill(-pid, syscall.SIGKILL)
				_ = syscall.Kill(pid, syscall.SIGKILL)
			}
		}
		w.mu.Lock()
		any := false
		for {
			var ws syscall.WaitStatus
			pid, err := syscall.Wait4(-1, &ws, syscall.WNOHANG, nil)
			if err == syscall.EINTR {
				continue
			}
			if err == syscall.ECHILD {
				break
			}
			if pid > 0 {
				any = true
				delete(w.tracked, pid)
				continue
			}
			any = true // children left, none exited yet
			break
		}
		w.mu.Unlock()
		if !any {
			return
		}
		time.Sleep(2 * time.Millisecond)
	}
}

// children lists the worker's direct children from /proc.
func children() []int {
	self := os.Getpid()
	var out []int
	// /proc/self/task/*/children needs CONFIG_PROC_CHILDREN; the stat
	// scan works everywhere.
	ents, err := os.ReadDir("/proc")
	if err != nil {
		return nil
	}
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile("/proc/" + e.Name() + "/stat")
		if err != nil {
			continue
		}
		// pid (comm) state ppid …; comm may hold spaces and parentheses.
		s := string(b)
		i := strings.LastIndexByte(s, ')')
		if i < 0 {
			continue
		}
		fields := strings.Fields(s[i+1:])
		if len(fields) < 2 {
			continue
		}
		if ppid, _ := strconv.Atoi(fields[1]); ppid == self {
			out = append(out, pid)
		}
	}
	return out
}

// oomScoreAdj is a worker's oom_score_adj (-1000 to 1000): the OOM
// killer picks a session's processes well before the kernel's.
const oomScoreAdj = 500

// closeRangeCloexec is CLOSE_RANGE_CLOEXEC for close_range(2).
const closeRangeCloexec = 1 << 2

// closeOnExecAbove marks every descriptor above fd close-on-exec: what
// this process inherited stays open in it and in nothing it starts.
func closeOnExecAbove(fd int) {
	if unix.CloseRange(uint(fd+1), ^uint(0), closeRangeCloexec) == nil {
		return
	}
	ents, _ := os.ReadDir("/proc/self/fd") // before Linux 5.11
	for _, e := range ents {
		if n, err := strconv.Atoi(e.Name()); err == nil && n > fd {
			syscall.CloseOnExec(n)
		}
	}
}
