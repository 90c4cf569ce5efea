package analyze

import (
	"os"
	"path"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"

	"mvdan.cc/sh/v3/syntax"

	"github.com/shoal-sh/shoal/core/policy"
)

// Where the source itself makes the analysis blind — an IFS it assigns, a
// nameref, a link it creates, a PATH it changes, an option that runs code
// — the analyzer says so: the effect is dynamic (its target is what the
// source wrote, never a place it guessed) and the plan's uncertain list
// says why.

const defaultIFS = " \t\n"

// ifsUnknown reports whether word splitting may differ from the default:
// the source assigned IFS, or the session holds another one.
func (w *walker) ifsUnknown(s *scope) bool {
	if v, ok := s.vars["IFS"]; ok {
		return !v.known || v.val != defaultIFS
	}
	if s.namerefs {
		return true
	}
	if w.env.Lookup != nil {
		if v, ok := w.env.Lookup("IFS"); ok && v != defaultIFS {
			w.unsure("the session's IFS is not the default: how unquoted words split is known only at run time")
			return true
		}
	}
	return false
}

// splitsOnIFS reports whether a word's expansion depends on IFS: an
// unquoted expansion is split on it, and "$*" is joined with it.
func splitsOnIFS(word *syntax.Word) bool {
	for _, p := range word.Parts {
		switch p := p.(type) {
		case *syntax.ParamExp, *syntax.CmdSubst, *syntax.ArithmExp:
			return true
		case *syntax.DblQuoted:
			for _, q := range p.Parts {
				if pe, ok := q.(*syntax.ParamExp); ok && pe.Param != nil &&
					(pe.Param.Value == "*" || indexStar(pe.Index)) {
					return true
				}
			}
		}
	}
	return false
}

func indexStar(x syntax.ArithmExpr) bool {
	w, ok := x.(*syntax.Word)
	return ok && w.Lit() == "*"
}

// codeVars are variables that make the programs started afterwards run
// code or files the command line does not show.
var codeVars = map[string]string{
	"BASH_ENV":              "bash runs the file BASH_ENV names before its own commands",
	"ENV":                   "sh runs the file ENV names before its own commands",
	"SHELLOPTS":             "SHELLOPTS changes how child shells behave",
	"BASHOPTS":              "BASHOPTS changes how child shells behave",
	"PS4":                   "PS4 is expanded (and its substitutions run) by shells tracing commands",
	"PROMPT_COMMAND":        "PROMPT_COMMAND runs in interactive shells",
	"LD_PRELOAD":            "LD_PRELOAD loads a library into every program started",
	"LD_LIBRARY_PATH":       "LD_LIBRARY_PATH changes the libraries programs load",
	"LD_AUDIT":              "LD_AUDIT loads a library into every program started",
	"GCONV_PATH":            "GCONV_PATH makes programs load other modules",
	"PYTHONSTARTUP":         "PYTHONSTARTUP runs a file in interactive python",
	"PYTHONPATH":            "PYTHONPATH changes which python modules load",
	"PYTHONHOME":            "PYTHONHOME changes which python runs",
	"NODE_OPTIONS":          "NODE_OPTIONS can make node load code (--require)",
	"PERL5OPT":              "PERL5OPT adds options (and code) to every perl",
	"PERL5LIB":              "PERL5LIB changes which perl modules load",
	"RUBYOPT":               "RUBYOPT adds options (and code) to every ruby",
	"RUBYLIB":               "RUBYLIB changes which ruby libraries load",
	"GIT_SSH":               "GIT_SSH names a program git runs",
	"GIT_SSH_COMMAND":       "GIT_SSH_COMMAND is a command git runs",
	"GIT_EXTERNAL_DIFF":     "GIT_EXTERNAL_DIFF is a program git runs",
	"GIT_PAGER":             "GIT_PAGER is a command git runs",
	"GIT_EDITOR":            "GIT_EDITOR is a command git runs",
	"GIT_SEQUENCE_EDITOR":   "GIT_SEQUENCE_EDITOR is a command git runs",
	"GIT_ASKPASS":           "GIT_ASKPASS is a program git runs",
	"GIT_EXEC_PATH":         "GIT_EXEC_PATH changes which git programs run",
	"GIT_CONFIG_PARAMETERS": "GIT_CONFIG_PARAMETERS sets git configuration that can run commands",
	"GIT_CONFIG_COUNT":      "GIT_CONFIG_COUNT sets git configuration that can run commands",
	"GIT_CONFIG_GLOBAL":     "GIT_CONFIG_GLOBAL makes git read configuration that can run commands",
	"GIT_CONFIG_SYSTEM":     "GIT_CONFIG_SYSTEM makes git read configuration that can run commands",
	"GIT_DIR":               "GIT_DIR points git at another repository",
	"GIT_WORK_TREE":         "GIT_WORK_TREE points git at another work tree",
	"SSH_ASKPASS":           "SSH_ASKPASS is a program ssh runs",
	"PAGER":                 "PAGER is a command programs run",
	"MANPAGER":              "MANPAGER is a command man runs",
	"EDITOR":                "EDITOR is a command programs run",
	"VISUAL":                "VISUAL is a command programs run",
	"LESSOPEN":              "LESSOPEN is a command less runs",
	"TAR_OPTIONS":           "TAR_OPTIONS adds options to tar (--to-command runs code)",
	"MAKEFLAGS":             "MAKEFLAGS adds options to make",
}

