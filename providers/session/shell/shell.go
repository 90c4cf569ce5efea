package shell

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime/debug"
	"slices"
	"strings"
	"sync"
	"time"

	"mvdan.cc/sh/v3/expand"
	"mvdan.cc/sh/v3/interp"
	"mvdan.cc/sh/v3/syntax"

	"github.com/shoal-sh/shoal/core/value"
	"github.com/shoal-sh/shoal/providers/session/sandbox"
)

// EmitFunc publishes payload on a user.* channel of the kernel's event bus
// and returns the seq the event got. The bus decides which channels are
// allowed; its error is shown to the script as is.
type EmitFunc func(ctx context.Context, channel string, payload json.RawMessage) (seq uint64, err error)

// NextEventFunc waits for the next event on channel and returns its seq and
// payload. With since nil it waits for the first event published after the
// call; otherwise it returns the oldest retained event with seq > *since,
// waiting when there is none yet. It returns ctx.Err() when ctx ends first.
type NextEventFunc func(ctx context.Context, channel string, since *uint64) (seq uint64, payload json.RawMessage, err error)

// Options configures an [Evaluator]. The zero value is usable.
type Options struct {
	// Dir is the initial working directory; the process's own when empty.
	Dir string
	// Env is the initial environment as NAME=value pairs. When nil the
	// process environment is used, minus the variables that describe the
	// kernel's own terminal and session, plus the agent-safe defaults (see
	// docs/shell.md). An explicit Env is taken as given.
	Env []string
	// Emit carries the emit builtin to the wire bus; nil makes emit fail
	// with a message saying the session has no bus.
	Emit EmitFunc
	// NextEvent carries wire events to the recv builtin; nil makes recv
	// fail likewise.
	NextEvent NextEventFunc
	// Values resolves the refs the out builtin reads (out:N, val:blake3:…);
	// nil makes out fail with a message saying so.
	Values ValueFunc
	// MaxCapture is the number of bytes of stdout and of stderr kept per
	// run (the first and last halves); default [DefaultMaxCapture].
	MaxCapture int
	// RawOutput keeps ANSI escapes, carriage returns and backspaces in the
	// captured output instead of cleaning them.
	RawOutput bool
	// Domain, when set, confines the session: every file the interpreter
	// opens and every process it starts goes through the domain's
	// Landlock worker (see package sandbox). Nil runs unconfined.
	Domain *sandbox.Domain
	// FifoDir is where the interpreter makes the FIFOs of process
	// substitution. The interpreter opens those itself, bypassing the open
	// handler, so under confinement it must be a directory only the kernel
	// can create entries in (the domain may only read and write the files
	// already there). Empty: the session's TMPDIR.
	FifoDir string
	// TempDir, when set, is the session's TMPDIR.
	TempDir string
	// Bash is the GNU bash that runs sources the interpreter cannot run
	// as bash does (see docs/shell.md, Bash fidelity): "" finds /bin/bash
	// or bash on PATH, "-" runs every source in the interpreter.
	Bash string
	// KillGrace is how long a process group has between SIGTERM and
	// SIGKILL when its run is cancelled or the evaluator closes; default
	// [DefaultKillGrace].
	KillGrace time.Duration
}

// Defaults for [Options].
const (
	DefaultMaxCapture = 16 << 20
	DefaultKillGrace  = time.Second
)

// ErrClosed is returned by Run once [Evaluator.Close] has been called.
var ErrClosed = errors.New("shell evaluator is closed: the session ended, attach to a new one")

// RunOptions tunes one run.
type RunOptions struct {
	// Detach, when closed, turns the run into a task: it goes on running
	// concurrently with later foreground runs and its state changes (cd,
	// variables, functions) are not merged into the session. A channel that
	// is already closed starts the run as a task. Nil means the run stays
	// in the foreground until it ends.
	Detach <-chan struct{}
	// File, when set, is src as [Parse] parsed it: a caller that already
	// parsed the source (for a policy check) saves the second parse.
	File *syntax.File
	// Domain, when set, confines this run instead of the session's
	// domain: an applied plan runs with its targets added.
	Domain *sandbox.Domain
	// Live, when set, follows the run's output while it runs.
	Live *Live
	// Check, when set, is called once the run has its turn (a foreground
	// run holds the foreground; a task has made its copy), with the
	// session state the run starts from. An error from it ends the run
	// before anything runs, and RunWith returns that error and no Result.
	// A policy check made here sees the working directory and variables
	// the run will use: nothing can change them in between.
	Check func(State) error
}

