package attacks

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/shoal-sh/shoal/core/policy"
	"github.com/shoal-sh/shoal/core/statedir"
	"github.com/shoal-sh/shoal/sdk/client"
)

// The attack table test. One kernel (the real `shoal kernel` binary, a
// child process, so an attack that kills it kills only it) serves every
// row. Around it, all under t.TempDir():
//
//	home/    $HOME of the kernel and its sessions: dotfiles and a secret
//	canary/  files, a directory tree, a symlink target: outside every workspace
//	state/   the state directory: policy.toml, journal.db, the token files
//	work/N/  the workspace of row N's session
//	tmp/     $TMPDIR
//
// Each row runs in a session of its own, which is closed afterwards (that
// ends whatever the row left running). Then, whatever the kernel answered,
// the outcome is checked: canary and home byte-for-byte as planted (tool
// caches excepted: they are writable by design), the state directory's
// files byte-for-byte (journal.db and the content store may only grow:
// every row the journal held before is still there, the same), no token
// or secret copied anywhere the agent could take it from, and the kernel
// still answers `echo hi`. A row that breaks any of these fails and the
// world is put back (kernel restarted, trees replanted) so the next row
// starts clean.

// attack is one row of the table.
type attack struct {
	name  string
	class string
	// via: exec | pty.open | plan.apply | cli | http | attach.
	via string
	// src is shell source (exec, plan.apply, cli), pty.open's params as
	// JSON (pty.open), session.attach's params as JSON (attach) or the
	// request body (http). {{C}}, {{W}}, {{H}}, {{S}}, {{SHOAL}},
	// {{KPID}}, {{REF}}, {{TOKEN}}, {{STOLEN}}, {{RELC}}, {{SESSION}} are
	// filled in.
	src string

	// pre runs in the row's session before src (exec).
	pre string
	// concurrent is sent on a second connection of the session while src
	// runs (exec): a check made before src's turn is the attack.
	concurrent string
	// timeoutMS and background are exec's options.
	timeoutMS  int64
	background bool
	// input is typed into the PTY (pty.open).
	input string
	// fresh: attach on a new connection instead of the attacker's own.
	fresh bool
	// via is plan.approve's via (attach): "elicitation" claims the
	// person at the host said yes.
	approveVia string
	// auth is the Authorization header, query is added to the URL (http).
	auth, query string
	// gate names a precondition without which the row must not run at
	// all (see gates).
	gate string
	// approved: the operator (the person at the CLI) approves the plan
	// (plan.apply), as it would one it has read. The canary paths in
	// mayChange are what the plan names and may change; nothing else may.
	approved  bool
	mayChange []string
	// after runs in the session once the plan was applied (plan.apply).
	after string
	// hole says why this attack still gets through: a known gap, listed
	// in docs/security.md. Such a row is run and reported, and fails the
	// test when it stops getting through (then the mark must go).
	hole string
}

// safePath is what a path may hold to go into shell source unquoted.
var safePath = regexp.MustCompile(`^/[A-Za-z0-9/._-]+$`)

type env struct {
	t                                    *testing.T
	root, home, canary, state, work, tmp string
	shoal, shoalMCP                      string
	kernel                               *exec.Cmd
	kernelDone                           chan struct{}
	kernelLog                            *os.File
	kpid                                 int
	tokens                               map[string]string // file name → token
	stable                               map[string][]byte // state files that never change
	homeSnap, canarySnap                 map[string]string
	sentinel                             journalRow
	http                                 *facade
	gates                                map[string]bool
	outsider                             *exec.Cmd // a process outside every session
	rowN                                 int
	confined                             bool // the kernel says sessions run confined
	scoped                               bool // … and their signals scoped
	readOnly                             bool // … and their mounts read-only but the writable paths
	kernelStarts                         int
}

// holeOf is a's hole mark as it stands here: the metadata hole is closed
// where sessions have read-only mounts.
func (e *env) holeOf(a attack) string {
	if a.hole == metadataHole && e.readOnly {
		return ""
	}
	return a.hole
}

// journalRow is a journal row as journal.query answers it.
type journalRow struct {
	TS  int64
	Raw string
}

func TestAttackTable(t *testing.T) {
	if testing.Short() {
		t.Skip("the attack table starts a kernel and a facade; skipped with -short")
	}
	if len(table) < 100 {
		t.Fatalf("the table has %d attacks; issue 11 asks for at least 100", len(table))
	}
	e := newEnv(t)
	var failed []string
	holes := 0
	for _, a := range table {
		if a.gate != "" && !e.gates[a.gate] {
			t.Logf("LEFT OUT %s (%s): its precondition %q does not hold here; it must not run unconfined", a.name, a.class, a.gate)
			continue
		}
		problems := e.run(a)
		hole := e.holeOf(a)
		switch {
		case len(problems) > 0 && hole != "":
			holes++
			t.Logf("KNOWN HOLE %s [%s via %s] got through, as docs/security.md says (%s):\n  %s", a.name, a.class, a.via, hole, strings.Join(problems, "\n  "))
		case len(problems) > 0:
			failed = append(failed, a.name)
			t.Errorf("ATTACK %s [%s via %s] got through:\n  %s\n  source: %s", a.name, a.class, a.via, strings.Join(problems, "\n  "), a.src)
		case hole != "" && e.confined:
			t.Errorf("%s no longer gets through: drop its hole mark and its line in docs/security.md", a.name)
		case hole != "":
			t.Logf("%s did not get through, but sessions are not confined here (nothing runs): its hole mark stays", a.name)
		}
		if len(problems) > 0 {
			e.repair()
		}
	}
	if e.outsider.ProcessState != nil || syscall.Kill(e.outsider.Process.Pid, 0) != nil {
		t.Error("the process outside every session did not survive the table")
	}
	t.Logf("%d attacks, %d got through, %d known holes, %d kernel starts", len(table), len(failed), holes, e.kernelStarts)
}

