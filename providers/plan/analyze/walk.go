package analyze

import (
	"errors"
	"io"
	"maps"
	"path"
	"strconv"
	"strings"
	"time"

	"mvdan.cc/sh/v3/expand"
	"mvdan.cc/sh/v3/pattern"
	"mvdan.cc/sh/v3/syntax"

	"github.com/shoal-sh/shoal/core/policy"
)

// Limits that keep hostile or huge sources cheap to analyze. Past them the
// analyzer stops following and reports a dynamic effect: a source too
// complex to read is never waved through.
const (
	maxSteps    = 20000 // commands visited, all nesting included
	maxDepth    = 12    // nested sh -c / eval / source / function calls
	maxLoopVals = 16    // loop items analyzed one by one
	maxScript   = 256 << 10
	maxFields   = 1024 // words one source word may expand to
)

type walker struct {
	env   Env
	fx    []Effect
	heads []string

	funcs  map[string]*syntax.Stmt // defined by this source
	called map[string]bool
	frames []frame // functions being analyzed, innermost last

	depth        int
	steps        int
	exhausted    bool
	walkBudget   int
	walkDeadline time.Time
	dirs         map[string]string // realDir cache
	roots        map[string]string // repoRoot cache
	path         map[string]bool   // onPath cache
	parser       *syntax.Parser

	// notes say what the analysis could not know, for the plan's
	// uncertain list.
	notes []string
	// links are the places the source itself makes links at (ln, cp -s,
	// an extracted archive, a checkout): what is below them is only known
	// at run time.
	links []linkArea
	// cdable: `shopt -s cdable_vars` ran, so `cd NAME` may go to $NAME.
	cdable bool
	// hashed are command names `hash -p` pointed at another file.
	hashed map[string]bool
	// shadows caches shadowed by name and PATH.
	shadows map[string]string
	// light: the walker models one command line as it runs (see Line):
	// what ran is resolved already, and nothing is read from the disk
	// but what decides a target.
	light bool
}

type frame struct {
	name string
	cond int // conditional nesting at entry
	// locals are the variables the function declared local, with the
	// values they had before; they come back when it returns.
	locals map[string]savedVar
}

type savedVar struct {
	v   varVal
	had bool
}

// varVal is what the analyzer knows of a shell variable the source sets.
type varVal struct {
	val   string
	known bool
	// glob: a for-loop variable iterating over a pattern's matches; the
	// value is the pattern and stands for each name it matches.
	glob bool
}

// scope is the shell state the walk tracks: the working directory, the
// variables the source assigned, positional parameters, and how deep in
// conditionals the walk is.
type scope struct {
	cwd         string
	cwdKnown    bool
	vars        map[string]varVal
	params      []string
	paramsKnown bool
	cond        int
	// namerefs: a `declare -n` ran; any assignment may change another
	// variable, so no variable's value is known from then on.
	namerefs bool
	// pathSet: the source assigned PATH.
	pathSet bool
}

func newWalker(env Env) *walker {
	w := &walker{
		env:        env,
		funcs:      map[string]*syntax.Stmt{},
		called:     map[string]bool{},
		walkBudget: env.WalkCap,
	}
	if w.walkBudget <= 0 {
		w.walkBudget = DefaultWalkCap
	}
	return w
}

func (w *walker) topScope() *scope {
	cwd := path.Clean(w.env.Cwd)
	return &scope{cwd: cwd, cwdKnown: path.IsAbs(cwd), vars: map[string]varVal{}}
}

func (s *scope) clone() *scope {
	c := *s
	c.vars = maps.Clone(s.vars)
	return &c
}

// merge folds the states of alternative branches back into s: whatever
// differs between them becomes unknown.
func (s *scope) merge(branches ...*scope) {
	for _, b := range branches {
		if !b.cwdKnown || b.cwd != s.cwd {
			s.cwdKnown = false
		}
		s.namerefs = s.namerefs || b.namerefs
		s.pathSet = s.pathSet || b.pathSet
		for k, v := range b.vars {
			if old, ok := s.vars[k]; !ok || old != v {
				s.vars[k] = varVal{}
			}
		}
	}
}

