package shell

import (
	"bytes"
	"context"
	"errors"
	"io"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"

	"mvdan.cc/sh/v3/expand"
	"mvdan.cc/sh/v3/interp"
	"mvdan.cc/sh/v3/syntax"

	"github.com/shoal-sh/shoal/providers/plan/analyze"
)

// The bash fallback (issue 14). A source using a construct only bash runs
// (bashneed.go) runs as `bash -c SOURCE` instead of in the interpreter,
// as one process of the run: through the same process middleware, so in
// the session's confinement, its process group tracked, its output
// captured and followed like any command's. The policy check has already
// passed on the same source. The session's state crosses over both ways:
//
//   - in: a BASH_ENV file, written in the session's FIFO directory (the
//     one directory a confined process may write existing files in),
//     defines the session's functions and variables and sets its options;
//     exported variables come through the environment, the directory is
//     the process's, positional parameters follow `bash -c SRC bash`.
//   - out: at the end (an EXIT trap, or code after the source when the
//     source sets traps of its own) bash writes $PWD, its options,
//     declare -p and declare -f to a second file there; what changed is
//     applied to the run's interpreter state as interpreter code, so the
//     next run, interpreted or not, goes on from it.
//
// Such a run has no typed values (ls and jq are the programs), is marked
// [MarkBash], and records as effects the bash process plus the effects the
// planner's analysis of the source names (bash's own commands are not
// observed one by one).

// MarkBash marks a run that ran under GNU bash instead of the interpreter.
const MarkBash = "bash"

// bashBuiltin is the one command of a run that falls back: it runs bash.
const bashBuiltin = "\x00bash"

// maxBashSource is the longest source given to bash -c: Linux refuses
// an argument of 128 KiB or more (MAX_ARG_STRLEN), and the saving code
// may follow the source. A longer source stays in the interpreter.
const maxBashSource = 120 << 10

// bashRun is the fallback of one run.
type bashRun struct {
	src      string
	file     *syntax.File            // the source as parsed, for its analysis
	funcs    map[string]*syntax.Stmt // the run's functions (its runner's copy)
	apply    *syntax.File            // the state bash ended with, as interpreter code; nil when none came back
	analysis *analyze.Analysis
}

// bashStub is the program a falling-back run runs: the bash builtin, given
// the interpreter's option states (which only $- and its own builtins
// tell) and the positional parameters.
var bashStub = sync.OnceValue(func() *syntax.File {
	f, err := Parse(`BASH "$-" "$(builtin shopt -o pipefail; builtin shopt)" "$@"`)
	if err != nil {
		panic(err)
	}
	f.Stmts[0].Cmd.(*syntax.CallExpr).Args[0].Parts[0].(*syntax.Lit).Value = bashBuiltin
	return f
})

// findBash is the bash the fallback runs: opt when given, "-" for none,
// else /bin/bash or bash on PATH.
func findBash(opt string) string {
	switch opt {
	case "-":
		return ""
	case "":
		if fi, err := os.Stat("/bin/bash"); err == nil && !fi.IsDir() {
			return "/bin/bash"
		}
		p, _ := exec.LookPath("bash")
		return p
	}
	return opt
}

// maybeBash returns what the run runs: file itself, or the bash stub when
// the source needs bash and bash can run it.
func (e *Evaluator) maybeBash(ru *run, r *interp.Runner, src string, file *syntax.File) *syntax.File {
	n := &ru.need
	if n.why == "" || n.shoalish || e.bash == "" || len(src) > maxBashSource {
		return file
	}
	if n.usesJq {
		if _, err := exec.LookPath("jq"); err != nil {
			return file // jq is the builtin here, and there is no program
		}
	}
	ru.bash = &bashRun{src: src, file: file, funcs: r.Funcs}
	ru.oneShot = true // bash itself reports what signals end
	ru.mark(MarkBash)
	return bashStub()
}

// applyBash makes the state bash ended with the run's.
func (e *Evaluator) applyBash(ru *run, r *interp.Runner) {
	if ru.bash == nil || ru.bash.apply == nil {
		return
	}
	interp.StdIO(nil, io.Discard, io.Discard)(r)
	// No run in the context: the handlers record nothing of this.
	_ = r.Run(context.WithValue(e.base, runKey{}, (*run)(nil)), ru.bash.apply)
}

