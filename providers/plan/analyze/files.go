package analyze

import (
	"os"
	"path"
	"slices"
	"strings"

	"github.com/shoal-sh/shoal/core/policy"
)

func rmCmd(w *walker, s *scope, c *cmd) {
	w.spawn(s, c, "", true, modeled)
	p := w.parse(c.args, optSpec{})
	rec := p.has("r", "R", "recursive")
	force := p.has("f", "force")
	if p.dyn {
		// A dynamic argument may itself be -r or -f.
		rec, force = true, true
	}
	for _, a := range p.ops {
		w.fs(s, a, fsReq{kind: policy.FSDelete, mode: modeDelete, head: c.head, recursive: rec, force: force})
	}
}

func rmdirCmd(w *walker, s *scope, c *cmd) {
	w.spawn(s, c, "", true, modeled)
	p := w.parse(c.args, optSpec{})
	for _, a := range p.ops {
		w.fs(s, a, fsReq{kind: policy.FSDelete, mode: modeDelete, head: c.head,
			override: true, reversible: true, reason: "removes only empty directories"})
	}
}

// destFor is where src lands when copied or moved to dest: inside dest
// when dest is a directory (or must be one), else dest itself.
func (w *walker) destFor(s *scope, dest, src arg, intoDir bool) arg {
	if dest.dyn {
		return dest
	}
	d, ok := w.abs(s, dest)
	if !ok {
		return arg{dyn: true, text: dest.text}
	}
	if !intoDir {
		if info, err := os.Stat(d); err != nil || !info.IsDir() {
			return arg{val: d, text: dest.text}
		}
	}
	if src.dyn || src.glob {
		return arg{dyn: true, text: dest.text + "/" + src.text}
	}
	return arg{val: path.Join(d, path.Base(src.val)), text: dest.text}
}

// transfer splits the operands of mv/cp/ln/install into sources and a
// destination, honouring -t DIR.
func transfer(p *parsed) (srcs []arg, dest arg, intoDir, ok bool) {
	if t, has := p.val("t", "target-directory"); has {
		return p.ops, t, true, len(p.ops) > 0
	}
	if len(p.ops) < 2 {
		return nil, arg{}, false, false
	}
	srcs = p.ops[:len(p.ops)-1]
	return srcs, p.ops[len(p.ops)-1], len(srcs) > 1, true
}

func mvCmd(w *walker, s *scope, c *cmd) {
	w.spawn(s, c, "", true, modeled)
	p := w.parse(c.args, optSpec{shortVal: "tS", longVal: []string{"target-directory", "suffix"}})
	srcs, dest, intoDir, ok := transfer(&p)
	if !ok {
		return
	}
	for _, src := range srcs {
		w.fs(s, src, fsReq{kind: policy.FSDelete, mode: modeDelete, head: c.head,
			override: true, reversible: true, reason: "moved to " + dest.text + ", not destroyed"})
		to := w.destFor(s, dest, src, intoDir)
		w.fs(s, to, fsReq{kind: policy.FSWrite, mode: modeTruncate, head: c.head, force: p.has("f", "force")})
		if w.mayBeLink(s, src) {
			// A link (or a tree holding links) moved is a link elsewhere.
			w.madeLink(s, to, "mv")
		}
	}
}

// mayBeLink reports whether a path is, or may hold, a link: a symbolic
// link or a directory now, a place the source made links at, or unknown.
func (w *walker) mayBeLink(s *scope, a arg) bool {
	p, ok := w.abs(s, a)
	if !ok || a.glob {
		return true
	}
	if _, linked := w.linkedAt(p); linked {
		return true
	}
	info, err := os.Lstat(p)
	return err == nil && (info.Mode()&os.ModeSymlink != 0 || info.IsDir())
}