// step counts one visited command; false once the budget is spent.
func (w *walker) step() bool {
	if w.exhausted {
		return false
	}
	w.steps++
	if w.steps > maxSteps {
		w.exhausted = true
		w.dynamicSpawn("", "(source)", "too complex to analyze fully; the rest is unknown")
		return false
	}
	return true
}

func (w *walker) add(e Effect) { w.fx = append(w.fx, e) }

// unsure records something the analysis could not know, in words for the
// plan's uncertain list.
func (w *walker) unsure(reason string) { w.notes = uniqueAppend(w.notes, reason) }

func (w *walker) dynamicSpawn(head, target, reason string) {
	w.add(Effect{
		Effect:     policy.Effect{Kind: policy.ProcSpawn, Head: head, Target: target, Dynamic: true},
		Reversible: false,
		Reason:     reason,
	})
}

func (w *walker) stmts(s *scope, list []*syntax.Stmt) {
	for _, st := range list {
		w.stmt(s, st)
	}
}

func (w *walker) stmt(s *scope, st *syntax.Stmt) {
	if st == nil || !w.step() {
		return
	}
	if st.Background || st.Coprocess {
		// A background job runs beside the shell: its cd and assignments
		// do not reach the statements after it.
		s = s.clone()
	}
	if st.Cmd == nil {
		// A statement of redirections alone (`> f`, `exec > f`-less)
		// truncates or opens its files.
		w.redirects(s, st.Redirs)
		return
	}
	w.redirects(s, st.Redirs)
	w.command(s, st.Cmd)
}

func (w *walker) command(s *scope, cmd syntax.Command) {
	switch x := cmd.(type) {
	case *syntax.CallExpr:
		w.call(s, x)
	case *syntax.Block:
		w.stmts(s, x.Stmts)
	case *syntax.Subshell:
		w.stmts(s.clone(), x.Stmts)
	case *syntax.IfClause:
		w.ifClause(s, x)
	case *syntax.WhileClause:
		links := len(w.links)
		w.stmts(s, x.Cond)
		body := s.clone()
		body.cond++
		w.stmts(body, x.Do)
		if len(w.links) > links {
			// A link made in one round is there in the next.
			w.stmts(s, x.Cond)
			w.stmts(body, x.Do)
		}
		body.cond--
		s.merge(body)
	case *syntax.ForClause:
		w.forClause(s, x)
	case *syntax.CaseClause:
		w.substs(s, x.Word)
		var branches []*scope
		for _, item := range x.Items {
			for _, p := range item.Patterns {
				w.substs(s, p)
			}
			b := s.clone()
			b.cond++
			w.stmts(b, item.Stmts)
			b.cond--
			branches = append(branches, b)
		}
		s.merge(branches...)
	case *syntax.BinaryCmd:
		switch x.Op {
		case syntax.Pipe, syntax.PipeAll:
			// Each side of a pipe runs in its own subshell.
			w.stmt(s.clone(), x.X)
			w.stmt(s.clone(), x.Y)
		default:
			w.stmt(s, x.X)
			s.cond++
			w.stmt(s, x.Y)
			s.cond--
		}
	case *syntax.FuncDecl:
		if x.Name != nil {
			w.funcs[x.Name.Value] = x.Body
		}
		for _, n := range x.Names {
			w.funcs[n.Value] = x.Body
		}
	case *syntax.DeclClause:
		w.decl(s, x)
	case *syntax.TimeClause:
		w.stmt(s, x.Stmt)
	case *syntax.CoprocClause:
		w.stmt(s.clone(), x.Stmt)
	case *syntax.TestDecl:
		w.stmt(s.clone(), x.Body)
	default:
		// Arithmetic, [[ ]] tests, let: no effects of their own, but any
		// command substitution inside them runs, and an arithmetic
		// assignment changes a variable.
		w.substs(s, cmd)
		w.arithAssigns(s, cmd)
	}
}

