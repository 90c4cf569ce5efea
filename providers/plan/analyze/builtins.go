package analyze

import (
	"path"
	"strings"

	"github.com/shoal-sh/shoal/core/policy"
)

func cdCmd(w *walker, s *scope, c *cmd) {
	p := w.parse(c.args, optSpec{})
	// cd sets OLDPWD to where it leaves.
	old := varVal{val: s.cwd, known: s.cwdKnown}
	defer func() {
		if !s.namerefs {
			s.vars["OLDPWD"] = old
		}
	}()
	if len(p.ops) > 0 && !p.ops[0].dyn {
		if d := p.ops[0].val; !path.IsAbs(d) && !strings.HasPrefix(d, ".") && d != "-" && !strings.HasPrefix(d, "~") {
			cdpath, set := s.vars["CDPATH"]
			if !set && w.env.Lookup != nil {
				v, ok := w.env.Lookup("CDPATH")
				cdpath, set = varVal{val: v, known: true}, ok
			}
			if set && (!cdpath.known || cdpath.val != "") || w.cdable {
				w.unsure("cd " + d + " searches CDPATH (or cdable_vars): where it goes is known only at run time")
				s.cwdKnown = false
				return
			}
		}
	}
	switch {
	case p.dyn:
		s.cwdKnown = false
	case len(p.ops) == 0:
		if w.env.Home == "" {
			s.cwdKnown = false
		} else {
			s.cwd, s.cwdKnown = path.Clean(w.env.Home), true
		}
	case p.ops[0].val == "-" || strings.HasPrefix(p.ops[0].val, "+") || p.ops[0].val == "":
		s.cwdKnown = false
	default:
		if d, ok := w.abs(s, p.ops[0]); ok {
			s.cwd, s.cwdKnown = d, true
		} else {
			s.cwdKnown = false
		}
	}
}

func popdCmd(w *walker, s *scope, c *cmd) {
	s.vars["OLDPWD"] = varVal{val: s.cwd, known: s.cwdKnown}
	s.cwdKnown = false
}

func evalCmd(w *walker, s *scope, c *cmd) {
	vals, ok := argVals(c.args)
	if !ok {
		w.dynamicSpawn("eval", joinText(c.args), "evaluates text known only at run time")
		return
	}
	w.source(s, strings.Join(vals, " "), "eval", "eval", true, nil)
}

func joinText(args []arg) string {
	parts := make([]string, len(args))
	for i, a := range args {
		if a.dyn {
			parts[i] = a.text
		} else {
			parts[i] = a.val
		}
	}
	return strings.Join(parts, " ")
}

func sourceCmd(w *walker, s *scope, c *cmd) {
	if len(c.args) == 0 {
		return
	}
	f := c.args[0]
	p, ok := w.abs(s, f)
	if !ok {
		w.fs(s, f, fsReq{kind: policy.FSRead, head: c.name, executes: true})
		w.dynamicSpawn(c.name, f.text, "runs a file known only at run time")
		return
	}
	w.fs(s, f, fsReq{kind: policy.FSRead, head: c.name, executes: true})
	data, ok := readScript(p)
	if !ok {
		w.dynamicSpawn(c.name, p, "runs a file that cannot be read now; its commands are not known")
		return
	}
	// source runs in the current shell: its cd and variables persist.
	old, oldK := s.params, s.paramsKnown
	if len(c.args) > 1 {
		s.params, s.paramsKnown = argVals(c.args[1:])
	}
	w.source(s, data, c.name, p, true, nil)
	s.params, s.paramsKnown = old, oldK
}

func execCmd(w *walker, s *scope, c *cmd) {
	p := w.parse(c.args, optSpec{shortVal: "a", stopAtOperand: true})
	w.run(s, p.rest, false)
}

