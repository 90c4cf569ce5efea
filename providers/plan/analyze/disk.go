package analyze

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"mvdan.cc/sh/v3/expand"
	"mvdan.cc/sh/v3/syntax"

	"github.com/shoal-sh/shoal/core/policy"
)

// writeMode says how a write treats what is already there.
type writeMode int

const (
	modeRead     writeMode = iota
	modeTruncate           // replaces content (>, cp, tee, dd of=, sed -i)
	modeAppend             // adds at the end (>>, tee -a)
	modeModify             // changes in place without truncating (<>)
	modeMeta               // changes metadata (chmod, chown, touch)
	modeCreate             // creates a directory or link; refuses to replace
	modeTree               // changes a whole tree (checkout, extract); Reason set by the caller
	modeDelete
)

// fsReq describes one file-system effect a command has on an argument.
type fsReq struct {
	kind      string
	mode      writeMode
	head, sub string
	recursive bool
	force     bool
	// reversible/reason override the analyzer's own judgement when set
	// (mv's delete is only a move; git rm keeps the last commit).
	override   bool
	reversible bool
	reason     string
	executes   bool
}

// pseudoFiles are names that are not files: writing to them loses or
// shows data but changes nothing on disk.
var pseudoFiles = []string{"/dev/null", "/dev/zero", "/dev/stdout", "/dev/stderr", "/dev/stdin",
	"/dev/tty", "/dev/random", "/dev/urandom", "/dev/full"}

func isPseudo(p string) bool {
	return slices.Contains(pseudoFiles, p) || strings.HasPrefix(p, "/dev/fd/") ||
		strings.HasPrefix(p, "/proc/self/fd/")
}

// abs turns an argument into an absolute, cleaned path, or reports that
// it cannot (dynamic argument, unknown cwd, unexpanded ~).
func (w *walker) abs(s *scope, a arg) (string, bool) {
	if a.dyn || a.val == "" {
		return "", false
	}
	p := a.val
	if strings.HasPrefix(p, "~") {
		return "", false // HOME unknown, or ~user we do not resolve
	}
	if !path.IsAbs(p) {
		if !s.cwdKnown {
			return "", false
		}
		p = path.Join(s.cwd, p)
	}
	return path.Clean(p), true
}

// fs records a file-system effect of a on disk, with its reversibility
// and, for deletes and overwrites, an estimate measured now.
func (w *walker) fs(s *scope, a arg, r fsReq) {
	e := Effect{Effect: policy.Effect{Kind: r.kind, Head: r.head, Sub: r.sub, Recursive: r.recursive, Force: r.force}, Executes: r.executes}
	p, ok := w.abs(s, a)
	if !ok {
		e.Dynamic = true
		e.Target = a.text
		if a.text == "" {
			e.Target = "(unknown)"
		}
		if r.kind == policy.FSRead {
			e.Reversible, e.Reason = true, "reading changes nothing"
		} else {
			e.Reason = "target known only at run time"
		}
		if r.override && r.kind != policy.FSRead {
			e.Reason = r.reason + "; target known only at run time"
		}
		w.add(e)
		return
	}
	if isPseudo(p) {
		return
	}
	if w.light {
		e.Target, e.Glob = p, a.glob
		w.add(e)
		return
	}
	if l, linked := w.linkedAt(p); linked {
		// The source made a link here earlier: where this lands is only
		// known once it has run.
		e.Dynamic, e.Target, e.Glob = true, p, a.glob
		e.Reason = l.by + " made a link at or above " + p + " earlier in the source: where it leads is known only at run time"
		if l.path == "" {
			e.Reason = l.by + " made a link at a place known only at run time: where " + p + " leads is not known"
		}
		if r.kind == policy.FSRead {
			e.Reversible = true
		}
		w.add(e)
		return
	}
	if a.glob {
		e.Glob = true
		e.Target = p
		w.globEffect(&e, r)
		w.add(e)
		return
	}
	follow := r.kind != policy.FSDelete
	p = w.realPath(p, follow)
	e.Target = p
	w.judge(&e, p, r)
	w.add(e)
}

