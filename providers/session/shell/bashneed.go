package shell

import (
	"slices"
	"strconv"
	"strings"

	"mvdan.cc/sh/v3/syntax"
)

// Some bash the interpreter cannot run as bash does, and no handler can
// reach: file descriptors above 2, PIPESTATUS and FUNCNAME, declare -i,
// anchored replacements, set -C. A source using such a construct runs
// under GNU bash instead (bash.go). Whether it does is read off the
// syntax tree in the walk the run makes anyway (run.scan): a type switch
// per node, no second pass.

// bashNeeds is what the scan learned about a source's need for bash.
type bashNeeds struct {
	why      string // the first construct only bash runs; "" when none
	shoalish bool   // the source calls a Shoal-only builtin: it must stay in the interpreter
	usesJq   bool   // jq is a builtin here; under bash it must be a program on PATH
	usesTrap bool   // the source calls trap: the state is saved by code after it, not by an EXIT trap
	// secrets: the source may print the environment or read a dotenv
	// file (set alone, env, printenv, a .env word), which the handlers
	// notice as it runs in the interpreter; under bash it is read off
	// the source instead.
	secrets bool
	// Names for checks that need the whole source: assignments to a
	// name declared readonly (fatal in bash), declare -p of a name
	// declared associative (bash's own listing).
	readonly, assigned, assoc, printed []string
	// Names assigned an arithmetic expression as literal text (x=3+4),
	// and names arithmetic reads: bash evaluates such a value, the
	// interpreter takes it for 0.
	exprValued, arithNames []string
}

// bashOnlyVars are parameters bash sets and the interpreter leaves
// empty.
var bashOnlyVars = map[string]bool{
	"PIPESTATUS": true, "FUNCNAME": true, "BASH_SOURCE": true, "BASH_LINENO": true,
	"BASH_SUBSHELL": true, "BASHPID": true, "SECONDS": true, "EPOCHSECONDS": true,
	"EPOCHREALTIME": true, "BASH_VERSINFO": true, "BASH_VERSION": true, "BASH_ARGV": true,
	"BASH_ARGC": true, "BASH_ARGV0": true, "BASH_COMMAND": true, "BASH_EXECUTION_STRING": true,
}

// bashOnlyBuiltins are builtins the interpreter refuses as unsupported.
var bashOnlyBuiltins = map[string]bool{
	"kill": true, "jobs": true, "disown": true, "fg": true, "bg": true, "suspend": true,
	"caller": true, "compgen": true, "complete": true, "compopt": true, "ulimit": true,
	"enable": true, "fc": true, "history": true, "logout": true,
}

// shoalOnly are Shoal's builtins that no program stands in for.
var shoalOnly = map[string]bool{"emit": true, "recv": true, "out": true, "open": true, "from": true}

// The options the interpreter implements: set -o names (and their
// letters) and shopt names.
var (
	interpSetOpts = map[string]bool{"allexport": true, "errexit": true, "noexec": true, "noglob": true,
		"nounset": true, "xtrace": true, "pipefail": true}
	interpShopts = map[string]bool{"dotglob": true, "expand_aliases": true, "extglob": true,
		"globstar": true, "nocaseglob": true, "nullglob": true}
)

const interpSetFlags = "aefnux"

