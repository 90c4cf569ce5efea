// Package analyze reads bash source without running it and says what it
// would do: the effects (files read, written and deleted, programs
// started, hosts contacted, variables set, events published), their
// targets, whether each can be undone, and how much a delete or overwrite
// would touch on disk right now.
//
// The analyzer parses with mvdan.cc/sh/v3/syntax and walks the tree:
// redirections, known commands and their options, wrappers (sudo, env,
// xargs, timeout, …), strings run as code (sh -c, eval, trap, source,
// shell scripts run by path), functions, loops and every branch of a
// conditional. It looks at the disk only through read-only calls (Lstat,
// ReadDir, ReadFile of scripts, a bounded WalkDir for estimates).
//
// What it cannot resolve it never guesses: a command or target known only
// at run time — an unset variable, a command substitution, a script read
// from stdin, eval of computed text, a path below a link the source made,
// a program shadowed on PATH, an option that runs code — becomes an effect
// marked Dynamic whose target is the source text, the plan is never
// reversible, and Analysis.Uncertain says why. The default policy allows
// such effects only when the run is confined by the OS.
package analyze

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"mvdan.cc/sh/v3/syntax"

	"github.com/shoal-sh/shoal/core/policy"
)

// Env is what the analyzer knows about the session the source would run
// in.
type Env struct {
	// Cwd is the session's working directory (absolute).
	Cwd string
	// Home is the home directory `~` expands to.
	Home string
	// Lookup returns a variable's value as the session would see it
	// (environment and shell variables). Nil means none is known: every
	// variable reference is then dynamic.
	Lookup func(name string) (string, bool)
	// Func returns the body of a shell function defined by an earlier
	// execution in the session, so a call to it is analyzed rather than
	// taken for an unknown program. When Func is nil the analyzer cannot
	// tell a function from a typo, and a command that is neither known, a
	// builtin nor a program on PATH becomes a dynamic effect.
	Func func(name string) (*syntax.Stmt, bool)
	// Terminal says the source starts a program on a terminal (pty.open):
	// a shell, interpreter or editor reading its commands from it is
	// interactive work whose keystrokes come later (and cannot be
	// analysed), not unknown code. Code given on its command line still is.
	Terminal bool
	// WalkCap bounds how many directory entries estimates may visit over
	// the whole analysis (default [DefaultWalkCap]). Past it, or past
	// [WalkTime], estimates are marked truncated.
	WalkCap int
}

// Estimate walk budgets: entries per analysis when Env.WalkCap is zero,
// and wall time per analysis, so `rm -rf /` is planned in a blink.
const (
	DefaultWalkCap = 10000
	WalkTime       = 150 * time.Millisecond
)

// Estimate is how much an effect would touch, measured on disk at
// analysis time.
type Estimate struct {
	Files int64 `json:"files"`
	Bytes int64 `json:"bytes"`
	// Truncated: the real numbers may be larger (the walk hit its cap, or
	// a target is only known at run time).
	Truncated bool `json:"truncated,omitempty"`
}

// Effect is one effect with what the analyzer learned about it.
type Effect struct {
	policy.Effect
	// Reversible says whether the effect can be undone from what remains
	// afterwards; Reason says why, in a few words.
	Reversible bool   `json:"reversible"`
	Reason     string `json:"reason"`
	// Estimate is set for deletes and overwrites of concrete targets.
	Estimate *Estimate `json:"estimate,omitempty"`
	// Executes marks an fs.read of a script that the source runs: its
	// content is part of what the plan does.
	Executes bool `json:"executes,omitempty"`
}

// Analysis is the result of [Analyze].
type Analysis struct {
	// Effects in source order, without duplicates.
	Effects []Effect `json:"effects"`
	// Heads are the commands run, by base name, in order of first use.
	Heads []string `json:"heads"`
	// Reversible is true when every effect is.
	Reversible bool `json:"reversible"`
	// Estimates sums the effects' estimates.
	Estimates Estimate `json:"estimates"`
	// Dynamic is true when any effect is dynamic.
	Dynamic bool `json:"dynamic"`
	// Uncertain says, in words, what the analysis could not know: why each
	// dynamic effect is dynamic, and what the source does that may make
	// it do more than the effects show (an abbreviated option read as
	// the full one, a nameref, an assigned IFS). Empty when nothing is.
	Uncertain []string `json:"uncertain"`
}