// judge fills reversibility and estimates for a concrete path.
func (w *walker) judge(e *Effect, p string, r fsReq) {
	info, err := os.Lstat(p)
	exists := err == nil
	switch r.kind {
	case policy.FSRead:
		e.Reversible, e.Reason = true, "reading changes nothing"
		if r.executes {
			e.Reason = "reads a script that runs; its commands are analyzed"
		}
	case policy.FSDelete:
		switch {
		case !exists:
			e.Reversible, e.Reason = true, "does not exist now: nothing to delete"
		case info.IsDir() && r.recursive:
			est := w.walkTree(p)
			e.Estimate = &est
			e.Reversible = false
			e.Reason = fmt.Sprintf("deletes a tree of %s; there is no trash", est.String())
		case info.IsDir():
			e.Estimate = &Estimate{}
			e.Reversible, e.Reason = true, "removes a directory only if it is empty"
		case info.Mode()&fs.ModeSymlink != 0:
			e.Estimate = &Estimate{Files: 1}
			e.Reversible, e.Reason = false, "removes a symbolic link (not what it points to)"
		default:
			e.Estimate = &Estimate{Files: 1, Bytes: info.Size()}
			e.Reversible, e.Reason = false, fmt.Sprintf("deletes a file of %d bytes; there is no trash", info.Size())
		}
	case policy.FSWrite:
		switch r.mode {
		case modeTruncate:
			switch {
			case !exists:
				e.Reversible, e.Reason = true, "creates a new file"
			case info.IsDir():
				e.Reversible, e.Reason = true, "writes into an existing directory"
			default:
				e.Overwrite = true
				e.Estimate = &Estimate{Files: 1, Bytes: info.Size()}
				e.Reversible, e.Reason = false, fmt.Sprintf("replaces an existing file of %d bytes", info.Size())
			}
		case modeAppend:
			e.Reversible = true
			if exists {
				e.Reason = "appends; the earlier content stays"
			} else {
				e.Reason = "creates a new file"
			}
		case modeModify:
			e.Reversible, e.Reason = !exists, "opens for writing in place"
			if exists {
				e.Estimate = &Estimate{Files: 1, Bytes: info.Size()}
			}
		case modeMeta:
			if r.recursive && exists && info.IsDir() {
				est := w.walkTree(p)
				e.Estimate = &est
				e.Reversible, e.Reason = false, fmt.Sprintf("changes metadata across a tree of %s; the old values are not recorded", est.String())
			} else {
				e.Reversible, e.Reason = true, "changes one file's metadata; it can be set back"
			}
		case modeCreate:
			e.Reversible, e.Reason = true, "creates a new entry"
			if exists {
				e.Reason = "exists already; left as it is"
			}
		case modeTree:
			e.Reversible, e.Reason = false, "changes files across a tree"
			if exists && info.IsDir() && r.recursive {
				est := w.walkTree(p)
				e.Estimate = &est
			}
		}
	}
	if r.override {
		e.Reversible, e.Reason = r.reversible, r.reason
	}
}

// globEffect judges a pattern target by what it matches now.
func (w *walker) globEffect(e *Effect, r fsReq) {
	if dir, ok := strings.CutSuffix(e.Target, "/**"); ok && r.kind != policy.FSRead {
		// Anything below dir (find … -exec rm {} +): bounded by its tree.
		est := w.walkTree(dir)
		e.Estimate = &est
		e.Reversible, e.Reason = false, fmt.Sprintf("may reach any file below %s: up to %s", dir, est.String())
		if r.override {
			e.Reversible, e.Reason = r.reversible, r.reason
		}
		return
	}
	matches, truncated := w.globMatches(e.Target)
	switch {
	case r.kind == policy.FSRead:
		e.Reversible, e.Reason = true, "reading changes nothing"
		return
	case r.override:
		e.Reversible, e.Reason = r.reversible, r.reason
	case len(matches) == 0:
		e.Reversible, e.Reason = true, "the pattern matches nothing now"
		return
	case r.kind == policy.FSWrite && r.mode != modeTruncate && r.mode != modeTree:
		e.Reversible, e.Reason = true, fmt.Sprintf("the pattern matches %d entries now", len(matches))
		return
	}
	est := Estimate{Truncated: truncated}
	for _, m := range matches {
		info, err := os.Lstat(m)
		if err != nil {
			continue
		}
		if info.IsDir() {
			if r.recursive {
				sub := w.walkTree(m)
				est.Files += sub.Files
				est.Bytes += sub.Bytes
				est.Truncated = est.Truncated || sub.Truncated
			}
			continue
		}
		est.Files++
		est.Bytes += info.Size()
	}
	e.Estimate = &est
	if !r.override {
		verb := "deletes"
		if r.kind == policy.FSWrite {
			verb = "replaces"
		}
		e.Reversible, e.Reason = false, fmt.Sprintf("%s what the pattern matches now: %s", verb, est.String())
	}
}

