package pty

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/shoal-sh/shoal/core"
	"github.com/shoal-sh/shoal/core/rpc"
	"github.com/shoal-sh/shoal/core/uri"
)

// deadline bounds every wait in these tests. It is generous on purpose:
// the tests assert what the screen shows, never how fast.
const deadline = 60 * time.Second

var (
	alice = &core.Caller{Session: "s1", Principal: "agent:alice"}
	bob   = &core.Caller{Session: "s2", Principal: "agent:bob"}
)

func newManager(t *testing.T) *Manager {
	t.Helper()
	m := New()
	m.Grace = 300 * time.Millisecond
	t.Cleanup(func() { _ = m.Close() })
	return m
}

// shellEnv gives a prompt the tests can match.
var shellEnv = map[string]string{"PS1": "shoal$ ", "ENV": ""}

func open(t *testing.T, m *Manager, c *core.Caller, o OpenOptions) Screen {
	t.Helper()
	s, err := m.Open(context.Background(), c, o)
	if err != nil {
		t.Fatalf("open %+v: %v", o, err)
	}
	return s
}

// waitFor waits until the screen matches pattern; on failure it shows the
// last screen.
func waitFor(t *testing.T, m *Manager, c *core.Caller, id, pattern string) Screen {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), deadline)
	defer cancel()
	s, err := m.WaitScreen(ctx, c.Session, id, regexp.MustCompile(pattern))
	if err != nil {
		t.Fatalf("waiting for %q on %s: %v\nscreen:\n%s", pattern, id, err, s.Text())
	}
	return s
}

func write(t *testing.T, m *Manager, c *core.Caller, id, text string, keys ...string) {
	t.Helper()
	if _, err := m.Write(context.Background(), c.Session, id, Input{Text: text, Keys: keys}); err != nil {
		t.Fatalf("write %q %v to %s: %v", text, keys, id, err)
	}
}

func codeOf(err error) rpc.Code {
	var e *rpc.Error
	if errors.As(err, &e) {
		return e.Code
	}
	return 0
}

func TestShellEcho(t *testing.T) {
	for _, shell := range []string{"sh", "bash --norc --noprofile"} {
		t.Run(shell, func(t *testing.T) {
			if _, err := exec.LookPath(strings.Fields(shell)[0]); err != nil {
				t.Skipf("%s not installed", shell)
			}
			m := newManager(t)
			s := open(t, m, alice, OpenOptions{Command: shell, Env: shellEnv})
			if s.PTY != "pty:1" || s.URI != "shoal://pty/1" || !s.Alive || s.Exit != nil {
				t.Fatalf("open answered %+v", s)
			}
			if s.Cols != DefaultCols || s.Rows != DefaultRows || len(s.Lines) != DefaultRows {
				t.Fatalf("size %d×%d with %d lines, want %d×%d", s.Cols, s.Rows, len(s.Lines), DefaultCols, DefaultRows)
			}
			waitFor(t, m, alice, s.PTY, `shoal\$$`)
			write(t, m, alice, s.PTY, "echo hello", "Enter")
			s = waitFor(t, m, alice, s.PTY, `(?m)^shoal\$ echo hello\nhello\nshoal\$$`)
			// The cursor sits after the new prompt.
			row := strings.Count(s.Text(), "\n")
			if s.Cursor.Row != row || s.Cursor.Col != len("shoal$ ") {
				t.Errorf("cursor %+v, want row %d col %d\n%s", s.Cursor, row, len("shoal$ "), s.Text())
			}
		})
	}
}