func cpCmd(w *walker, s *scope, c *cmd) {
	w.spawn(s, c, "", true, modeled)
	spec := optSpec{shortVal: "tS", longVal: []string{"target-directory", "suffix", "reflink", "sparse", "preserve"}}
	if c.head == "install" {
		spec.shortVal = "tSgmo"
	}
	p := w.parse(c.args, spec)
	rec := p.has("r", "R", "a", "recursive", "archive")
	if c.head == "install" && p.has("d", "directory") {
		for _, a := range p.ops {
			w.fs(s, a, fsReq{kind: policy.FSWrite, mode: modeCreate, head: c.head})
		}
		return
	}
	srcs, dest, intoDir, ok := transfer(&p)
	if !ok {
		return
	}
	// -s and -l make links; -P, -d, -a and -r copy the links they meet as
	// links.
	links := c.head == "cp" && (rec || p.has("s", "l", "P", "d", "symbolic-link", "link", "no-dereference"))
	var made []arg
	defer func() {
		for _, to := range made {
			w.madeLink(s, to, "cp")
		}
	}()
	for _, src := range srcs {
		w.fs(s, src, fsReq{kind: policy.FSRead, head: c.head, recursive: rec})
		to := w.destFor(s, dest, src, intoDir)
		if links {
			made = append(made, to)
		}
		mode := modeTruncate
		if rec {
			if d, ok := w.abs(s, to); ok {
				if info, err := os.Stat(d); err == nil && info.IsDir() {
					w.fs(s, to, fsReq{kind: policy.FSWrite, mode: modeTree, head: c.head, recursive: true,
						override: true, reversible: false, reason: "merges into an existing directory, replacing files of the same names"})
					continue
				}
			}
			mode = modeCreate
		}
		w.fs(s, to, fsReq{kind: policy.FSWrite, mode: mode, head: c.head, recursive: rec, force: p.has("f", "force")})
	}
}

func lnCmd(w *walker, s *scope, c *cmd) {
	w.spawn(s, c, "", true, modeled)
	p := w.parse(c.args, optSpec{shortVal: "tS", longVal: []string{"target-directory", "suffix"}})
	force := p.has("f", "force")
	mode := modeCreate
	if force {
		mode = modeTruncate
	}
	by := "ln"
	if p.has("s", "symbolic") {
		by = "ln -s"
	}
	if len(p.ops) == 1 && !p.has("t", "target-directory") {
		src := p.ops[0]
		to := w.destFor(s, arg{val: ".", text: "."}, src, true)
		w.fs(s, to, fsReq{kind: policy.FSWrite, mode: mode, head: c.head, force: force})
		w.madeLink(s, to, by)
		return
	}
	srcs, dest, intoDir, ok := transfer(&p)
	if !ok {
		return
	}
	for _, src := range srcs {
		to := w.destFor(s, dest, src, intoDir)
		w.fs(s, to, fsReq{kind: policy.FSWrite, mode: mode, head: c.head, force: force})
		w.madeLink(s, to, by)
	}
}

// metaCmd: chmod/chown/chgrp; skip operands name the mode or owner.
func metaCmd(skip int) handler {
	return func(w *walker, s *scope, c *cmd) {
		w.spawn(s, c, "", true, modeled)
		p := w.parse(c.args, optSpec{longVal: []string{"reference", "from"}})
		rec := p.has("R", "recursive")
		ops := p.ops
		if !p.has("reference") && len(ops) > 0 {
			ops = ops[skip:]
		}
		for _, a := range ops {
			w.fs(s, a, fsReq{kind: policy.FSWrite, mode: modeMeta, head: c.head, recursive: rec})
		}
	}
}

func touchCmd(w *walker, s *scope, c *cmd) {
	w.spawn(s, c, "", true, modeled)
	p := w.parse(c.args, optSpec{shortVal: "drt", longVal: []string{"date", "reference", "time"}})
	for _, a := range p.ops {
		w.fs(s, a, fsReq{kind: policy.FSWrite, mode: modeCreate, head: c.head,
			override: true, reversible: true, reason: "creates an empty file or updates its times"})
	}
}

func mkdirCmd(w *walker, s *scope, c *cmd) {
	w.spawn(s, c, "", true, modeled)
	p := w.parse(c.args, optSpec{shortVal: "m", longVal: []string{"mode", "context"}})
	for _, a := range p.ops {
		w.fs(s, a, fsReq{kind: policy.FSWrite, mode: modeCreate, head: c.head})
	}
}

