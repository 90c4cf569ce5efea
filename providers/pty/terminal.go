package pty

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"github.com/shoal-sh/shoal/core/wire"
	"github.com/shoal-sh/shoal/providers/session/sandbox"
	"io"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/charmbracelet/x/vt"
	"github.com/creack/pty"
	"golang.org/x/sys/unix"
)

// Screen is what a PTY read answers (SPEC S4): the rendered screen of the
// terminal emulator and the state of the program behind it.
type Screen = wire.Screen

// Cursor is the cursor position, 0-based, row first like Lines.
type Cursor = wire.Cursor

// Info is one entry of a PTY listing.
type Info = wire.PTYInfo

// Closed is the answer to closing a PTY.
type Closed = wire.PTYClosed

type exitStatus struct {
	code   int
	signal string
}

// reap waits for the leader and decodes its status.
func reap(cmd *exec.Cmd) exitStatus {
	_ = cmd.Wait() // a non-zero exit is an error here; the status says it all
	ps := cmd.ProcessState
	if ps == nil {
		return exitStatus{code: -1}
	}
	if ws, ok := ps.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		return exitStatus{code: 128 + int(ws.Signal()), signal: unix.SignalName(ws.Signal())}
	}
	return exitStatus{code: ps.ExitCode()}
}

// procStatus waits for a confined leader and decodes its status.
func procStatus(p *sandbox.Proc) exitStatus {
	ws, err := p.Wait()
	p.Release()
	if err != nil {
		return exitStatus{code: -1}
	}
	if ws.Signaled() {
		return exitStatus{code: 128 + int(ws.Signal()), signal: unix.SignalName(ws.Signal())}
	}
	return exitStatus{code: ws.ExitStatus()}
}

// Bounds on what a terminal buffers on the program's behalf.
const (
	readChunk       = 32 << 10
	maxPendingInput = 1 << 20 // input the program has not read yet
	scrollbackLines = 1000
)

// terminal is one PTY: the program's process group, the master side of the
// pseudo-terminal, and the emulator that renders what the program writes.
//
// Goroutines, all ended by shutdown:
//   - pump reads the master into the emulator, so a chatty program never
//     blocks on a full PTY buffer;
//   - answer drains the emulator's input pipe — keys and text we send, and
//     the emulator's own replies to terminal queries (cursor position,
//     device attributes) — into inputQueue without ever blocking the pump;
//   - feed writes inputQueue to the master, blocking only itself when the
//     program does not read its input;
//   - watch waits for the leader to exit and, at close, reaps it.
type terminal struct {
	id      uint64
	session string
	command string
	cwd     string
	created time.Time

	cmd  *exec.Cmd     // the leader, when started unconfined
	proc *sandbox.Proc // the leader, when started in a session's domain
	pgid int
	ptmx *os.File

	mu        sync.Mutex
	emu       *vt.Emulator
	title     string
	change    uint64
	changed   chan struct{} // closed and replaced on every state change
	status    *exitStatus   // nil while the leader runs
	drained   bool          // the pump saw the end of output
	closed    bool
	cache     []string // lines rendered at cacheAt
	cacheAt   uint64
	cacheLive bool

	in *inputQueue

	leaderExited chan struct{} // closed when status is set
	pumpDone     chan struct{}
	release      chan struct{} // closed by shutdown: watch may reap now
	reaped       chan struct{} // closed when the leader is reaped
	pinned       bool          // the leader stays a zombie until release
	wg           sync.WaitGroup
	shutOnce     sync.Once
}

// start runs cmd on a new pseudo-terminal of the given size.
func start(cmd *exec.Cmd, cols, rows int) (*terminal, error) {
	master, err := pty.StartWithSize(cmd, &pty.Winsize{Cols: uint16(cols), Rows: uint16(rows)})
	if err != nil {
		return nil, err
	}
	// creack/pty leaves the master in blocking mode (its ioctls go through
	// File.Fd). A non-blocking duplicate goes through the runtime poller,
	// so Close interrupts a pending Read or Write and deadlines work.
	ptmx, err := pollable(master)
	_ = master.Close()
	if err != nil {
		_ = unix.Kill(-cmd.Process.Pid, unix.SIGKILL)
		_ = cmd.Wait()
		return nil, err
	}
	t := newTerminal(ptmx, cmd.Process.Pid, cols, rows)
	t.cmd = cmd
	t.run()
	return t, nil
}