func commandCmd(w *walker, s *scope, c *cmd) {
	p := w.parse(c.args, optSpec{stopAtOperand: true})
	if p.has("v", "V") {
		return // lookup only
	}
	if len(p.rest) > 0 && !p.rest[0].dyn {
		// `command x` skips functions but not builtins.
		if b, ok := builtins[p.rest[0].val]; ok {
			b(w, s, &cmd{name: p.rest[0].val, head: p.rest[0].val, args: p.rest[1:]})
			return
		}
	}
	w.run(s, p.rest, false)
}

func builtinCmd(w *walker, s *scope, c *cmd) {
	if len(c.args) == 0 || c.args[0].dyn {
		if len(c.args) > 0 {
			w.dynamicSpawn("builtin", c.args[0].text, "the builtin is known only at run time")
		}
		return
	}
	if b, ok := builtins[c.args[0].val]; ok {
		b(w, s, &cmd{name: c.args[0].val, head: c.args[0].val, args: c.args[1:]})
	}
}

// trapCmd analyzes the handler text: it runs later, in this shell.
func trapCmd(w *walker, s *scope, c *cmd) {
	p := w.parse(c.args, optSpec{})
	if p.has("l", "p") || len(p.ops) < 2 {
		return
	}
	h := p.ops[0]
	if h.dyn {
		w.dynamicSpawn("trap", h.text, "a signal handler known only at run time")
		return
	}
	if h.val == "" || h.val == "-" {
		return
	}
	w.source(s.clone(), h.val, "trap", "trap", true, nil)
}

func unsetCmd(w *walker, s *scope, c *cmd) {
	p := w.parse(c.args, optSpec{})
	for _, a := range p.ops {
		if a.dyn {
			w.add(Effect{Effect: policy.Effect{Kind: policy.EnvWrite, Target: a.text, Dynamic: true}, Reason: "variable name known only at run time"})
			continue
		}
		if p.has("f") {
			delete(w.funcs, a.val)
			continue
		}
		s.vars[a.val] = varVal{known: true}
		w.envWrite("unset", a.val)
	}
}

// readCmd: read, mapfile and getopts set variables to input values.
func readCmd(w *walker, s *scope, c *cmd) {
	spec := optSpec{shortVal: "adnNpstuCc", longVal: nil}
	if c.name == "getopts" {
		spec = optSpec{}
	}
	p := w.parse(c.args, spec)
	names := p.ops
	if c.name == "getopts" && len(names) > 1 {
		names = names[1:2]
	}
	if a, ok := p.val("a"); ok {
		names = append(names, a)
	}
	if len(names) == 0 && c.name == "read" {
		names = []arg{{val: "REPLY"}}
	}
	if len(names) == 0 && c.name != "read" && c.name != "getopts" {
		names = []arg{{val: "MAPFILE"}}
	}
	for _, a := range names {
		if a.dyn {
			continue
		}
		s.vars[a.val] = varVal{}
		w.envWrite("", a.val)
	}
}

func printfCmd(w *walker, s *scope, c *cmd) {
	p := w.parse(c.args, optSpec{shortVal: "v"})
	if v, ok := p.val("v"); ok && !v.dyn {
		s.vars[v.val] = varVal{}
		w.envWrite("", v.val)
	}
}

// declCmd handles declare/export/… reached as plain commands (through
// `command` or `builtin`); the parser usually gives a DeclClause instead.
func declCmd(w *walker, s *scope, c *cmd) {
	for _, a := range c.args {
		if a.dyn {
			w.add(Effect{Effect: policy.Effect{Kind: policy.EnvWrite, Target: a.text, Dynamic: true}, Reason: "variable name known only at run time"})
			continue
		}
		if strings.HasPrefix(a.val, "-") || strings.HasPrefix(a.val, "+") {
			continue
		}
		name, val, has := strings.Cut(a.val, "=")
		if has {
			s.vars[name] = varVal{val: val, known: true}
		}
		if c.name != "local" {
			w.envWrite(c.name, name)
		}
	}
}