func TestFullScreenLess(t *testing.T) {
	if _, err := exec.LookPath("less"); err != nil {
		t.Skip("less not installed")
	}
	dir := t.TempDir()
	var b strings.Builder
	for i := 1; i <= 200; i++ {
		fmt.Fprintf(&b, "line %d\n", i)
	}
	file := filepath.Join(dir, "lines.txt")
	if err := os.WriteFile(file, []byte(b.String()), 0o600); err != nil {
		t.Fatal(err)
	}
	m := newManager(t)
	s := open(t, m, alice, OpenOptions{
		Argv: []string{"less", file}, Cols: 60, Rows: 20,
		Env: map[string]string{"LESS": "", "LESSHISTFILE": "-", "LESSOPEN": ""},
	})
	s = waitFor(t, m, alice, s.PTY, `(?m)^line 19\n.*lines\.txt`)
	if s.Lines[0] != "line 1" || s.Lines[18] != "line 19" || !strings.Contains(s.Lines[19], "lines.txt") {
		t.Fatalf("less did not draw the first page and its status line:\n%s", s.Text())
	}
	if !s.AltScreen {
		t.Errorf("less should be on the alternate screen")
	}
	write(t, m, alice, s.PTY, "", "PageDown")
	s = waitFor(t, m, alice, s.PTY, `^line 20\n`)
	if s.Lines[18] != "line 38" {
		t.Errorf("after PageDown, row 18 = %q, want line 38\n%s", s.Lines[18], s.Text())
	}
	write(t, m, alice, s.PTY, "q")
	s = waitExit(t, m, alice, s.PTY)
	if s.Exit == nil || *s.Exit != 0 || s.AltScreen {
		t.Errorf("after q: exit %v, alt screen %v", s.Exit, s.AltScreen)
	}
}

// TestTerminalQueries drives a raw-mode program that draws at absolute
// positions and asks for the cursor position: the emulator's answer must
// reach the program.
func TestTerminalQueries(t *testing.T) {
	m := newManager(t)
	script := `stty raw -echo; printf '\033[?1049h\033[2J\033[3;5HMID\033[6n'; ` +
		`r=$(dd bs=1 count=6 2>/dev/null | od -An -c | tr -s ' '); ` +
		`printf '\033]2;my title\007\033[5;1HGOT%s' "$r"; stty sane; sleep 100`
	s := open(t, m, alice, OpenOptions{Command: script, Cols: 40, Rows: 8})
	s = waitFor(t, m, alice, s.PTY, `GOT 033 \[ 3 ; 8 R`)
	if s.Lines[2] != "    MID" || !s.AltScreen || s.Title != "my title" {
		t.Errorf("screen %q alt %v title %q", s.Lines, s.AltScreen, s.Title)
	}
}

func TestCtrlCInterruptsSleep(t *testing.T) {
	m := newManager(t)
	s := open(t, m, alice, OpenOptions{Command: "sh", Env: shellEnv})
	waitFor(t, m, alice, s.PTY, `shoal\$$`)
	// Once "sleeping" shows, the foreground child runs: a Ctrl-C now ends
	// it whether or not it has become sleep yet. (The interactive shell
	// itself would only note an interrupt and go on to the next command.)
	write(t, m, alice, s.PTY, "sh -c 'echo sleeping; exec sleep 100'", "Enter")
	waitFor(t, m, alice, s.PTY, `\nsleeping$`)
	write(t, m, alice, s.PTY, "", "Ctrl-C")
	waitFor(t, m, alice, s.PTY, `\nsleeping\n(.*\n)?shoal\$$`)
	write(t, m, alice, s.PTY, "echo back $?", "Enter")
	waitFor(t, m, alice, s.PTY, `\nback 130\nshoal\$$`)
}

func TestCtrlDEndsShell(t *testing.T) {
	m := newManager(t)
	s := open(t, m, alice, OpenOptions{Command: "sh", Env: shellEnv})
	waitFor(t, m, alice, s.PTY, `shoal\$$`)
	write(t, m, alice, s.PTY, "", "Ctrl-D")
	s = waitExit(t, m, alice, s.PTY)
	if *s.Exit != 0 || s.Signal != "" {
		t.Errorf("exit %d signal %q, want 0", *s.Exit, s.Signal)
	}
}