// startConfined runs args on a new pseudo-terminal inside a session's
// domain: the kernel opens the pair, the domain's worker forks the
// program on the terminal side (a new session with it as controlling
// terminal), so the program and all it starts are confined.
func startConfined(d *sandbox.Domain, args []string, dir string, env []string, cols, rows int) (*terminal, error) {
	path, err := exec.LookPath(args[0])
	if err != nil {
		return nil, err
	}
	master, tty, err := pty.Open()
	if err != nil {
		return nil, err
	}
	defer tty.Close()
	if err := pty.Setsize(master, &pty.Winsize{Cols: uint16(cols), Rows: uint16(rows)}); err != nil {
		master.Close()
		return nil, err
	}
	p, err := d.Start(sandbox.Spec{Path: path, Argv: args, Env: env, Dir: dir,
		Files: []*os.File{tty, tty, tty}, Setsid: true, Setctty: true, Ctty: 0})
	if err != nil {
		master.Close()
		return nil, err
	}
	ptmx, err := pollable(master)
	_ = master.Close()
	if err != nil {
		_ = unix.Kill(-p.Pid, unix.SIGKILL)
		p.Wait()
		p.Release()
		return nil, err
	}
	t := newTerminal(ptmx, p.Pid, cols, rows)
	t.proc = p
	t.run()
	return t, nil
}

// newTerminal is a terminal on ptmx whose leader is pid (Setsid: its pid
// is the group id); run starts its goroutines.
func newTerminal(ptmx *os.File, pid, cols, rows int) *terminal {
	emu := vt.NewEmulator(cols, rows)
	emu.SetScrollbackSize(scrollbackLines)
	t := &terminal{
		pgid:         pid,
		ptmx:         ptmx,
		emu:          emu,
		changed:      make(chan struct{}),
		in:           newInputQueue(),
		leaderExited: make(chan struct{}),
		pumpDone:     make(chan struct{}),
		release:      make(chan struct{}),
		reaped:       make(chan struct{}),
		created:      time.Now(),
	}
	emu.SetCallbacks(vt.Callbacks{
		// Called from inside emu.Write, under t.mu.
		Title: func(s string) { t.title = s },
	})
	return t
}

func (t *terminal) run() {
	t.wg.Add(4)
	go t.pump()
	go t.answer()
	go t.feed()
	go t.watch()
}

func pollable(f *os.File) (*os.File, error) {
	var fd int
	var dupErr error
	rc, err := f.SyscallConn()
	if err != nil {
		return nil, fmt.Errorf("pty master: %w", err)
	}
	if err := rc.Control(func(old uintptr) {
		fd, dupErr = unix.FcntlInt(old, unix.F_DUPFD_CLOEXEC, 0)
	}); err != nil {
		return nil, fmt.Errorf("pty master: %w", err)
	}
	if dupErr != nil {
		return nil, fmt.Errorf("duplicate pty master: %w", dupErr)
	}
	if err := unix.SetNonblock(fd, true); err != nil {
		_ = unix.Close(fd)
		return nil, fmt.Errorf("pty master non-blocking: %w", err)
	}
	return os.NewFile(uintptr(fd), "/dev/ptmx"), nil
}

// notifyLocked wakes every waiter. Callers hold t.mu.
func (t *terminal) notifyLocked() {
	close(t.changed)
	t.changed = make(chan struct{})
}

func (t *terminal) pump() {
	defer t.wg.Done()
	defer close(t.pumpDone)
	buf := make([]byte, readChunk)
	for {
		n, err := t.ptmx.Read(buf)
		if n > 0 {
			t.mu.Lock()
			_, _ = t.emu.Write(buf[:n]) // the emulator never fails a write
			t.change++
			t.notifyLocked()
			t.mu.Unlock()
		}
		if err != nil {
			// EIO: every holder of the terminal side is gone. ErrClosed: shutdown.
			break
		}
	}
	t.mu.Lock()
	t.drained = true
	t.notifyLocked()
	t.mu.Unlock()
}