// State is the session state a run starts from, as [RunOptions.Check]
// sees it.
type State struct {
	Dir  string
	Var  func(name string) (string, bool)
	Func func(name string) (*syntax.Stmt, bool)
}

// stateOf describes a committed session state, which is never changed
// again: reading it needs no lock.
func stateOf(r *interp.Runner) State {
	return State{
		Dir: r.Dir,
		Var: func(name string) (string, bool) {
			v, ok := r.Vars[name]
			if !ok || !v.IsSet() {
				return "", false
			}
			return v.String(), true
		},
		Func: func(name string) (*syntax.Stmt, bool) {
			f, ok := r.Funcs[name]
			return f, ok
		},
	}
}

// parsers keeps bash parsers for reuse: a parser is a large value, and
// each execution parses its source.
var parsers = sync.Pool{New: func() any { return syntax.NewParser(syntax.Variant(syntax.LangBash)) }}

// Parse parses src as bash, as a run does.
func Parse(src string) (*syntax.File, error) {
	p := parsers.Get().(*syntax.Parser)
	defer parsers.Put(p)
	f, err := p.Parse(strings.NewReader(src), "")
	if err == nil {
		bashTree(f)
		f.Name = "bash" // $0, as in bash -c
	}
	return f, err
}

// Evaluator is one shell session. It is safe for concurrent use: foreground
// runs take turns, tasks run beside them.
type Evaluator struct {
	opts       Options
	base       context.Context // cancelled by Close; parent of every run context
	cancelBase context.CancelFunc
	fg         chan struct{} // the foreground token, capacity 1
	bash       string        // the bash of the fallback; "" for none

	mu        sync.Mutex
	closed    bool
	session   *interp.Runner // committed state; never run directly, only copied
	next      *interp.Runner // a copy of session made ahead for the next run, or nil
	exported  *exports       // of session; nil until read (prepare reads it off the critical path)
	lingering map[*run]context.CancelFunc
	groups    map[int]*group
	killers   map[*time.Timer]struct{}
	handoffs  map[pipeKey]handoff
	events    eventState

	wg sync.WaitGroup // runs in progress and processes not yet reaped

	// devNull is the standard input of processes that get none; opened
	// once, closed by Close after the last process is reaped.
	devNull *os.File
}

// New makes an evaluator. It fails when the directory is not usable.
func New(opts Options) (*Evaluator, error) {
	if opts.MaxCapture <= 0 {
		opts.MaxCapture = DefaultMaxCapture
	}
	if opts.KillGrace <= 0 {
		opts.KillGrace = DefaultKillGrace
	}
	if opts.Dir == "" {
		wd, err := os.Getwd()
		if err != nil {
			return nil, fmt.Errorf("new shell: working directory: %w", err)
		}
		opts.Dir = wd
	}
	dir, err := filepath.Abs(opts.Dir)
	if err != nil {
		return nil, fmt.Errorf("new shell: %w", err)
	}
	if fi, err := os.Stat(dir); err != nil {
		return nil, fmt.Errorf("new shell: %w", err)
	} else if !fi.IsDir() {
		return nil, fmt.Errorf("new shell: %s is not a directory", dir)
	}
	opts.Dir = dir
	env := opts.Env
	if env == nil {
		env = agentEnviron(os.Environ())
	}
	tmpdir := opts.TempDir
	if opts.FifoDir != "" {
		// The interpreter takes its FIFO directory from the first TMPDIR
		// it sees; the session's own TMPDIR is set right after.
		if tmpdir == "" {
			tmpdir = expand.ListEnviron(env...).Get("TMPDIR").String()
		}
		env = append(slices.Clone(env), "TMPDIR="+opts.FifoDir)
	} else if tmpdir != "" {
		env = append(slices.Clone(env), "TMPDIR="+tmpdir)
		tmpdir = ""
	}
	e := &Evaluator{
		opts:      opts,
		bash:      findBash(opts.Bash),
		fg:        make(chan struct{}, 1),
		lingering: make(map[*run]context.CancelFunc),
		groups:    make(map[int]*group),
		killers:   make(map[*time.Timer]struct{}),
		handoffs:  make(map[pipeKey]handoff),
	}
	if e.devNull, err = os.Open(os.DevNull); err != nil {
		return nil, fmt.Errorf("new shell: %w", err)
	}
	e.base, e.cancelBase = context.WithCancel(context.Background())
	r, err := interp.New(
		interp.Env(expand.ListEnviron(env...)),
		interp.Dir(dir),
		interp.StdIO(nil, nil, nil),
		interp.CallHandler(recoverCall(bashCalls(e.callHandler))),
		interp.OpenHandler(recoverOpen(stdStreams(e.openHandler))),
		interp.ReadDirHandler2(e.readDirHandler),
		interp.ExecHandlers(recoverMiddleware, e.builtinMiddleware, e.processMiddleware),
	)
	if err != nil {
		e.devNull.Close()
		return nil, fmt.Errorf("new shell: %w", err)
	}
	// Running nothing initialises the runner's variables (PWD, HOME, …) so
	// Env and Subshell see the same state a first run would.
	init := &syntax.File{}
	if opts.FifoDir != "" {
		src := "unset TMPDIR"
		if tmpdir != "" {
			q, _ := syntax.Quote(tmpdir, syntax.LangBash)
			src = "export TMPDIR=" + q
		}
		if init, err = Parse(src); err != nil {
			e.devNull.Close()
			return nil, fmt.Errorf("new shell: %w", err)
		}
	}
	if err := r.Run(e.base, init); err != nil {
		e.devNull.Close()
		return nil, fmt.Errorf("new shell: %w", err)
	}
	e.session = r
	return e, nil
}