// see is called by the scan for every node.
func (b *bashNeeds) see(n syntax.Node) {
	switch n := n.(type) {
	case *syntax.Redirect:
		b.because(redirReason(n))
		if n.Word != nil {
			b.dotEnv(n.Word)
		}
	case *syntax.ParamExp:
		b.because(paramReason(n))
	case *syntax.DeclClause:
		b.because(b.decl(n))
	case *syntax.CallExpr:
		for _, as := range n.Assigns {
			if as.Name != nil && len(b.assigned) < 64 {
				b.assigned = append(b.assigned, as.Name.Value)
				b.exprValue(as)
			}
		}
		b.because(b.call(n))
	case *syntax.BinaryArithm:
		switch n.Op {
		case syntax.Quo, syntax.Rem, syntax.QuoAssgn, syntax.RemAssgn:
			if w, ok := n.Y.(*syntax.Word); ok && w.Lit() == "0" {
				b.because("division by a literal 0")
			}
		}
	case *syntax.ArithmExp:
		b.arith(n.X)
	case *syntax.ArithmCmd:
		b.arith(n.X)
	case *syntax.ForClause:
		if n.Select {
			b.because("select")
		}
	case *syntax.TimeClause:
		b.because("time") // the interpreter reports on stdout
	case *syntax.ExtGlob:
		if n.Op == syntax.GlobExcept {
			b.because("the pattern !(…)")
		}
	case *syntax.Subshell:
		if b.why == "" && trapIn(n.Stmts) {
			b.because("trap in a subshell")
		}
	case *syntax.CmdSubst:
		if b.why == "" && trapIn(n.Stmts) {
			b.because("trap in a command substitution")
		}
	}
}

func (b *bashNeeds) because(why string) {
	if b.why == "" {
		b.why = why
	}
}

// finish makes the checks that need the whole source.
func (b *bashNeeds) finish() {
	for _, name := range b.assigned {
		if slices.Contains(b.readonly, name) {
			b.because("assignment to readonly " + name)
		}
	}
	for _, name := range b.arithNames {
		if slices.Contains(b.exprValued, name) {
			b.because("arithmetic on " + name + ", which holds an expression")
		}
	}
	for _, name := range b.printed {
		if slices.Contains(b.assoc, name) {
			b.because("declare -p of associative " + name)
		}
	}
}

// exprValue notes an assignment of literal text that is an arithmetic
// expression rather than a number or a name.
func (b *bashNeeds) exprValue(as *syntax.Assign) {
	if as.Value == nil || len(b.exprValued) >= 16 {
		return
	}
	lit, ok := plainText(as.Value)
	if !ok {
		return
	}
	if _, err := strconv.ParseInt(lit, 10, 64); err == nil {
		return // a number, signed or not
	}
	if lit != "" && strings.ContainsAny(lit, "+-*/%<>&|^!~?:()") && strings.ContainsAny(lit, "0123456789") {
		b.exprValued = append(b.exprValued, as.Name.Value)
	}
}

// plainText is a word's text when it holds no expansion: literal parts,
// single- or double-quoted.
func plainText(w *syntax.Word) (string, bool) {
	if w == nil {
		return "", false
	}
	var sb strings.Builder
	for _, part := range w.Parts {
		switch p := part.(type) {
		case *syntax.Lit:
			sb.WriteString(p.Value)
		case *syntax.SglQuoted:
			if p.Dollar {
				return "", false
			}
			sb.WriteString(p.Value)
		case *syntax.DblQuoted:
			for _, q := range p.Parts {
				lit, ok := q.(*syntax.Lit)
				if !ok {
					return "", false
				}
				sb.WriteString(lit.Value)
			}
		default:
			return "", false
		}
	}
	return sb.String(), true
}

// arith notes the names an arithmetic expression reads.
func (b *bashNeeds) arith(x syntax.ArithmExpr) {
	if x == nil {
		return
	}
	syntax.Walk(x, func(n syntax.Node) bool {
		if w, ok := n.(*syntax.Word); ok {
			if name := w.Lit(); syntax.ValidName(name) && len(b.arithNames) < 32 {
				b.arithNames = append(b.arithNames, name)
			}
			return false
		}
		return true
	})
}

func redirReason(r *syntax.Redirect) string {
	if r.N != nil {
		switch r.N.Value {
		case "0", "1", "2":
		default:
			return "file descriptor " + r.N.Value
		}
	}
	switch r.Op {
	case syntax.RdrClob:
		return "the redirection >|"
	case syntax.RdrInOut:
		return "the redirection <>"
	case syntax.DplOut:
		if lit := r.Word.Lit(); lit != "1" && lit != "2" && lit != "-" {
			return "the redirection >&" + lit
		}
	case syntax.DplIn:
		if lit := r.Word.Lit(); lit != "-" {
			return "the redirection <&" + lit
		}
	}
	return ""
}