// waitExit waits until the program exited and its output ended.
func waitExit(t *testing.T, m *Manager, c *core.Caller, id string) Screen {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), deadline)
	defer cancel()
	s, err := m.WaitExit(ctx, c.Session, id)
	if err != nil || s.Alive || s.Exit == nil {
		t.Fatalf("%s did not exit: %v\n%s", id, err, s.Text())
	}
	return s
}

func TestResize(t *testing.T) {
	m := newManager(t)
	s := open(t, m, alice, OpenOptions{Command: "sh", Env: shellEnv})
	waitFor(t, m, alice, s.PTY, `shoal\$$`)
	write(t, m, alice, s.PTY, "stty size", "Enter")
	waitFor(t, m, alice, s.PTY, `\n40 120\n`)
	r, err := m.Resize(alice.Session, s.PTY, 100, 30)
	if err != nil {
		t.Fatal(err)
	}
	if r.Cols != 100 || r.Rows != 30 || len(r.Lines) != 30 || r.Change <= s.Change {
		t.Fatalf("resize answered %d×%d, %d lines, change %d (before %d)", r.Cols, r.Rows, len(r.Lines), r.Change, s.Change)
	}
	write(t, m, alice, s.PTY, "stty size", "Enter")
	waitFor(t, m, alice, s.PTY, `\n30 100\n`)
	for _, bad := range [][2]int{{0, 10}, {10, 0}, {1, 10}, {MaxCols + 1, 10}, {10, MaxRows + 1}} {
		if _, err := m.Resize(alice.Session, s.PTY, bad[0], bad[1]); codeOf(err) != rpc.InvalidParams {
			t.Errorf("resize %v: %v, want INVALID_PARAMS", bad, err)
		}
	}
}

func TestScrollbackAndWideChars(t *testing.T) {
	m := newManager(t)
	s := open(t, m, alice, OpenOptions{Command: `seq 1 50; printf '中文x'; sleep 100`, Cols: 20, Rows: 5})
	s = waitFor(t, m, alice, s.PTY, `中文x`)
	if want := []string{"47", "48", "49", "50", "中文x"}; strings.Join(s.Lines, ",") != strings.Join(want, ",") {
		t.Fatalf("lines %q, want %q", s.Lines, want)
	}
	if s.Cursor.Col != 5 {
		t.Errorf("cursor col %d after two wide characters and x, want 5", s.Cursor.Col)
	}
	r, err := m.Screen(alice.Session, s.PTY, 3)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Join(r.Scrollback, ",") != "44,45,46" {
		t.Errorf("scrollback %q, want 44,45,46", r.Scrollback)
	}
}

func TestCwdAndEnv(t *testing.T) {
	m := newManager(t)
	dir := t.TempDir()
	sub := filepath.Join(dir, "sub")
	if err := os.Mkdir(sub, 0o700); err != nil {
		t.Fatal(err)
	}
	m.CwdOf = func(session string) string { return dir }
	m.EnvOf = func(session string) []string {
		return []string{"PATH=" + os.Getenv("PATH"), "FROM_SESSION=yes", "TERM=dumb", "LINES=3"}
	}
	cmd := `printf '%s|%s|%s|%s|%s\n' "$(pwd)" "$FROM_SESSION" "$EXTRA" "$TERM" "${LINES-unset}"; sleep 100`
	s := open(t, m, alice, OpenOptions{Command: cmd, Env: map[string]string{"EXTRA": "x y"}})
	waitFor(t, m, alice, s.PTY, regexp.QuoteMeta(dir+"|yes|x y|xterm-256color|unset"))
	s = open(t, m, alice, OpenOptions{Command: cmd, Cwd: "sub"})
	waitFor(t, m, alice, s.PTY, regexp.QuoteMeta(sub+"|yes||xterm-256color|unset"))
	s = open(t, m, alice, OpenOptions{Argv: []string{"sh", "-c", `echo "[$1]"; sleep 100`, "argv0", "a 'quoted' arg"}})
	if s.Command != `sh -c 'echo "[$1]"; sleep 100' argv0 "a 'quoted' arg"` {
		t.Errorf("argv command shown as %s", s.Command)
	}
	waitFor(t, m, alice, s.PTY, regexp.QuoteMeta("[a 'quoted' arg]"))

	for _, o := range []OpenOptions{
		{},
		{Command: "sh", Argv: []string{"sh"}},
		{Command: "sh", Cwd: filepath.Join(dir, "missing")},
		{Command: "sh", Env: map[string]string{"A=B": "x"}},
		{Command: "sh", Cols: 1},
	} {
		if _, err := m.Open(context.Background(), alice, o); codeOf(err) != rpc.InvalidParams {
			t.Errorf("open %+v: %v, want INVALID_PARAMS", o, err)
		}
	}
}