// codeVar notes an assignment to one of codeVars: what programs started
// afterwards run is not what their command lines show.
func (w *walker) codeVar(name, why string) {
	reason := name + " is set: " + why + "; what runs is known only at run time"
	w.add(Effect{
		Effect:     policy.Effect{Kind: policy.ProcSpawn, Target: "$" + name, Dynamic: true},
		Reversible: false,
		Reason:     reason,
	})
}

// linkArea is a place where the source makes a link (or may: an
// extracted archive, a checkout): a path at or below it may lead anywhere.
type linkArea struct {
	path string // absolute; empty: the place is not known, so anywhere
	by   string
}

// madeLink records that the command makes a link at a (or a tree that
// may hold links below a).
func (w *walker) madeLink(s *scope, a arg, by string) {
	if w.light {
		return // one command: no later path to mislead
	}
	p, ok := w.abs(s, a)
	if !ok {
		p = ""
	}
	w.links = append(w.links, linkArea{path: p, by: by})
	if p == "" {
		w.unsure(by + " makes a link at a place known only at run time: where later paths lead is not known")
	}
}

// linkedAt reports a link made earlier in the source at or above p.
func (w *walker) linkedAt(p string) (linkArea, bool) {
	for _, l := range w.links {
		if l.path == "" || p == l.path || strings.HasPrefix(p, strings.TrimSuffix(l.path, "/")+"/") {
			return l, true
		}
	}
	return linkArea{}, false
}

// systemDirs hold the programs the analyzer models under their names.
var systemDirs = []string{"/bin", "/sbin", "/usr/bin", "/usr/sbin", "/usr/local/bin", "/usr/local/sbin",
	"/usr/local/go/bin", "/usr/lib/go/bin", "/usr/games", "/snap/bin", "/opt/homebrew/bin", "/opt/homebrew/sbin",
	"/run/current-system/sw/bin", "/nix/var/nix/profiles/default/bin", "/usr/libexec", "/usr/lib/git-core"}

// systemDir reports a directory whose programs are taken for what their
// names say: a system directory, or one on the kernel's own PATH (the
// environment the person started Shoal with: pyenv shims, ~/go/bin, …).
// A directory only the session's PATH has — put there by an agent's
// earlier execution — is not one. (A program an unconfined run writes into
// a directory of the kernel's PATH is not caught here; confined, those
// directories are not writable.)
func systemDir(dir string) bool {
	dir = path.Clean(dir)
	return slices.Contains(systemDirs, dir) || strings.HasPrefix(dir, "/nix/store/") || kernelPath()[dir]
}

// kernelPath is the set of absolute directories on the kernel's PATH.
var kernelPath = sync.OnceValue(func() map[string]bool {
	dirs := map[string]bool{}
	for _, d := range filepath.SplitList(os.Getenv("PATH")) {
		if filepath.IsAbs(d) {
			dirs[path.Clean(d)] = true
		}
	}
	return dirs
})

