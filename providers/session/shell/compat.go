package shell

import (
	"context"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"

	"mvdan.cc/sh/v3/expand"
	"mvdan.cc/sh/v3/interp"
	"mvdan.cc/sh/v3/syntax"
)

// bashCalls adds to a call handler the rewrites that make a builtin of the
// interpreter behave as bash's: printf becomes Shoal's bashPrintf (a
// builtin of its own, or for -v an eval of the assignment it computed).
func bashCalls(h interp.CallHandlerFunc) interp.CallHandlerFunc {
	return func(ctx context.Context, args []string) ([]string, error) {
		args, err := h(ctx, args)
		if err != nil || len(args) == 0 {
			return args, err
		}
		hc := interp.HandlerCtx(ctx)
		if definesFunc(ctx, args[0]) {
			return args, nil // the script's own printf or test runs
		}
		switch args[0] {
		case "printf":
			return printfCall(hc, args), nil
		case "cd":
			return cdCall(hc, args), nil
		case "return":
			return returnCall(args), nil
		case "shift":
			return shiftCall(args), nil
		case "read":
			return readCall(ctx, hc, args), nil
		case "test", "[":
			return append([]string{testBuiltin}, args...), nil
		case "trap":
			return trapCall(runOf(ctx), args), nil
		case "shopt":
			return shoptCall(args), nil
		case "unset":
			return unsetCall(hc, args), nil
		case "getopts":
			return getoptsCall(args), nil
		case "umask":
			return umaskCall(args), nil
		}
		return args, nil
	}
}

// returnCall makes return behave as bash's. A bare return returns the
// status of the last command (the interpreter returns 0; eval expands $?
// first). Outside a function or sourced script bash refuses it with
// status 2 and goes on; the interpreter's status is 1 and its message
// another. The builtin return fails only there, so its failure is the
// test.
func returnCall(args []string) []string {
	status := "$?"
	switch {
	case len(args) == 2 && isUint(args[1]):
		status = args[1]
	case len(args) != 1:
		return args
	}
	return []string{"eval", "builtin return " + status + " 2>/dev/null || { " +
		"echo \"return: can only \\`return' from a function or sourced script\" >&2; (exit 2); }"}
}

func isUint(s string) bool {
	_, err := strconv.ParseUint(s, 10, 8)
	return err == nil
}

// trapCall keeps the conditions the interpreter traps (EXIT, ERR) and
// drops signal names, which it refuses with a message, leaving the whole
// trap unset. A run receives no signals but its cancellation, so a signal
// trap would never fire anyway; `trap cleanup EXIT INT TERM` sets the
// EXIT trap as in bash. The traps set are remembered for trap -p (and
// trap alone), which the interpreter does not know.
func trapCall(ru *run, args []string) []string {
	if len(args) == 1 || args[1] == "-p" {
		return []string{printfBuiltin, "%s", ru.trapListing(args[min(2, len(args)):])}
	}
	if len(args) < 3 || strings.HasPrefix(args[1], "-") && args[1] != "-" {
		return args
	}
	out := args[:2:2]
	for _, sig := range args[2:] {
		name := strings.TrimPrefix(strings.ToUpper(sig), "SIG")
		switch name {
		case "0":
			name = "EXIT"
		case "EXIT", "ERR":
		default:
			continue
		}
		out = append(out, sig)
		ru.setTrap(name, args[1])
	}
	if len(out) == 2 {
		return []string{"true"}
	}
	return out
}

// setTrap remembers the action of an EXIT or ERR trap ("-" resets it).
func (ru *run) setTrap(cond, action string) {
	if ru == nil {
		return
	}
	ru.mu.Lock()
	defer ru.mu.Unlock()
	if action == "-" {
		delete(ru.traps, cond)
		return
	}
	if ru.traps == nil {
		ru.traps = make(map[string]string)
	}
	ru.traps[cond] = action
}