func (e Estimate) String() string {
	s := fmt.Sprintf("%d files, %d bytes", e.Files, e.Bytes)
	if e.Truncated {
		s += " or more"
	}
	return s
}

// globMatches expands a pattern against the disk the way bash would
// (read-only). Directory reads share the analysis's walk budget; when it
// runs out the matches found so far come back with truncated set.
func (w *walker) globMatches(pat string) (matches []string, truncated bool) {
	const maxMatches = 10000
	readDir := func(dir string) ([]fs.DirEntry, error) {
		if w.walkBudget <= 0 {
			truncated = true
			return nil, errBudget
		}
		ents, err := os.ReadDir(dir)
		w.walkBudget -= 1 + len(ents)
		return ents, err
	}
	cfg := &expand.Config{ReadDir2: readDir, NullGlob: true}
	word := &syntax.Word{Parts: []syntax.WordPart{&syntax.Lit{Value: pat}}}
	for m, err := range expand.FieldsSeq(cfg, word) {
		if err != nil {
			break
		}
		matches = append(matches, m)
		if len(matches) >= maxMatches {
			truncated = true
			break
		}
	}
	return matches, truncated
}

var errBudget = errors.New("estimate budget spent")

// walkTree counts the files and bytes below root, sharing the analysis's
// walk budget; symbolic links are counted, never followed.
func (w *walker) walkTree(root string) Estimate {
	var est Estimate
	if w.walkDeadline.IsZero() {
		w.walkDeadline = time.Now().Add(WalkTime)
	}
	_ = filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if w.walkBudget <= 0 || (w.walkBudget%256 == 0 && time.Now().After(w.walkDeadline)) {
			w.walkBudget = 0
			est.Truncated = true
			return filepath.SkipAll
		}
		w.walkBudget--
		if err != nil || d.IsDir() {
			return nil
		}
		est.Files++
		if d.Type().IsRegular() {
			if info, err := d.Info(); err == nil {
				est.Bytes += info.Size()
			}
		}
		return nil
	})
	return est
}

// realPath resolves symbolic links in p's directories (and in p itself
// when follow is set), so a write through a link is judged where it
// lands. Parts that do not exist yet are kept as written. Directory
// resolutions are cached for the analysis: system calls are the bulk of
// its cost.
func (w *walker) realPath(p string, follow bool) string {
	if p == "/" {
		return p
	}
	out := path.Join(w.realDir(path.Dir(p)), path.Base(p))
	if follow {
		if info, err := os.Lstat(out); err == nil && info.Mode()&fs.ModeSymlink != 0 {
			if r, err := filepath.EvalSymlinks(out); err == nil {
				return r
			}
		}
	}
	return out
}

// realDir resolves a directory's symbolic links; a missing part and what
// follows it are kept as written.
func (w *walker) realDir(dir string) string {
	if r, ok := w.dirs[dir]; ok {
		return r
	}
	r := dir
	if res, err := filepath.EvalSymlinks(dir); err == nil {
		r = res
	} else if errors.Is(err, fs.ErrNotExist) {
		if parent := path.Dir(dir); parent != dir {
			r = path.Join(w.realDir(parent), path.Base(dir))
		}
	}
	if w.dirs == nil {
		w.dirs = map[string]string{}
	}
	w.dirs[dir] = r
	return r
}