func teeCmd(w *walker, s *scope, c *cmd) {
	w.spawn(s, c, "", true, modeled)
	p := w.parse(c.args, optSpec{longVal: []string{"output-error"}})
	mode := modeTruncate
	if p.has("a", "append") {
		mode = modeAppend
	}
	for _, a := range p.ops {
		w.fs(s, a, fsReq{kind: policy.FSWrite, mode: mode, head: c.head})
	}
}

// ddFiles records what dd reads and writes.
func ddFiles(w *walker, s *scope, c *cmd) {
	w.spawn(s, c, "", true, modeled)
	for _, a := range c.args {
		if a.dyn {
			w.fs(s, a, fsReq{kind: policy.FSWrite, mode: modeTruncate, head: c.head})
			continue
		}
		k, v, ok := strings.Cut(a.val, "=")
		if !ok {
			continue
		}
		switch k {
		case "if":
			w.fs(s, arg{val: v, text: a.text}, fsReq{kind: policy.FSRead, head: c.head})
		case "of":
			w.fs(s, arg{val: v, text: a.text}, fsReq{kind: policy.FSWrite, mode: modeTruncate, head: c.head})
		}
	}
}

func truncateCmd(w *walker, s *scope, c *cmd) {
	w.spawn(s, c, "", true, modeled)
	p := w.parse(c.args, optSpec{shortVal: "sr", longVal: []string{"size", "reference"}})
	for _, a := range p.ops {
		w.fs(s, a, fsReq{kind: policy.FSWrite, mode: modeTruncate, head: c.head})
	}
}

func shredCmd(w *walker, s *scope, c *cmd) {
	w.spawn(s, c, "", true, modeled)
	p := w.parse(c.args, optSpec{shortVal: "ns", longVal: []string{"iterations", "size", "random-source"}})
	for _, a := range p.ops {
		w.fs(s, a, fsReq{kind: policy.FSWrite, mode: modeTruncate, head: c.head,
			override: true, reversible: false, reason: "overwrites the content beyond recovery"})
		if p.has("u", "remove") {
			w.fs(s, a, fsReq{kind: policy.FSDelete, mode: modeDelete, head: c.head})
		}
	}
}

// sedCmd: with -i the files are edited in place (irreversibly unless a
// backup suffix is given); otherwise they are only read.
func sedCmd(w *walker, s *scope, c *cmd) {
	w.spawn(s, c, "", true, modeled)
	inPlace, suffix := false, ""
	var rest []arg
	for _, a := range c.args {
		if !a.dyn && strings.HasPrefix(a.val, "--in-place") {
			inPlace = true
			_, suffix, _ = strings.Cut(a.val, "=")
			continue
		}
		if !a.dyn && strings.HasPrefix(a.val, "-") && !strings.HasPrefix(a.val, "--") {
			if i := strings.IndexByte(a.val, 'i'); i > 0 && !strings.ContainsAny(a.val[1:i], "ef") {
				inPlace = true
				suffix = a.val[i+1:]
				if a.val[1:i] != "" {
					rest = append(rest, arg{val: a.val[:i], text: a.text})
				}
				continue
			}
		}
		rest = append(rest, a)
	}
	p := w.parse(rest, optSpec{shortVal: "efl", longVal: []string{"expression", "file", "line-length"}})
	ops := p.ops
	scripts := p.all("e", "expression")
	if !p.has("e", "f", "expression", "file") && len(ops) > 0 {
		scripts = append(scripts, ops[0])
		ops = ops[1:]
	}
	runs := false
	for _, f := range p.all("f", "file") {
		w.fs(s, f, fsReq{kind: policy.FSRead, head: c.head})
		text, ok := w.readProgram(s, f)
		runs = runs || !ok || sedRuns(text)
	}
	for _, sc := range scripts {
		runs = runs || sc.dyn || sedRuns(sc.val)
	}
	if runs && !p.has("sandbox") {
		w.opaque(c, "the sed script writes files (w, s///w) or runs commands (e, s///e), or is known only at run time")
	}
	for _, a := range ops {
		if !inPlace {
			w.fs(s, a, fsReq{kind: policy.FSRead, head: c.head})
			continue
		}
		r := fsReq{kind: policy.FSWrite, mode: modeTruncate, head: c.head}
		if suffix != "" {
			r.override, r.reversible, r.reason = true, true, "edits in place, keeping a backup with suffix "+suffix
		}
		w.fs(s, a, r)
	}
}