func TestUnknownPTY(t *testing.T) {
	m := newManager(t)
	s := open(t, m, alice, OpenOptions{Command: "sleep 100"})
	other := open(t, m, bob, OpenOptions{Command: "sleep 100"})
	closed := open(t, m, alice, OpenOptions{Command: "sleep 100"})
	if _, err := m.ClosePTY(alice.Session, closed.PTY); err != nil {
		t.Fatal(err)
	}
	for _, id := range []string{"pty:99", "99", "abc", "", "pty:0", other.PTY, closed.PTY} {
		_, err := m.Screen(alice.Session, id, 0)
		if codeOf(err) != rpc.UnknownPTY || int(rpc.UnknownPTY) != -32022 {
			t.Errorf("read %q: %v, want UNKNOWN_PTY", id, err)
			continue
		}
		if !strings.Contains(err.Error(), s.PTY) || strings.Contains(err.Error(), other.PTY+",") {
			t.Errorf("read %q: message %q should list only this session's open PTYs", id, err)
		}
	}
	if _, err := m.Write(context.Background(), alice.Session, closed.PTY, Input{Text: "x"}); codeOf(err) != rpc.UnknownPTY {
		t.Errorf("write to a closed PTY: %v", err)
	}
	if _, err := m.ClosePTY(alice.Session, closed.PTY); codeOf(err) != rpc.UnknownPTY {
		t.Errorf("closing twice: %v", err)
	}
	if _, err := m.Resize(bob.Session, s.PTY, 80, 24); codeOf(err) != rpc.UnknownPTY {
		t.Errorf("resize from another session: %v", err)
	}
	if _, err := m.Screen("nobody", "1", 0); codeOf(err) != rpc.UnknownPTY || !strings.Contains(err.Error(), "no open PTYs") {
		t.Errorf("read from a session without PTYs: %v", err)
	}

	m.MaxPerSession = 1 // alice holds one open PTY
	if _, err := m.Open(context.Background(), alice, OpenOptions{Command: "sleep 100"}); codeOf(err) != rpc.InvalidParams || !strings.Contains(err.Error(), "pty.close") {
		t.Errorf("open past the per-session cap: %v", err)
	}
	open(t, m, &core.Caller{Session: "s3"}, OpenOptions{Command: "sleep 100"}) // another session has room
}

// pidAlive reports whether pid names a process that has not been reaped.
func pidAlive(pid int) bool { return unix.Kill(pid, 0) == nil }

func fdCount(t *testing.T) int {
	t.Helper()
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Skipf("no /proc/self/fd: %v", err)
	}
	return len(ents)
}

