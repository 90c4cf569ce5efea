package shell

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"mvdan.cc/sh/v3/expand"
	"mvdan.cc/sh/v3/interp"
)

const (
	sigTERM = syscall.SIGTERM
	sigKILL = syscall.SIGKILL
)

// ioGrace is how long Wait keeps reading a process's output after it
// exited while something else (a daemonised grandchild) still holds the
// pipe. Output the process itself wrote is already in the pipe and is read
// well within it.
const ioGrace = 500 * time.Millisecond

// forcedEnv is set on every process, whatever the session exports: these
// are the variables whose absence makes a tool wait for a human (a pager
// on a pipe, a credential prompt).
var forcedEnv = [][2]string{
	{"PAGER", "cat"},
	{"GIT_PAGER", "cat"},
	{"MANPAGER", "cat"},
	{"SYSTEMD_PAGER", "cat"},
	{"GH_PAGER", "cat"},
	{"AWS_PAGER", ""},
	{"GIT_TERMINAL_PROMPT", "0"},
}

// defaultEnv is put into a session environment taken from the kernel's
// own: quiet, colourless, non-interactive tools. A script may change these
// with export.
var defaultEnv = [][2]string{
	{"TERM", "dumb"},
	{"NO_COLOR", "1"},
	{"CLICOLOR", "0"},
	{"LESS", "FRX"},
	{"DEBIAN_FRONTEND", "noninteractive"},
	{"EDITOR", "true"},
	{"VISUAL", "true"},
	{"GIT_EDITOR", "true"},
}

// inheritedDrop are variables of the kernel's environment that describe
// its own terminal or shell and would mislead the session's programs.
var inheritedDrop = []string{
	"COLORTERM", "TERM_PROGRAM", "TERM_PROGRAM_VERSION", "TERM_SESSION_ID", "WT_SESSION",
	"VTE_VERSION", "TMUX", "TMUX_PANE", "STY", "WINDOWID", "PS1", "PS2", "PS4",
	"PROMPT_COMMAND", "SHLVL", "OLDPWD", "PWD", "_", "LS_COLORS", "CLICOLOR_FORCE", "FORCE_COLOR",
}

// agentEnviron derives a session environment from the kernel's.
func agentEnviron(environ []string) []string {
	out := make([]string, 0, len(environ)+len(defaultEnv)+len(forcedEnv))
	for _, kv := range environ {
		name, _, _ := strings.Cut(kv, "=")
		if slices.Contains(inheritedDrop, name) || strings.HasPrefix(name, "SHOAL_") ||
			strings.HasPrefix(name, "BASH_FUNC_") || strings.HasPrefix(name, "ITERM_") ||
			strings.HasPrefix(name, "KONSOLE_") || isEnvSetting(name, defaultEnv) || isEnvSetting(name, forcedEnv) {
			continue
		}
		out = append(out, kv)
	}
	for _, kv := range defaultEnv {
		out = append(out, kv[0]+"="+kv[1])
	}
	for _, kv := range forcedEnv {
		out = append(out, kv[0]+"="+kv[1])
	}
	return out
}

func isEnvSetting(name string, list [][2]string) bool {
	for _, kv := range list {
		if kv[0] == name {
			return true
		}
	}
	return false
}

// processEnv is the environment of one process: the exported string
// variables visible to the command, then the forced settings. The entries
// are slices of one string: one allocation instead of one per variable.
func processEnv(env expand.Environ) []string {
	vals := make(map[string]string, 64)
	size := 0
	for name, vr := range env.Each {
		// The same name can come twice (an inner scope over an outer
		// one); the later entry is the current one.
		if isExport(vr) && !isEnvSetting(name, forcedEnv) {
			vals[name] = vr.Str
			size += len(name) + 1 + len(vr.Str)
		} else {
			delete(vals, name)
		}
	}
	for _, kv := range forcedEnv {
		size += len(kv[0]) + 1 + len(kv[1])
	}
	var b strings.Builder
	b.Grow(size)
	ends := make([]int, 0, len(vals)+len(forcedEnv))
	for name, v := range vals {
		b.WriteString(name)
		b.WriteByte('=')
		b.WriteString(v)
		ends = append(ends, b.Len())
	}
	for _, kv := range forcedEnv {
		b.WriteString(kv[0])
		b.WriteByte('=')
		b.WriteString(kv[1])
		ends = append(ends, b.Len())
	}
	all := b.String()
	list := make([]string, len(ends))
	start := 0
	for i, end := range ends {
		list[i] = all[start:end]
		start = end
	}
	return list
}

// group is a process group the evaluator started: the leader is the
// command it ran; other members are whatever the leader spawned and left
// behind.
type group struct {
	pgid       int
	args       []string
	run        *run
	started    time.Time
	leaderDone chan struct{}

	mu   sync.Mutex
	gone bool // observed empty; the id may be reused now, never signal it again
}

func (g *group) signal(sig syscall.Signal) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.gone {
		return
	}
	if err := syscall.Kill(-g.pgid, sig); errors.Is(err, syscall.ESRCH) {
		g.gone = true
	}
}