// Run runs src in the foreground; see [Evaluator.RunWith].
func (e *Evaluator) Run(ctx context.Context, src string) (*Result, error) {
	return e.RunWith(ctx, src, RunOptions{})
}

// RunWith parses src as bash and runs it on a copy of the session state.
//
// A syntax error is not an error of RunWith: it is a Result with exit 2 and
// the parser's message on stderr, like bash. RunWith returns an error only
// when the run could not complete: ctx was cancelled (the partial Result
// comes with ctx.Err(), exit 130, and every process group of the run is
// ended) or the evaluator was closed ([ErrClosed]).
//
// A foreground run waits for the previous foreground run to end or detach.
// When it ends without having been detached its state becomes the
// session's.
func (e *Evaluator) RunWith(ctx context.Context, src string, opts RunOptions) (*Result, error) {
	start := time.Now()
	if err := e.enter(); err != nil {
		return nil, err
	}
	defer e.wg.Done()

	file := opts.File
	if file == nil {
		var perr error
		if file, perr = Parse(src); perr != nil {
			return parseErrorResult(perr, start), nil
		}
	}

	ru := e.newRun(file)
	ru.domain = opts.Domain
	if opts.Live != nil {
		opts.Live.attach(ru.stdout, ru.stderr)
	}
	if err := e.takeTurn(ctx, ru, opts.Detach); err != nil {
		return nil, err
	}

	e.mu.Lock()
	var r *interp.Runner
	if !ru.detached {
		// The copy made ahead is for the foreground; a task makes its own.
		r, e.next = e.next, nil
	}
	before := e.exportsLocked()
	base := e.session // the committed state r is a copy of
	if r == nil {
		r = copySession(e.session)
	}
	e.mu.Unlock()
	if opts.Check != nil {
		if err := opts.Check(stateOf(base)); err != nil {
			ru.releaseForeground()
			ru.stdout.release()
			ru.stderr.release()
			return nil, err
		}
	}
	file = e.maybeBash(ru, r, src, file)
	if err := interp.StdIO(nil, ru.stdout, ru.stderr)(r); err != nil {
		ru.releaseForeground()
		return nil, fmt.Errorf("run: %w", err)
	}

	runCtx, cancel := context.WithCancel(e.base)
	ru.ctx = context.WithValue(runCtx, runKey{}, ru)
	stopCaller := context.AfterFunc(ctx, cancel)
	stopTerminate := context.AfterFunc(runCtx, func() { e.terminate(ru) })

	watchDone := make(chan struct{})
	if !ru.detached && opts.Detach != nil {
		go func() {
			select {
			case <-opts.Detach:
				ru.detach()
			case <-watchDone:
			}
		}()
	}

	panicked, err := runRecovering(ru.ctx, r, file)
	close(watchDone)
	stopCaller()

	exit, retErr := e.exitStatus(ctx, runCtx, ru, err)
	if exit == 1 && r.Exited() && ru.sawUnset.Load() {
		// An unset parameter under set -u or ${x?msg}: fatal with
		// status 127 in bash, 1 in the interpreter.
		exit = 127
	}
	if !panicked && runCtx.Err() == nil {
		e.applyBash(ru, r)
	}

	changed := before.changed(r.Vars)
	interp.StdIO(nil, nil, nil)(r) // the committed state must not keep this run's buffers alive
	if panicked {
		// Whatever the run started is ended: nothing will wait for it.
		e.terminate(ru)
	}
	if merge := ru.finish(); merge && panicked {
		// The interpreter stopped half-way through its own bookkeeping:
		// its state is not one to go on from. The session keeps the one
		// it had.
		<-e.fg
	} else if merge {
		e.mu.Lock()
		e.session = r
		e.exported = nil
		e.next = nil
		e.mu.Unlock()
		<-e.fg
		e.wg.Add(1) // while this run's own count is held, so Close waits for it
		go e.prepare(r)
	}

	// Background jobs (cmd &) outlive their run, so their context stays
	// alive until Close; everything else ends here.
	if ru.mayBackground && runCtx.Err() == nil && !panicked {
		e.mu.Lock()
		e.lingering[ru] = cancel
		e.mu.Unlock()
	} else {
		stopTerminate()
		cancel()
	}
	e.dropHandoffs(ru)

	res := ru.result(exit, changed, e.opts.RawOutput)
	ru.stdout.release()
	ru.stderr.release()
	res.Duration = time.Since(start)
	return res, retErr
}