// TestOpenCloseCycles opens and closes PTYs whose program leaves a
// background child in its process group, and checks nothing stays behind:
// no process, no file descriptor.
func TestOpenCloseCycles(t *testing.T) {
	m := newManager(t)
	before, goroutines := fdCount(t), runtime.NumGoroutine()
	bgRe := regexp.MustCompile(`BG=(\d+)`)
	for i := range 50 {
		cmd := `sleep 1000 & echo BG=$!; exec sleep 1000`
		if i%10 == 0 {
			// A group that ignores the polite signals needs the SIGKILL.
			cmd = `trap '' HUP TERM; sleep 1000 & echo BG=$!; sleep 1000`
		}
		s := open(t, m, alice, OpenOptions{Command: cmd})
		s = waitFor(t, m, alice, s.PTY, `BG=\d+`)
		bg, _ := strconv.Atoi(bgRe.FindStringSubmatch(s.Text())[1])
		m.mu.Lock()
		leader := m.terms[mustID(t, s.PTY)].cmd.Process.Pid
		m.mu.Unlock()
		c, err := m.ClosePTY(alice.Session, s.PTY)
		if err != nil {
			t.Fatal(err)
		}
		if !c.Closed || c.Exit == nil || c.PTY != s.PTY {
			t.Fatalf("close answered %+v", c)
		}
		if pidAlive(leader) {
			t.Fatalf("cycle %d: leader %d still exists after close", i, leader)
		}
		if !exits(bg) {
			t.Fatalf("cycle %d: background child %d survived close", i, bg)
		}
	}
	if m.Len() != 0 {
		t.Errorf("%d PTYs still open", m.Len())
	}
	if after := fdCount(t); after != before {
		t.Errorf("file descriptors: %d before, %d after 50 cycles", before, after)
	}
	// A goroutine of the last close may still be on its way out: give it
	// a moment before counting.
	for deadline := time.Now().Add(5 * time.Second); runtime.NumGoroutine() > goroutines && time.Now().Before(deadline); {
		time.Sleep(10 * time.Millisecond)
	}
	if after := runtime.NumGoroutine(); after > goroutines {
		t.Errorf("goroutines: %d before, %d after 50 cycles", goroutines, after)
	}
}

// exits reports whether a process that is not our child ends within the
// test deadline. SIGKILL is delivered asynchronously, so an orphan may
// still be running for a moment after close returns; its pidfd becomes
// readable when it ends.
func exits(pid int) bool {
	fd, err := unix.PidfdOpen(pid, 0)
	if err != nil {
		return errors.Is(err, unix.ESRCH) // already gone
	}
	defer unix.Close(fd)
	fds := []unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}}
	for {
		n, err := unix.Poll(fds, int(deadline.Milliseconds()))
		if errors.Is(err, unix.EINTR) {
			continue
		}
		return err == nil && n == 1
	}
}

func mustID(t *testing.T, ref string) uint64 {
	t.Helper()
	n, ok := ParseID(ref)
	if !ok {
		t.Fatalf("bad id %q", ref)
	}
	return n
}

func TestSessionClosedAndClose(t *testing.T) {
	m := newManager(t)
	a := open(t, m, alice, OpenOptions{Command: "sleep 100"})
	b := open(t, m, bob, OpenOptions{Command: "sleep 100"})
	pid := func(ref string) int {
		m.mu.Lock()
		defer m.mu.Unlock()
		return m.terms[mustID(t, ref)].cmd.Process.Pid
	}
	pa, pb := pid(a.PTY), pid(b.PTY)
	m.SessionClosed(alice.Session)
	if pidAlive(pa) {
		t.Errorf("alice's PTY process survived her session")
	}
	if _, err := m.Screen(bob.Session, b.PTY, 0); err != nil || !pidAlive(pb) {
		t.Errorf("bob's PTY should live on: %v", err)
	}
	if err := m.Close(); err != nil {
		t.Fatal(err)
	}
	if pidAlive(pb) || m.Len() != 0 {
		t.Errorf("Close left a PTY behind")
	}
	if _, err := m.Open(context.Background(), bob, OpenOptions{Command: "sh"}); codeOf(err) != rpc.Unavailable {
		t.Errorf("open after Close: %v, want UNAVAILABLE", err)
	}
}