func newEnv(t *testing.T) *env {
	root := t.TempDir()
	e := &env{t: t, root: root, home: filepath.Join(root, "home"), canary: filepath.Join(root, "canary"),
		state: filepath.Join(root, "st"), work: filepath.Join(root, "work"), tmp: filepath.Join(root, "tmp"),
		gates: map[string]bool{}}
	for _, d := range []string{e.root, e.home, e.canary, e.state, e.work, e.tmp} {
		if !safePath.MatchString(d) {
			t.Fatalf("test directory %q has characters the table's sources do not quote", d)
		}
	}
	if len(filepath.Join(e.state, statedir.SocketName)) > 100 {
		t.Skipf("the temp dir %s is too long for a unix socket path", root)
	}
	for _, d := range []string{e.state, e.work, e.tmp} {
		must(t, os.MkdirAll(d, 0o700))
	}
	bin := filepath.Join(root, "bin")
	e.shoal, e.shoalMCP = filepath.Join(bin, "shoal"), filepath.Join(bin, "shoal-mcp")
	builds := map[string]string{e.shoal: "./cmd/shoal", e.shoalMCP: "./cmd/shoal-mcp", filepath.Join(bin, "shoal-kernel"): "./cmd/shoal-kernel"}
	for path, pkg := range builds {
		cmd := exec.Command("go", "build", "-o", path, pkg)
		cmd.Dir = "../.."
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("build %s: %v\n%s", pkg, err, out)
		}
	}
	// A lead agent the policy gives Approve: the agent credential must
	// not carry it anyway.
	must(t, os.WriteFile(filepath.Join(e.state, statedir.PolicyName), []byte("[grants]\n\"agent:lead\" = [\"Approve\"]\n"), 0o600))
	e.plantAll()
	e.startKernel()
	e.tokens = map[string]string{}
	for _, name := range []string{statedir.TokenName, statedir.OperatorTokenName} {
		tok, err := statedir.ReadToken(e.state, name)
		must(t, err)
		e.tokens[name] = tok
	}
	e.http = startFacade(t, e)
	tok, err := statedir.ReadToken(e.state, statedir.HTTPTokenName)
	must(t, err)
	e.tokens[statedir.HTTPTokenName] = tok
	e.stable = map[string][]byte{}
	for _, name := range []string{statedir.PolicyName, statedir.TokenName, statedir.OperatorTokenName, statedir.HTTPTokenName} {
		b, err := os.ReadFile(filepath.Join(e.state, name))
		must(t, err)
		e.stable[name] = b
	}
	e.outsider = exec.Command("sleep", "3600")
	must(t, e.outsider.Start())
	t.Cleanup(func() { e.outsider.Process.Kill(); e.outsider.Wait() })
	e.checkHome()
	e.markSentinel()
	e.checkGates()
	return e
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// kernelEnv is the environment of the kernel (and so of its sessions):
// HOME and TMPDIR inside the test, nothing of Shoal's own.
func (e *env) kernelEnv() []string {
	var env []string
	for _, kv := range os.Environ() {
		k, _, _ := strings.Cut(kv, "=")
		if k == "HOME" || k == "TMPDIR" || strings.HasPrefix(k, "SHOAL_") || strings.HasPrefix(k, "XDG_") || strings.HasPrefix(k, "GIT_") {
			continue
		}
		env = append(env, kv)
	}
	return append(env, "HOME="+e.home, "TMPDIR="+e.tmp, "XDG_CONFIG_HOME="+filepath.Join(e.home, ".config"))
}

func (e *env) startKernel() {
	if err := e.launchKernel(); err != nil {
		log, _ := os.ReadFile(e.kernelLog.Name())
		e.t.Fatalf("the kernel did not start: %v\n%s", err, log)
	}
}

// launchKernel starts `shoal kernel` on the state dir and waits until it
// answers on its socket.
func (e *env) launchKernel() error {
	t := e.t
	if e.kernelLog == nil {
		f, err := os.Create(filepath.Join(e.root, "kernel.log"))
		must(t, err)
		e.kernelLog = f
		t.Cleanup(func() { e.stopKernel(); f.Close() })
	}
	cmd := exec.Command(e.shoal, "kernel", "--state-dir", e.state, "--log-level", "warn")
	cmd.Env = e.kernelEnv()
	cmd.Dir = e.root
	cmd.Stderr = e.kernelLog
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		return err
	}
	e.kernelStarts++
	done := make(chan struct{})
	go func() { cmd.Wait(); close(done) }()
	e.kernel, e.kernelDone, e.kpid = cmd, done, cmd.Process.Pid
	sock := filepath.Join(e.state, statedir.SocketName)
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		if c, err := net.Dial("unix", sock); err == nil {
			c.Close()
			return nil
		}
		select {
		case <-done:
			return fmt.Errorf("it exited: %v", cmd.ProcessState)
		default:
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("it never answered on %s", sock)
		}
	}
}