func (w *walker) ifClause(s *scope, x *syntax.IfClause) {
	var branches []*scope
	for c := x; c != nil; c = c.Else {
		w.stmts(s, c.Cond)
		b := s.clone()
		b.cond++
		w.stmts(b, c.Then)
		b.cond--
		branches = append(branches, b)
	}
	s.merge(branches...)
}

func (w *walker) forClause(s *scope, x *syntax.ForClause) {
	switch loop := x.Loop.(type) {
	case *syntax.WordIter:
		name := loop.Name.Value
		var vals []varVal
		known := true
		if loop.InPos.IsValid() {
			for _, it := range loop.Items {
				for _, a := range w.fields(s, it) {
					if a.dyn {
						known = false
					}
					vals = append(vals, varVal{val: a.val, known: true, glob: a.glob})
				}
			}
		} else {
			// `for x; do` iterates over the positional parameters.
			known = s.paramsKnown
			for _, p := range s.params {
				vals = append(vals, varVal{val: p, known: true})
			}
		}
		if known && len(vals) <= maxLoopVals {
			var branches []*scope
			for _, v := range vals {
				b := s.clone()
				b.cond++
				b.vars[name] = v
				w.stmts(b, x.Do)
				b.cond--
				branches = append(branches, b)
			}
			s.merge(branches...)
			s.vars[name] = varVal{}
			return
		}
		b := s.clone()
		b.cond++
		b.vars[name] = varVal{}
		links := len(w.links)
		w.stmts(b, x.Do)
		if len(w.links) > links {
			w.stmts(b, x.Do)
		}
		b.cond--
		s.merge(b)
		s.vars[name] = varVal{}
	case *syntax.CStyleLoop:
		w.substs(s, loop)
		w.arithAssigns(s, loop)
		b := s.clone()
		b.cond++
		links := len(w.links)
		w.stmts(b, x.Do)
		if len(w.links) > links {
			w.stmts(b, x.Do)
		}
		b.cond--
		s.merge(b)
	}
}

func (w *walker) decl(s *scope, x *syntax.DeclClause) {
	variant := x.Variant.Value
	// declare and typeset make function-local variables too, unless -g.
	local := variant == "local"
	global := false
	nameref := false
	for _, as := range x.Args {
		if as.Name == nil && as.Value != nil {
			if lit := as.Value.Lit(); strings.HasPrefix(lit, "-") {
				global = global || strings.Contains(lit, "g")
				nameref = nameref || strings.Contains(lit, "n")
			}
		}
	}
	if (variant == "declare" || variant == "typeset") && !global {
		local = len(w.frames) > 0
	}
	if nameref {
		w.nameref(s)
	}
	for _, as := range x.Args {
		if as.Name == nil {
			// `export "$X"`, or an option like -x.
			if as.Value != nil {
				for _, a := range w.fields(s, as.Value) {
					switch {
					case a.dyn:
						w.add(Effect{Effect: policy.Effect{Kind: policy.EnvWrite, Target: a.text, Dynamic: true}, Reason: "variable name known only at run time"})
					case strings.HasPrefix(a.val, "-") || strings.HasPrefix(a.val, "+"):
					default:
						name, val, hasVal := strings.Cut(a.val, "=")
						if local {
							w.makeLocal(s, name)
						}
						if hasVal {
							w.setVar(s, name, varVal{val: val, known: true})
						}
						if !local {
							w.envWrite(variant, name)
						}
					}
				}
			}
			continue
		}
		name := as.Name.Value
		if local {
			w.makeLocal(s, name)
		}
		if as.Naked && as.Value == nil && as.Array == nil {
			if local {
				// `local x` starts x unset in the function.
				s.vars[name] = varVal{known: true}
			} else {
				w.envWrite(variant, name)
			}
			continue
		}
		w.setVar(s, name, w.assignValue(s, as))
		if !local {
			w.envWrite(variant, name)
		}
	}
}