// bashDir is where the fallback's two files go.
func (e *Evaluator) bashDir() string {
	for _, d := range []string{e.opts.FifoDir, e.opts.TempDir} {
		if d != "" {
			return d
		}
	}
	return os.TempDir()
}

func builtinBash(c *call) error {
	b := c.ru.bash
	if b == nil || len(c.args) < 3 {
		return c.failf(2, "not a bash run")
	}
	dir := c.e.bashDir()
	envFile, err := os.CreateTemp(dir, "bash-env-")
	if err != nil {
		return c.failf(126, "%v", err)
	}
	defer os.Remove(envFile.Name())
	stateFile, err := os.CreateTemp(dir, "bash-state-")
	if err != nil {
		envFile.Close()
		return c.failf(126, "%v", err)
	}
	stateFile.Close()
	defer os.Remove(stateFile.Name())

	vars := runVars(c.hc.Env)
	flags, opts := c.args[1], c.args[2]
	save := bashEpilogue(stateFile.Name())
	script := b.src
	trap := ""
	if c.ru.need.usesTrap {
		script += "\n" + save
	} else {
		trap = save
	}
	userEnv := c.hc.Env.Get("BASH_ENV")
	_, werr := io.WriteString(envFile, bashPreamble(vars, b.funcs, flags, opts, userEnv, trap))
	if cerr := envFile.Close(); werr == nil {
		werr = cerr
	}
	if werr != nil {
		return c.failf(126, "%v", werr)
	}
	env := slices.DeleteFunc(processEnv(c.hc.Env), func(kv string) bool { return strings.HasPrefix(kv, "BASH_ENV=") })
	env = append(env, "BASH_ENV="+envFile.Name())
	args := append([]string{"bash", "-c", script, "bash"}, c.args[3:]...)

	c.ru.effect(EffectProcSpawn, c.e.bash)
	b.analysis = analyze.AnalyzeFile(b.file, analyze.Env{Cwd: c.hc.Dir, WalkCap: 1,
		Lookup: func(name string) (string, bool) { v := c.hc.Env.Get(name); return v.String(), v.IsSet() },
		Func:   func(name string) (*syntax.Stmt, bool) { f, ok := b.funcs[name]; return f, ok }})
	if c.ru.need.secrets || slices.ContainsFunc(b.analysis.Heads, func(h string) bool { return h == "env" || h == "printenv" }) {
		c.ru.mark(MarkSecretSource)
	}
	for _, ef := range b.analysis.Effects {
		if slices.Contains(observedKinds, ef.Kind) {
			target := ef.Target
			if ef.Dynamic {
				target = ""
			}
			c.ru.effect(ef.Kind, target)
		}
	}
	err = c.e.spawnEnv(c.ctx, c.ru, c.hc, c.e.bash, args, env)
	status := 0
	var es interp.ExitStatus
	switch {
	case errors.As(err, &es):
		status = int(es)
	case err != nil:
		return err
	}
	if state, rerr := os.ReadFile(stateFile.Name()); rerr == nil {
		b.apply = bashApply(state, vars, b.funcs, c.hc.Dir, flags, status)
	}
	return err
}

// bashEpilogue is the code that saves bash's state in path: $PWD and $-,
// then the options, the variables and the functions, NUL-separated. It
// keeps $?, traces nothing and fires no ERR trap of the source's.
func bashEpilogue(path string) string {
	q, _ := syntax.Quote(path, syntax.LangBash)
	return `{ __shoal_status=$?; trap - ERR; { printf '%s\0' "${PWD-}" "$-"; shopt -po; shopt -p; printf '\0'; declare -p; printf '\0'; declare -f; } >` +
		q + `; (exit "$__shoal_status"); } 2>/dev/null`
}