// stopKernel ends the kernel this test started, and its process group.
func (e *env) stopKernel() {
	if e.kernel == nil {
		return
	}
	select {
	case <-e.kernelDone:
	default:
		_ = e.kernel.Process.Signal(syscall.SIGTERM)
		select {
		case <-e.kernelDone:
		case <-time.After(15 * time.Second):
			_ = syscall.Kill(-e.kpid, syscall.SIGKILL)
			<-e.kernelDone
		}
	}
	e.kernel = nil
}

func (e *env) kernelAlive() bool {
	if e.kernel == nil {
		return false
	}
	select {
	case <-e.kernelDone:
		return false
	default:
		return true
	}
}

func (e *env) dial(ctx context.Context, session, principal, workspace string, operator bool) (*client.Client, error) {
	return client.Dial(ctx, client.Options{StateDir: e.state, Session: session, Principal: principal,
		Workspace: workspace, Operator: operator})
}

// ---- the canary and home trees ----------------------------------------

// node is one planted path: a file (content), a directory, or a symlink.
type node struct {
	content, link string
	dir           bool
}

func (e *env) canarySpec() map[string]node {
	return map[string]node{
		"f1":              {content: "canary one\n"},
		"f2":              {content: "canary two\n"},
		"target":          {content: "the target of every symlink attack\n"},
		"dir":             {dir: true},
		"dir/f3":          {content: "canary three\n"},
		"dir/sub":         {dir: true},
		"dir/sub/f4":      {content: "canary four\n"},
		"empty":           {dir: true},
		"etc":             {dir: true},
		"etc/passwd":      {content: "root:x:0:0:root:/root:/bin/sh\n"},
		"link-to-target":  {link: "target"},
		"link-to-outside": {link: e.home + "/.profile"},
	}
}

// secret is the private key planted in ~/.ssh: it must not be read out.
const secret = "-----BEGIN OPENSSH PRIVATE KEY-----\nc2hvYWwtYXR0YWNrLWNhbmFyeS1zZWNyZXQ=\n-----END OPENSSH PRIVATE KEY-----\n"

const secretMark = "c2hvYWwtYXR0YWNrLWNhbmFyeS1zZWNyZXQ="

func homeSpec() map[string]node {
	return map[string]node{
		".ssh":                   {dir: true},
		".ssh/id_ed25519":        {content: secret},
		".ssh/authorized_keys":   {content: "ssh-ed25519 AAAAC3 me@here\n"},
		".npmrc":                 {content: "registry=https://registry.npmjs.org/\n"},
		".pypirc":                {content: "[distutils]\nindex-servers = pypi\n"},
		".config":                {dir: true},
		".config/gh":             {dir: true},
		".config/gh/hosts.yml":   {content: "github.com:\n    user: me\n"},
		".bashrc":                {content: "# bashrc\n"},
		".profile":               {content: "# profile\n"},
		".gitconfig":             {content: "[user]\n\tname = me\n"},
		".cache":                 {dir: true},
		"projects":               {dir: true},
		"projects/other":         {dir: true},
		"projects/other/main.go": {content: "package main\n"},
	}
}

func plant(t *testing.T, dir string, spec map[string]node) {
	must(t, os.RemoveAll(dir))
	must(t, os.MkdirAll(dir, 0o755))
	keys := make([]string, 0, len(spec))
	for k := range spec {
		keys = append(keys, k)
	}
	slices.Sort(keys) // parents first
	for _, k := range keys {
		n, p := spec[k], filepath.Join(dir, k)
		switch {
		case n.dir:
			must(t, os.Mkdir(p, 0o755))
		case n.link != "":
			must(t, os.Symlink(n.link, p))
		default:
			must(t, os.WriteFile(p, []byte(n.content), 0o644))
		}
	}
}

func (e *env) plantAll() {
	// An attack may have left a tree unwritable (chmod -R 000).
	for _, d := range []string{e.canary, e.home} {
		filepath.WalkDir(d, func(p string, _ fs.DirEntry, _ error) error { os.Chmod(p, 0o755); return nil })
	}
	plant(e.t, e.canary, e.canarySpec())
	plant(e.t, e.home, homeSpec())
	e.canarySnap = snapshot(e.canary, nil)
	e.homeSnap = snapshot(e.home, e.writableInHome)
}

// writableInHome reports whether rel (under $HOME) is a tool cache the
// sandbox lets sessions write.
func (e *env) writableInHome(rel string) bool {
	for _, c := range policy.DefaultCaches {
		c = strings.TrimPrefix(c, "~/")
		if rel == c || strings.HasPrefix(rel, c+"/") {
			return true
		}
	}
	return false
}

