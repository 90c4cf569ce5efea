package pty

import (
	"context"
	"fmt"
	"log/slog"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"mvdan.cc/sh/v3/syntax"

	"github.com/shoal-sh/shoal/core"
	"github.com/shoal-sh/shoal/core/rpc"
	"github.com/shoal-sh/shoal/providers/session/sandbox"
)

// Defaults and bounds for a PTY's size and timing.
const (
	DefaultCols = 120
	DefaultRows = 40
	MaxCols     = 1000
	MaxRows     = 500
	// MinSize is the fewest columns and rows a terminal may have.
	MinSize = 2
	// DefaultGrace is how long a closing PTY's processes get after SIGHUP
	// and SIGTERM before SIGKILL.
	DefaultGrace = time.Second
	// DefaultSettle is how long the screen must stay still before open and
	// write answer; settleFirst and settleLimit bound that wait.
	DefaultSettle    = 50 * time.Millisecond
	settleFirstWrite = 200 * time.Millisecond
	settleFirstOpen  = 500 * time.Millisecond
	settleLimit      = 2 * time.Second
	// Term is the TERM every PTY program sees.
	Term = "xterm-256color"
	// DefaultMaxPerSession is how many PTYs a session may hold open.
	DefaultMaxPerSession = 32
)

// Manager owns every PTY of the kernel. PTY ids count per kernel
// (pty:1, pty:2, …) so a journal row's ref names one PTY unambiguously;
// each PTY belongs to the session that opened it, and other sessions see
// it as unknown. Manager is also the "pty" resource provider.
type Manager struct {
	// Shell runs command strings as Shell -c COMMAND (default /bin/sh).
	Shell string
	// CwdOf gives a session's working directory, where a PTY starts when
	// open names no cwd. Nil means the kernel's own directory.
	CwdOf func(session string) string
	// DomainOf gives a session's confinement: a PTY's program starts in
	// it, like the session's commands. Nil (or a nil domain) starts it
	// unconfined.
	DomainOf func(session string) *sandbox.Domain
	// EnvOf gives a session's environment (KEY=VALUE). Nil means the
	// kernel's own environment.
	EnvOf func(session string) []string
	// Grace is how long closing processes get before SIGKILL.
	Grace time.Duration
	// MaxPerSession caps a session's open PTYs (default
	// DefaultMaxPerSession). Each holds a process group, a few goroutines
	// and an emulator whose parser alone reserves 4 MiB.
	MaxPerSession int

	// Services set at start-up (Needs); nil when not offered.
	rows  core.Journal
	check core.PolicyCheck
	log   *slog.Logger

	mu     sync.Mutex
	next   uint64
	terms  map[uint64]*terminal
	closed bool
}

// New returns a Manager with the defaults above.
func New() *Manager {
	return &Manager{Shell: "/bin/sh", Grace: DefaultGrace, MaxPerSession: DefaultMaxPerSession, terms: map[uint64]*terminal{}}
}

// OpenOptions describe a PTY to open. Exactly one of Command and Argv is
// set.
type OpenOptions struct {
	// Command is shell source, run as Shell -c Command.
	Command string
	// Argv runs a program directly (looked up in the PTY's PATH).
	Argv []string
	// Cols and Rows default to DefaultCols × DefaultRows.
	Cols, Rows int
	// Env adds to (or overrides) the session environment.
	Env map[string]string
	// Cwd is where the program starts; relative to the session's cwd.
	Cwd string
	// Settle is how long the screen must stay still before Open returns;
	// 0 returns at once, negative means DefaultSettle.
	Settle time.Duration
}