// shadowed reports why a command name the analyzer models may run
// something else: `hash -p`, a PATH the source changed or one with a
// relative entry, or a program of that name found before the system's.
func (w *walker) shadowed(s *scope, name string) (string, bool) {
	if w.hashed[name] {
		return "hash -p pointed " + name + " at another file: what runs is not known", true
	}
	if _, modeled := externals[name]; !modeled {
		return "", false
	}
	pathVal, known := w.pathOf(s)
	if !known {
		return "PATH is assigned a value known only at run time: which " + name + " runs is not known", true
	}
	key := name + "\x00" + pathVal
	if s.pathSet {
		key += "\x00set"
	}
	if r, seen := w.shadows[key]; seen {
		return r, r != ""
	}
	r := w.shadowedOn(s, name, pathVal)
	if w.shadows == nil {
		w.shadows = map[string]string{}
	}
	w.shadows[key] = r
	return r, r != ""
}

// shadowedOn is shadowed for a known PATH; "" when name is the system's.
func (w *walker) shadowedOn(s *scope, name, pathVal string) string {
	for _, dir := range filepath.SplitList(pathVal) {
		if dir == "" || !filepath.IsAbs(dir) {
			return "PATH holds a relative entry (" + strconvQuote(dir) + "): " + name + " may be a program in the working directory"
		}
		sys := systemDir(dir)
		if w.isExec(filepath.Join(dir, name)) {
			if sys {
				return ""
			}
			return name + " on PATH is " + filepath.Join(dir, name) + ", not the system's: what it does is not known"
		}
		if !sys && s.pathSet {
			return "PATH was changed to search " + dir + " first: " + name + " may be a program put there"
		}
	}
	return ""
}

func strconvQuote(s string) string { return `"` + s + `"` }

// pathOf is PATH as the command would see it, and whether it is known.
func (w *walker) pathOf(s *scope) (string, bool) {
	if v, ok := s.vars["PATH"]; ok {
		return v.val, v.known && !s.namerefs
	}
	if s.namerefs {
		return "", false
	}
	if w.env.Lookup != nil {
		if v, ok := w.env.Lookup("PATH"); ok {
			return v, true
		}
	}
	return os.Getenv("PATH"), true
}

func (w *walker) isExec(p string) bool {
	if ok, seen := w.path["\x00"+p]; seen {
		return ok
	}
	info, err := os.Stat(p)
	ok := err == nil && info.Mode().IsRegular() && info.Mode()&0o111 != 0
	if w.path == nil {
		w.path = map[string]bool{}
	}
	w.path["\x00"+p] = ok
	return ok
}

// opaque records a command whose options make it run code or write files
// that the command line does not name.
func (w *walker) opaque(c *cmd, why string) {
	w.dynamicSpawn(c.head, c.head+" "+joinText(c.args), why)
}

// machine records a command that reaches past the session: the whole
// machine, or a daemon that runs things outside its confinement.
func (w *walker) machine(s *scope, c *cmd, sub, reason string) {
	target := c.name
	if strings.Contains(target, "/") && !path.IsAbs(target) && s.cwdKnown {
		target = path.Join(s.cwd, target)
	}
	w.add(Effect{
		Effect:     policy.Effect{Kind: policy.ProcSpawn, Target: target, Head: c.head, Sub: sub, Machine: true},
		Reversible: false,
		Reason:     reason,
	})
}

func killCmd(w *walker, s *scope, c *cmd) {
	args := c.args
	if c.head != "kill" {
		pkillCmd(w, s, c)
		return
	}
	i := 0
	if len(args) > 0 && !args[0].dyn {
		switch v := args[0].val; {
		case v == "-l" || v == "-L" || v == "--list" || v == "--table":
			w.spawn(s, c, "", true, "lists signal names")
			return
		case v == "-s" || v == "-n" || v == "--signal":
			i = 2
		case strings.HasPrefix(v, "-") && v != "--" && v != "-":
			i = 1 // -9, -KILL, -SIGTERM: the signal
		}
	}
	if i < len(args) && !args[i].dyn && args[i].val == "--" {
		i++
	}
	for _, a := range args[min(i, len(args)):] {
		if !a.dyn && (a.val == "-1" || a.val == "1") {
			w.machine(s, c, "", "signals every process (-1) or init (1): the whole machine")
			return
		}
	}
	w.spawn(s, c, "", false, "signals running processes; a killed process cannot be resumed")
}