func TestWaitScreen(t *testing.T) {
	m := newManager(t)
	s := open(t, m, alice, OpenOptions{Command: `echo done; exit 3`})
	ctx, cancel := context.WithTimeout(context.Background(), deadline)
	defer cancel()
	// An exited program whose screen cannot match ends the wait early.
	got, err := m.WaitScreen(ctx, alice.Session, s.PTY, regexp.MustCompile(`never`))
	if codeOf(err) != rpc.Timeout || ctx.Err() != nil {
		t.Fatalf("wait on an exited program: %v", err)
	}
	if got.Alive || got.Exit == nil || *got.Exit != 3 || got.Lines[0] != "done" {
		t.Errorf("final screen %+v", got)
	}
	if data := err.(*rpc.Error).Data.(map[string]any); data["screen"] == nil {
		t.Errorf("TIMEOUT data lacks the screen: %v", data)
	}

	// pty.wait until:"exit" answers the final screen.
	bye := open(t, m, alice, OpenOptions{Command: `echo bye; exit 4`})
	raw, err := call(t, m, alice, "pty.wait", `{"pty":"`+bye.PTY+`","until":"exit","timeout_ms":60000}`)
	if err != nil || !strings.Contains(string(raw), `"lines":["bye"`) || !strings.Contains(string(raw), `"alive":false,"exit":4`) {
		t.Errorf("pty.wait until exit: %s %v", raw, err)
	}

	// A deadline ends a wait on a live program; a close ends it too.
	live := open(t, m, alice, OpenOptions{Command: "sleep 100"})
	short, cancelShort := context.WithCancel(context.Background())
	cancelShort()
	if _, err := m.WaitScreen(short, alice.Session, live.PTY, regexp.MustCompile(`never`)); codeOf(err) != rpc.Timeout {
		t.Errorf("cancelled wait: %v", err)
	}
	done := make(chan error, 1)
	go func() {
		_, err := m.WaitScreen(ctx, alice.Session, live.PTY, regexp.MustCompile(`never`))
		done <- err
	}()
	if _, err := m.ClosePTY(alice.Session, live.PTY); err != nil {
		t.Fatal(err)
	}
	if err := <-done; codeOf(err) != rpc.UnknownPTY {
		t.Errorf("wait across a close: %v, want UNKNOWN_PTY", err)
	}
}

type fakeJournal struct {
	mu   sync.Mutex
	rows []core.JournalRow
}

func (j *fakeJournal) Append(_ context.Context, row core.JournalRow) (core.JournalRow, error) {
	j.mu.Lock()
	defer j.mu.Unlock()
	row.EntryID = uint64(len(j.rows) + 1)
	j.rows = append(j.rows, row)
	return row, nil
}

// call invokes a kernel method the way the kernel does.
func call(t *testing.T, m *Manager, c *core.Caller, method, params string) (json.RawMessage, error) {
	t.Helper()
	res, err := m.Methods()[method](context.Background(), c, json.RawMessage(params))
	if err != nil {
		return nil, err
	}
	b, merr := json.Marshal(res)
	if merr != nil {
		t.Fatalf("%s result does not marshal: %v", method, merr)
	}
	return b, nil
}