func setCmd(w *walker, s *scope, c *cmd) {
	for i, a := range c.args {
		if a.val == "--" || (!a.dyn && !strings.HasPrefix(a.val, "-") && !strings.HasPrefix(a.val, "+")) {
			rest := c.args[i:]
			if a.val == "--" {
				rest = c.args[i+1:]
			}
			s.params, s.paramsKnown = argVals(rest)
			return
		}
		if a.dyn {
			s.paramsKnown = false
			return
		}
	}
}

func shiftCmd(w *walker, s *scope, c *cmd) {
	n := 1
	if len(c.args) > 0 {
		if c.args[0].dyn || !isNumber(c.args[0].val) {
			s.paramsKnown = false
			return
		}
		n = 0
		for _, ch := range c.args[0].val {
			n = n*10 + int(ch-'0')
			if n > 1<<20 {
				break
			}
		}
	}
	if s.paramsKnown {
		if n > len(s.params) {
			n = len(s.params)
		}
		s.params = s.params[n:]
	}
}

func emitCmd(w *walker, s *scope, c *cmd) {
	if len(c.args) == 0 {
		return
	}
	ch := c.args[0]
	e := Effect{Effect: policy.Effect{Kind: policy.EventPublish, Target: ch.val}, Reversible: false,
		Reason: "a published event cannot be recalled"}
	if ch.dyn {
		e.Dynamic, e.Target = true, ch.text
	}
	w.add(e)
}

// readsCmd: a tool that reads its operands.
func readsCmd(spec optSpec) handler {
	return func(w *walker, s *scope, c *cmd) {
		p := w.parse(c.args, spec)
		if _, isBuiltin := builtins[c.name]; !isBuiltin || strings.Contains(c.name, "/") {
			w.spawn(s, c, "", true, "reads; changes nothing")
		}
		w.readOperands(s, c, p.ops)
	}
}

func (w *walker) readOperands(s *scope, c *cmd, ops []arg) {
	for _, a := range ops {
		if !a.dyn && (a.val == "-" || a.val == "") {
			continue
		}
		w.fs(s, a, fsReq{kind: policy.FSRead, head: c.head})
	}
}

// patternFirstCmd: grep-like tools whose first operand is a pattern or
// program unless one of progOpts gave it.
func patternFirstCmd(spec optSpec, progOpts ...string) handler {
	return func(w *walker, s *scope, c *cmd) {
		p := w.parse(c.args, spec)
		if _, isBuiltin := builtins[c.name]; !isBuiltin || strings.Contains(c.name, "/") {
			w.spawn(s, c, "", true, "reads; changes nothing")
		}
		ops := p.ops
		if !p.has(progOpts...) && len(ops) > 0 {
			ops = ops[1:]
		}
		ops = append(ops, p.all("f", "file", "from-file")...)
		w.readOperands(s, c, ops)
	}
}

// wrapperCmd: a program that runs another one (nice, timeout, nohup…);
// skip is how many operands precede the command (timeout's duration).
func wrapperCmd(spec optSpec, skip int) handler {
	return func(w *walker, s *scope, c *cmd) {
		w.spawn(s, c, "", true, modeled)
		p := w.parse(c.args, spec)
		if o, ok := p.val("o", "output"); ok && c.head == "time" {
			w.fs(s, o, fsReq{kind: policy.FSWrite, mode: modeTruncate, head: c.head})
		}
		rest := p.rest
		if len(rest) > 0 && rest[0].dyn && skip > 0 {
			w.dynamicSpawn(c.head, joinText(rest), "the wrapped command is known only at run time")
			return
		}
		if len(rest) < skip {
			return
		}
		w.run(s, rest[skip:], false)
	}
}

// aliasCmd analyzes each alias body as code: it runs whenever the alias
// is used, in this execution or a later one.
func aliasCmd(w *walker, s *scope, c *cmd) {
	for _, a := range c.args {
		if a.dyn {
			w.dynamicSpawn("alias", a.text, "an alias whose body is known only at run time")
			continue
		}
		name, body, ok := strings.Cut(a.val, "=")
		if !ok || strings.HasPrefix(name, "-") {
			continue
		}
		w.source(s.clone(), body, "alias", "alias "+name, true, nil)
	}
}