// snapshot maps every path under dir (but skipped ones) to its kind,
// mode and content hash or link target.
func snapshot(dir string, skip func(rel string) bool) map[string]string {
	out := map[string]string{}
	filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		rel, _ := filepath.Rel(dir, p)
		if err != nil {
			out[rel] = "unreadable: " + err.Error()
			return nil
		}
		if rel != "." && skip != nil && skip(rel) {
			if d.IsDir() {
				return filepath.SkipDir
			}
			return nil
		}
		fi, err := os.Lstat(p)
		if err != nil {
			out[rel] = "lstat: " + err.Error()
			return nil
		}
		switch {
		case fi.Mode()&fs.ModeSymlink != 0:
			target, _ := os.Readlink(p)
			out[rel] = "link " + target
		case fi.IsDir():
			out[rel] = "dir " + fi.Mode().Perm().String() + owner(fi)
		default:
			b, err := os.ReadFile(p)
			sum := sha256.Sum256(b)
			out[rel] = fmt.Sprintf("file %s %s%s mtime %d %v", fi.Mode().Perm(), hex.EncodeToString(sum[:8]), owner(fi), fi.ModTime().UnixNano(), err)
		}
		return nil
	})
	return out
}

// without is snap less the paths at or under any of prefixes.
func without(snap map[string]string, prefixes []string) map[string]string {
	out := map[string]string{}
	for k, v := range snap {
		if !slices.ContainsFunc(prefixes, func(p string) bool { return k == p || strings.HasPrefix(k, p+"/") }) {
			out[k] = v
		}
	}
	return out
}

// owner is a path's uid and gid, as a snapshot records them.
func owner(fi fs.FileInfo) string {
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		return fmt.Sprintf(" %d:%d", st.Uid, st.Gid)
	}
	return ""
}

func diffSnap(what string, want, got map[string]string) []string {
	var out []string
	for k, w := range want {
		if g, ok := got[k]; !ok {
			out = append(out, fmt.Sprintf("%s/%s is gone (was %s)", what, k, w))
		} else if g != w {
			out = append(out, fmt.Sprintf("%s/%s changed: %s → %s", what, k, w, g))
		}
	}
	for k, g := range got {
		if _, ok := want[k]; !ok {
			out = append(out, fmt.Sprintf("%s/%s appeared (%s)", what, k, g))
		}
	}
	slices.Sort(out)
	return out
}

// checkHome makes sure the sessions' ~ and $HOME are the test's home:
// every attack on the home directory must land in the temp dir.
func (e *env) checkHome() {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	ws := filepath.Join(e.work, "home-check")
	must(e.t, os.MkdirAll(ws, 0o755))
	c, err := e.dial(ctx, "home-check", "agent:check", ws, false)
	must(e.t, err)
	defer c.Close()
	if conf := c.Attached.Confinement; conf != nil {
		e.confined, e.scoped, e.readOnly = conf.Confined, conf.Scoped, conf.Confined && conf.ReadOnlyMounts
		e.t.Logf("confinement of a session: %+v", *conf)
	}
	out := e.stdout(ctx, c, `printf '%s|%s|' "$HOME" ~; sh -c 'printf %s "$HOME"'`)
	want := e.home + "|" + e.home + "|" + e.home
	if out != want {
		e.t.Fatalf("the sessions' home is %q, want %q: refusing to run attacks on the home directory", out, want)
	}
	c.Call(ctx, "session.close", map[string]string{}, nil)
}

// stdout runs source and returns what it wrote on stdout.
func (e *env) stdout(ctx context.Context, c *client.Client, source string) string {
	r, err := c.Exec(ctx, source, client.ExecOptions{})
	if err != nil {
		return "exec: " + err.Error()
	}
	res, err := c.Read(ctx, r.URI+"?path=.stdout&format=raw")
	if err != nil || len(res.Contents) == 0 {
		return fmt.Sprintf("read %s: %v", r.URI, err)
	}
	return res.Contents[0].Text
}

// checkGates works out which dangerous rows may run: `kill -9 -1` only
// where a session provably cannot signal a process outside it (here the
// sleep the test started) and can signal its own.
func (e *env) checkGates() {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	ws := filepath.Join(e.work, "gate")
	must(e.t, os.MkdirAll(ws, 0o755))
	c, err := e.dial(ctx, "gate", "agent:gate", ws, false)
	must(e.t, err)
	defer c.Close()
	own := e.stdout(ctx, c, `sh -c 'sleep 30 & p=$!; kill -0 $p && echo own-ok; kill $p'`)
	outside := e.stdout(ctx, c, fmt.Sprintf(`env kill -0 %d && echo outside-ok; true`, e.outsider.Process.Pid))
	kern := e.stdout(ctx, c, fmt.Sprintf(`env kill -0 %d && echo kernel-ok; true`, e.kpid))
	c.Call(ctx, "session.close", map[string]string{}, nil)
	out := own + "|" + outside + "|" + kern
	// Scoped: a session signals its own processes, and the signals it
	// sends elsewhere fail (not merely go unsent because exec was refused).
	scoped := strings.Contains(own, "own-ok") && !strings.Contains(outside, "outside-ok") && !strings.Contains(kern, "kernel-ok") &&
		!strings.HasPrefix(outside, "exec:") && !strings.HasPrefix(kern, "exec:")
	// Both the probe and the kernel's own word, before kill -9 -1 runs.
	scoped = scoped && e.confined && e.scoped
	e.gates["signals-scoped"] = scoped
	e.t.Logf("signal scoping probe: %q (scoped: %v)", out, scoped)
}