func paramReason(p *syntax.ParamExp) string {
	if p.Param != nil && bashOnlyVars[p.Param.Value] {
		return "$" + p.Param.Value
	}
	if p.Repl != nil && !p.Repl.All && p.Repl.Orig != nil && len(p.Repl.Orig.Parts) > 0 {
		if lit, ok := p.Repl.Orig.Parts[0].(*syntax.Lit); ok && (strings.HasPrefix(lit.Value, "#") || strings.HasPrefix(lit.Value, "%")) {
			return "the anchored replacement ${x/" + lit.Value[:1] + "…}"
		}
	}
	if p.Exp != nil && p.Exp.Op == syntax.OtherParamOps && p.Exp.Word != nil {
		switch op := p.Exp.Word.Lit(); op {
		case "Q", "A", "K", "k":
			return "${x@" + op + "}"
		}
	}
	return ""
}

// decl looks at a declaration: attributes the interpreter lacks, and the
// names it makes readonly or associative or prints.
func (b *bashNeeds) decl(d *syntax.DeclClause) string {
	variant := d.Variant.Value
	why := ""
	readonly, assoc, print, listing := variant == "readonly", false, false, false
	names := 0
	for _, as := range d.Args {
		if as.Naked && as.Name == nil && as.Value != nil {
			lit := as.Value.Lit()
			if lit == "-" && variant == "local" {
				why = "local -"
			}
			if len(lit) < 2 || (lit[0] != '-' && lit[0] != '+') || lit == "--" {
				continue
			}
			flags := lit[1:]
			switch {
			case strings.ContainsAny(flags, "iltuI"):
				why = variant + " " + lit
			case strings.Contains(flags, "f") && (variant == "export" || strings.Contains(flags, "x")):
				why = "export -f"
			}
			readonly = readonly || lit[0] == '-' && strings.Contains(flags, "r")
			assoc = assoc || strings.Contains(flags, "A")
			print = print || strings.Contains(flags, "p")
			listing = listing || strings.ContainsAny(flags, "pF")
			continue
		}
		names++
		name := ""
		if as.Name != nil {
			name = as.Name.Value
		} else if as.Naked && as.Value != nil {
			name = as.Value.Lit()
		}
		if name == "" || len(b.readonly)+len(b.assoc)+len(b.printed) > 64 {
			continue
		}
		if readonly {
			b.readonly = append(b.readonly, name)
		}
		if assoc {
			b.assoc = append(b.assoc, name)
		}
		if print {
			b.printed = append(b.printed, name)
		}
	}
	if why == "" && names == 0 && listing {
		why = variant + " listing" // bash lists its own way (and its own variables)
	}
	return why
}

