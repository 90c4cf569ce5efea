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

// matchPath matches a cleaned absolute path against a path pattern whose
// anchors are already expanded. A `**` segment matches zero or more whole
// segments; other segments match one segment with [matchName] rules, so
// `*` never crosses a slash there.
func matchPath(pat, p string) bool {
	return matchSegs(splitPath(pat), splitPath(p))
}

func splitPath(p string) []string {
	p = strings.Trim(p, "/")
	if p == "" {
		return nil
	}
	return strings.Split(p, "/")
}

func matchSegs(pat, segs []string) bool {
	for len(pat) > 0 {
		if pat[0] == "**" {
			rest := pat[1:]
			for k := 0; k <= len(segs); k++ {
				if matchSegs(rest, segs[k:]) {
					return true
				}
			}
			return false
		}
		if len(segs) == 0 || !matchName(pat[0], segs[0]) {
			return false
		}
		pat, segs = pat[1:], segs[1:]
	}
	return len(segs) == 0
}

// expandAnchor turns a rule's path pattern into an absolute pattern: `~`
// is home, `.` is cwd. ok is false when the anchor it needs is unknown or
// is the file system root: a root that counted as "the home tree" or "the
// work tree" would make every path ordinary work.
func expandAnchor(pat string, ctx DecideContext) (string, bool) {
	var base, rest string
	switch {
	case pat == "~" || strings.HasPrefix(pat, "~/"):
		base, rest = ctx.Home, pat[1:]
	case pat == "." || strings.HasPrefix(pat, "./"):
		base, rest = ctx.Cwd, pat[1:]
	default:
		return pat, true
	}
	base = path.Clean(base)
	if base == "" || base == "." || base == "/" || !path.IsAbs(base) {
		return "", false
	}
	return base + rest, true
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