func TestMethodsAndProvider(t *testing.T) {
	m := newManager(t)
	j := &fakeJournal{}
	h := &core.Host{}
	core.Offer[core.Journal](h, core.ServiceJournal, j)
	if err := core.Wire(h, m); err != nil {
		t.Fatal(err)
	}
	if got, ok := core.Get(h, ServiceName); !ok || got != m {
		t.Fatal("Provision did not offer the manager")
	}

	raw, err := call(t, m, alice, "pty.open", `{"command":"FOO=1 cat -u","cols":30,"rows":20,"settle_ms":0}`)
	if err != nil {
		t.Fatal(err)
	}
	var s Screen
	if err := json.Unmarshal(raw, &s); err != nil || s.PTY != "pty:1" || s.Cols != 30 {
		t.Fatalf("pty.open answered %s (%v)", raw, err)
	}
	if !strings.Contains(string(raw), `"exit":null`) {
		t.Errorf("exit must be null while alive: %s", raw)
	}
	if len(j.rows) != 1 {
		t.Fatalf("journal rows %+v", j.rows)
	}
	row := j.rows[0]
	if row.Kind != "pty.open" || row.Head != "cat" || row.Source != "FOO=1 cat -u" || row.Session != "s1" ||
		row.Principal != "agent:alice" || !row.OK || row.Ref != "pty:1" || strings.Join(row.Effects, ",") != "pty,proc.spawn" {
		t.Errorf("journal row %+v", row)
	}

	for i, id := range []string{`"pty:1"`, `"1"`, `1`} {
		if _, err := call(t, m, alice, "pty.write", `{"pty":`+id+`,"input":"hi`+strconv.Itoa(i)+`","keys":["Enter"],"settle_ms":0}`); err != nil {
			t.Fatalf("pty.write with id %s: %v", id, err)
		}
		// The terminal's echo, then cat's copy.
		waitFor(t, m, alice, "pty:1", fmt.Sprintf(`(?m)^hi%d\nhi%d$`, i, i))
	}
	if raw, err = call(t, m, alice, "pty.read", `{"pty":"pty:1"}`); err != nil || !strings.Contains(string(raw), `"lines":["hi0","hi0","hi1"`) {
		t.Errorf("pty.read: %s %v", raw, err)
	}
	if raw, err = call(t, m, alice, "pty.wait", `{"pty":"pty:1","pattern":"hi","timeout_ms":60000}`); err != nil {
		t.Errorf("pty.wait: %s %v", raw, err)
	}
	if raw, err = call(t, m, alice, "pty.resize", `{"pty":1,"cols":40,"rows":8}`); err != nil || !strings.Contains(string(raw), `"cols":40,"rows":8`) {
		t.Errorf("pty.resize: %s %v", raw, err)
	}
	if raw, err = call(t, m, alice, "pty.list", `{}`); err != nil || !strings.Contains(string(raw), `{"ptys":[{"pty":"pty:1","uri":"shoal://pty/1","command":"FOO=1 cat -u"`) {
		t.Errorf("pty.list: %s %v", raw, err)
	}
	if raw, err = call(t, m, bob, "pty.list", `null`); err != nil || string(raw) != `{"ptys":[]}` {
		t.Errorf("pty.list for another session: %s %v", raw, err)
	}

	// The provider side.
	res, err := m.List(context.Background(), alice)
	if err != nil || len(res) != 2 || res[0].URI != Root || !res[0].Root || res[1].URI != "shoal://pty/1" || res[1].Root {
		t.Errorf("List = %+v, %v", res, err)
	}
	if res, _ := m.List(context.Background(), bob); len(res) != 1 {
		t.Errorf("bob sees %+v", res)
	}
	if tpl := m.Templates(); len(tpl) != 1 || tpl[0].URITemplate != "shoal://pty/{id}" {
		t.Errorf("templates %+v", tpl)
	}
	for _, tt := range []struct {
		uri  string
		code rpc.Code
		want string
	}{
		{"shoal://pty", 0, `{"ptys":[{"pty":"pty:1"`},
		{"shoal://pty/1", 0, `{"pty":"pty:1","uri":"shoal://pty/1","command":"FOO=1 cat -u","lines":["hi0"`},
		{"shoal://pty/pty:1", 0, `"pty":"pty:1"`},
		{"shoal://pty/7", rpc.UnknownPTY, ""},
		{"shoal://pty/1/x", rpc.NotFound, ""},
	} {
		u, err := uri.Parse(tt.uri)
		if err != nil {
			t.Fatal(err)
		}
		got, err := m.Read(context.Background(), alice, u)
		if tt.code != 0 {
			if codeOf(err) != tt.code {
				t.Errorf("Read %s: %v, want code %d", tt.uri, err, tt.code)
			}
			continue
		}
		if err != nil {
			t.Errorf("Read %s: %v", tt.uri, err)
			continue
		}
		b, _ := json.Marshal(got.Record)
		if !strings.HasPrefix(string(b), tt.want) && !strings.Contains(string(b), tt.want) {
			t.Errorf("Read %s = %s, want %s…", tt.uri, b, tt.want)
		}
	}

	if raw, err = call(t, m, alice, "pty.close", `{"pty":"pty:1"}`); err != nil || !strings.HasPrefix(string(raw), `{"pty":"pty:1","closed":true,"exit":`) {
		t.Errorf("pty.close: %s %v", raw, err)
	}

	for _, tt := range []struct{ method, params string }{
		{"pty.open", `{}`},
		{"pty.open", `{"cmd":"sh"}`},
		{"pty.open", `{"command":"sh","settle_ms":-1}`},
		{"pty.open", `[1]`},
		{"pty.write", `{"input":"x"}`},
		{"pty.write", `{"pty":"pty:1"}`},
		{"pty.write", `{"pty":"pty:1","keys":["Hyper-x"]}`},
		{"pty.write", `{"pty":true,"input":"x"}`},
		{"pty.read", `{"pty":"pty:1","scrollback":-1}`},
		{"pty.resize", `{"pty":"pty:1"}`},
		{"pty.close", `{}`},
		{"pty.list", `{"session":"s2"}`},
		{"pty.wait", `{"pty":"pty:1"}`},
		{"pty.wait", `{"pty":"pty:1","pattern":"("}`},
		{"pty.wait", `{"pty":"pty:1","pattern":"x","timeout_ms":0}`},
		{"pty.wait", `{"pty":"pty:1","pattern":"x","until":"exit"}`},
		{"pty.wait", `{"pty":"pty:1","until":"forever"}`},
	} {
		if _, err := call(t, m, alice, tt.method, tt.params); codeOf(err) != rpc.InvalidParams {
			t.Errorf("%s %s: %v, want INVALID_PARAMS", tt.method, tt.params, err)
		}
	}
	if _, err := call(t, m, alice, "pty.read", `{"pty":"pty:1"}`); codeOf(err) != rpc.UnknownPTY {
		t.Errorf("pty.read after close: %v", err)
	}
}