// call looks at a simple command by its literal name.
func (b *bashNeeds) call(c *syntax.CallExpr) string {
	if len(c.Args) == 0 {
		return ""
	}
	name := c.Args[0].Lit()
	for _, w := range c.Args[1:] {
		b.dotEnv(w)
	}
	switch {
	case name == "env" || name == "printenv" || name == "set" && len(c.Args) == 1:
		b.secrets = true
	case shoalOnly[name]:
		b.shoalish = true
	case name == "jq":
		b.usesJq = true
	case name == "trap":
		b.usesTrap = true
		for _, w := range c.Args[1:] {
			if sig := strings.ToUpper(w.Lit()); sig == "DEBUG" || sig == "RETURN" {
				return "trap on " + sig
			}
		}
		if len(c.Args) > 1 {
			if t, ok := plainText(c.Args[1]); ok && strings.Contains(t, "LINENO") {
				return "$LINENO in a trap" // the line of the command that fired it
			}
			b.code(c.Args[1:2])
		}
	case name == "eval":
		b.code(c.Args[1:])
	case name == "umask" && len(c.Args) > 1 && !strings.HasPrefix(c.Args[1].Lit(), "-"):
		return "umask MODE" // bash sets its own; the interpreter's is the kernel's
	case name == "wait" || name == "read":
		// wait -n/-p/-f; read -t (timeout) and -u (another fd).
		flags := map[string]string{"wait": "npf", "read": "tu"}[name]
		for _, w := range c.Args[1:] {
			lit := w.Lit()
			if lit == "--" || !strings.HasPrefix(lit, "-") {
				break
			}
			if strings.ContainsAny(lit[1:], flags) {
				return name + " " + lit
			}
		}
	case name == "printf":
		args := c.Args[1:]
		if len(args) > 1 && args[0].Lit() == "-v" {
			args = args[2:]
		}
		if len(args) > 0 && args[0].Lit() == "--" {
			args = args[1:]
		}
		if len(args) > 0 {
			if t, ok := plainText(args[0]); ok && strings.Contains(t, "%(") {
				return "printf %(…)T"
			}
		}
	case name == "dirs":
		return "dirs" // bash shows the home directory as ~
	case bashOnlyBuiltins[name]:
		return "the builtin " + name
	case name == "set":
		return setReason(c.Args[1:])
	case name == "shopt":
		return shoptReason(c.Args[1:])
	}
	return ""
}

// setReason names a set option the interpreter lacks, or set -o's
// listing (bash pads it).
func setReason(args []*syntax.Word) string {
	for i := 0; i < len(args); i++ {
		a := args[i].Lit()
		if len(a) < 2 || (a[0] != '-' && a[0] != '+') || a == "--" {
			return ""
		}
		for _, c := range a[1:] {
			if c == 'o' {
				if i+1 >= len(args) {
					return "set " + a[:1] + "o"
				}
				i++
				if opt := args[i].Lit(); !interpSetOpts[opt] {
					return "set -o " + opt
				}
				continue
			}
			if !strings.ContainsRune(interpSetFlags, c) {
				return "set " + a[:1] + string(c)
			}
		}
	}
	return ""
}

// shoptReason names a shopt option the interpreter lacks, or a listing
// (bash pads it).
func shoptReason(args []*syntax.Word) string {
	mode := ""
	for _, w := range args {
		switch a := w.Lit(); {
		case a == "-s" || a == "-u" || a == "-q":
			mode = a
		case strings.HasPrefix(a, "-"):
			return "shopt " + a
		case mode == "":
			return "shopt listing"
		case mode != "-q" && !interpShopts[a]:
			return "shopt " + mode + " " + a
		}
	}
	if mode == "" || mode == "-s" && len(args) == 1 || mode == "-u" && len(args) == 1 {
		return "shopt listing"
	}
	return ""
}

// code looks into words that are code run later (a trap's action, eval's
// arguments) when they are plain text.
func (b *bashNeeds) code(words []*syntax.Word) {
	for _, w := range words {
		t, ok := plainText(w)
		if !ok || b.why != "" || !strings.ContainsAny(t, "$<>&|") {
			continue
		}
		p := parsers.Get().(*syntax.Parser)
		f, err := p.Parse(strings.NewReader(t), "")
		parsers.Put(p)
		if err == nil {
			syntax.Walk(f, func(n syntax.Node) bool {
				b.see(n)
				return b.why == ""
			})
		}
	}
}

func (b *bashNeeds) dotEnv(w *syntax.Word) {
	if t, ok := plainText(w); ok && isDotEnv(t) {
		b.secrets = true
	}
}

// trapIn reports whether stmts call trap.
func trapIn(stmts []*syntax.Stmt) bool {
	found := false
	for _, st := range stmts {
		syntax.Walk(st, func(n syntax.Node) bool {
			if c, ok := n.(*syntax.CallExpr); ok && len(c.Args) > 0 && c.Args[0].Lit() == "trap" {
				found = true
			}
			return !found
		})
	}
	return found
}