// Open starts a program on a new PTY in the caller's session and journals
// it. Errors are *rpc.Error values.
func (m *Manager) Open(ctx context.Context, c *core.Caller, o OpenOptions) (Screen, error) {
	session, principal := callerOf(c)
	cols, rows, err := size(o.Cols, o.Rows, DefaultCols, DefaultRows)
	if err != nil {
		return Screen{}, err
	}
	display, head, args, err := m.program(o)
	if err != nil {
		return Screen{}, err
	}
	cwd, err := m.cwd(session, o.Cwd)
	if err != nil {
		return Screen{}, err
	}
	env, err := m.env(session, o.Env)
	if err != nil {
		return Screen{}, err
	}
	if err := m.checkPolicy(ctx, c, display, cwd, o.Env); err != nil {
		return Screen{}, err
	}

	m.mu.Lock()
	if m.closed {
		m.mu.Unlock()
		return Screen{}, rpc.Errorf(rpc.Unavailable, "the kernel is stopping; no new PTYs")
	}
	if limit := m.MaxPerSession; limit > 0 && m.countLocked(session) >= limit {
		m.mu.Unlock()
		return Screen{}, rpc.Errorf(rpc.InvalidParams, "this session already has %d open PTYs, the most it may hold; close one with pty.close (pty.list shows them)", limit)
	}
	m.next++
	id := m.next
	m.mu.Unlock()

	var t *terminal
	if d := m.domainOf(session); d != nil {
		t, err = startConfined(d, args, cwd, env, cols, rows)
	} else {
		cmd := exec.Command(args[0], args[1:]...)
		cmd.Dir = cwd
		cmd.Env = env
		t, err = start(cmd, cols, rows)
	}
	row := core.JournalRow{
		Session: session, Principal: principal, Kind: "pty.open",
		Head: head, Source: display, Effects: []string{"pty", "proc.spawn"},
		OK: err == nil, Ref: ptyRef(id),
	}
	if err != nil {
		row.Exit = 127
		m.journal(ctx, row)
		return Screen{}, rpc.Errorf(rpc.InvalidParams, "cannot start %q in %s: %v; check the command and cwd", display, cwd, err)
	}
	t.id, t.session, t.command, t.cwd = id, session, display, cwd

	m.mu.Lock()
	if m.closed {
		m.mu.Unlock()
		t.shutdown(0)
		return Screen{}, rpc.Errorf(rpc.Unavailable, "the kernel is stopping; no new PTYs")
	}
	m.terms[id] = t
	m.mu.Unlock()
	m.journal(ctx, row)

	quiet := o.Settle
	if quiet < 0 {
		quiet = DefaultSettle
	}
	t.settle(ctx, 0, settleFirstOpen, quiet, settleLimit)
	return t.screen(ptyRef(id), ptyURI(id), 0), nil
}

// Input is what Write sends: Text as is (so "\r" and escape sequences pass
// through), then each of Keys.
type Input struct {
	Text string
	Keys []string
	// Settle as in OpenOptions.
	Settle time.Duration
}

// Write sends input to a PTY and answers the screen once it settles.
func (m *Manager) Write(ctx context.Context, session, id string, in Input) (Screen, error) {
	keys, err := ParseKeys(in.Keys)
	if err != nil {
		return Screen{}, rpc.Errorf(rpc.InvalidParams, "%v", err)
	}
	t, n, err := m.lookup(session, id)
	if err != nil {
		return Screen{}, err
	}
	t.mu.Lock()
	since := t.change
	t.mu.Unlock()
	if err := t.send(in.Text, keys); err != nil {
		if err == errClosed {
			return Screen{}, m.unknown(session, id)
		}
		return Screen{}, rpc.Errorf(rpc.InvalidParams, "write to %s: %v", ptyRef(n), err)
	}
	quiet := in.Settle
	if quiet < 0 {
		quiet = DefaultSettle
	}
	t.settle(ctx, since, settleFirstWrite, quiet, settleLimit)
	return t.screen(ptyRef(n), ptyURI(n), 0), nil
}

// Screen answers the current screen; scrollback > 0 adds up to that many
// lines that scrolled off the top.
func (m *Manager) Screen(session, id string, scrollback int) (Screen, error) {
	t, n, err := m.lookup(session, id)
	if err != nil {
		return Screen{}, err
	}
	return t.screen(ptyRef(n), ptyURI(n), scrollback), nil
}

// Resize changes the PTY's size; the program gets SIGWINCH.
func (m *Manager) Resize(session, id string, cols, rows int) (Screen, error) {
	cols, rows, err := size(cols, rows, 0, 0)
	if err != nil {
		return Screen{}, err
	}
	t, n, err := m.lookup(session, id)
	if err != nil {
		return Screen{}, err
	}
	if err := t.resize(cols, rows); err != nil {
		if err == errClosed {
			return Screen{}, m.unknown(session, id)
		}
		return Screen{}, rpc.Errorf(rpc.Internal, "%s: %v", ptyRef(n), err)
	}
	return t.screen(ptyRef(n), ptyURI(n), 0), nil
}