func (t *terminal) answer() {
	defer t.wg.Done()
	defer t.in.close()
	buf := make([]byte, readChunk)
	for {
		// Emulator.Read only reads the pipe; it needs no lock.
		n, err := t.emu.Read(buf)
		if n > 0 {
			// Straight to the master when nothing waits before it, so a
			// keystroke takes no hop through the feed goroutine.
			t.in.pushOrWrite(buf[:n], t.tryWrite)
		}
		if err != nil {
			return
		}
	}
}

func (t *terminal) feed() {
	defer t.wg.Done()
	for {
		chunk, ok := t.in.take()
		if !ok {
			return
		}
		_, err := t.ptmx.Write(chunk)
		t.in.done()
		if err != nil {
			// The master is closed or the program is gone; drop the rest
			// but keep draining so the answer goroutine never stalls.
			t.in.discard()
		}
	}
}

func (t *terminal) watch() {
	defer t.wg.Done()
	var (
		st     exitStatus
		reaped bool
	)
	if t.proc != nil {
		// The worker reaps its children; the pid is not pinned, so the
		// group is signalled only while the terminal is still held
		// (see shutdown), as where waitid cannot wait without reaping.
		st, reaped = procStatus(t.proc), true
	} else {
		st, reaped = awaitExit(t.cmd)
	}
	t.mu.Lock()
	t.status = &st
	t.pinned = !reaped
	t.notifyLocked()
	t.mu.Unlock()
	close(t.leaderExited)
	if !reaped {
		<-t.release
		reap(t.cmd)
	}
	close(t.reaped)
}

