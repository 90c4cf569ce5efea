package policy

import (
	"path"
	"strings"
)

// matchName matches s against a glob where `*` is any run of characters
// (slashes included), `?` is one character and `\` escapes the next one.
// Principals, heads, subcommands, hosts and channels use it.
func matchName(pat, s string) bool {
	// Classic iterative wildcard match with one backtrack point: linear in
	// practice and never recursive, so hostile patterns cannot blow the stack.
	p, i := 0, 0
	starP, starI := -1, 0
	for i < len(s) {
		if p < len(pat) {
			c := pat[p]
			switch {
			case c == '*':
				starP, starI = p, i
				p++
				continue
			case c == '?':
				p++
				i++
				continue
			case c == '\\' && p+1 < len(pat):
				if pat[p+1] == s[i] {
					p += 2
					i++
					continue
				}
			case c == s[i]:
				p++
				i++
				continue
			}
		}
		if starP < 0 {
			return false
		}
		starI++
		p, i = starP+1, starI
	}
	for p < len(pat) && pat[p] == '*' {
		p++
	}
	return p == len(pat)
}

// matchPath matches a cleaned absolute path against an absolute path
// pattern. A `**` segment matches zero or more whole segments; other
// segments match one segment with [matchName] rules, so `*` never crosses
// a slash there. It works on substrings and never allocates: Decide runs
// it for every rule and effect.
func matchPath(pat, p string) bool {
	return matchSegs(strings.Trim(pat, "/"), strings.Trim(p, "/"))
}

// nextSeg splits off the first segment of a slash-separated string.
func nextSeg(s string) (seg, rest string) {
	if i := strings.IndexByte(s, '/'); i >= 0 {
		return s[:i], s[i+1:]
	}
	return s, ""
}

func matchSegs(pat, p string) bool {
	if !strings.Contains(pat, "**") {
		for pat != "" {
			var seg, s string
			seg, pat = nextSeg(pat)
			if p == "" {
				return false
			}
			s, p = nextSeg(p)
			if !matchName(seg, s) {
				return false
			}
		}
		return p == ""
	}
	// With `**` a backtracking match can take exponential time on
	// patterns like /**/**/**/…; track the set of reachable path positions
	// instead: O(pattern segments × path segments).
	var segs []string
	if p != "" {
		segs = strings.Split(p, "/")
	}
	n := len(segs)
	cur, next := make([]bool, n+1), make([]bool, n+1)
	cur[0] = true
	for pat != "" {
		var seg string
		seg, pat = nextSeg(pat)
		clear(next)
		if seg == "**" {
			on := false
			for i := 0; i <= n; i++ {
				on = on || cur[i]
				next[i] = on
			}
		} else {
			for i := 0; i < n; i++ {
				if cur[i] && matchName(seg, segs[i]) {
					next[i+1] = true
				}
			}
		}
		cur, next = next, cur
	}
	return cur[n]
}

// anchors are a decision's `~` and `.`, resolved and cleaned on first use;
// empty when unknown or the file system root: a root that counted as "the
// home tree" or "the work tree" would make every path ordinary work.
type anchors struct {
	ctx       DecideContext
	resolved  bool
	home, cwd string
}

func (a *anchors) get() (home, cwd string) {
	if !a.resolved {
		a.resolved = true
		clean := func(d string) string {
			if d != "" && a.ctx.Resolve != nil {
				d = a.ctx.Resolve(d)
			}
			if d == "" || !path.IsAbs(d) {
				return ""
			}
			d = path.Clean(d)
			if d == "/" {
				return ""
			}
			return d
		}
		a.home, a.cwd = clean(a.ctx.Home), clean(a.ctx.Cwd)
	}
	return a.home, a.cwd
}

// matchTarget matches a path target against a rule's path pattern,
// expanding a leading `~` or `.` to its anchor.
func (a *anchors) matchTarget(pat, t string) bool {
	var base, rest string
	switch {
	case pat == "~" || strings.HasPrefix(pat, "~/"):
		base, _ = a.get()
		rest = pat[1:]
	case pat == "." || strings.HasPrefix(pat, "./"):
		_, base = a.get()
		rest = pat[1:]
	default:
		return matchPath(pat, t)
	}
	if base == "" || !strings.HasPrefix(t, base) {
		return false
	}
	t = t[len(base):]
	if t != "" && t[0] != '/' {
		return false // /home/uu is not below /home/u
	}
	return matchPath(rest, t)
}

// isPathPattern reports whether a target pattern is a path pattern.
func isPathPattern(p string) bool {
	return strings.HasPrefix(p, "/") || p == "~" || strings.HasPrefix(p, "~/") ||
		p == "." || strings.HasPrefix(p, "./")
}

// StaticPrefix returns the directory part of a glob before its first
// segment holding a pattern character: /home/u/src/*.go → /home/u/src.
// A glob effect is matched by its static prefix, the narrowest directory
// sure to contain everything it can name.
func StaticPrefix(glob string) string {
	segs := strings.Split(glob, "/")
	for i, s := range segs {
		if strings.ContainsAny(s, "*?[") {
			p := strings.Join(segs[:i], "/")
			if p == "" {
				return "/"
			}
			return p
		}
	}
	return glob
}