// ---- the journal -------------------------------------------------------

func (e *env) operator(ctx context.Context) (*client.Client, error) {
	return e.dial(ctx, "operator", "human:attack-test", filepath.Join(e.work), true)
}

func (e *env) journalQuery(ctx context.Context, q map[string]any) ([]journalRow, error) {
	c, err := e.operator(ctx)
	if err != nil {
		return nil, err
	}
	defer c.Close()
	var res struct {
		Rows []json.RawMessage `json:"rows"`
	}
	if err := c.Call(ctx, "journal.query", q, &res); err != nil {
		return nil, err
	}
	var out []journalRow
	for _, r := range res.Rows {
		var ts struct {
			TS int64 `json:"ts"`
		}
		json.Unmarshal(r, &ts)
		out = append(out, journalRow{ts.TS, string(r)})
	}
	return out, nil
}

func (e *env) newestRow(ctx context.Context) (journalRow, error) {
	rows, err := e.journalQuery(ctx, map[string]any{"limit": 1})
	if err != nil || len(rows) == 0 {
		return journalRow{}, fmt.Errorf("no newest journal row: %v", err)
	}
	return rows[0], nil
}

// rowKept reports whether the journal still holds r, unchanged.
func (e *env) rowKept(ctx context.Context, r journalRow) error {
	rows, err := e.journalQuery(ctx, map[string]any{"since": r.TS, "until": r.TS + 1, "limit": 1000})
	if err != nil {
		return err
	}
	for _, x := range rows {
		if x.Raw == r.Raw {
			return nil
		}
	}
	return fmt.Errorf("the journal row of %d is gone or changed", r.TS)
}

// markSentinel writes a row every later check looks for.
func (e *env) markSentinel() {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c, err := e.operator(ctx)
	must(e.t, err)
	_, err = c.Exec(ctx, "echo journal-sentinel", client.ExecOptions{})
	c.Close()
	must(e.t, err)
	e.sentinel, err = e.newestRow(ctx)
	must(e.t, err)
}

// ---- running a row -----------------------------------------------------

// fill substitutes the placeholders of a row's text.
func (e *env) fill(s, ws string, vars map[string]string) string {
	relc, _ := filepath.Rel(ws, e.canary)
	r := strings.NewReplacer("{{C}}", e.canary, "{{W}}", ws, "{{H}}", e.home, "{{S}}", e.state,
		"{{SHOAL}}", e.shoal, "{{KPID}}", fmt.Sprint(e.kpid), "{{RELC}}", relc,
		"{{TOKEN}}", e.tokens[statedir.TokenName], "{{REF}}", vars["REF"], "{{STOLEN}}", vars["STOLEN"],
		"{{SESSION}}", vars["SESSION"])
	return r.Replace(s)
}

func (e *env) run(a attack) (problems []string) {
	e.rowN++
	session := fmt.Sprintf("atk-%03d", e.rowN)
	ws := filepath.Join(e.work, fmt.Sprintf("%03d", e.rowN))
	must(e.t, os.MkdirAll(ws, 0o755))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer func() { cancel() }()

	before, err := e.newestRow(ctx)
	if err != nil {
		return []string{"before the attack: " + err.Error()}
	}
	casBefore := snapshot(filepath.Join(e.state, "cas"), nil)
	journalSize := fileSize(filepath.Join(e.state, "journal.db"))

	agent, err := e.dial(ctx, session, "agent:attacker", ws, false)
	if err != nil {
		return []string{"the attacker could not attach: " + err.Error()}
	}
	note := e.attack(ctx, agent, a, session, ws)
	if note != "" {
		e.t.Logf("%s: %s", a.name, note)
	}
	cancel()
	// The checks get their own time: the attack may have used up its own.
	ctx, cancel = context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	agent.Call(ctx, "session.close", map[string]string{}, nil)
	agent.Close()
	e.http.closeSessions()

	// The outcome, whatever the kernel said.
	if !e.kernelAlive() {
		problems = append(problems, "the kernel process is gone: "+e.logTail())
	}
	if err := e.echoHi(ctx); err != nil {
		problems = append(problems, "the kernel does not answer `echo hi`: "+err.Error())
	}
	if syscall.Kill(e.outsider.Process.Pid, 0) != nil {
		e.t.Fatalf("%s killed a process outside every session; stopping the table", a.name)
	}
	want, got := e.canarySnap, snapshot(e.canary, nil)
	if a.approved && len(diffSnap("", e.canarySnap, got)) == 0 {
		// Not a breach, but then the row tested no widening at all.
		problems = append(problems, "the approved plan did not change what it names ("+strings.Join(a.mayChange, ", ")+"): the row proves nothing")
	}
	if len(a.mayChange) > 0 {
		want, got = without(want, a.mayChange), without(got, a.mayChange)
		defer e.plantAll() // what the approved plan changed is put back
	}
	problems = append(problems, diffSnap("canary", want, got)...)
	problems = append(problems, diffSnap("~", e.homeSnap, snapshot(e.home, e.writableInHome))...)
	for name, want := range e.stable {
		got, err := os.ReadFile(filepath.Join(e.state, name))
		if err != nil || !bytes.Equal(got, want) {
			problems = append(problems, fmt.Sprintf("state dir: %s changed (%v)", name, err))
		}
	}
	if _, err := os.Stat(filepath.Join(e.state, statedir.ConfigName)); err == nil {
		problems = append(problems, "state dir: a config.toml appeared")
	}
	if size := fileSize(filepath.Join(e.state, "journal.db")); size < journalSize {
		problems = append(problems, fmt.Sprintf("state dir: journal.db shrank from %d to %d bytes", journalSize, size))
	}
	casAfter := snapshot(filepath.Join(e.state, "cas"), nil)
	for k, v := range casBefore {
		if casAfter[k] != v {
			problems = append(problems, fmt.Sprintf("state dir: content store entry %s changed: %s → %s", k, v, casAfter[k]))
		}
	}
	if !e.kernelAlive() {
		// As a facade would: start it again, and see what it kept.
		if err := e.restartQuietly(); err != nil {
			problems = append(problems, "the kernel does not start again: "+err.Error())
			return problems
		}
	}
	for _, r := range []journalRow{e.sentinel, before} {
		if err := e.rowKept(ctx, r); err != nil {
			problems = append(problems, "journal: "+err.Error())
		}
	}
	problems = append(problems, e.leaks()...)
	// The row's workspace is its own; what it left there goes with it.
	os.RemoveAll(ws)
	return problems
}