// findCmd: paths first, then an expression; -delete deletes what it
// finds and -exec runs a command on it.
func findCmd(w *walker, s *scope, c *cmd) {
	w.spawn(s, c, "", true, modeled)
	var paths []arg
	i := 0
	for ; i < len(c.args); i++ {
		a := c.args[i]
		if !a.dyn && (strings.HasPrefix(a.val, "-") || a.val == "(" || a.val == "!") {
			break
		}
		paths = append(paths, a)
	}
	if len(paths) == 0 {
		paths = []arg{{val: ".", text: "."}}
	}
	for _, p := range paths {
		w.fs(s, p, fsReq{kind: policy.FSRead, head: c.head, recursive: true})
	}
	// What {} stands for: any path below the one search root, else unknown.
	found := arg{dyn: true, text: "{}"}
	if len(paths) == 1 {
		if root, ok := w.abs(s, paths[0]); ok {
			found = arg{val: strings.TrimSuffix(root, "/") + "/**", glob: true, text: "{}"}
		}
	}
	expr := c.args[i:]
	tested := false // a test before -delete narrows what it deletes
	for j := 0; j < len(expr); j++ {
		a := expr[j]
		if a.dyn {
			tested = true
			continue
		}
		switch a.val {
		case "-delete":
			if tested && !found.dyn {
				w.fs(s, found, fsReq{kind: policy.FSDelete, mode: modeDelete, head: c.head, recursive: true})
				continue
			}
			for _, p := range paths {
				w.fs(s, p, fsReq{kind: policy.FSDelete, mode: modeDelete, head: c.head, recursive: true})
			}
		case "-exec", "-execdir", "-ok", "-okdir":
			var sub []arg
			for j++; j < len(expr); j++ {
				if !expr[j].dyn && (expr[j].val == ";" || expr[j].val == "+") {
					break
				}
				x := expr[j]
				if !x.dyn && strings.Contains(x.val, "{}") {
					x = found
					if expr[j].val != "{}" {
						x = arg{dyn: true, text: expr[j].val}
					}
				}
				sub = append(sub, x)
			}
			w.nested(func() { w.run(s.clone(), sub, false) })
		case "-fprint", "-fprint0", "-fprintf", "-fls":
			if j+1 < len(expr) {
				j++
				w.fs(s, expr[j], fsReq{kind: policy.FSWrite, mode: modeTruncate, head: c.head})
			}
		default:
			if strings.HasPrefix(a.val, "-") && !slices.Contains(findOptions, a.val) {
				tested = true
			}
		}
	}
}

// findOptions are find's global options: they do not narrow what an
// action applies to.
var findOptions = []string{"-depth", "-maxdepth", "-mindepth", "-mount", "-xdev", "-follow", "-noleaf",
	"-ignore_readdir_race", "-noignore_readdir_race", "-daystart", "-warn", "-nowarn", "-regextype", "-print", "-print0"}

// xargsCmd runs its command with arguments read from stdin: those are
// unknown here, so the command gets a dynamic operand.
func xargsCmd(w *walker, s *scope, c *cmd) {
	w.spawn(s, c, "", true, modeled)
	p := w.parse(c.args, optSpec{shortVal: "aEeIiLlnPsd", longVal: []string{"arg-file", "eof", "replace", "max-lines", "max-args", "max-procs", "max-chars", "delimiter", "process-slot-var"}, stopAtOperand: true})
	if f, ok := p.val("a", "arg-file"); ok {
		w.fs(s, f, fsReq{kind: policy.FSRead, head: c.head})
	}
	sub := p.rest
	if len(sub) == 0 {
		sub = []arg{{val: "echo", text: "echo"}}
	}
	input := arg{dyn: true, text: "(stdin items)"}
	if r, ok := p.val("I", "i", "replace"); ok && !r.dyn {
		repl := r.val
		if repl == "" {
			repl = "{}"
		}
		out := make([]arg, len(sub))
		for i, a := range sub {
			out[i] = a
			if i > 0 && !a.dyn && strings.Contains(a.val, repl) {
				out[i] = input
			}
		}
		sub = out
	} else {
		sub = append(append([]arg{}, sub...), input)
	}
	w.nested(func() { w.run(s.clone(), sub, false) })
}