// ClosePTY ends a PTY's processes and forgets it.
func (m *Manager) ClosePTY(session, id string) (Closed, error) {
	t, n, err := m.lookup(session, id)
	if err != nil {
		return Closed{}, err
	}
	m.mu.Lock()
	_, mine := m.terms[n]
	delete(m.terms, n)
	m.mu.Unlock()
	if !mine {
		return Closed{}, m.unknown(session, id) // a concurrent close won
	}
	t.shutdown(m.grace())
	in := t.info(ptyRef(n), ptyURI(n))
	return Closed{PTY: ptyRef(n), Closed: true, Exit: in.Exit, Signal: in.Signal}, nil
}

// PTYs lists the session's PTYs, oldest first.
func (m *Manager) PTYs(session string) []Info {
	ts := m.sessionTerms(session)
	out := make([]Info, len(ts))
	for i, t := range ts {
		out[i] = t.info(ptyRef(t.id), ptyURI(t.id))
	}
	return out
}

// Len counts open PTYs across sessions (the idle-exit check needs it).
func (m *Manager) Len() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return len(m.terms)
}

// WaitScreen waits until the PTY's screen text (Screen.Text) matches re,
// waking on each screen change. When ctx ends first, or the program has
// exited and its output ended without a match, it answers the last screen
// and a TIMEOUT error carrying that screen; a PTY closed meanwhile is
// UNKNOWN_PTY.
func (m *Manager) WaitScreen(ctx context.Context, session, id string, re *regexp.Regexp) (Screen, error) {
	return m.wait(ctx, session, id, fmt.Sprintf("match %q", re.String()),
		func(s Screen, _ bool) bool { return re.MatchString(s.Text()) })
}

// WaitExit waits until the PTY's program has exited and all its output
// has reached the screen, then answers the final screen. Errors are as for
// WaitScreen.
func (m *Manager) WaitExit(ctx context.Context, session, id string) (Screen, error) {
	return m.wait(ctx, session, id, "exit", func(_ Screen, final bool) bool { return final })
}

// wait is the loop under WaitScreen and WaitExit: it checks cond on each
// change of the terminal's state, never by polling. final is true once
// the screen can no longer change.
func (m *Manager) wait(ctx context.Context, session, id, what string, cond func(s Screen, final bool) bool) (Screen, error) {
	t, n, err := m.lookup(session, id)
	if err != nil {
		return Screen{}, err
	}
	ref, u := ptyRef(n), ptyURI(n)
	for {
		t.mu.Lock()
		if t.closed {
			t.mu.Unlock()
			return Screen{}, m.unknown(session, id)
		}
		s := t.screenLocked(ref, u, 0)
		final := t.status != nil && t.drained
		ch := t.changed
		t.mu.Unlock()

		if cond(s, final) {
			return s, nil
		}
		if final {
			e := rpc.Errorf(rpc.Timeout, "%s exited (exit %d) and its screen will not %s; the final screen is in data.screen", ref, *s.Exit, what)
			e.Data = map[string]any{"screen": s}
			return s, e
		}
		select {
		case <-ch:
		case <-ctx.Done():
			e := rpc.Errorf(rpc.Timeout, "%s did not %s in time; the last screen is in data.screen — read it, send input, or wait longer", ref, what)
			e.Data = map[string]any{"screen": s}
			return s, e
		}
	}
}

// SessionClosed ends every PTY of the session.
func (m *Manager) SessionClosed(session string) {
	m.mu.Lock()
	var ts []*terminal
	for id, t := range m.terms {
		if t.session == session {
			ts = append(ts, t)
			delete(m.terms, id)
		}
	}
	m.mu.Unlock()
	m.shutdownAll(ts)
}

// Close ends every PTY and refuses new ones. It leaves no child process.
func (m *Manager) Close() error {
	m.mu.Lock()
	m.closed = true
	ts := make([]*terminal, 0, len(m.terms))
	for id, t := range m.terms {
		ts = append(ts, t)
		delete(m.terms, id)
	}
	m.mu.Unlock()
	m.shutdownAll(ts)
	return nil
}

// shutdownAll closes PTYs in parallel, so stopping many costs one grace.
func (m *Manager) shutdownAll(ts []*terminal) {
	var wg sync.WaitGroup
	for _, t := range ts {
		wg.Go(func() { t.shutdown(m.grace()) })
	}
	wg.Wait()
}

