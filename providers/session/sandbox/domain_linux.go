//go:build linux

package sandbox

import (
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"sync"
	"syscall"
	"time"

	"github.com/shoal-sh/shoal/internal/fdpass"
)

// Domain is one session's confinement: its rules and the worker that
// carries them out, started on first use and again after it died.
type Domain struct {
	rules Rules

	mu     sync.Mutex
	w      *Worker
	closed bool
	last   Status
}

// NewDomain makes a domain for rules. Nothing starts until it is used.
func NewDomain(rules Rules) *Domain { return &Domain{rules: rules} }

// Rules returns the domain's rules.
func (d *Domain) Rules() Rules { return d.rules }

// worker returns the running worker, starting one when there is none.
func (d *Domain) worker() (*Worker, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.closed {
		return nil, errors.New("the session is closed")
	}
	if d.w != nil && !d.w.gone() {
		return d.w, nil
	}
	w, err := StartWorker(d.rules)
	if w != nil {
		d.last = w.status
	}
	if err != nil {
		return nil, err
	}
	d.w = w
	return w, nil
}

// Status starts the worker if needed and says how it is confined.
func (d *Domain) Status() (Status, error) {
	w, err := d.worker()
	if err != nil {
		d.mu.Lock()
		defer d.mu.Unlock()
		return d.last, err
	}
	return w.status, nil
}

// Open opens path inside the domain.
func (d *Domain) Open(path string, flag int, perm os.FileMode) (*os.File, error) {
	w, err := d.worker()
	if err != nil {
		return nil, &os.PathError{Op: "open", Path: path, Err: err}
	}
	return w.Open(path, flag, perm)
}

// Start starts a process inside the domain.
func (d *Domain) Start(s Spec) (*Proc, error) {
	w, err := d.worker()
	if err != nil {
		return nil, err
	}
	return w.Start(s)
}

// Close ends the worker, which kills and reaps everything it started.
// It waits (bounded) for the worker to exit.
func (d *Domain) Close() error {
	d.mu.Lock()
	d.closed = true
	w := d.w
	d.w = nil
	d.mu.Unlock()
	if w == nil {
		return nil
	}
	return w.Close()
}

// Worker is the kernel's end of one worker process.
type Worker struct {
	conn   blockingConn
	cmd    *exec.Cmd
	status Status
	group  *pidsGroup // its pids cgroup; nil without one

	wmu sync.Mutex

	mu      sync.Mutex
	nextID  uint64
	pending map[uint64]chan answer
	procs   map[int]*Proc
	early   map[int]syscall.WaitStatus // exits that came before their pid was known
	dead    error
	done    chan struct{}
}

type answer struct {
	r   reply
	fds []int
}

// Spec is one process to start.
type Spec struct {
	Path  string
	Argv  []string
	Env   []string
	Dir   string
	Files []*os.File // stdin, stdout, stderr, then extra descriptors (3, 4, …)
	// Setpgid puts the process in a group of its own; Setsid in a new
	// session, with Files[Ctty] as its controlling terminal when Setctty.
	Setpgid, Setsid, Setctty bool
	Ctty                     int
}

// Proc is a process started in a domain.
type Proc struct {
	Pid int
	// PidFD is a pidfd of the process, or -1; Release closes it.
	PidFD int

	w      *Worker
	exited chan struct{}
	status syscall.WaitStatus
	err    error
}

// executable is the binary to start as a worker; tests may point it
// elsewhere.
var executable = func() (string, error) { return "/proc/self/exe", nil }