func tarCmd(w *walker, s *scope, c *cmd) {
	w.spawn(s, c, "", true, modeled)
	args := c.args
	// Old-style bundled first argument: tar xzf a.tgz.
	if len(args) > 0 && !args[0].dyn && !strings.HasPrefix(args[0].val, "-") {
		args = append([]arg{{val: "-" + args[0].val, text: args[0].text}}, args[1:]...)
	}
	p := w.parse(args, optSpec{shortVal: "fCTXbHIFg", longVal: []string{"file", "directory", "files-from", "exclude-from", "exclude", "format"}})
	if p.has("I", "F") || slices.ContainsFunc(tarRuns, func(o string) bool { return p.has(o) }) {
		w.opaque(c, "tar is told to run a command (--to-command, -I, --checkpoint-action=exec, …): its effects are known only at run time")
	}
	archive, hasArchive := p.val("f", "file")
	dir := arg{val: ".", text: "."}
	if d, ok := p.val("C", "directory"); ok {
		dir = d
	}
	switch {
	case p.has("x", "extract", "get"):
		if hasArchive {
			w.fs(s, archive, fsReq{kind: policy.FSRead, head: c.head})
		}
		w.fs(s, dir, fsReq{kind: policy.FSWrite, mode: modeTree, head: c.head, sub: "extract",
			override: true, reversible: false, reason: "extracting may replace existing files"})
		w.madeLink(s, dir, "tar")
	case p.has("c", "create", "r", "append", "u", "update"):
		if hasArchive {
			w.fs(s, archive, fsReq{kind: policy.FSWrite, mode: modeTruncate, head: c.head})
		}
		w.readOperands(s, c, p.ops)
	default:
		if hasArchive {
			w.fs(s, archive, fsReq{kind: policy.FSRead, head: c.head})
		}
	}
}

func unzipCmd(w *walker, s *scope, c *cmd) {
	w.spawn(s, c, "", true, modeled)
	p := w.parse(c.args, optSpec{shortVal: "dx", longVal: nil})
	if len(p.ops) > 0 {
		w.fs(s, p.ops[0], fsReq{kind: policy.FSRead, head: c.head})
	}
	if p.has("l", "t", "v", "Z") {
		return
	}
	dir := arg{val: ".", text: "."}
	if d, ok := p.val("d"); ok {
		dir = d
	}
	w.fs(s, dir, fsReq{kind: policy.FSWrite, mode: modeTree, head: c.head,
		override: true, reversible: false, reason: "extracting may replace existing files"})
	w.madeLink(s, dir, "unzip")
}

func sortCmd(w *walker, s *scope, c *cmd) {
	w.spawn(s, c, "", true, modeled)
	p := w.parse(c.args, optSpec{shortVal: "ktoST", longVal: []string{"key", "field-separator", "output", "buffer-size", "temporary-directory", "files0-from"}})
	if o, ok := p.val("o", "output"); ok {
		w.fs(s, o, fsReq{kind: policy.FSWrite, mode: modeTruncate, head: c.head})
	}
	w.readOperands(s, c, p.ops)
}

// deviceCmd: mkfs and partitioners write the device they are given.
func deviceCmd(w *walker, s *scope, c *cmd) {
	if len(c.args) == 1 && !c.args[0].dyn && (c.args[0].val == "-l" || c.args[0].val == "--list") {
		w.spawn(s, c, "", true, "lists partitions")
		return
	}
	w.machine(s, c, "", "formats or repartitions a device; what was on it is gone")
	p := w.parse(c.args, optSpec{shortVal: "tLbcCEFgGIiJjlmMNOoTUeS", longVal: []string{"type", "label"}})
	for _, a := range p.ops {
		if !a.dyn && isNumber(a.val) {
			continue // a block count
		}
		w.fs(s, a, fsReq{kind: policy.FSWrite, mode: modeTruncate, head: c.head,
			override: true, reversible: false, reason: "formats or repartitions it; what was on it is gone"})
	}
}