// setVar records an assignment the source makes. Under a nameref any
// assignment may land elsewhere, so nothing assigned is known; some
// variables change what later commands do, and the plan says so.
func (w *walker) setVar(s *scope, name string, v varVal) {
	if s.namerefs {
		v = varVal{}
	}
	s.vars[name] = v
	switch name {
	case "PATH":
		s.pathSet = true
	case "IFS":
		if !v.known || v.val != defaultIFS {
			w.unsure("IFS is assigned: how unquoted words split is known only at run time")
		}
	case "CDPATH":
		w.unsure("CDPATH is assigned: a relative cd may go to another directory")
	}
	if r, ok := codeVars[name]; ok {
		w.codeVar(name, r)
	}
}

// nameref notes a `declare -n`: from here on an assignment to one name
// may change another, so every variable is unknown.
func (w *walker) nameref(s *scope) {
	if !s.namerefs {
		s.namerefs = true
		for k := range s.vars {
			s.vars[k] = varVal{}
		}
	}
	w.unsure("declare -n makes a name refer to another variable: variable values are known only at run time")
}

// makeLocal saves a variable's value on the innermost function's frame,
// once, so that it comes back when the function returns.
func (w *walker) makeLocal(s *scope, name string) {
	if len(w.frames) == 0 {
		return
	}
	f := &w.frames[len(w.frames)-1]
	if f.locals == nil {
		f.locals = map[string]savedVar{}
	}
	if _, saved := f.locals[name]; saved {
		return
	}
	v, had := s.vars[name]
	f.locals[name] = savedVar{v: v, had: had}
}

// arithAssigns marks the variables an arithmetic expression assigns
// (x=1, x+=2, x++) as unknown: the analyzer does not evaluate them.
func (w *walker) arithAssigns(s *scope, node syntax.Node) {
	syntax.Walk(node, func(n syntax.Node) bool {
		var word *syntax.Word
		switch n := n.(type) {
		case *syntax.BinaryArithm:
			switch n.Op {
			case syntax.Assgn, syntax.AddAssgn, syntax.SubAssgn, syntax.MulAssgn, syntax.QuoAssgn, syntax.RemAssgn,
				syntax.AndAssgn, syntax.OrAssgn, syntax.XorAssgn, syntax.ShlAssgn, syntax.ShrAssgn:
				word, _ = n.X.(*syntax.Word)
			}
		case *syntax.UnaryArithm:
			if n.Op == syntax.Inc || n.Op == syntax.Dec {
				word, _ = n.X.(*syntax.Word)
			}
		}
		if word != nil {
			if name := word.Lit(); name != "" {
				s.vars[name] = varVal{}
			}
		}
		return true
	})
}

func (w *walker) envWrite(variant, name string) {
	reason := "sets a session variable; it can be set back"
	if variant == "export" {
		reason = "exports a variable to the session and its children; it can be set back"
	}
	w.add(Effect{Effect: policy.Effect{Kind: policy.EnvWrite, Target: name}, Reversible: true, Reason: reason})
}

func (w *walker) assignValue(s *scope, as *syntax.Assign) varVal {
	if as.Array != nil {
		for _, el := range as.Array.Elems {
			if el.Value != nil {
				w.substs(s, el.Value)
			}
		}
		return varVal{}
	}
	if as.Value == nil || as.Index != nil {
		return varVal{}
	}
	v, ok := w.literal(s, as.Value)
	if as.Append {
		old, had := s.vars[as.Name.Value]
		if !had || !old.known || !ok {
			return varVal{}
		}
		v = old.val + v
	}
	return varVal{val: v, known: ok}
}

// arg is one expanded command-line field.
type arg struct {
	val  string // the expanded text, when !dyn
	dyn  bool   // not known until run time (may even be several fields)
	glob bool   // holds unquoted pattern characters
	text string // as written in the source when dyn, else val
}

var errSubst = errors.New("command substitution")