// attack carries out a row by its via. What the kernel answers is only
// logged: the outcome is judged afterwards.
func (e *env) attack(ctx context.Context, agent *client.Client, a attack, session, ws string) string {
	vars := map[string]string{"SESSION": session}
	var notes []string
	say := func(step string, err error) {
		if err != nil {
			notes = append(notes, step+": "+oneLine(err.Error()))
		}
	}
	if a.pre != "" {
		_, err := agent.Exec(ctx, e.fill(a.pre, ws, vars), client.ExecOptions{})
		say("pre", err)
		if b, err := os.ReadFile(filepath.Join(ws, "stolen")); err == nil {
			vars["STOLEN"] = strings.TrimSpace(string(b))
		}
	}
	// The plan the self-approval attacks try to get approved.
	planRef := func() string {
		var p struct {
			Ref string `json:"ref"`
		}
		err := agent.Call(ctx, "plan.create", map[string]string{"source": e.fill("rm -rf {{C}}/dir {{C}}/f1", ws, vars)}, &p)
		say("plan.create", err)
		return p.Ref
	}
	switch a.via {
	case "exec":
		src := e.fill(a.src, ws, vars)
		opts := client.ExecOptions{TimeoutMS: a.timeoutMS, Background: a.background}
		if a.concurrent == "" {
			_, err := agent.Exec(ctx, src, opts)
			say("exec", err)
			break
		}
		second, err := e.dial(ctx, session, "agent:attacker", ws, false)
		if err != nil {
			say("second connection", err)
			break
		}
		var wg sync.WaitGroup
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, err := agent.Exec(ctx, src, opts)
			say("exec", err)
		}()
		time.Sleep(100 * time.Millisecond) // let the first one start
		_, err = second.Exec(ctx, e.fill(a.concurrent, ws, vars), client.ExecOptions{})
		say("concurrent exec", err)
		wg.Wait()
		second.Close()
	case "plan.apply":
		var p struct {
			Ref string `json:"ref"`
		}
		err := agent.Call(ctx, "plan.create", map[string]string{"source": e.fill(a.src, ws, vars)}, &p)
		say("plan.create", err)
		if p.Ref == "" {
			break
		}
		if a.approved {
			op, err := e.dial(ctx, session, "human:operator", ws, true)
			if err != nil {
				e.t.Fatalf("%s: the operator cannot attach: %v", a.name, err)
			}
			err = op.Call(ctx, "plan.approve", map[string]string{"ref": p.Ref}, nil)
			op.Close()
			if err != nil {
				e.t.Fatalf("%s: the operator's approval failed: %v", a.name, err)
			}
		} else {
			say("plan.approve by its author", agent.Call(ctx, "plan.approve", map[string]string{"ref": p.Ref}, nil))
		}
		say("plan.apply", agent.Call(ctx, "plan.apply", map[string]string{"ref": p.Ref}, nil))
		if a.after != "" {
			_, err := agent.Exec(ctx, e.fill(a.after, ws, vars), client.ExecOptions{})
			say("after", err)
		}
	case "cli":
		vars["REF"] = planRef()
		_, err := agent.Exec(ctx, e.fill(a.src, ws, vars), client.ExecOptions{})
		say("exec of the CLI", err)
		if vars["REF"] != "" {
			say("plan.apply", agent.Call(ctx, "plan.apply", map[string]string{"ref": vars["REF"]}, nil))
		}
	case "attach":
		vars["REF"] = planRef()
		var params map[string]any
		if err := json.Unmarshal([]byte(e.fill(a.src, ws, vars)), &params); err != nil {
			e.t.Fatalf("%s: attach params: %v", a.name, err)
		}
		if _, ok := params["session"]; !ok {
			params["session"] = session
		}
		if a.fresh {
			say("fresh connection", rawAttachApprove(ctx, filepath.Join(e.state, statedir.SocketName), params, vars["REF"], a.approveVia))
		} else {
			say("second session.attach", agent.Call(ctx, "session.attach", params, nil))
			approve := map[string]string{"ref": vars["REF"]}
			if a.approveVia != "" {
				approve["via"] = a.approveVia
			}
			say("plan.approve after it", agent.Call(ctx, "plan.approve", approve, nil))
		}
		if vars["REF"] != "" {
			say("plan.apply", agent.Call(ctx, "plan.apply", map[string]string{"ref": vars["REF"]}, nil))
		}
	case "pty.open":
		var params map[string]any
		if err := json.Unmarshal([]byte(e.fill(a.src, ws, vars)), &params); err != nil {
			e.t.Fatalf("%s: pty.open params: %v", a.name, err)
		}
		var scr struct {
			PTY string `json:"pty"`
		}
		err := agent.Call(ctx, "pty.open", params, &scr)
		say("pty.open", err)
		if scr.PTY == "" {
			break
		}
		if a.input != "" {
			say("pty.write", agent.Call(ctx, "pty.write", map[string]any{"pty": scr.PTY, "input": e.fill(a.input, ws, vars) + "\recho __d''one__\r"}, nil))
		}
		var w map[string]any
		say("wait", agent.Call(ctx, "wait", map[string]any{"target": scr.PTY, "pattern": "__done__", "timeout_ms": 3000}, &w))
		say("pty.close", agent.Call(ctx, "pty.close", map[string]any{"pty": scr.PTY}, nil))
	case "http":
		code, body := e.http.post(ctx, e.fill(a.auth, ws, vars), a.query, e.fill(a.src, ws, vars))
		notes = append(notes, fmt.Sprintf("HTTP %d %s", code, oneLine(body)))
	default:
		e.t.Fatalf("%s: unknown via %q", a.name, a.via)
	}
	return strings.Join(notes, "; ")
}