func pkillCmd(w *walker, s *scope, c *cmd) {
	if c.head == "killall5" {
		w.machine(s, c, "", "signals every process on the machine")
		return
	}
	p := w.parse(c.args, optSpec{shortVal: "sugUtPGF", longVal: []string{"signal", "euid", "uid", "group", "pgroup", "session", "terminal", "parent", "pidfile", "user"}})
	for _, u := range p.all("u", "U", "euid", "uid", "user") {
		for _, name := range strings.Split(u.val, ",") {
			if !u.dyn && (name == "root" || name == "0") {
				w.machine(s, c, "", "signals root's processes: the machine's own services")
				return
			}
		}
	}
	for _, o := range p.ops {
		if !o.dyn && slices.Contains([]string{"init", "systemd", "1", ".", ".*", "^", "sshd", "dbus-daemon"}, o.val) {
			w.machine(s, c, "", "signals "+o.val+": the machine's own processes")
			return
		}
	}
	w.spawn(s, c, "", false, "signals running processes; a killed process cannot be resumed")
}

// machineCmd: reboot, passwd and the like change the whole machine
// whatever their arguments.
func machineCmd(reason string) handler {
	return func(w *walker, s *scope, c *cmd) { w.machine(s, c, "", reason) }
}

// readsUnless: a machine tool that only reads when every argument is one
// of readOnly (iptables -L, ufw status); anything else changes the machine.
func readsUnless(reason string, readOnly ...string) handler {
	return func(w *walker, s *scope, c *cmd) {
		if len(c.args) == 0 && c.head != "ufw" {
			w.spawn(s, c, "", true, "prints; changes nothing")
			return
		}
		for _, a := range c.args {
			if a.dyn || !slices.ContainsFunc(readOnly, func(r string) bool {
				return a.val == r || (strings.HasSuffix(r, "*") && strings.HasPrefix(a.val, strings.TrimSuffix(r, "*")))
			}) {
				w.machine(s, c, "", reason)
				return
			}
		}
		w.spawn(s, c, "", true, "prints; changes nothing")
	}
}

var systemctlReads = []string{"status", "show", "cat", "help", "is-active", "is-enabled", "is-failed",
	"is-system-running", "get-default", "list-units", "list-unit-files", "list-sockets", "list-timers",
	"list-jobs", "list-dependencies", "list-machines", "show-environment", "--version"}

func systemctlCmd(w *walker, s *scope, c *cmd) {
	p := w.parse(c.args, optSpec{shortVal: "tpsHMn", longVal: []string{"type", "property", "signal", "host", "machine", "lines", "output", "root"}, stopAtOperand: true})
	if len(p.rest) == 0 {
		w.spawn(s, c, "", true, "lists units")
		return
	}
	sub := p.rest[0]
	if !sub.dyn && slices.Contains(systemctlReads, sub.val) {
		w.spawn(s, c, sub.val, true, "inspects; changes nothing")
		return
	}
	w.machine(s, c, sub.text, "changes what the machine runs (units, power state) through systemd, outside the session")
}

func crontabCmd(w *walker, s *scope, c *cmd) {
	if len(c.args) == 1 && !c.args[0].dyn && c.args[0].val == "-l" {
		w.spawn(s, c, "", true, "lists cron jobs")
		return
	}
	w.machine(s, c, "", "hands jobs to cron, which runs them later outside the session and its confinement")
}

func ddCmd(w *walker, s *scope, c *cmd) {
	for _, a := range c.args {
		if k, v, ok := strings.Cut(a.val, "="); !a.dyn && ok && k == "of" {
			if d := path.Clean(v); strings.HasPrefix(d, "/dev/") && !isPseudo(d) {
				w.machine(s, c, "", "writes a device directly: "+d)
			}
		}
	}
	ddFiles(w, s, c)
}

// awkRuns reports an awk program that starts commands or writes files:
// system(), a pipe to or from a command, print > file, or an extension.
func awkRuns(prog string) bool {
	if strings.Contains(prog, "system") || strings.Contains(prog, "@") {
		return true
	}
	if strings.Contains(strings.ReplaceAll(prog, "||", ""), "|") {
		return true
	}
	return awkRedirect.MatchString(prog)
}

var awkRedirect = regexp.MustCompile(`\bprintf?\b[^;{}\n]*>`)