// takeTurn waits for the previous foreground run to end or detach, and
// marks ru as holding the foreground; a run detached first (a task)
// takes no turn.
func (e *Evaluator) takeTurn(ctx context.Context, ru *run, detach <-chan struct{}) error {
	if isClosed(detach) {
		ru.detached = true
		return nil
	}
	select {
	case e.fg <- struct{}{}:
		ru.fgHeld = true
	case <-detach:
		ru.detached = true
	case <-ctx.Done():
		return ctx.Err()
	case <-e.base.Done():
		return ErrClosed
	}
	return nil
}

// exitStatus is the exit status of a run the interpreter ended with err,
// and RunWith's error: ctx's when the run was cancelled (exit 130),
// ErrClosed when the evaluator closed under it. What went wrong is also
// said on the run's stderr.
func (e *Evaluator) exitStatus(ctx, runCtx context.Context, ru *run, err error) (int, error) {
	var es interp.ExitStatus
	switch {
	case err == nil:
		return 0, nil
	case runCtx.Err() != nil:
		retErr := ctx.Err()
		if e.base.Err() != nil || retErr == nil {
			retErr = ErrClosed
		}
		fmt.Fprintf(ru.stderr, "shoal: run cancelled: %v\n", retErr)
		return 130, retErr
	case errors.As(err, &es):
		return int(es), nil
	default:
		fmt.Fprintf(ru.stderr, "shoal: %v\n", err)
		return 1, nil
	}
}

// copySession is the copy of a committed session state a run works on.
// Its variable map, which the run fills when it ends, starts at the size
// the session's has, so filling it does not grow it step by step.
func copySession(session *interp.Runner) *interp.Runner {
	r := session.Subshell()
	r.Vars = make(map[string]expand.Variable, len(session.Vars)+8)
	return r
}

// prepare copies a newly committed session state for the next run, so
// that the copy (every variable and function) is not made while a request
// waits. A committed runner is never run or changed again, so copying it
// beside a run that copies it too is safe. The copy is dropped if the
// state changed meanwhile.
func (e *Evaluator) prepare(session *interp.Runner) {
	defer e.wg.Done()
	sub, x := copySession(session), newExports(session.Vars)
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.session != session || e.closed {
		return
	}
	if e.next == nil {
		e.next = sub
	}
	if e.exported == nil {
		e.exported = x
	}
}

// runRecovering is r.Run with a panic in the interpreter or in one of the
// evaluator's handlers turned into an error, so that the run ends like a
// failed command and gives back what it holds (the foreground, its
// processes) instead of leaving the session waiting for a run that is
// gone. The stack goes into the error: it is what a bug report needs.
func runRecovering(ctx context.Context, r *interp.Runner, file *syntax.File) (panicked bool, err error) {
	defer func() {
		if p := recover(); p != nil {
			stack := debug.Stack()
			if len(stack) > 4096 {
				stack = stack[:4096]
			}
			panicked, err = true, fmt.Errorf("internal error (please report it): %v\n%s", p, stack)
		}
	}()
	return false, r.Run(ctx, file)
}

// Cwd is the session's working directory as of the last foreground run.
func (e *Evaluator) Cwd() string {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.session.Dir
}

// Env returns the session's exported variables, sorted by name. The values
// are secrets as far as Shoal is concerned: callers show them only to
// principals holding the EnvRead grant.
func (e *Evaluator) Env() []EnvVar {
	e.mu.Lock()
	defer e.mu.Unlock()
	return slices.Clone(e.exportsLocked().sorted)
}