// bashManaged are variables bash keeps itself (or, for GID, does not
// have): never carried either way.
var bashManaged = map[string]bool{
	"BASH": true, "BASHOPTS": true, "BASHPID": true, "BASH_ALIASES": true, "BASH_ARGC": true,
	"BASH_ARGV": true, "BASH_ARGV0": true, "BASH_CMDS": true, "BASH_COMMAND": true, "BASH_ENV": true,
	"BASH_EXECUTION_STRING": true, "BASH_LINENO": true, "BASH_LOADABLES_PATH": true, "BASH_REMATCH": true,
	"BASH_SOURCE": true, "BASH_SUBSHELL": true, "BASH_VERSINFO": true, "BASH_VERSION": true,
	"COMP_WORDBREAKS": true, "DIRSTACK": true, "EPOCHREALTIME": true, "EPOCHSECONDS": true, "EUID": true,
	"FUNCNAME": true, "GROUPS": true, "HISTCMD": true, "LINENO": true, "PIPESTATUS": true, "PPID": true,
	"PWD": true, "RANDOM": true, "SECONDS": true, "SHELLOPTS": true, "SHLVL": true, "SRANDOM": true,
	"UID": true, "GID": true, "_": true,
}

// bashDefaults are variables bash sets when they are not set: carried
// back only when the session had them or bash's value was changed.
var bashDefaults = map[string]string{
	"HOSTNAME": "", "HOSTTYPE": "", "MACHTYPE": "", "OSTYPE": "", "OPTERR": "1", "OPTIND": "1",
	"PS4": "+ ", "PS1": "", "PS2": "", "IFS": " \t\n", "MAILCHECK": "", "SHELL": "", "TERM": "", "PATH": "",
	"HISTFILE": "", "HISTFILESIZE": "", "HISTSIZE": "", "COLUMNS": "", "LINES": "",
}

func carried(name string) bool {
	return !bashManaged[name] && !strings.HasPrefix(name, "__shoal_") && syntax.ValidName(name)
}

// runVars are the run's set variables by name (the innermost of a name
// that comes twice), without the ones bash keeps.
func runVars(env expand.Environ) map[string]expand.Variable {
	vars := make(map[string]expand.Variable, 64)
	for name, vr := range env.Each {
		if !carried(name) {
			continue
		}
		if vr.IsSet() {
			vars[name] = vr
		} else {
			delete(vars, name)
		}
	}
	return vars
}

// bashPreamble is the BASH_ENV file: the session's functions, variables
// and options (flags is $-, opts what the interpreter's shopt printed),
// then the trap that saves the state, if any.
func bashPreamble(vars map[string]expand.Variable, funcs map[string]*syntax.Stmt, flags, opts string, userEnv expand.Variable, trap string) string {
	var b strings.Builder
	b.WriteString("unset BASH_ENV\n")
	if userEnv.IsSet() && userEnv.Exported {
		b.WriteString("export BASH_ENV=" + quote(userEnv.String()) + "\n")
	}
	printer := syntax.NewPrinter()
	for _, name := range slices.Sorted(maps.Keys(funcs)) {
		b.WriteString(name + "() ")
		_ = printer.Print(&b, funcs[name])
		b.WriteString("\n")
	}
	for _, name := range slices.Sorted(maps.Keys(vars)) {
		vr := vars[name]
		if vr.Exported && !vr.ReadOnly && vr.Kind == expand.String {
			continue // in the environment
		}
		if d := declaration(name, vr); d != "" {
			b.WriteString(d + "\n")
		}
	}
	for _, line := range strings.Split(opts, "\n") {
		name, state, _ := strings.Cut(line, "\t")
		if state, _, _ = strings.Cut(state, "\t"); state != "on" {
			continue
		}
		switch {
		case name == "pipefail":
			b.WriteString("set -o pipefail\n")
		case interpShopts[name] && name != "expand_aliases":
			b.WriteString("shopt -s " + name + "\n")
		}
	}
	if trap != "" {
		b.WriteString("trap -- " + quote(trap) + " EXIT\n")
	}
	if f := strings.Map(func(r rune) rune {
		if strings.ContainsRune("aefux", r) {
			return r
		}
		return -1
	}, flags); f != "" {
		b.WriteString("set -" + f + "\n")
	}
	return b.String()
}