// fields expands a word the way the shell would, without running
// anything: command and process substitutions are walked for their own
// effects, and a word depending on them or on unknown variables is
// dynamic.
func (w *walker) fields(s *scope, word *syntax.Word) []arg {
	w.substs(s, word)
	if w.ifsUnknown(s) && splitsOnIFS(word) {
		return []arg{{dyn: true, text: printWord(word)}}
	}
	if braceFields(word) > maxFields {
		// {1..100000000} would expand to more words than any plan can
		// show; treat it like anything else too big to know.
		return []arg{{dyn: true, text: printWord(word)}}
	}
	missed := false
	cfg := &expand.Config{
		Env:       &scopeEnv{w: w, s: s, missed: &missed},
		CmdSubst:  func(io.Writer, *syntax.CmdSubst) error { return errSubst },
		ProcSubst: func(*syntax.ProcSubst) (string, error) { return "/dev/fd/63", nil },
	}
	vals, err := expand.Fields(cfg, word)
	if err != nil || missed || ((!s.cwdKnown || s.namerefs) && usesPWD(word)) {
		// Only a dynamic word shows its source text; printing is costly.
		return []arg{{dyn: true, text: printWord(word)}}
	}
	glob := hasGlob(word) || usesGlobVar(s, word)
	out := make([]arg, len(vals))
	for i, v := range vals {
		out[i] = arg{val: v, glob: glob && pattern.HasMeta(v, 0), text: v}
	}
	return out
}

// literal expands a word to one string (assignment values, here-strings).
func (w *walker) literal(s *scope, word *syntax.Word) (string, bool) {
	w.substs(s, word)
	if braceFields(word) > maxFields {
		return "", false
	}
	missed := false
	cfg := &expand.Config{
		Env:       &scopeEnv{w: w, s: s, missed: &missed},
		CmdSubst:  func(io.Writer, *syntax.CmdSubst) error { return errSubst },
		ProcSubst: func(*syntax.ProcSubst) (string, error) { return "/dev/fd/63", nil },
	}
	v, err := expand.Literal(cfg, word)
	if err != nil || missed || ((!s.cwdKnown || s.namerefs) && usesPWD(word)) {
		return "", false
	}
	return v, true
}

// braceFields is how many words brace expansion makes of word, saturated
// just past maxFields.
func braceFields(word *syntax.Word) int {
	cp := *word // SplitBraces replaces the Parts slice
	if !syntax.SplitBraces(&cp) {
		return 1
	}
	return partsFields(cp.Parts)
}

func partsFields(parts []syntax.WordPart) int {
	n := 1
	for _, p := range parts {
		if b, ok := p.(*syntax.BraceExp); ok {
			n = satMul(n, braceExpFields(b))
		}
	}
	return n
}

func braceExpFields(b *syntax.BraceExp) int {
	if b.Sequence {
		if len(b.Elems) < 2 {
			return 1
		}
		from, err1 := strconv.Atoi(b.Elems[0].Lit())
		to, err2 := strconv.Atoi(b.Elems[1].Lit())
		if err1 != nil || err2 != nil {
			return 256 // a letter range: at most the byte range
		}
		step := 1
		if len(b.Elems) > 2 {
			if st, err := strconv.Atoi(b.Elems[2].Lit()); err == nil && st != 0 {
				step = max(st, -st)
			}
		}
		span := to - from
		if span < 0 {
			span = -span
		}
		if span < 0 { // overflow
			return maxFields + 1
		}
		return min(span/step+1, maxFields+1)
	}
	n := 0
	for _, e := range b.Elems {
		n += partsFields(e.Parts)
		if n > maxFields {
			return maxFields + 1
		}
	}
	return n
}

func satMul(a, b int) int {
	if a > maxFields || b > maxFields || a*b > maxFields {
		return maxFields + 1
	}
	return a * b
}

// usesGlobVar reports a reference to a loop variable standing for a
// pattern's matches.
func usesGlobVar(s *scope, word *syntax.Word) bool {
	found := false
	syntax.Walk(word, func(n syntax.Node) bool {
		if pe, ok := n.(*syntax.ParamExp); ok && pe.Param != nil && s.vars[pe.Param.Value].glob {
			found = true
		}
		return !found
	})
	return found
}

