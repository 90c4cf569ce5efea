package shell

import (
	"strconv"
	"strings"

	"mvdan.cc/sh/v3/syntax"
)

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