// trapListing is what trap -p prints: `trap -- 'action' COND` for each set
// trap among conds (all when none are named), EXIT before ERR.
func (ru *run) trapListing(conds []string) string {
	if ru == nil {
		return ""
	}
	ru.mu.Lock()
	defer ru.mu.Unlock()
	var b strings.Builder
	for _, cond := range []string{"EXIT", "ERR"} {
		action, ok := ru.traps[cond]
		named := len(conds) == 0
		for _, c := range conds {
			c = strings.TrimPrefix(strings.ToUpper(c), "SIG")
			named = named || c == cond || c == "0" && cond == "EXIT"
		}
		if ok && named {
			fmt.Fprintf(&b, "trap -- %s %s\n", singleQuote(action), cond)
		}
	}
	return b.String()
}

// shoptCall answers shopt -q from what the interpreter's shopt prints.
func shoptCall(args []string) []string {
	if len(args) < 3 || args[1] != "-q" {
		return args
	}
	var conds []string
	for _, name := range args[2:] {
		conds = append(conds, "[[ \"$(shopt "+singleQuote(name)+" 2>/dev/null)\" == *$'\\ton'* ]]")
	}
	return []string{"eval", strings.Join(conds, " && ")}
}

// unsetCall refuses to unset a readonly variable, as bash does (the
// interpreter's unset succeeds silently and leaves it); the other names
// are unset.
func unsetCall(hc interp.HandlerContext, args []string) []string {
	var keep, refused []string
	for i, name := range args[1:] {
		if strings.HasPrefix(name, "-") {
			if name != "-v" || i > 0 {
				return args // -f, -n: functions and namerefs are not variables here
			}
			continue
		}
		if v := hc.Env.Get(name); v.IsSet() && v.ReadOnly {
			refused = append(refused, name)
		} else {
			keep = append(keep, singleQuote(name))
		}
	}
	if len(refused) == 0 {
		return args
	}
	var script strings.Builder
	if len(keep) > 0 {
		script.WriteString("unset " + strings.Join(keep, " ") + "; ")
	}
	for _, name := range refused {
		fmt.Fprintf(&script, "echo %s >&2; ", singleQuote("unset: "+name+": cannot unset: readonly variable"))
	}
	script.WriteString("(exit 1)")
	return []string{"eval", script.String()}
}

// definesFunc reports whether the session or the running source defines
// a function of that name, which then runs instead of any builtin. A
// function defined only by a sourced file or an eval is not seen.
func definesFunc(ctx context.Context, name string) bool {
	ru := runOf(ctx)
	if ru == nil {
		return false
	}
	if ru.funcNames[name] {
		return true
	}
	_, ok := ru.e.Func(name)
	return ok
}

// getoptsCall words getopts' complaints as bash does ("bash: illegal
// option -- z"): the interpreter's getopts runs silent (a leading ':'),
// and the bad option is reported here, leaving NAME '?' and OPTARG unset
// as bash's reporting mode does.
func getoptsCall(args []string) []string {
	if len(args) < 3 || strings.HasPrefix(args[1], ":") || !syntax.ValidName(args[2]) {
		return args
	}
	call := []string{"getopts", singleQuote(":" + args[1]), args[2]}
	for _, a := range args[3:] {
		call = append(call, singleQuote(a))
	}
	name := args[2]
	script := "if " + strings.Join(call, " ") + "; then case $" + name + " in " +
		`'?') echo "$0: illegal option -- $OPTARG" >&2; ` + name + `='?'; unset OPTARG;; ` +
		`':') echo "$0: option requires an argument -- $OPTARG" >&2; ` + name + `='?'; unset OPTARG;; ` +
		"esac; else (exit 1); fi"
	return []string{"eval", script}
}

// umaskCall prints the file mode mask (umask, umask -S), which the
// interpreter does not know. Setting it stays unsupported: the mask is
// the kernel's, shared by every session.
func umaskCall(args []string) []string {
	if len(args) > 2 || len(args) == 2 && args[1] != "-S" {
		return args
	}
	mask, ok := processUmask()
	if !ok {
		return args
	}
	if len(args) == 1 {
		return []string{printfBuiltin, "%04o\n", strconv.Itoa(int(mask))}
	}
	var parts []string
	for i, who := range []string{"u", "g", "o"} {
		bits := ^mask >> (6 - 3*i) & 7
		perm := ""
		for j, c := range "rwx" {
			if bits&(4>>j) != 0 {
				perm += string(c)
			}
		}
		parts = append(parts, who+"="+perm)
	}
	return []string{printfBuiltin, "%s\n", strings.Join(parts, ",")}
}