// StartWorker starts a worker for rules and waits until it is confined.
// When rules are Required and Landlock cannot be applied it returns an
// error wrapping [ErrUnavailable] and the worker's Status.
func StartWorker(rules Rules) (*Worker, error) {
	spec, err := json.Marshal(rules)
	if err != nil {
		return nil, err
	}
	fds, err := syscall.Socketpair(syscall.AF_UNIX, syscall.SOCK_SEQPACKET|syscall.SOCK_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("start sandbox worker: %w", err)
	}
	// The kernel's end is used with blocking calls too: its reader sits
	// in recvmsg on a thread of its own (see read).
	mine, theirs := blockingConn(fds[0]), os.NewFile(uintptr(fds[1]), "sandbox-worker")
	defer theirs.Close()
	exe, err := executable()
	if err != nil {
		syscall.Close(int(mine))
		return nil, err
	}
	command := func(mounts bool) *exec.Cmd {
		cmd := &exec.Cmd{
			Path:       exe,
			Args:       []string{"shoal-sandbox"},
			Env:        []string{envWorker + "=" + string(spec), "PATH=/usr/bin:/bin"},
			ExtraFiles: []*os.File{theirs},
			Stderr:     os.Stderr,
			// Its own group: a Ctrl-C at the kernel's terminal is the
			// kernel's to handle, and the worker ends its processes itself.
			SysProcAttr: &syscall.SysProcAttr{Setpgid: true},
		}
		if mounts {
			// A mount namespace of its own (made private to it before
			// the worker runs), for its read-only mounts: see
			// readOnlyMounts.
			cmd.SysProcAttr.Unshareflags = syscall.CLONE_NEWNS
			cmd.Env = append(cmd.Env, envMounts+"=1")
		}
		return cmd
	}
	mounts := wantMounts()
	cmd := command(mounts)
	err = cmd.Start()
	if err != nil && mounts {
		// Refused (a seccomp profile, say): start it without; its
		// status then says that metadata changes are not refused.
		cmd = command(false)
		err = cmd.Start()
	}
	if err != nil {
		syscall.Close(int(mine))
		return nil, fmt.Errorf("start sandbox worker: %w", err)
	}
	// Into its pids cgroup before it can start anything.
	maxTasks := cmp.Or(rules.MaxTasks, DefaultMaxTasks)
	group, _ := joinPidsGroup(cmd.Process.Pid, maxTasks)
	w := &Worker{
		conn: mine, cmd: cmd, group: group,
		pending: map[uint64]chan answer{}, procs: map[int]*Proc{}, early: map[int]syscall.WaitStatus{},
		done: make(chan struct{}),
	}
	rcv := newReceiver(w.conn)
	var ready reply
	timeout := syscall.Timeval{Sec: 30}
	syscall.SetsockoptTimeval(int(mine), syscall.SOL_SOCKET, syscall.SO_RCVTIMEO, &timeout)
	fdsIn, err := rcv.next(&ready)
	fdpass.Close(fdsIn)
	syscall.SetsockoptTimeval(int(mine), syscall.SOL_SOCKET, syscall.SO_RCVTIMEO, &syscall.Timeval{})
	if err != nil || ready.Op != "ready" || ready.Ready == nil {
		w.kill()
		syscall.Close(int(mine))
		if err == nil {
			err = errors.New("unexpected first message")
		}
		return nil, fmt.Errorf("start sandbox worker: %w", err)
	}
	w.status = *ready.Ready
	if group != nil {
		w.status.MaxTasks = maxTasks
	}
	if !w.status.Confined && rules.Required {
		w.kill()
		syscall.Close(int(mine))
		return w, fmt.Errorf("%w: %s", ErrUnavailable, w.status.Reason)
	}
	go w.read(rcv)
	return w, nil
}

// Status says how the worker is confined.
func (w *Worker) Status() Status { return w.status }

func (w *Worker) gone() bool {
	select {
	case <-w.done:
		return true
	default:
		return false
	}
}

// read dispatches the worker's messages until it goes away, then fails
// whatever still waits.
func (w *Worker) read(rcv *receiver) {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	defer syscall.Close(int(w.conn)) // once nothing reads it any more
	for {
		var r reply
		fds, err := rcv.next(&r)
		if err != nil {
			w.fail(ErrWorkerGone)
			return
		}
		switch r.Op {
		case "reply":
			w.mu.Lock()
			ch := w.pending[r.ID]
			delete(w.pending, r.ID)
			w.mu.Unlock()
			if ch == nil {
				fdpass.Close(fds)
				continue
			}
			ch <- answer{r: r, fds: fds}
		case "exit":
			fdpass.Close(fds)
			w.mu.Lock()
			p := w.procs[r.Pid]
			delete(w.procs, r.Pid)
			if p == nil {
				w.early[r.Pid] = syscall.WaitStatus(r.Status)
			}
			w.mu.Unlock()
			if p != nil {
				p.finish(syscall.WaitStatus(r.Status), nil)
			}
		default:
			fdpass.Close(fds)
		}
	}
}

// fail marks the worker gone and ends every wait on it.
func (w *Worker) fail(err error) {
	w.mu.Lock()
	if w.dead != nil {
		w.mu.Unlock()
		return
	}
	w.dead = err
	pending, procs := w.pending, w.procs
	w.pending, w.procs = map[uint64]chan answer{}, map[int]*Proc{}
	close(w.done)
	w.mu.Unlock()
	for _, ch := range pending {
		ch <- answer{r: reply{Err: err.Error()}}
	}
	for _, p := range procs {
		p.finish(0, err)
	}
	// Wakes the reader from recvmsg; it closes the descriptor.
	syscall.Shutdown(int(w.conn), syscall.SHUT_RDWR)
	go func() {
		w.cmd.Wait()
		w.group.remove()
	}()
}