// send queues text and then keys as input, in order, through the emulator
// so keys are encoded for the program's current terminal modes.
func (t *terminal) send(text string, keys []vt.KeyPressEvent) error {
	if n := t.in.pending(); n+len(text) > maxPendingInput {
		return fmt.Errorf("the program has not read %d bytes of earlier input; wait for it (pty.read) before writing more", n)
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.closed {
		return errClosed
	}
	if text != "" {
		t.emu.SendText(text)
	}
	for _, k := range keys {
		t.emu.SendKey(k)
	}
	return nil
}

var errClosed = errors.New("pty closed")

func (t *terminal) resize(cols, rows int) error {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.closed {
		return errClosed
	}
	// The emulator first, under the lock: output the program draws after
	// its SIGWINCH must land on a screen of the new size.
	t.emu.Resize(cols, rows)
	var ioErr error
	rc, err := t.ptmx.SyscallConn()
	if err == nil {
		err = rc.Control(func(fd uintptr) {
			ioErr = unix.IoctlSetWinsize(int(fd), unix.TIOCSWINSZ, &unix.Winsize{Col: uint16(cols), Row: uint16(rows)})
		})
	}
	t.change++
	t.notifyLocked()
	if err == nil {
		err = ioErr
	}
	if err != nil {
		return fmt.Errorf("resize pty: %w", err)
	}
	return nil
}

// screen renders the current state. scrollback > 0 adds that many of the
// newest scrolled-off lines.
func (t *terminal) screen(ref, uri string, scrollback int) Screen {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.screenLocked(ref, uri, scrollback)
}

func (t *terminal) screenLocked(ref, uri string, scrollback int) Screen {
	if !t.cacheLive || t.cacheAt != t.change {
		t.cache = renderLines(t.emu)
		t.cacheAt, t.cacheLive = t.change, true
	}
	pos := t.emu.CursorPosition()
	s := Screen{
		PTY:       ref,
		URI:       uri,
		Command:   t.command,
		Lines:     t.cache,
		Cursor:    Cursor{Row: pos.Y, Col: pos.X, Visible: !t.emu.CursorHidden()},
		Cols:      t.emu.Width(),
		Rows:      t.emu.Height(),
		Alive:     t.status == nil,
		Change:    t.change,
		Title:     t.title,
		AltScreen: t.emu.IsAltScreen(),
	}
	if t.status != nil {
		code := t.status.code
		s.Exit, s.Signal = &code, t.status.signal
	}
	if scrollback > 0 {
		s.Scrollback = scrollbackTail(t.emu, scrollback)
	}
	return s
}

func (t *terminal) info(ref, uri string) Info {
	t.mu.Lock()
	defer t.mu.Unlock()
	in := Info{
		PTY: ref, URI: uri, Command: t.command, Cwd: t.cwd,
		Cols: t.emu.Width(), Rows: t.emu.Height(),
		Alive: t.status == nil, Created: t.created.UnixNano(),
	}
	if t.status != nil {
		code := t.status.code
		in.Exit, in.Signal = &code, t.status.signal
	}
	return in
}

// renderLines reads the screen cell by cell. Wide characters occupy a cell
// followed by an empty placeholder, which is skipped.
func renderLines(e *vt.Emulator) []string {
	w, h := e.Width(), e.Height()
	lines := make([]string, h)
	buf := make([]byte, 0, w)
	for y := range h {
		buf = buf[:0]
		for x := range w {
			c := e.CellAt(x, y)
			switch {
			case c == nil:
				buf = append(buf, ' ')
			case c.Content == "":
				if c.Width != 0 {
					buf = append(buf, ' ')
				}
			default:
				buf = append(buf, c.Content...)
			}
		}
		lines[y] = string(bytes.TrimRight(buf, " "))
	}
	return lines
}

func scrollbackTail(e *vt.Emulator, n int) []string {
	sb := e.Scrollback()
	total := sb.Len()
	if n > total {
		n = total
	}
	out := make([]string, 0, n)
	for i := total - n; i < total; i++ {
		out = append(out, strings.TrimRight(sb.Line(i).String(), " "))
	}
	return out
}

// waitChange waits until the change counter passes seen, the state changes
// otherwise (exit, close), ctx ends or d passes. It reports the counter.
func (t *terminal) waitChange(ctx context.Context, seen uint64, d time.Duration) (uint64, bool) {
	t.mu.Lock()
	cur, ch, closed := t.change, t.changed, t.closed
	t.mu.Unlock()
	if cur != seen || closed {
		return cur, true
	}
	timer := time.NewTimer(d)
	defer timer.Stop()
	select {
	case <-ch:
	case <-timer.C:
		return seen, false
	case <-ctx.Done():
		return seen, false
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.change, t.change != seen
}

// settle waits for the program to react to input: up to first for the
// screen to change at all, then until it has been still for quiet, never
// longer than limit in total.
func (t *terminal) settle(ctx context.Context, since uint64, first, quiet, limit time.Duration) {
	if quiet <= 0 {
		return
	}
	deadline := time.Now().Add(limit)
	seen, changed := t.waitChange(ctx, since, min(first, limit))
	if !changed {
		return
	}
	for {
		left := time.Until(deadline)
		if left <= 0 || ctx.Err() != nil || t.isFinal() {
			return
		}
		next, changed := t.waitChange(ctx, seen, min(quiet, left))
		if !changed || next == seen {
			return
		}
		seen = next
	}
}

// isFinal reports whether the screen can no longer change.
func (t *terminal) isFinal() bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.closed || (t.status != nil && t.drained)
}

// shutdown ends the PTY: the whole process group gets SIGHUP, SIGCONT and
// SIGTERM, then SIGKILL after grace (at once if everything already ended);
// the leader is reaped, the master closed, and every goroutine has
// returned when shutdown does. It is safe to call more than once.
func (t *terminal) shutdown(grace time.Duration) {
	t.shutOnce.Do(func() {
		t.mu.Lock()
		t.closed = true
		t.notifyLocked()
		exited, drained, pinned := t.status != nil, t.drained, t.pinned
		t.mu.Unlock()

		// Without a pinned zombie a gone leader may have freed its group
		// id; signal only while the terminal still has holders.
		signal := !exited || pinned || !drained
		if signal && !(exited && drained) {
			for _, s := range []unix.Signal{unix.SIGHUP, unix.SIGCONT, unix.SIGTERM} {
				_ = unix.Kill(-t.pgid, s)
			}
			ctx, cancel := context.WithTimeout(context.Background(), grace)
			select {
			case <-t.leaderExited:
			case <-ctx.Done():
			}
			select {
			case <-t.pumpDone:
			case <-ctx.Done():
			}
			cancel()
		}
		if signal {
			// Stragglers that detached from the terminal, or ignored the
			// polite signals, end here.
			_ = unix.Kill(-t.pgid, unix.SIGKILL)
		}
		_ = t.ptmx.Close() // interrupts the pump and a blocked feed
		<-t.leaderExited
		close(t.release)
		<-t.reaped
		if pw, ok := t.emu.InputPipe().(io.Closer); ok {
			_ = pw.Close() // ends answer, which closes the queue and ends feed
		}
		t.wg.Wait()
	})
}

// tryWrite writes p to the master without waiting and returns how much
// went (0 when the terminal's input buffer is full or the master closed).
func (t *terminal) tryWrite(p []byte) int {
	rc, err := t.ptmx.SyscallConn()
	if err != nil {
		return 0
	}
	written := 0
	_ = rc.Write(func(fd uintptr) bool {
		for written < len(p) {
			n, err := unix.Write(int(fd), p[written:])
			if err != nil || n <= 0 {
				break
			}
			written += n
		}
		return true // never wait: what is left goes to the queue
	})
	return written
}

// inputQueue buffers bytes for the master. push never blocks, so the
// emulator's replies to queries cannot stall the pump even when the
// program stops reading its input.
type inputQueue struct {
	mu       sync.Mutex
	buf      []byte
	inflight int
	closed   bool
	ready    chan struct{} // capacity 1: "buf may be non-empty"
}

func newInputQueue() *inputQueue { return &inputQueue{ready: make(chan struct{}, 1)} }

func (q *inputQueue) push(p []byte) {
	q.mu.Lock()
	// Past the bound only emulator replies can arrive (send checks first);
	// a reply the program would read that late is useless, so drop it.
	if len(q.buf)+len(p) <= 2*maxPendingInput {
		q.buf = append(q.buf, p...)
	}
	q.mu.Unlock()
	select {
	case q.ready <- struct{}{}:
	default:
	}
}

// pushOrWrite is push for the queue's only producer (the answer
// goroutine): when nothing is queued or being written, it first tries
// write, which must not block, and queues only what did not go. Order is
// kept: while write runs the bytes count as in flight, so feed finds the
// queue busy, and nobody else pushes meanwhile.
func (q *inputQueue) pushOrWrite(p []byte, write func([]byte) int) {
	q.mu.Lock()
	if len(q.buf) > 0 || q.inflight > 0 || q.closed {
		q.mu.Unlock()
		q.push(p)
		return
	}
	q.inflight = len(p)
	q.mu.Unlock()
	n := write(p)
	q.mu.Lock()
	q.inflight = 0
	q.mu.Unlock()
	if n < len(p) {
		q.push(p[n:])
	}
}

// take returns the buffered bytes, waiting for some; false once closed.
func (q *inputQueue) take() ([]byte, bool) {
	for {
		q.mu.Lock()
		if len(q.buf) > 0 {
			b := q.buf
			q.buf = nil
			q.inflight = len(b)
			q.mu.Unlock()
			return b, true
		}
		if q.closed {
			q.mu.Unlock()
			return nil, false
		}
		q.mu.Unlock()
		<-q.ready
	}
}

func (q *inputQueue) done() {
	q.mu.Lock()
	q.inflight = 0
	q.mu.Unlock()
}

func (q *inputQueue) discard() {
	q.mu.Lock()
	q.buf = nil
	q.mu.Unlock()
}

func (q *inputQueue) pending() int {
	q.mu.Lock()
	defer q.mu.Unlock()
	return len(q.buf) + q.inflight
}

func (q *inputQueue) close() {
	q.mu.Lock()
	q.closed = true
	q.mu.Unlock()
	select {
	case q.ready <- struct{}{}:
	default:
	}
}

// ref and uri forms of a PTY id.
func ptyRef(id uint64) string { return "pty:" + strconv.FormatUint(id, 10) }
func ptyURI(id uint64) string { return "shoal://pty/" + strconv.FormatUint(id, 10) }