// Close cancels every run, ends every process group the evaluator started
// (SIGTERM, then SIGKILL after the grace period) and waits until the
// direct children are reaped and the runs have returned. It is idempotent.
func (e *Evaluator) Close() error {
	e.mu.Lock()
	if e.closed {
		e.mu.Unlock()
		return nil
	}
	e.closed = true
	lingering := e.lingering
	e.lingering = nil
	e.mu.Unlock()

	e.cancelBase()
	for _, cancel := range lingering {
		cancel()
	}
	groups := e.liveGroups()
	for _, g := range groups {
		g.signal(sigTERM)
	}
	deadline := time.Now().Add(e.opts.KillGrace)
	for time.Now().Before(deadline) && anyLeaderRunning(groups) {
		time.Sleep(5 * time.Millisecond)
	}
	groups = e.liveGroups()
	for _, g := range groups {
		g.signal(sigKILL)
	}
	// SIGKILL cannot be refused, but dying takes a moment; wait (bounded)
	// so that no process of ours is still running when Close returns.
	deadline = time.Now().Add(e.opts.KillGrace)
	for time.Now().Before(deadline) && slices.ContainsFunc(groups, (*group).alive) {
		time.Sleep(2 * time.Millisecond)
	}

	done := make(chan struct{})
	go func() {
		e.wg.Wait()
		close(done)
	}()
	var err error
	select {
	case <-done:
		e.devNull.Close()
	case <-time.After(10 * e.opts.KillGrace):
		// A process may still be starting with devNull; leave it open.
		err = errors.New("close shell: some runs did not stop after their processes were killed")
	}
	e.mu.Lock()
	for t := range e.killers {
		t.Stop()
	}
	clear(e.killers)
	e.mu.Unlock()
	return err
}

// enter registers a run, refusing once the evaluator is closed.
func (e *Evaluator) enter() error {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.closed {
		return ErrClosed
	}
	e.wg.Add(1)
	return nil
}

func isClosed(ch <-chan struct{}) bool {
	if ch == nil {
		return false
	}
	select {
	case <-ch:
		return true
	default:
		return false
	}
}

func parseErrorResult(err error, start time.Time) *Result {
	msg := err.Error() + "\n"
	return &Result{
		Exit:     2,
		Stderr:   msg,
		Value:    value.NewRecord(value.F("exit", value.Int(2)), value.F("stdout", value.Str("")), value.F("stderr", value.Str(msg))),
		Duration: time.Since(start),
	}
}

// exports are the exported, set string variables of a committed session
// state: sorted for Env, and by name for telling what a run changed.
type exports struct {
	sorted []EnvVar
	byName map[string]string
}

func isExport(vr expand.Variable) bool {
	return vr.IsSet() && vr.Exported && vr.Kind == expand.String
}

// newExports reads the exports of a runner's final variable map.
func newExports(vars map[string]expand.Variable) *exports {
	x := &exports{sorted: make([]EnvVar, 0, len(vars)), byName: make(map[string]string, len(vars))}
	for name, vr := range vars {
		if isExport(vr) {
			x.sorted = append(x.sorted, EnvVar{Name: name, Value: vr.Str})
			x.byName[name] = vr.Str
		}
	}
	slices.SortFunc(x.sorted, func(a, b EnvVar) int { return strings.Compare(a.Name, b.Name) })
	return x
}

// changed names, sorted, the exports that a run ending with vars added,
// changed or removed.
func (x *exports) changed(vars map[string]expand.Variable) []string {
	var names []string
	kept := 0
	for name, vr := range vars {
		if !isExport(vr) {
			continue
		}
		old, ok := x.byName[name]
		if ok {
			kept++
		}
		if !ok || old != vr.Str {
			names = append(names, name)
		}
	}
	if kept < len(x.sorted) {
		for _, v := range x.sorted {
			if vr, ok := vars[v.Name]; !ok || !isExport(vr) {
				names = append(names, v.Name)
			}
		}
	}
	slices.Sort(names)
	return names
}

// exportsLocked returns the exports of the committed state, reading them
// now if prepare has not yet. e.mu is held.
func (e *Evaluator) exportsLocked() *exports {
	if e.exported == nil {
		e.exported = newExports(e.session.Vars)
	}
	return e.exported
}

// Var returns the session's value of a shell variable (exported or not),
// for static analysis of later source (plans resolve $NAME with it).
func (e *Evaluator) Var(name string) (string, bool) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.session == nil || e.session.Vars == nil {
		return "", false
	}
	v, ok := e.session.Vars[name]
	if !ok || !v.IsSet() {
		return "", false
	}
	return v.String(), true
}

// Func returns the body of a function the session has defined.
func (e *Evaluator) Func(name string) (*syntax.Stmt, bool) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.session == nil || e.session.Funcs == nil {
		return nil, false
	}
	f, ok := e.session.Funcs[name]
	return f, ok
}