// PolicyEffects returns the effects as the policy sees them.
func (a *Analysis) PolicyEffects() []policy.Effect {
	out := make([]policy.Effect, len(a.Effects))
	for i, e := range a.Effects {
		out[i] = e.Effect
	}
	return out
}

// Kinds returns the distinct effect kinds, in [policy.Kinds] order.
func (a *Analysis) Kinds() []string {
	out := []string{}
	for _, k := range policy.Kinds {
		for _, e := range a.Effects {
			if e.Kind == k {
				out = append(out, k)
				break
			}
		}
	}
	return out
}

// Head is the first command's name, what the journal records as head;
// empty when the source runs none.
func (a *Analysis) Head() string {
	if len(a.Heads) == 0 {
		return ""
	}
	return a.Heads[0]
}

// ErrSyntax wraps parse errors of the top-level source.
var ErrSyntax = errors.New("source does not parse")

// Analyze parses src as bash and derives its effects. Only a syntax error
// in src itself is an error; anything the analyzer cannot follow becomes a
// dynamic effect instead.
func Analyze(src string, env Env) (*Analysis, error) {
	f, err := syntax.NewParser(syntax.Variant(syntax.LangBash)).Parse(strings.NewReader(src), "")
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrSyntax, err)
	}
	return AnalyzeFile(f, env), nil
}

// AnalyzeFile is Analyze of source the caller has already parsed as bash
// (the session parses an execution's source once, for the policy check
// and for the run). The walk only reads f.
func AnalyzeFile(f *syntax.File, env Env) *Analysis {
	w := newWalker(env)
	s := w.topScope()
	w.stmts(s, f.Stmts)
	w.uncalledFuncs(s)
	return w.finish()
}

// Line is the planner's command model applied to one command line whose
// words are all known, as the evaluator runs it in dir: the effects the
// command has (what rm deletes, what curl reaches, the command a wrapper
// or `sh -c` runs), with the same handlers, options and targets as
// [Analyze]. The runtime observer (providers/session/shell) records these,
// so that a plan and the journal describe a command alike. The program is
// taken as resolved (no PATH check), targets are not link-resolved and
// nothing is estimated; only what decides a target is looked at (whether
// a destination is a directory, a repository's remote).
func Line(argv []string, dir string) *Analysis {
	w := newWalker(Env{Cwd: dir})
	w.light = true
	args := make([]arg, len(argv))
	for i, a := range argv {
		args[i] = arg{val: a, text: a}
	}
	w.run(w.topScope(), args, false)
	return w.finish()
}

func (w *walker) finish() *Analysis {
	a := &Analysis{Effects: []Effect{}, Heads: w.heads, Reversible: true, Uncertain: []string{}}
	if a.Heads == nil {
		a.Heads = []string{}
	}
	seen := map[policy.Effect]int{}
	for _, e := range w.fx {
		if i, dup := seen[e.Effect]; dup {
			if !e.Reversible && a.Effects[i].Reversible {
				a.Effects[i].Reversible, a.Effects[i].Reason = false, e.Reason
			}
			continue
		}
		seen[e.Effect] = len(a.Effects)
		a.Effects = append(a.Effects, e)
	}
	for _, e := range a.Effects {
		if !e.Reversible {
			a.Reversible = false
		}
		if e.Dynamic {
			// What is not known cannot be promised to be undoable.
			a.Dynamic, a.Reversible = true, false
			a.Uncertain = uniqueAppend(a.Uncertain, e.Reason)
			if e.Kind == policy.FSDelete || e.Kind == policy.FSWrite {
				a.Estimates.Truncated = true
			}
		}
		if e.Estimate != nil {
			a.Estimates.Files += e.Estimate.Files
			a.Estimates.Bytes += e.Estimate.Bytes
			a.Estimates.Truncated = a.Estimates.Truncated || e.Estimate.Truncated
		}
	}
	for _, n := range w.notes {
		a.Uncertain = uniqueAppend(a.Uncertain, n)
	}
	if len(a.Uncertain) > 0 {
		a.Reversible = false
	}
	return a
}

// uniqueAppend appends s to list unless present.
func uniqueAppend(list []string, s string) []string {
	if slices.Contains(list, s) {
		return list
	}
	return append(list, s)
}