func awkCmd(w *walker, s *scope, c *cmd) {
	w.spawn(s, c, "", true, "reads; changes nothing")
	p := w.parse(c.args, optSpec{shortVal: "fvFe", longVal: []string{"file", "assign", "field-separator", "source", "include", "load"}})
	ops := p.ops
	var progs []string
	if files := p.all("f", "file", "include"); len(files) > 0 {
		for _, f := range files {
			w.fs(s, f, fsReq{kind: policy.FSRead, head: c.head, executes: true})
			text, ok := w.readProgram(s, f)
			if !ok {
				w.opaque(c, "runs an awk program from a file that cannot be read now")
				return
			}
			progs = append(progs, text)
		}
	} else if len(ops) > 0 {
		if ops[0].dyn {
			w.opaque(c, "runs an awk program known only at run time")
			return
		}
		progs = append(progs, ops[0].val)
		ops = ops[1:]
	}
	for _, e := range p.all("e", "source") {
		progs = append(progs, e.val)
	}
	if p.has("l", "load") || slices.ContainsFunc(progs, awkRuns) {
		w.opaque(c, "the awk program runs commands or writes files (system(), | pipes, print > file): its effects are known only at run time")
	}
	w.readOperands(s, c, ops)
}

// readProgram reads a program file named by an argument (read-only).
func (w *walker) readProgram(s *scope, a arg) (string, bool) {
	p, ok := w.abs(s, a)
	if !ok || w.light {
		return "", false
	}
	return readScript(p)
}

// sedRuns reports a sed script that writes files (w, W, s///w) or runs
// commands (e, s///e). A script it cannot read counts as one that does.
func sedRuns(script string) bool {
	n := len(script)
	skipDelim := func(i int, d byte) int {
		for i < n {
			switch script[i] {
			case '\\':
				i += 2
				continue
			case d:
				return i + 1
			}
			i++
		}
		return n
	}
	toEnd := func(i int, ends string) int {
		for i < n && !strings.ContainsRune(ends, rune(script[i])) {
			i++
		}
		return i
	}
	for i := 0; i < n; {
		ch := script[i]
		switch {
		case strings.ContainsRune(" \t\n;{}!,~+0123456789$IM", rune(ch)):
			i++
		case ch == '/':
			i = skipDelim(i+1, '/')
		case ch == '\\':
			if i+1 >= n {
				return true
			}
			i = skipDelim(i+2, script[i+1])
		case ch == '#':
			i = toEnd(i, "\n")
		case ch == ':' || ch == 'b' || ch == 't' || ch == 'T' || ch == 'v':
			i = toEnd(i+1, ";\n")
		case ch == 'a' || ch == 'i' || ch == 'c' || ch == 'r' || ch == 'R':
			i = toEnd(i+1, "\n")
		case ch == 'w' || ch == 'W' || ch == 'e':
			return true
		case ch == 's' || ch == 'y':
			if i+1 >= n {
				return true
			}
			d := script[i+1]
			j := skipDelim(i+2, d)
			j = skipDelim(j, d)
			end := toEnd(j, ";\n}")
			if ch == 's' && strings.ContainsAny(script[j:end], "we") {
				return true
			}
			i = end
		case strings.ContainsRune("dDgGhHnNpPxlLqQz=F", rune(ch)):
			i++
		default:
			return true
		}
	}
	return false
}

// editors run whatever commands they are given (-c, +cmd, :!, a script
// on stdin) and may write any file.
func editorCmd(w *walker, s *scope, c *cmd) {
	w.spawn(s, c, "", false, modeled)
	for _, a := range c.args {
		if !a.dyn && !strings.HasPrefix(a.val, "-") && !strings.HasPrefix(a.val, "+") {
			w.fs(s, a, fsReq{kind: policy.FSWrite, mode: modeModify, head: c.head})
		}
	}
	if w.env.Terminal && !slices.ContainsFunc(c.args, func(a arg) bool {
		return a.dyn || strings.HasPrefix(a.val, "-") || strings.HasPrefix(a.val, "+")
	}) {
		return // edited by keystrokes on the terminal
	}
	w.opaque(c, "an editor runs the commands it is given (-c, +cmd, :!, a script on stdin) and may write any file")
}