func (m *Manager) grace() time.Duration {
	if m.Grace <= 0 {
		return DefaultGrace
	}
	return m.Grace
}

func (m *Manager) countLocked(session string) int {
	n := 0
	for _, t := range m.terms {
		if t.session == session {
			n++
		}
	}
	return n
}

func (m *Manager) sessionTerms(session string) []*terminal {
	m.mu.Lock()
	var ts []*terminal
	for _, t := range m.terms {
		if t.session == session {
			ts = append(ts, t)
		}
	}
	m.mu.Unlock()
	slices.SortFunc(ts, func(a, b *terminal) int { return int(a.id) - int(b.id) })
	return ts
}

// ParseID accepts "pty:3", "3" and, through the methods, the number 3.
func ParseID(s string) (uint64, bool) {
	s = strings.TrimSpace(s)
	s = strings.TrimPrefix(s, "pty:")
	n, err := strconv.ParseUint(s, 10, 64)
	return n, err == nil && n > 0
}

func (m *Manager) lookup(session, id string) (*terminal, uint64, error) {
	n, ok := ParseID(id)
	if !ok {
		return nil, 0, m.unknown(session, id)
	}
	m.mu.Lock()
	t := m.terms[n]
	m.mu.Unlock()
	if t == nil || t.session != session {
		return nil, 0, m.unknown(session, id)
	}
	return t, n, nil
}

// unknown builds the UNKNOWN_PTY error, naming the session's open PTYs so
// the model can pick the right one.
func (m *Manager) unknown(session, id string) error {
	var open []string
	for _, t := range m.sessionTerms(session) {
		open = append(open, ptyRef(t.id))
	}
	e := rpc.Errorf(rpc.UnknownPTY, "unknown or closed PTY %q; ", id)
	if len(open) == 0 {
		e.Message += "this session has no open PTYs — open one with pty.open"
	} else {
		e.Message += "this session's open PTYs: " + strings.Join(open, ", ")
	}
	e.Data = map[string]any{"open": open}
	if open == nil {
		e.Data = map[string]any{"open": []string{}}
	}
	return e
}

// program resolves what to run: the display form (journal source and the
// screen's command), the journal head, and the argv to execute.
func (m *Manager) program(o OpenOptions) (display, head string, args []string, err error) {
	shell := m.Shell
	if shell == "" {
		shell = "/bin/sh"
	}
	switch {
	case o.Command != "" && len(o.Argv) > 0:
		return "", "", nil, rpc.Errorf(rpc.InvalidParams, "give either command (shell source) or argv (a program and its arguments), not both")
	case strings.TrimSpace(o.Command) != "":
		return o.Command, commandHead(o.Command), []string{shell, "-c", o.Command}, nil
	case len(o.Argv) > 0 && o.Argv[0] != "":
		quoted := make([]string, len(o.Argv))
		for i, a := range o.Argv {
			q, qerr := syntax.Quote(a, syntax.LangBash)
			if qerr != nil {
				return "", "", nil, rpc.Errorf(rpc.InvalidParams, "argv[%d] cannot be passed to a program: %v", i, qerr)
			}
			quoted[i] = q
		}
		// The shell resolves the program in the PTY's own PATH and cwd,
		// then replaces itself with it.
		args = append([]string{shell, "-c", `exec "$0" "$@"`}, o.Argv...)
		return strings.Join(quoted, " "), filepath.Base(o.Argv[0]), args, nil
	default:
		return "", "", nil, rpc.Errorf(rpc.InvalidParams, `pty.open needs a command, e.g. {"command":"bash"} or {"command":"less README.md"}`)
	}
}

// checkPolicy judges what a PTY would start with the same analysis and
// refusal as exec: the command, or argv joined with shell quoting, run in
// cwd, with the variables the PTY is given as prefix assignments (so
// BASH_ENV=… counts). Later keystrokes cannot be analysed; the
// confinement holds there.
func (m *Manager) checkPolicy(ctx context.Context, c *core.Caller, display, cwd string, env map[string]string) error {
	pc := m.check
	if pc == nil {
		return nil
	}
	var src strings.Builder
	for _, k := range slices.Sorted(maps.Keys(env)) {
		q, err := syntax.Quote(env[k], syntax.LangBash)
		if err != nil || !syntax.ValidName(k) {
			return rpc.Errorf(rpc.InvalidParams, "env %q cannot be given to a program", k)
		}
		src.WriteString(k + "=" + q + " ")
	}
	src.WriteString(display)
	return pc.CheckTerminal(ctx, c, src.String(), cwd)
}