// declaration is a declare command that gives name vr's value and
// attributes, in bash (and in the interpreter); "" for what has none.
func declaration(name string, vr expand.Variable) string {
	attrs := ""
	if vr.ReadOnly {
		attrs += "r"
	}
	if vr.Exported {
		attrs += "x"
	}
	var value string
	switch vr.Kind {
	case expand.String:
		value = quote(vr.Str)
	case expand.NameRef:
		attrs += "n"
		value = quote(vr.Str)
	case expand.Indexed:
		attrs += "a"
		var b strings.Builder
		b.WriteByte('(')
		for i, v := range vr.List {
			if i > 0 {
				b.WriteByte(' ')
			}
			b.WriteString(quote(v))
		}
		b.WriteByte(')')
		value = b.String()
	case expand.Associative:
		attrs += "A"
		var b strings.Builder
		b.WriteByte('(')
		for i, k := range slices.Sorted(maps.Keys(vr.Map)) {
			if i > 0 {
				b.WriteByte(' ')
			}
			b.WriteString("[" + quote(k) + "]=" + quote(vr.Map[k]))
		}
		b.WriteByte(')')
		value = b.String()
	default:
		return ""
	}
	if attrs != "" {
		attrs = " -" + attrs
	}
	return "declare" + attrs + " " + name + "=" + value
}

func quote(s string) string {
	q, err := syntax.Quote(s, syntax.LangBash)
	if err != nil {
		return singleQuote(s)
	}
	return q
}

// bashApply reads the state bash saved and returns, as interpreter code,
// what changed against the run's (vars, funcs, dir, flags): nil
// when bash saved nothing (it ended by exit or a signal before, or the
// source's own EXIT trap replaced the saving one).
func bashApply(state []byte, vars map[string]expand.Variable, funcs map[string]*syntax.Stmt, dir, flags string, status int) *syntax.File {
	parts := bytes.SplitN(state, []byte{0}, 5)
	if len(parts) != 5 {
		return nil
	}
	var b strings.Builder
	if pwd := string(parts[0]); pwd != "" && pwd != dir && filepath.IsAbs(pwd) {
		b.WriteString("cd " + quote(pwd) + "\n")
	}
	applyFuncs(&b, parts[4], funcs)
	applyVars(&b, parts[3], vars)
	applyOpts(&b, string(parts[1]), flags, string(parts[2]))
	b.WriteString("(exit " + strconv.Itoa(status) + ")\n")
	f, err := Parse(b.String())
	if err != nil {
		return nil
	}
	return f
}

// applyFuncs writes the functions bash ended with (as bash prints them)
// and unsets the ones it no longer has.
func applyFuncs(b *strings.Builder, text []byte, funcs map[string]*syntax.Stmt) {
	f, err := Parse(string(text))
	if err != nil {
		return
	}
	seen := map[string]bool{}
	printer := syntax.NewPrinter()
	for _, st := range f.Stmts {
		fd, ok := st.Cmd.(*syntax.FuncDecl)
		if !ok || fd.Name == nil || strings.HasPrefix(fd.Name.Value, "__shoal_") {
			continue
		}
		seen[fd.Name.Value] = true
		_ = printer.Print(b, fd)
		b.WriteString("\n")
	}
	for _, name := range slices.Sorted(maps.Keys(funcs)) {
		if !seen[name] {
			b.WriteString("unset -f " + quote(name) + "\n")
		}
	}
}

// applyVars writes declarations for the variables bash changed or added
// (from its declare -p) and unsets the ones it removed.
func applyVars(b *strings.Builder, text []byte, vars map[string]expand.Variable) {
	after := parseDeclarations(text)
	if after == nil {
		return
	}
	for _, name := range slices.Sorted(maps.Keys(after)) {
		vr := after[name]
		old, had := vars[name]
		if !carried(name) || had && old.ReadOnly {
			continue
		}
		if def, ok := bashDefaults[name]; ok && !had && (def == "" || vr.Str == def) || !had && isEnvSetting(name, forcedEnv) {
			continue // bash's own, or set for every process, not by the source
		}
		if had && sameVar(old, vr) {
			continue
		}
		if d := declaration(name, vr); d != "" {
			b.WriteString(d + "\n")
		}
	}
	for _, name := range slices.Sorted(maps.Keys(vars)) {
		if _, ok := after[name]; !ok && !vars[name].ReadOnly {
			b.WriteString("unset -v " + name + "\n")
		}
	}
}