// usesPWD reports an explicit $PWD in a word.
func usesPWD(word *syntax.Word) bool {
	found := false
	syntax.Walk(word, func(n syntax.Node) bool {
		if pe, ok := n.(*syntax.ParamExp); ok && pe.Param != nil && pe.Param.Value == "PWD" {
			found = true
		}
		return !found
	})
	return found
}

// hasGlob reports unquoted pattern characters in a word.
func hasGlob(word *syntax.Word) bool {
	for _, p := range word.Parts {
		switch p := p.(type) {
		case *syntax.Lit:
			if pattern.HasMeta(p.Value, 0) {
				return true
			}
		case *syntax.ExtGlob:
			return true
		}
	}
	return false
}

func printWord(word *syntax.Word) string {
	var b strings.Builder
	if err := syntax.NewPrinter(syntax.SingleLine(true)).Print(&b, word); err != nil {
		return "?"
	}
	return b.String()
}

// substs walks the command and process substitutions inside a node: they
// run in a subshell, so their cd and assignments stay there.
func (w *walker) substs(s *scope, node syntax.Node) {
	if node == nil {
		return
	}
	syntax.Walk(node, func(n syntax.Node) bool {
		switch n := n.(type) {
		case *syntax.CmdSubst:
			w.nested(func() { w.stmts(s.clone(), n.Stmts) })
			return false
		case *syntax.ProcSubst:
			w.nested(func() { w.stmts(s.clone(), n.Stmts) })
			return false
		}
		return true
	})
}

// nested runs f one level deeper, or records a dynamic effect when the
// nesting is too deep to follow.
func (w *walker) nested(f func()) {
	if w.depth >= maxDepth {
		w.dynamicSpawn("", "(nested code)", "nested too deep to analyze")
		return
	}
	w.depth++
	f()
	w.depth--
}

// scopeEnv lets mvdan's expander read the tracked scope; a variable nobody
// knows flips missed, which makes the word dynamic.
type scopeEnv struct {
	w      *walker
	s      *scope
	missed *bool
}

func (e *scopeEnv) Get(name string) expand.Variable {
	str := func(v string) expand.Variable { return expand.Variable{Set: true, Kind: expand.String, Str: v} }
	switch name {
	case "IFS":
		// The default IFS; words an unknown IFS would split are dynamic
		// before they get here (see fields).
		return expand.Variable{}
	case "PWD":
		// The expander reads PWD for globbing on every word; only an
		// explicit $PWD makes a word depend on it (see usesPWD).
		if e.s.cwdKnown {
			return str(e.s.cwd)
		}
		return expand.Variable{}
	case "HOME":
		if _, assigned := e.s.vars["HOME"]; !assigned && !e.s.namerefs && e.w.env.Home != "" {
			return str(e.w.env.Home)
		}
	case "@", "*":
		if e.s.paramsKnown {
			return expand.Variable{Set: true, Kind: expand.Indexed, List: e.s.params}
		}
	case "#":
		if e.s.paramsKnown {
			return str(strconv.Itoa(len(e.s.params)))
		}
	}
	if n, err := strconv.Atoi(name); err == nil && n >= 1 {
		if e.s.paramsKnown {
			if n <= len(e.s.params) {
				return str(e.s.params[n-1])
			}
			return expand.Variable{}
		}
		*e.missed = true
		return expand.Variable{}
	}
	if e.s.namerefs {
		*e.missed = true
		return expand.Variable{}
	}
	if v, ok := e.s.vars[name]; ok {
		if v.known {
			return str(v.val)
		}
		*e.missed = true
		return expand.Variable{}
	}
	if e.w.env.Lookup != nil {
		if v, ok := e.w.env.Lookup(name); ok {
			return str(v)
		}
	}
	*e.missed = true
	return expand.Variable{}
}

func (e *scopeEnv) Each(func(name string, vr expand.Variable) bool) {}