// commandHead is the name of the first command in shell source, as the
// journal's head: "FOO=1 vim x" → "vim".
func commandHead(src string) string {
	f, err := syntax.NewParser().Parse(strings.NewReader(src), "")
	if err == nil {
		head := ""
		syntax.Walk(f, func(n syntax.Node) bool {
			if head != "" {
				return false
			}
			if call, ok := n.(*syntax.CallExpr); ok && len(call.Args) > 0 {
				head = call.Args[0].Lit()
				if head == "" {
					head = "?"
				}
				return false
			}
			return true
		})
		if head != "" && head != "?" {
			return head
		}
	}
	if fs := strings.Fields(src); len(fs) > 0 {
		return fs[0]
	}
	return ""
}

func (m *Manager) domainOf(session string) *sandbox.Domain {
	if m.DomainOf == nil {
		return nil
	}
	return m.DomainOf(session)
}

func (m *Manager) cwd(session, asked string) (string, error) {
	base := ""
	if m.CwdOf != nil {
		base = m.CwdOf(session)
	}
	if base == "" {
		wd, err := os.Getwd()
		if err != nil {
			return "", rpc.Errorf(rpc.Internal, "kernel working directory: %v", err)
		}
		base = wd
	}
	dir := base
	if asked != "" {
		dir = asked
		if !filepath.IsAbs(dir) {
			dir = filepath.Join(base, dir)
		}
	}
	st, err := os.Stat(dir)
	if err != nil || !st.IsDir() {
		return "", rpc.Errorf(rpc.InvalidParams, "cwd %q is not a directory; give an existing directory or leave cwd out to use the session's", dir)
	}
	return dir, nil
}

func (m *Manager) env(session string, add map[string]string) ([]string, error) {
	var base []string
	if m.EnvOf != nil {
		base = m.EnvOf(session)
	} else {
		base = os.Environ()
	}
	env := make([]string, 0, len(base)+len(add)+1)
	for _, kv := range base {
		k, _, _ := strings.Cut(kv, "=")
		// The terminal's size lives in the PTY; stale values would
		// override it in many programs.
		if k == "COLUMNS" || k == "LINES" || k == "TERM" {
			continue
		}
		env = append(env, kv)
	}
	env = append(env, "TERM="+Term)
	keys := make([]string, 0, len(add))
	for k := range add {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		if k == "" || strings.ContainsAny(k, "=\x00") || strings.ContainsRune(add[k], 0) {
			return nil, rpc.Errorf(rpc.InvalidParams, "env name %q is not usable: names are non-empty, without '=' or NUL, and values have no NUL", k)
		}
		env = append(env, k+"="+add[k]) // exec keeps the last of duplicates
	}
	return env, nil
}

func (m *Manager) journal(ctx context.Context, row core.JournalRow) {
	if m.rows == nil {
		return // no journal in this kernel (unit tests, minimal builds)
	}
	if _, err := m.rows.Append(ctx, row); err != nil {
		m.logger().Warn("journal pty.open", "pty", row.Ref, "err", err)
	}
}

func (m *Manager) logger() *slog.Logger {
	if m.log != nil {
		return m.log
	}
	return slog.Default()
}

func size(cols, rows, defCols, defRows int) (int, int, error) {
	if cols == 0 {
		cols = defCols
	}
	if rows == 0 {
		rows = defRows
	}
	if cols < MinSize || cols > MaxCols || rows < MinSize || rows > MaxRows {
		return 0, 0, rpc.Errorf(rpc.InvalidParams, "size %d×%d is out of range: cols %d…%d, rows %d…%d", cols, rows, MinSize, MaxCols, MinSize, MaxRows)
	}
	return cols, rows, nil
}

func callerOf(c *core.Caller) (session, principal string) {
	if c == nil {
		return "", ""
	}
	return c.Session, c.Principal
}

// Busy reports open PTYs: a background kernel stays up while any is open.
func (m *Manager) Busy() bool { return m.Len() > 0 }