func TestCommandHead(t *testing.T) {
	for _, tt := range []struct{ src, want string }{
		{"vim notes.txt", "vim"},
		{"FOO=1 BAR=2 less -R x", "less"},
		{"  top -d 1", "top"},
		{"(cd /tmp && make)", "cd"},
		{"python3 -c 'import time'", "python3"},
		{"$EDITOR x", "$EDITOR"},
		{"if", "if"},
	} {
		if got := commandHead(tt.src); got != tt.want {
			t.Errorf("commandHead(%q) = %q, want %q", tt.src, got, tt.want)
		}
	}
}

// TestHammer drives one PTY from many goroutines at once (under -race):
// writes, reads, resizes and waits while output streams in.
func TestHammer(t *testing.T) {
	m := newManager(t)
	s := open(t, m, alice, OpenOptions{Command: "cat"})
	var wg sync.WaitGroup
	for g := range 4 {
		wg.Go(func() {
			for i := range 25 {
				switch (g + i) % 4 {
				case 0:
					_, _ = m.Write(context.Background(), alice.Session, s.PTY, Input{Text: fmt.Sprintf("g%d-%d\r", g, i)})
				case 1:
					_, _ = m.Screen(alice.Session, s.PTY, 5)
				case 2:
					_, _ = m.Resize(alice.Session, s.PTY, 40+i, 10+g)
				case 3:
					_ = m.PTYs(alice.Session)
				}
			}
		})
	}
	wg.Wait()
	write(t, m, alice, s.PTY, "end-of-hammer\r")
	waitFor(t, m, alice, s.PTY, `end-of-hammer`)
}