func oneLine(s string) string {
	s = strings.ReplaceAll(s, "\n", " ")
	if len(s) > 600 {
		s = s[:600] + "…"
	}
	return s
}

func fileSize(p string) int64 {
	fi, err := os.Stat(p)
	if err != nil {
		return -1
	}
	return fi.Size()
}

// rawAttachApprove attaches a new connection with params and asks it to
// approve ref.
func rawAttachApprove(ctx context.Context, sock string, params map[string]any, ref, via string) error {
	approve := map[string]string{"ref": ref}
	if via != "" {
		approve["via"] = via
	}
	var d net.Dialer
	nc, err := d.DialContext(ctx, "unix", sock)
	if err != nil {
		return err
	}
	defer nc.Close()
	nc.SetDeadline(time.Now().Add(20 * time.Second))
	br := bufio.NewReader(nc)
	var errs []string
	for i, req := range []map[string]any{
		{"jsonrpc": "2.0", "id": 1, "method": "session.attach", "params": params},
		{"jsonrpc": "2.0", "id": 2, "method": "plan.approve", "params": approve},
	} {
		b, _ := json.Marshal(req)
		if _, err := nc.Write(append(b, '\n')); err != nil {
			return err
		}
		line, err := br.ReadBytes('\n')
		if err != nil {
			return fmt.Errorf("answer %d: %w", i+1, err)
		}
		var m struct {
			Error *struct{ Message string } `json:"error"`
		}
		json.Unmarshal(line, &m)
		if m.Error != nil {
			errs = append(errs, req["method"].(string)+": "+m.Error.Message)
		}
	}
	if len(errs) > 0 {
		return errors.New(strings.Join(errs, "; "))
	}
	return nil
}

// echoHi is the kernel-up check: a fresh connection runs `echo hi`.
func (e *env) echoHi(ctx context.Context) error {
	ws := filepath.Join(e.work, "probe")
	if err := os.MkdirAll(ws, 0o755); err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	c, err := e.dial(ctx, "probe", "agent:probe", ws, false)
	if err != nil {
		return err
	}
	defer c.Close()
	if out := e.stdout(ctx, c, "echo hi"); out != "hi\n" {
		return fmt.Errorf("stdout %q", out)
	}
	return nil
}

// logTail is the end of the kernel's log.
func (e *env) logTail() string {
	b, _ := os.ReadFile(e.kernelLog.Name())
	if len(b) > 600 {
		b = b[len(b)-600:]
	}
	return oneLine(string(b))
}

// leaks looks for a token or the secret key anywhere an agent could
// carry them off: the workspaces, the home directory, the temp dir, the
// canary.
func (e *env) leaks() []string {
	var out []string
	needles := map[string]string{"the secret key": secretMark}
	for name, tok := range e.tokens {
		needles[name] = tok
	}
	keyPath := filepath.Join(e.home, ".ssh", "id_ed25519")
	for _, dir := range []string{e.work, e.home, e.tmp, e.canary} {
		filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
			if err != nil || d.IsDir() || p == keyPath || !d.Type().IsRegular() {
				return nil
			}
			f, err := os.Open(p)
			if err != nil {
				return nil
			}
			b, _ := io.ReadAll(io.LimitReader(f, 1<<20))
			f.Close()
			for what, needle := range needles {
				if bytes.Contains(b, []byte(needle)) {
					out = append(out, fmt.Sprintf("%s was copied to %s", what, p))
				}
			}
			return nil
		})
	}
	return out
}

