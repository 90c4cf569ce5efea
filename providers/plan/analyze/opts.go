package analyze

import (
	"slices"
	"sort"
	"strings"
)

// optSpec describes a command's option syntax, enough to tell options
// from operands.
type optSpec struct {
	// shortVal lists the short options that take a value (-o FILE, -oFILE).
	shortVal string
	// longVal lists the long options that take a value (--output FILE).
	longVal []string
	// stopAtOperand: options end at the first operand, which starts the
	// rest (wrappers and commands with subcommands: sudo, env, git).
	stopAtOperand bool
}

type parsed struct {
	flags map[string]int
	vals  map[string][]arg
	ops   []arg
	rest  []arg
	// dyn: a dynamic argument stood where options are read; it may be any
	// option at all.
	dyn bool
	// long holds the long options given (--name), which GNU programs
	// accept abbreviated: --recu is --recursive.
	long map[string]bool
	// w, when set, is told of each abbreviation read as a full name.
	w *walker
}

// parse is parseOpts for a command the walker analyzes: abbreviated long
// options it reads as full names are noted in the plan.
func (w *walker) parse(args []arg, spec optSpec) parsed {
	p := parseOpts(args, spec)
	p.w = w
	return p
}

func parseOpts(args []arg, spec optSpec) parsed {
	p := parsed{flags: map[string]int{}, vals: map[string][]arg{}}
	for i := 0; i < len(args); i++ {
		a := args[i]
		operand := func() bool {
			if spec.stopAtOperand {
				p.rest = args[i:]
				return true
			}
			p.ops = append(p.ops, a)
			return false
		}
		switch {
		case a.dyn:
			p.dyn = true
			if operand() {
				return p
			}
		case a.val == "--":
			if spec.stopAtOperand {
				p.rest = args[i+1:]
				return p
			}
			p.ops = append(p.ops, args[i+1:]...)
			return p
		case strings.HasPrefix(a.val, "--") && len(a.val) > 2:
			name, v, has := strings.Cut(a.val[2:], "=")
			if p.long == nil {
				p.long = map[string]bool{}
			}
			p.long[name] = true
			switch {
			case has:
				p.vals[name] = append(p.vals[name], arg{val: v, text: a.text})
			case slices.Contains(spec.longVal, name) && i+1 < len(args):
				i++
				p.vals[name] = append(p.vals[name], args[i])
			default:
				p.flags[name]++
			}
		case strings.HasPrefix(a.val, "-") && len(a.val) > 1:
			cluster := a.val[1:]
			for j := 0; j < len(cluster); j++ {
				ch := cluster[j : j+1]
				if strings.Contains(spec.shortVal, ch) {
					if j+1 < len(cluster) {
						p.vals[ch] = append(p.vals[ch], arg{val: cluster[j+1:], text: a.text})
					} else if i+1 < len(args) {
						i++
						p.vals[ch] = append(p.vals[ch], args[i])
					}
					break
				}
				p.flags[ch]++
			}
		default:
			if operand() {
				return p
			}
		}
	}
	return p
}

// has reports whether any of the named options was given, a long one
// possibly abbreviated.
func (p *parsed) has(names ...string) bool {
	for _, n := range names {
		if p.flags[n] > 0 || len(p.vals[n]) > 0 {
			return true
		}
	}
	for _, n := range names {
		if k, ok := p.abbrev(n); ok && (p.flags[k] > 0 || len(p.vals[k]) > 0) {
			return true
		}
	}
	return false
}

// abbrev finds a long option given as an abbreviation of name (--recu for
// recursive). A program refuses an ambiguous abbreviation, so taking it
// for name is never less than what runs.
func (p *parsed) abbrev(name string) (string, bool) {
	if len(name) < 2 {
		return "", false
	}
	for _, k := range sortedKeys(p.long) {
		if len(k) < len(name) && strings.HasPrefix(name, k) {
			if p.w != nil {
				p.w.unsure("--" + k + " is read as --" + name + ": GNU programs accept abbreviated long options")
			}
			return k, true
		}
	}
	return "", false
}

func sortedKeys(m map[string]bool) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	return sortedStrings(out)
}

// val returns the last value given to any of the named options.
func (p *parsed) val(names ...string) (arg, bool) {
	for _, n := range names {
		if v := p.vals[n]; len(v) > 0 {
			return v[len(v)-1], true
		}
	}
	for _, n := range names {
		if k, ok := p.abbrev(n); ok {
			if v := p.vals[k]; len(v) > 0 {
				return v[len(v)-1], true
			}
		}
	}
	return arg{}, false
}

// all returns every value given to the named options.
func (p *parsed) all(names ...string) []arg {
	var out []arg
	for _, n := range names {
		out = append(out, p.vals[n]...)
		if k, ok := p.abbrev(n); ok && k != n {
			out = append(out, p.vals[k]...)
		}
	}
	return out
}

func sortedStrings(s []string) []string {
	sort.Strings(s)
	return s
}