// alive reports whether any process of the group still runs. Members that
// outlived the leader are reparented to init and may stay zombies until
// init reaps them; a group of zombies only is over.
func (g *group) alive() bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.gone {
		return false
	}
	if err := syscall.Kill(-g.pgid, 0); errors.Is(err, syscall.ESRCH) || !groupHasLiveMember(g.pgid) {
		g.gone = true
	}
	return !g.gone
}

// groupHasLiveMember scans /proc for a process of the group that is not a
// zombie. Without /proc it assumes there is one.
func groupHasLiveMember(pgid int) bool {
	d, err := os.Open("/proc")
	if err != nil {
		return true
	}
	defer d.Close()
	names, err := d.Readdirnames(-1)
	if err != nil {
		return true
	}
	for _, name := range names {
		if name[0] < '0' || name[0] > '9' {
			continue
		}
		stat, err := os.ReadFile("/proc/" + name + "/stat")
		if err != nil {
			continue // exited meanwhile
		}
		// pid (comm) state ppid pgrp …; comm may contain spaces and parens.
		i := bytes.LastIndexByte(stat, ')')
		if i < 0 {
			continue
		}
		f := strings.Fields(string(stat[i+1:]))
		if len(f) < 3 || f[0] == "Z" || f[0] == "X" {
			continue
		}
		if f[2] == strconv.Itoa(pgid) {
			return true
		}
	}
	return false
}

func (g *group) leaderRunning() bool {
	select {
	case <-g.leaderDone:
		return false
	default:
		return true
	}
}

func anyLeaderRunning(gs []*group) bool {
	return slices.ContainsFunc(gs, (*group).leaderRunning)
}

// Process is one process group the evaluator started that still has a
// process in it.
type Process struct {
	PGID    int       `json:"pgid"` // also the leader's pid
	Args    []string  `json:"args"`
	Started time.Time `json:"started"`
	// Leader reports that the command itself is still running; when false
	// only processes it left behind remain.
	Leader bool `json:"leader"`
}

// Processes lists the live process groups, oldest first.
func (e *Evaluator) Processes() []Process {
	var out []Process
	for _, g := range e.liveGroups() {
		out = append(out, Process{PGID: g.pgid, Args: slices.Clone(g.args), Started: g.started, Leader: g.leaderRunning()})
	}
	slices.SortFunc(out, func(a, b Process) int { return a.Started.Compare(b.Started) })
	return out
}

// liveGroups prunes groups whose processes are all gone and returns the
// rest.
func (e *Evaluator) liveGroups() []*group {
	e.mu.Lock()
	gs := make([]*group, 0, len(e.groups))
	for _, g := range e.groups {
		gs = append(gs, g)
	}
	e.mu.Unlock()
	live := gs[:0]
	for _, g := range gs {
		if g.leaderRunning() || g.alive() {
			live = append(live, g)
			continue
		}
		e.mu.Lock()
		delete(e.groups, g.pgid)
		e.mu.Unlock()
	}
	return live
}

// terminate ends the process groups of a cancelled run: SIGTERM now,
// SIGKILL to whatever is left after the grace period.
func (e *Evaluator) terminate(ru *run) {
	e.mu.Lock()
	var gs []*group
	for _, g := range e.groups {
		if g.run == ru {
			gs = append(gs, g)
		}
	}
	e.mu.Unlock()
	e.killGroups(gs)
}

func (e *Evaluator) killGroups(gs []*group) {
	if len(gs) == 0 {
		return
	}
	for _, g := range gs {
		g.signal(sigTERM)
	}
	var t *time.Timer
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.closed {
		return // Close does its own SIGKILL sweep
	}
	t = time.AfterFunc(e.opts.KillGrace, func() {
		for _, g := range gs {
			g.signal(sigKILL)
		}
		e.mu.Lock()
		delete(e.killers, t)
		e.mu.Unlock()
	})
	e.killers[t] = struct{}{}
}

// spawn runs one external command to completion.
func (e *Evaluator) spawn(ctx context.Context, ru *run, hc interp.HandlerContext, path string, args []string) error {
	return e.spawnEnv(ctx, ru, hc, path, args, processEnv(hc.Env))
}