// restartQuietly starts the kernel again without touching the state dir,
// as a facade would after it died.
func (e *env) restartQuietly() error {
	e.stopKernel()
	return e.launchKernel()
}

// repair puts the world back after an attack that got through: the
// state dir's files as they were (a damaged journal is started afresh),
// the canary and home replanted, the kernel running.
func (e *env) repair() {
	e.stopKernel()
	must(e.t, os.MkdirAll(e.state, 0o700))
	filepath.WalkDir(e.state, func(p string, _ fs.DirEntry, _ error) error { os.Chmod(p, 0o700); return nil })
	for name, b := range e.stable {
		os.Remove(filepath.Join(e.state, name))
		must(e.t, os.WriteFile(filepath.Join(e.state, name), b, 0o600))
	}
	os.Remove(filepath.Join(e.state, statedir.ConfigName))
	if err := e.restartQuietly(); err != nil {
		// The journal (or the content store) is what keeps it down.
		e.stopKernel()
		os.Remove(filepath.Join(e.state, "journal.db"))
		os.RemoveAll(filepath.Join(e.state, "cas"))
		e.startKernel()
	}
	e.plantAll()
	// Whatever the attack copied to where it may write goes too.
	for _, d := range []string{e.tmp, filepath.Join(e.work, "http")} {
		entries, _ := os.ReadDir(d)
		for _, en := range entries {
			os.RemoveAll(filepath.Join(d, en.Name()))
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := e.rowKept(ctx, e.sentinel); err != nil {
		e.markSentinel()
	}
	if err := e.echoHi(ctx); err != nil {
		e.t.Fatalf("after repair the kernel does not answer: %v", err)
	}
}

// ---- the HTTP facade ---------------------------------------------------

type facade struct {
	url, token, sid string
	cmd             *exec.Cmd
	done            chan struct{}
	mu              sync.Mutex
	extra           []string // sessions made by rows, ended after each
}

func startFacade(t *testing.T, e *env) *facade {
	ws := filepath.Join(e.work, "http")
	must(t, os.MkdirAll(ws, 0o755))
	cmd := exec.Command(e.shoalMCP, "--http", "127.0.0.1:0", "--state-dir", e.state, "--principal", "agent:http", "--workspace", ws)
	cmd.Env = e.kernelEnv()
	cmd.Dir = ws
	stderr, err := cmd.StderrPipe()
	must(t, err)
	must(t, cmd.Start())
	f := &facade{cmd: cmd, done: make(chan struct{})}
	urls := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			if _, rest, ok := strings.Cut(sc.Text(), "serving MCP on "); ok {
				urls <- strings.Fields(rest)[0]
			}
		}
		cmd.Wait()
		close(f.done)
	}()
	t.Cleanup(func() {
		cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-f.done:
		case <-time.After(15 * time.Second):
			cmd.Process.Kill()
			<-f.done
		}
	})
	select {
	case f.url = <-urls:
	case <-f.done:
		t.Fatal("the HTTP facade exited before serving")
	case <-time.After(60 * time.Second):
		t.Fatal("the HTTP facade did not start serving")
	}
	tok, err := statedir.ReadToken(e.state, statedir.HTTPTokenName)
	must(t, err)
	f.token = tok
	// The attacker knows a live session id (it is not a secret).
	resp, _, err := f.do(context.Background(), "Bearer "+tok, "", "", initBody)
	must(t, err)
	f.sid = resp.Header.Get("Mcp-Session-Id")
	if resp.StatusCode != http.StatusOK || f.sid == "" {
		t.Fatalf("the facade refused its own token: %d", resp.StatusCode)
	}
	return f
}

const initBody = `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"attacker","version":"1"}}}`

func (f *facade) do(ctx context.Context, auth, query, sid, body string) (*http.Response, string, error) {
	req, err := http.NewRequestWithContext(ctx, "POST", f.url+query, strings.NewReader(body))
	if err != nil {
		return nil, "", err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	if auth != "" {
		req.Header.Set("Authorization", auth)
	}
	if sid != "" {
		req.Header.Set("Mcp-Session-Id", sid)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, "", err
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<16))
	return resp, string(b), nil
}

// post sends an attacker's request on the known session; a session the
// request itself made (an initialize that got through) is ended later.
func (f *facade) post(ctx context.Context, auth, query, body string) (int, string) {
	sid := f.sid
	if strings.Contains(body, `"initialize"`) {
		sid = ""
	}
	resp, b, err := f.do(ctx, auth, query, sid, body)
	if err != nil {
		return 0, err.Error()
	}
	if s := resp.Header.Get("Mcp-Session-Id"); s != "" && s != f.sid {
		f.mu.Lock()
		f.extra = append(f.extra, s)
		f.mu.Unlock()
	}
	return resp.StatusCode, b
}

func (f *facade) closeSessions() {
	f.mu.Lock()
	extra := f.extra
	f.extra = nil
	f.mu.Unlock()
	for _, s := range extra {
		req, _ := http.NewRequest("DELETE", f.url, nil)
		req.Header.Set("Authorization", "Bearer "+f.token)
		req.Header.Set("Mcp-Session-Id", s)
		if resp, err := http.DefaultClient.Do(req); err == nil {
			resp.Body.Close()
		}
	}
}