// tarRuns are tar's options that run a command.
var tarRuns = []string{"to-command", "use-compress-program", "checkpoint-action", "info-script",
	"new-volume-script", "rsh-command", "rmt-command", "index-file"}

// gitSafeConfig are configuration keys (by prefix) that `git -c` may set
// without running anything.
var gitSafeConfig = []string{"user.", "color.", "advice.", "init.defaultbranch", "core.quotepath",
	"core.autocrlf", "core.abbrev", "core.safecrlf", "commit.gpgsign", "tag.gpgsign", "pull.rebase",
	"pull.ff", "push.default", "safe.directory", "status.", "log.", "column.", "protocol.version",
	"merge.conflictstyle", "rebase.autosquash", "gc.auto", "maintenance.auto", "fetch.prune"}

// gitConfigRuns reports a `git -c` or `--config` setting that may run a
// command (alias.x=!…, core.pager, core.sshCommand, a filter…).
func gitConfigRuns(vals []arg) bool {
	for _, v := range vals {
		if v.dyn {
			return true
		}
		key, _, _ := strings.Cut(strings.ToLower(v.val), "=")
		if !slices.ContainsFunc(gitSafeConfig, func(p string) bool { return strings.HasPrefix(key, p) }) {
			return true
		}
	}
	return false
}

// gitRunsHooks: subcommands that run the repository's hooks.
var gitRunsHooks = []string{"commit", "merge", "rebase", "push", "checkout", "switch", "am", "pull",
	"cherry-pick", "revert", "clone", "worktree"}

// gitHooks reports executable hooks in a repository now (read-only).
func gitHooks(repo string) bool {
	ents, err := os.ReadDir(path.Join(repo, ".git", "hooks"))
	if err != nil {
		return false
	}
	for _, e := range ents {
		if strings.HasSuffix(e.Name(), ".sample") {
			continue
		}
		if info, err := e.Info(); err == nil && info.Mode()&0o111 != 0 {
			return true
		}
	}
	return false
}

// sshRuns are ssh -o options that run a local command.
var sshRuns = []string{"proxycommand", "localcommand", "permitlocalcommand", "knownhostscommand", "match"}

func sshOptsRun(opts []arg) bool {
	for _, o := range opts {
		if o.dyn {
			return true
		}
		key := strings.ToLower(strings.TrimSpace(strings.SplitN(strings.SplitN(o.val, "=", 2)[0], " ", 2)[0]))
		if slices.Contains(sshRuns, key) {
			return true
		}
	}
	return false
}

func linkCmd(w *walker, s *scope, c *cmd) {
	w.spawn(s, c, "", true, modeled)
	p := w.parse(c.args, optSpec{})
	if len(p.ops) == 2 {
		w.fs(s, p.ops[1], fsReq{kind: policy.FSWrite, mode: modeCreate, head: c.head})
		w.madeLink(s, p.ops[1], "link")
	}
}

// wroteBelow reports an earlier write or delete at or below dir (or one
// whose target is unknown).
func (w *walker) wroteBelow(dir string) bool {
	dir = w.realPath(dir, true)
	for _, e := range w.fx {
		if e.Kind != policy.FSWrite && e.Kind != policy.FSDelete {
			continue
		}
		if e.Dynamic || e.Target == dir || strings.HasPrefix(e.Target, dir+"/") {
			return true
		}
	}
	return false
}

// hashCmd: `hash -p FILE NAME` makes NAME run FILE.
func hashCmd(w *walker, s *scope, c *cmd) {
	p := w.parse(c.args, optSpec{shortVal: "pd"})
	if _, ok := p.val("p"); ok || p.dyn {
		for _, n := range p.ops {
			if w.hashed == nil {
				w.hashed = map[string]bool{}
			}
			w.hashed[n.val] = true
		}
		if p.dyn {
			w.unsure("hash -p with names known only at run time: which programs commands run is not known")
		}
	}
}

// shoptCmd follows the options that change what later commands mean.
func shoptCmd(w *walker, s *scope, c *cmd) {
	for _, a := range c.args {
		if a.dyn || a.val == "cdable_vars" {
			w.cdable = true
		}
		if a.dyn || a.val == "expand_aliases" {
			w.unsure("aliases are expanded: a command name may stand for an alias body")
		}
	}
}
