package shell

import (
	"context"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"time"

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
			if len(args) == 1 {
				// A bare return returns the status of the last command;
				// the interpreter returns 0. eval expands $? first.
				return []string{"eval", "return $?"}, nil
			}
		case "shift":
			return shiftCall(args), nil
		case "read":
			return readCall(ctx, hc, args), nil
		case "test", "[":
			return append([]string{testBuiltin}, args...), nil
		case "trap":
			return trapCall(args), nil
		case "shopt":
			return shoptCall(args), nil
		case "unset":
			return unsetCall(hc, args), nil
		case "getopts":
			return getoptsCall(args), nil
		}
		return args, nil
	}
}

// trapCall keeps the conditions the interpreter traps (EXIT, ERR) and
// drops signal names, which it refuses with a message, leaving the whole
// trap unset. A run receives no signals but its cancellation, so a signal
// trap would never fire anyway; `trap cleanup EXIT INT TERM` sets the
// EXIT trap as in bash.
func trapCall(args []string) []string {
	if len(args) < 3 || strings.HasPrefix(args[1], "-") && args[1] != "-" {
		return args
	}
	out := args[:2:2]
	for _, sig := range args[2:] {
		switch strings.TrimPrefix(strings.ToUpper(sig), "SIG") {
		case "EXIT", "0", "ERR":
			out = append(out, sig)
		}
	}
	if len(out) == 2 {
		return []string{"true"}
	}
	return out
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

// declareFuncs rewrites `declare -F NAME…` with literal names, which the
// interpreter's declare refuses, into the check bash makes: each name that
// is a function is printed, and the status is 1 when the last is not.
// Declarations never reach the call handler, so this is done on the tree.
func declareFuncs(st *syntax.Stmt) {
	d, ok := st.Cmd.(*syntax.DeclClause)
	if !ok || d.Variant.Value != "declare" && d.Variant.Value != "typeset" || len(d.Args) < 2 {
		return
	}
	var names []string
	for i, as := range d.Args {
		lit := ""
		switch {
		case !as.Naked || as.Index != nil:
			return
		case as.Name != nil && as.Value == nil:
			lit = as.Name.Value
		case as.Name == nil && as.Value != nil:
			lit = as.Value.Lit()
		}
		switch {
		case lit == "", i == 0 && lit != "-F":
			return
		case i > 0:
			names = append(names, lit)
		}
	}
	var checks []string
	for _, name := range names {
		q := singleQuote(name)
		checks = append(checks, "if [[ \"$(type -t "+q+")\" == function ]]; then echo "+q+"; else false; fi")
	}
	pos := d.Pos()
	word := func(part syntax.WordPart) *syntax.Word { return &syntax.Word{Parts: []syntax.WordPart{part}} }
	st.Cmd = &syntax.CallExpr{Args: []*syntax.Word{
		word(&syntax.Lit{ValuePos: pos, ValueEnd: pos, Value: "eval"}),
		word(&syntax.SglQuoted{Left: pos, Right: pos, Value: strings.Join(checks, "; ")}),
	}}
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

// readCall fits read to bash where the interpreter's read falls short.
// -p PROMPT is dropped when standard input is not a terminal (bash shows
// the prompt only to a person typing). -d DELIM, -n N and -N N, which the
// interpreter refuses, are done here: the record is read from standard
// input, then handed to the interpreter's read -r through a here-string
// (or assigned directly when it holds a newline and goes to one name), so
// field splitting stays the interpreter's.
func readCall(ctx context.Context, hc interp.HandlerContext, args []string) []string {
	if f, ok := hc.Stdin.(*os.File); ok && f != nil {
		if fi, err := f.Stat(); err == nil && fi.Mode()&os.ModeCharDevice != 0 && f.Name() != os.DevNull {
			return args
		}
	}
	ro := parseReadArgs(args[1:])
	if !ro.ownRecord() {
		return append(append([]string{args[0]}, ro.opts...), ro.names...)
	}
	record, eof := readRecord(ctx, hc, ro)
	var script string
	if strings.Contains(record, "\n") && len(ro.names) <= 1 && ro.array == "" {
		name := "REPLY"
		if len(ro.names) == 1 {
			name = ro.names[0]
			record = trimIFS(record, hc)
		}
		script = name + "=" + singleQuote(record)
	} else {
		inner := []string{"read", "-r"}
		if ro.array != "" {
			inner = append(inner, "-a", singleQuote(ro.array))
		}
		for _, n := range ro.names {
			inner = append(inner, singleQuote(n))
		}
		script = strings.Join(inner, " ") + " <<< " + singleQuote(record)
	}
	if eof {
		script += "; (exit 1)"
	}
	return []string{"eval", script}
}

// readArgs is a read command line.
type readArgs struct {
	opts, names []string // options passed on as they are; variable names
	raw         bool
	delim       string
	delimSet    bool
	count       int // -n or -N; -1 when neither
	exact       bool
	array       string
	timeoutOrFD bool // -t or -u: left to the interpreter
}

func (ro *readArgs) ownRecord() bool { return (ro.delimSet || ro.count >= 0) && !ro.timeoutOrFD }

func parseReadArgs(args []string) *readArgs {
	ro := &readArgs{count: -1}
	for i := 0; i < len(args); i++ {
		a := args[i]
		if a == "--" || len(a) < 2 || a[0] != '-' {
			if a == "--" {
				i++
			}
			ro.names = append(ro.names, args[min(i, len(args)):]...)
			return ro
		}
		kept := []byte{'-'}
		for j := 1; j < len(a); j++ {
			c := a[j]
			if strings.IndexByte("adinNptu", c) < 0 {
				ro.raw = ro.raw || c == 'r'
				kept = append(kept, c)
				continue
			}
			// An option with a value: the rest of the word, or the next.
			if len(kept) > 1 {
				ro.opts = append(ro.opts, string(kept))
				kept = kept[:1]
			}
			val := a[j+1:]
			if val == "" && i+1 < len(args) {
				val = args[i+1]
				i++
			}
			switch c {
			case 'p':
			case 'd':
				ro.delim, ro.delimSet = val, true
			case 'n', 'N':
				n, err := strconv.Atoi(val)
				if err != nil || n < 0 {
					ro.timeoutOrFD = true // let the interpreter word the error
					ro.opts = append(ro.opts, "-"+string(c), val)
					break
				}
				ro.count, ro.exact = n, c == 'N'
			case 'a':
				ro.array = val
				ro.opts = append(ro.opts, "-a", val)
			default:
				ro.timeoutOrFD = ro.timeoutOrFD || c == 't' || c == 'u'
				ro.opts = append(ro.opts, "-"+string(c), val)
			}
			break
		}
		if len(kept) > 1 {
			ro.opts = append(ro.opts, string(kept))
		}
	}
	return ro
}

// readRecord reads up to the delimiter (newline unless -d; NUL for -d
// ”), or N characters with -n/-N, decoding backslashes unless -r. eof
// reports that input ended first, when read fails.
func readRecord(ctx context.Context, hc interp.HandlerContext, ro *readArgs) (string, bool) {
	if hc.Stdin == nil {
		return "", true
	}
	if f, ok := hc.Stdin.(*os.File); ok {
		stop := context.AfterFunc(ctx, func() { _ = f.SetReadDeadline(time.Now()) })
		defer func() {
			if !stop() {
				_ = f.SetReadDeadline(time.Time{})
			}
		}()
	}
	delim := byte('\n')
	if ro.delimSet {
		delim = 0
		if ro.delim != "" {
			delim = ro.delim[0]
		}
	}
	chars := utf8Locale(hc.Env)
	var rec []byte
	count, pending := 0, 0 // characters read; continuation bytes still due
	escaped := false
	b := make([]byte, 1)
	for ro.count < 0 || count < ro.count || pending > 0 {
		if n, _ := hc.Stdin.Read(b); n == 0 {
			return string(rec), true
		}
		c := b[0]
		if pending > 0 {
			pending--
			rec = append(rec, c)
			continue
		}
		if escaped {
			escaped = false
			if c != '\n' {
				rec = append(rec, c)
				count++
			}
			continue
		}
		if c == delim && !ro.exact {
			return string(rec), false
		}
		if c == '\\' && !ro.raw {
			escaped = true
			continue
		}
		rec = append(rec, c)
		count++
		if chars && c >= 0xC0 {
			pending = utf8Len(c) - 1
		}
	}
	return string(rec), false
}

func utf8Len(lead byte) int {
	switch {
	case lead >= 0xF0:
		return 4
	case lead >= 0xE0:
		return 3
	}
	return 2
}

// trimIFS removes leading and trailing IFS whitespace, as read does for
// the value of its last name.
func trimIFS(s string, hc interp.HandlerContext) string {
	ifs := " \t\n"
	if v := hc.Env.Get("IFS"); v.IsSet() {
		ifs = v.String()
	}
	var ws []byte
	for _, c := range []byte(ifs) {
		if c == ' ' || c == '\t' || c == '\n' {
			ws = append(ws, c)
		}
	}
	return strings.Trim(s, string(ws))
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

// printfBuiltin is the name printf calls are rewritten to: not one a
// script can type, so it reaches only [builtinPrintf].
const printfBuiltin = "\x00printf"

func printfCall(hc interp.HandlerContext, args []string) []string {
	rest := args[1:]
	if len(rest) > 0 && rest[0] == "--" {
		rest = rest[1:]
	}
	if len(rest) == 0 || rest[0] != "-v" {
		return append([]string{printfBuiltin}, rest...)
	}
	if len(rest) < 2 {
		return []string{printfBuiltin, "-v"}
	}
	name, rest := rest[1], rest[2:]
	if len(rest) > 0 && rest[0] == "--" {
		rest = rest[1:]
	}
	r := bashPrintf(rest, utf8Locale(hc.Env))
	// eval assigns in the caller's scope, as printf -v does.
	var script strings.Builder
	fmt.Fprintf(&script, "%s=%s", name, singleQuote(string(r.out)))
	for _, e := range r.errs {
		fmt.Fprintf(&script, "; echo %s >&2", singleQuote(e))
	}
	if r.status != 0 {
		fmt.Fprintf(&script, "; (exit %d)", r.status)
	}
	return []string{"eval", script.String()}
}

// builtinPrintf is bash's printf; see [bashPrintf].
func builtinPrintf(c *call) error {
	args := c.args[1:]
	if len(args) > 0 && args[0] == "-v" {
		fmt.Fprintln(c.hc.Stderr, "printf: -v: option requires an argument")
		return interp.ExitStatus(2)
	}
	r := bashPrintf(args, utf8Locale(c.hc.Env))
	_, _ = c.hc.Stdout.Write(r.out)
	for _, e := range r.errs {
		fmt.Fprintln(c.hc.Stderr, e)
	}
	if r.status != 0 {
		return interp.ExitStatus(r.status)
	}
	return nil
}

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

// bashTree corrects the parsed tree where the parser or interpreter
// reads bash otherwise: see splitFuncBody, declareFuncs and
// highPositional.
func bashTree(f *syntax.File) {
	assoc := assocNames(f)
	syntax.Walk(f, func(n syntax.Node) bool {
		switch n := n.(type) {
		case *syntax.Stmt:
			declareFuncs(n)
			splitFuncBody(n)
		case *syntax.ParamExp:
			highPositional(n)
		case *syntax.UnaryTest:
			varSetIndex(n)
		case *syntax.CallExpr:
			n.Assigns = appendAssigns(n.Assigns, assoc)
		case *syntax.Word:
			assocLength(n.Parts, assoc)
		case *syntax.DblQuoted:
			assocLength(n.Parts, assoc)
		}
		return true
	})
}

// assocNames are the names the source declares associative (declare -A,
// local -A, typeset -A).
func assocNames(f *syntax.File) map[string]bool {
	var names map[string]bool
	syntax.Walk(f, func(n syntax.Node) bool {
		d, ok := n.(*syntax.DeclClause)
		if !ok {
			return true
		}
		isAssoc := false
		for _, as := range d.Args {
			if as.Naked && as.Name == nil && as.Value != nil {
				if lit := as.Value.Lit(); strings.HasPrefix(lit, "-") && strings.Contains(lit, "A") {
					isAssoc = true
				}
				continue
			}
			if isAssoc && as.Name != nil {
				if names == nil {
					names = make(map[string]bool)
				}
				names[as.Name.Value] = true
			}
		}
		return true
	})
	return names
}

// assocLength replaces ${#m[@]} of an associative array m, which the
// interpreter counts wrong, with the number of its keys, counted by the
// interpreter's ${!m[@]}: $(set -- "${!m[@]}"; echo $#).
func assocLength(parts []syntax.WordPart, assoc map[string]bool) {
	for i, part := range parts {
		p, ok := part.(*syntax.ParamExp)
		if !ok || !p.Length || p.Param == nil || !assoc[p.Param.Value] || p.Index == nil {
			continue
		}
		if w, ok := p.Index.(*syntax.Word); !ok || (w.Lit() != "@" && w.Lit() != "*") {
			continue
		}
		f, err := syntax.NewParser().Parse(strings.NewReader(`set -- "${!`+p.Param.Value+`[@]}"; echo $#`), "")
		if err != nil {
			continue
		}
		parts[i] = &syntax.CmdSubst{Left: p.Dollar, Right: p.Rbrace, Stmts: f.Stmts}
	}
}

// appendAssigns spells out the += forms the interpreter gets wrong:
// NAME[i]+=v (left empty) becomes NAME[i]=${NAME[i]}v, and
// m+=([k]=v …) on an associative array (which assigns nothing) becomes
// m[k]=v ….
func appendAssigns(assigns []*syntax.Assign, assoc map[string]bool) []*syntax.Assign {
	out := assigns[:0:0]
	changed := false
	for _, as := range assigns {
		switch {
		case as.Append && as.Index != nil && as.Value != nil && as.Name != nil:
			old := &syntax.ParamExp{Dollar: as.Pos(), Rbrace: as.Pos(), Param: as.Name, Index: as.Index}
			parts := append([]syntax.WordPart{old}, as.Value.Parts...)
			out = append(out, &syntax.Assign{Name: as.Name, Index: as.Index, Value: &syntax.Word{Parts: parts}})
			changed = true
		case as.Append && as.Array != nil && as.Name != nil && assoc[as.Name.Value] && allIndexed(as.Array):
			for _, el := range as.Array.Elems {
				out = append(out, &syntax.Assign{Name: as.Name, Index: el.Index, Value: el.Value})
			}
			changed = true
		default:
			out = append(out, as)
		}
	}
	if !changed {
		return assigns
	}
	return out
}

func allIndexed(a *syntax.ArrayExpr) bool {
	for _, el := range a.Elems {
		if el.Index == nil || el.Value == nil {
			return false
		}
	}
	return true
}

// varSetIndex rewrites [[ -v NAME[KEY] ]], which the interpreter takes
// for false, as [[ -n ${NAME[KEY]+x} ]], the same test.
func varSetIndex(u *syntax.UnaryTest) {
	w, ok := u.X.(*syntax.Word)
	if u.Op != syntax.TsVarSet || !ok {
		return
	}
	lit := w.Lit()
	open := strings.IndexByte(lit, '[')
	if open < 1 || !strings.HasSuffix(lit, "]") || !syntax.ValidName(lit[:open]) {
		return
	}
	key := lit[open+1 : len(lit)-1]
	if key == "" || strings.ContainsAny(key, "[]\"' ") {
		return
	}
	pos := w.Pos()
	litWord := func(v string) *syntax.Word {
		return &syntax.Word{Parts: []syntax.WordPart{&syntax.Lit{ValuePos: pos, ValueEnd: pos, Value: v}}}
	}
	u.Op = syntax.TsNempStr
	u.X = &syntax.Word{Parts: []syntax.WordPart{&syntax.ParamExp{
		Dollar: pos, Rbrace: pos,
		Param: &syntax.Lit{ValuePos: pos, ValueEnd: pos, Value: lit[:open]},
		Index: litWord(key),
		Exp:   &syntax.Expansion{Op: syntax.AlternateUnset, Word: litWord("x")},
	}}}
}

// highPositional makes ${10}, ${11}, … expand: the interpreter knows only
// $1 to $9 and takes ${10} for an unset variable. A plain ${N} becomes
// ${@:N:1}, the same word when the parameter is set.
func highPositional(p *syntax.ParamExp) {
	if p.Param == nil || len(p.Param.Value) < 2 || p.Short || p.Excl || p.Length || p.Width ||
		p.Index != nil || p.Slice != nil || p.Repl != nil || p.Names != 0 || p.Exp != nil {
		return
	}
	if _, err := strconv.ParseUint(p.Param.Value, 10, 31); err != nil || p.Param.Value[0] == '0' {
		return
	}
	num := func(v string) *syntax.Word {
		return &syntax.Word{Parts: []syntax.WordPart{&syntax.Lit{ValuePos: p.Param.ValuePos, ValueEnd: p.Param.ValueEnd, Value: v}}}
	}
	p.Slice = &syntax.Slice{Offset: num(p.Param.Value), Length: num("1")}
	p.Param = &syntax.Lit{ValuePos: p.Param.ValuePos, ValueEnd: p.Param.ValueEnd, Value: "@"}
}

// splitFuncBody corrects how the parser reads a function definition
// followed by && or ||: `f() { a; } && b` is a definition and then b in
// bash, but the parser takes the whole list as the body of f, so nothing
// runs. The leftmost command of such a list (the real body, a compound
// command in bash) becomes the body again, and the definition takes its
// place in the list.
func splitFuncBody(st *syntax.Stmt) {
	fd, ok := st.Cmd.(*syntax.FuncDecl)
	if !ok || fd.Body == nil {
		return
	}
	list, ok := fd.Body.Cmd.(*syntax.BinaryCmd)
	if !ok {
		return
	}
	first := list
	for {
		x, ok := first.X.Cmd.(*syntax.BinaryCmd)
		if !ok {
			break
		}
		first = x
	}
	def := *fd
	def.Body = first.X
	first.X = &syntax.Stmt{Position: fd.Pos(), Cmd: &def}
	body := fd.Body
	st.Cmd = list
	st.Negated = st.Negated || body.Negated
	st.Background = st.Background || body.Background
	st.Coprocess = st.Coprocess || body.Coprocess
	st.Disown = st.Disown || body.Disown
	st.Redirs = append(body.Redirs, st.Redirs...)
}