// processUmask reads the mask from /proc without changing it (umask(2)
// can only be read by setting it, racing every file the kernel creates).
func processUmask() (uint32, bool) {
	data, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0, false
	}
	for line := range strings.SplitSeq(string(data), "\n") {
		if v, ok := strings.CutPrefix(line, "Umask:"); ok {
			n, err := strconv.ParseUint(strings.TrimSpace(v), 8, 32)
			return uint32(n), err == nil
		}
	}
	return 0, false
}

// failBuiltin is the name of a call that only reports an error the way
// bash would have: args are the message and the status.
const failBuiltin = "\x00fail"

func builtinFail(c *call) error {
	fmt.Fprintln(c.hc.Stderr, c.args[1])
	n, _ := strconv.Atoi(c.args[2])
	return interp.ExitStatus(n)
}

func fail(status int, format string, args ...any) []string {
	return []string{failBuiltin, fmt.Sprintf(format, args...), strconv.Itoa(status)}
}

// cdCall words cd's failures as bash does ("cd: x: No such file or
// directory"); the interpreter's own cd does the rest.
func cdCall(hc interp.HandlerContext, args []string) []string {
	if len(args) > 2 {
		return fail(1, "cd: too many arguments")
	}
	if len(args) < 2 || args[1] == "" || args[1] == "-" || strings.HasPrefix(args[1], "-") {
		return args
	}
	fi, err := os.Stat(absIn(hc.Dir, args[1]))
	switch {
	case err != nil:
		return fail(1, "cd: %s: %s", args[1], strerror(err))
	case !fi.IsDir():
		return fail(1, "cd: %s: Not a directory", args[1])
	}
	return args
}

// shiftCall makes shift past the last parameter fail without shifting,
// as in bash; the interpreter's shift empties the list and succeeds.
func shiftCall(args []string) []string {
	n := "1"
	switch len(args) {
	case 1:
	case 2:
		if _, err := strconv.ParseUint(args[1], 10, 31); err != nil {
			return args
		}
		n = args[1]
	default:
		return args
	}
	return []string{"eval", "if (( $# < " + n + " )); then (exit 1); else builtin shift " + n + "; fi"}
}

// stdStreams serves /dev/stdin, /dev/stdout, /dev/stderr and /dev/fd/0-2
// from the command's own streams. Opened as files they would be the
// kernel's, not the script's.
func stdStreams(h interp.OpenHandlerFunc) interp.OpenHandlerFunc {
	return func(ctx context.Context, path string, flag int, perm os.FileMode) (io.ReadWriteCloser, error) {
		hc := interp.HandlerCtx(ctx)
		switch path {
		case "/dev/stdin", "/dev/fd/0":
			if hc.Stdin != nil {
				return stream{r: hc.Stdin}, nil
			}
		case "/dev/stdout", "/dev/fd/1":
			return stream{w: hc.Stdout}, nil
		case "/dev/stderr", "/dev/fd/2":
			return stream{w: hc.Stderr}, nil
		}
		return h(ctx, path, flag, perm)
	}
}

// stream is one of a command's standard streams opened by name; closing
// it leaves the stream open.
type stream struct {
	r io.Reader
	w io.Writer
}

func (s stream) Read(p []byte) (int, error) {
	if s.r == nil {
		return 0, os.ErrInvalid
	}
	return s.r.Read(p)
}

func (s stream) Write(p []byte) (int, error) {
	if s.w == nil {
		return 0, os.ErrInvalid
	}
	return s.w.Write(p)
}

func (stream) Close() error { return nil }

// utf8Locale reports whether the session's character type is UTF-8.
func utf8Locale(env expand.Environ) bool {
	for _, name := range []string{"LC_ALL", "LC_CTYPE", "LANG"} {
		if v := env.Get(name); v.IsSet() && v.String() != "" {
			s := strings.ToLower(v.String())
			return strings.Contains(s, "utf-8") || strings.Contains(s, "utf8")
		}
	}
	return false
}

// singleQuote quotes s for the shell with single quotes.
func singleQuote(s string) string {
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}