// spawnEnv is spawn with the process's environment given.
func (e *Evaluator) spawnEnv(ctx context.Context, ru *run, hc interp.HandlerContext, path string, args, env []string) error {
	if d := e.domainOf(ru); d != nil {
		return e.spawnConfined(ctx, ru, hc, d, path, args, env)
	}
	stdin := hc.Stdin
	if stdin == nil {
		stdin = e.devNull
	}
	stdout, stderr := hc.Stdout, hc.Stderr
	outs, err := newOutputs(stdout, stderr)
	if err != nil {
		fmt.Fprintf(hc.Stderr, "%s: %v\n", args[0], err)
		return interp.ExitStatus(126)
	}
	if outs != nil {
		defer outs.close()
		stdout, stderr = outs.child[0], outs.child[1]
	}
	command := func(path string, args []string) func() *exec.Cmd {
		return func() *exec.Cmd {
			return &exec.Cmd{
				Path:        path,
				Args:        args,
				Env:         env,
				Dir:         hc.Dir,
				Stdin:       stdin,
				Stdout:      stdout,
				Stderr:      stderr,
				SysProcAttr: &syscall.SysProcAttr{Setpgid: true},
				WaitDelay:   ioGrace,
			}
		}
	}
	cmd, g, err := e.start(ctx, ru, command(path, args))
	if isErrno(err, syscall.ENOEXEC) {
		// A script without a #! line: run it with sh, as shells do.
		cmd, g, err = e.start(ctx, ru, command("/bin/sh", append([]string{"sh", path}, args[1:]...)))
	}
	if err != nil {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		fmt.Fprintf(hc.Stderr, "%s: %s\n", args[0], strerror(err))
		return interp.ExitStatus(126)
	}
	// Should anything below panic (recoverMiddleware turns that into a
	// failed command), the process is still ended, reaped and accounted
	// for: nothing else would ever wait for it.
	reaped := false
	defer func() {
		if reaped {
			return
		}
		p := recover()
		g.signal(sigKILL)
		_ = cmd.Wait()
		close(g.leaderDone)
		e.mu.Lock()
		delete(e.groups, g.pgid)
		e.mu.Unlock()
		e.wg.Done()
		panic(p)
	}()
	var drain func()
	if outs != nil {
		outs.started()
		drain = outs.copy(cmd.Process.Pid, ioGrace)
	}
	werr := cmd.Wait()
	if drain != nil {
		drain()
	}
	reaped = true
	close(g.leaderDone)
	if !g.alive() {
		e.mu.Lock()
		delete(e.groups, g.pgid)
		e.mu.Unlock()
	}
	e.wg.Done()

	var ee *exec.ExitError
	switch {
	case werr == nil, errors.Is(werr, exec.ErrWaitDelay):
		return nil
	case errors.As(werr, &ee):
		if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			return signalStatus(ru, hc, ws.Signal())
		}
		return interp.ExitStatus(ee.ExitCode())
	default:
		fmt.Fprintf(hc.Stderr, "%s: %v\n", args[0], werr)
		return interp.ExitStatus(1)
	}
}

// signalStatus is the status of a command a signal ended, 128+N, and
// says so as bash does for SIGTERM: "Terminated" on stderr, unless the
// command is an earlier stage of a pipeline or the whole source (which
// bash -c runs by exec, reporting nothing). bash's reports of other
// signals name the process id, which no other run could reproduce.
func signalStatus(ru *run, hc interp.HandlerContext, sig syscall.Signal) error {
	if sig == syscall.SIGTERM && ru != nil && !ru.oneShot && !ru.inEarlierStage(hc.Pos.Offset()) {
		fmt.Fprintln(hc.Stderr, "Terminated")
	}
	return interp.ExitStatus(128 + int(sig))
}

// start starts a command in its own process group and tracks the group.
// On success the caller owns one e.wg count, released once the leader is
// reaped.
func (e *Evaluator) start(ctx context.Context, ru *run, newCmd func() *exec.Cmd) (*exec.Cmd, *group, error) {
	var cmd *exec.Cmd
	g, err := e.track(ctx, ru, func() (int, []string, error) {
		// A failed Start closed the command's pipes: each try gets a
		// fresh one.
		cmd = newCmd()
		if err := cmd.Start(); err != nil {
			return 0, nil, err
		}
		return cmd.Process.Pid, cmd.Args, nil
	})
	if err != nil {
		return nil, nil, err
	}
	return cmd, g, nil
}

// track starts a process group leader with launch and tracks its group,
// for start and startConfined alike: it refuses once the evaluator is
// closed, takes the e.wg count the caller then owns, retries ETXTBSY and
// ends a group whose run was cancelled while it started.
func (e *Evaluator) track(ctx context.Context, ru *run, launch func() (pid int, args []string, err error)) (*group, error) {
	e.mu.Lock()
	if e.closed {
		e.mu.Unlock()
		return nil, ErrClosed
	}
	e.wg.Add(1)
	e.mu.Unlock()
	if err := ctx.Err(); err != nil {
		e.wg.Done()
		return nil, err
	}
	pid, args, err := launch()
	// A file just written by a concurrently forked process can briefly
	// fail with ETXTBSY (go.dev/issue/22315); it clears within
	// milliseconds.
	for delay := time.Millisecond; isErrno(err, syscall.ETXTBSY) && delay < 300*time.Millisecond; delay *= 2 {
		time.Sleep(delay)
		pid, args, err = launch()
	}
	if err != nil {
		e.wg.Done()
		return nil, err
	}
	g := &group{pgid: pid, args: args, run: ru, started: time.Now(), leaderDone: make(chan struct{})}
	e.mu.Lock()
	e.groups[g.pgid] = g
	e.mu.Unlock()
	// A cancel that raced with the start found no group to end; end it here.
	if ctx.Err() != nil {
		e.killGroups([]*group{g})
	}
	return g, nil
}

func isErrno(err error, errno syscall.Errno) bool {
	var pe *os.PathError
	if errors.As(err, &pe) {
		return errors.Is(pe.Err, errno)
	}
	return errors.Is(err, errno)
}