// call sends one request and waits for its answer.
func (w *Worker) call(req *request, fds []int) (answer, error) {
	ch := make(chan answer, 1)
	w.mu.Lock()
	if w.dead != nil {
		w.mu.Unlock()
		return answer{}, w.dead
	}
	w.nextID++
	req.ID = w.nextID
	w.pending[req.ID] = ch
	w.mu.Unlock()
	w.wmu.Lock()
	err := send(w.conn, req, fds)
	w.wmu.Unlock()
	if err != nil {
		w.mu.Lock()
		delete(w.pending, req.ID)
		w.mu.Unlock()
		if w.gone() {
			return answer{}, ErrWorkerGone
		}
		return answer{}, err
	}
	a := <-ch
	if a.r.Err == ErrWorkerGone.Error() {
		return a, ErrWorkerGone
	}
	return a, nil
}

// Open opens path in the worker and returns the descriptor it got.
func (w *Worker) Open(path string, flag int, perm os.FileMode) (*os.File, error) {
	a, err := w.call(&request{Op: "open", Path: path, Flag: flag, Perm: uint32(perm.Perm())}, nil)
	if err == nil {
		err = a.r.err()
	}
	if err != nil {
		fdpass.Close(a.fds)
		return nil, &os.PathError{Op: "open", Path: path, Err: err}
	}
	if len(a.fds) != 1 {
		fdpass.Close(a.fds)
		return nil, &os.PathError{Op: "open", Path: path, Err: errors.New("sandbox worker sent no descriptor")}
	}
	return os.NewFile(uintptr(a.fds[0]), path), nil
}

// Start starts a process in the worker.
func (w *Worker) Start(s Spec) (*Proc, error) {
	if len(s.Files) < 3 {
		return nil, errors.New("sandbox: a process needs stdin, stdout and stderr")
	}
	fds := make([]int, len(s.Files))
	for i, f := range s.Files {
		fds[i] = int(f.Fd())
	}
	req := &request{Op: "spawn", Path: s.Path, Argv: s.Argv, Env: s.Env, Dir: s.Dir,
		Setpgid: s.Setpgid, Setsid: s.Setsid, Setctty: s.Setctty, Ctty: s.Ctty}
	// The worker replies with the pid; its exit may come right behind, so
	// the Proc is registered by the reader under mu before it reads on.
	a, err := w.call(req, fds)
	runtime.KeepAlive(s.Files) // the descriptors must stay open until sent
	if err == nil {
		err = a.r.err()
	}
	if err != nil {
		fdpass.Close(a.fds)
		return nil, err
	}
	p := &Proc{Pid: a.r.Pid, PidFD: -1, w: w, exited: make(chan struct{})}
	if len(a.fds) > 0 {
		p.PidFD = a.fds[0]
		fdpass.Close(a.fds[1:])
	}
	w.mu.Lock()
	if st, ok := w.early[p.Pid]; ok {
		delete(w.early, p.Pid)
		w.mu.Unlock()
		p.finish(st, nil)
		return p, nil
	}
	if w.dead != nil {
		err := w.dead
		w.mu.Unlock()
		p.finish(0, err)
		return p, nil
	}
	w.procs[p.Pid] = p
	w.mu.Unlock()
	return p, nil
}

func (p *Proc) finish(st syscall.WaitStatus, err error) {
	p.status, p.err = st, err
	close(p.exited)
}

// Exited is closed once the process has been reaped (or its worker is
// gone).
func (p *Proc) Exited() <-chan struct{} { return p.exited }

// Wait waits for the process to be reaped and returns its wait status;
// the error is [ErrWorkerGone] when the worker went away first.
func (p *Proc) Wait() (syscall.WaitStatus, error) {
	<-p.exited
	return p.status, p.err
}

// Release closes the pidfd.
func (p *Proc) Release() {
	if p.PidFD >= 0 {
		syscall.Close(p.PidFD)
		p.PidFD = -1
	}
}

// Close asks the worker to end everything it started and exit, and waits
// for it (bounded; then it is killed).
func (w *Worker) Close() error {
	w.wmu.Lock()
	err := send(w.conn, &request{Op: "close"}, nil)
	w.wmu.Unlock()
	if err != nil {
		w.kill()
		return nil
	}
	select {
	case <-w.done:
	case <-time.After(10 * time.Second):
		w.kill()
	}
	return nil
}

func (w *Worker) kill() {
	if w.cmd.Process != nil {
		w.cmd.Process.Kill()
	}
	w.fail(ErrWorkerGone)
}