// redirects records the files a statement's redirections open.
func (w *walker) redirects(s *scope, rs []*syntax.Redirect) {
	for _, r := range rs {
		if r.Hdoc != nil {
			w.substs(s, r.Hdoc)
		}
		if r.Word == nil {
			continue
		}
		switch r.Op {
		case syntax.Hdoc, syntax.DashHdoc:
			continue
		case syntax.WordHdoc:
			w.substs(s, r.Word)
			continue
		case syntax.DplIn, syntax.DplOut:
			// N>&M duplicates a descriptor; >&file (bash) writes a file.
			if lit := r.Word.Lit(); lit == "-" || isNumber(lit) {
				continue
			}
		}
		for _, a := range w.fields(s, r.Word) {
			switch r.Op {
			case syntax.RdrIn:
				w.fs(s, a, fsReq{kind: policy.FSRead, mode: modeRead})
			case syntax.AppOut, syntax.AppAll, syntax.AppClob, syntax.AppAllClob:
				w.fs(s, a, fsReq{kind: policy.FSWrite, mode: modeAppend})
			case syntax.RdrInOut:
				w.fs(s, a, fsReq{kind: policy.FSWrite, mode: modeModify})
			default:
				w.fs(s, a, fsReq{kind: policy.FSWrite, mode: modeTruncate, reason: "redirection"})
			}
		}
	}
}

func isNumber(s string) bool {
	if s == "" {
		return false
	}
	for _, c := range s {
		if c < '0' || c > '9' {
			return false
		}
	}
	return true
}

// source analyzes text as shell code. With share the code runs in the
// current shell (eval, source); otherwise in a child with params.
func (w *walker) source(s *scope, text, head, what string, share bool, params []arg) {
	w.nested(func() {
		if w.parser == nil {
			w.parser = syntax.NewParser(syntax.Variant(syntax.LangBash))
		}
		f, err := w.parser.Parse(strings.NewReader(text), "")
		if err != nil {
			w.dynamicSpawn(head, what, "code that does not parse cannot be analyzed")
			return
		}
		t := s
		if !share {
			t = s.clone()
			t.params, t.paramsKnown = argVals(params)
		}
		w.stmts(t, f.Stmts)
	})
}

// argVals returns the values of args, and whether all are known.
func argVals(args []arg) ([]string, bool) {
	vals := make([]string, 0, len(args))
	for _, a := range args {
		if a.dyn {
			return nil, false
		}
		vals = append(vals, a.val)
	}
	return vals, true
}

// callFunc analyzes a call of a shell function with args as its
// positional parameters. A function reached again while it is being
// analyzed is not followed twice; when that call is not guarded by any
// condition the recursion never ends, and the effect says so.
func (w *walker) callFunc(s *scope, name string, body *syntax.Stmt, args []arg) {
	w.called[name] = true
	for _, f := range w.frames {
		if f.name == name {
			if s.cond == f.cond {
				w.add(Effect{
					Effect:     policy.Effect{Kind: policy.ProcSpawn, Head: name, Target: name, Unbounded: true},
					Reversible: false,
					Reason:     "the function calls itself unconditionally: processes multiply until the machine gives out",
				})
			}
			return
		}
	}
	w.nested(func() {
		w.frames = append(w.frames, frame{name: name, cond: s.cond})
		oldP, oldK := s.params, s.paramsKnown
		s.params, s.paramsKnown = argVals(args)
		w.stmt(s, body)
		s.params, s.paramsKnown = oldP, oldK
		// Local variables end with the call: the caller sees its own
		// values again.
		for k, sv := range w.frames[len(w.frames)-1].locals {
			if sv.had {
				s.vars[k] = sv.v
			} else {
				delete(s.vars, k)
			}
		}
		w.frames = w.frames[:len(w.frames)-1]
	})
}

// uncalledFuncs analyzes functions the source defines but never calls:
// they stay defined in the session, and a later call would run them.
func (w *walker) uncalledFuncs(s *scope) {
	names := make([]string, 0, len(w.funcs))
	for n := range w.funcs {
		if !w.called[n] {
			names = append(names, n)
		}
	}
	// Sorted for stable output.
	for _, n := range sortedStrings(names) {
		c := s.clone()
		c.params, c.paramsKnown = nil, false
		w.callFunc(c, n, w.funcs[n], []arg{{dyn: true, text: "$@"}})
	}
}