func sameVar(a, b expand.Variable) bool {
	return a.Kind == b.Kind && a.Exported == b.Exported && a.ReadOnly == b.ReadOnly && a.Str == b.Str &&
		slices.Equal(a.List, b.List) && maps.Equal(a.Map, b.Map)
}

// parseDeclarations reads bash's declare -p: the set variables with
// their attributes. Only declarations are read, and their values only as
// literals: nothing in the file runs.
func parseDeclarations(text []byte) map[string]expand.Variable {
	f, err := syntax.NewParser(syntax.Variant(syntax.LangBash)).Parse(bytes.NewReader(text), "")
	if err != nil {
		return nil
	}
	cfg := &expand.Config{Env: expand.ListEnviron()}
	out := make(map[string]expand.Variable, len(f.Stmts))
	for _, st := range f.Stmts {
		d, ok := st.Cmd.(*syntax.DeclClause)
		if !ok || d.Variant.Value != "declare" {
			continue
		}
		vr := expand.Variable{Set: true, Kind: expand.String}
		for _, as := range d.Args {
			if as.Naked && as.Name == nil && as.Value != nil {
				flags := as.Value.Lit()
				vr.Exported = strings.Contains(flags, "x")
				vr.ReadOnly = strings.Contains(flags, "r")
				switch {
				case strings.Contains(flags, "A"):
					vr.Kind = expand.Associative
				case strings.Contains(flags, "a"):
					vr.Kind = expand.Indexed
				case strings.Contains(flags, "n"):
					vr.Kind = expand.NameRef
				}
				continue
			}
			if as.Name == nil || as.Naked || !assignValue(cfg, as, &vr) {
				continue
			}
			out[as.Name.Value] = vr
		}
	}
	return out
}

// assignValue reads one assignment of declare -p into vr.
func assignValue(cfg *expand.Config, as *syntax.Assign, vr *expand.Variable) bool {
	lit := func(w *syntax.Word) (string, bool) {
		if w == nil {
			return "", true
		}
		s, err := expand.Literal(cfg, w)
		return s, err == nil
	}
	if as.Array == nil {
		s, ok := lit(as.Value)
		vr.Str = s
		return ok && (vr.Kind == expand.String || vr.Kind == expand.NameRef)
	}
	switch vr.Kind {
	case expand.Indexed:
		vr.List = nil
		for _, el := range as.Array.Elems {
			v, ok := lit(el.Value)
			if !ok {
				return false
			}
			vr.List = append(vr.List, v)
		}
	case expand.Associative:
		vr.Map = make(map[string]string, len(as.Array.Elems))
		for _, el := range as.Array.Elems {
			k, ok1 := "", el.Index != nil
			if w, isWord := el.Index.(*syntax.Word); ok1 && isWord {
				k, ok1 = lit(w)
			}
			v, ok2 := lit(el.Value)
			if !ok1 || !ok2 {
				return false
			}
			vr.Map[k] = v
		}
	default:
		return false
	}
	return true
}

// applyOpts sets the interpreter's options as bash ended with them: the
// set flags in $-, pipefail and the shopt options it implements.
func applyOpts(b *strings.Builder, after, before, opts string) {
	for _, c := range "aefux" {
		on, was := strings.ContainsRune(after, c), strings.ContainsRune(before, c)
		if on != was {
			b.WriteString(map[bool]string{true: "set -", false: "set +"}[on] + string(c) + "\n")
		}
	}
	for _, line := range strings.Split(opts, "\n") {
		f := strings.Fields(line)
		if len(f) != 3 {
			continue
		}
		switch {
		case f[0] == "set" && f[2] == "pipefail":
			b.WriteString(line + "\n")
		case f[0] == "shopt" && interpShopts[f[2]] && f[2] != "expand_aliases":
			b.WriteString(line + "\n")
		}
	}
}
