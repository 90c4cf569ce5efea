package plan

import (
	"strings"

	"github.com/shoal-sh/shoal/core/policy"
	"github.com/shoal-sh/shoal/providers/plan/analyze"
)

// Workspace is where a session lives: the directory it was created for,
// its temp directory and the home directory. It mirrors the Workspace of
// the policy's [sandbox] rules (core/policy/sandbox.go), which decide what
// a confined run may write.
type Workspace struct{ Dir, Tmp, Home string }

// WritableRules are the [sandbox] rules of the policy as the checks need
// them: whether a confined run of a session may write path.
type WritableRules interface {
	Writable(path string, ws Workspace) bool
}

// SessionBounds is optionally implemented by the sessions service: a
// session's workspace directory (the one it was created for) and temp
// directory, and whether its runs are confined by the OS. With it the
// policy's `.` is the workspace (not wherever a cd went since), rules
// marked `confined` apply, and a write the analyzer sees outside the
// writable paths is refused up front.
type SessionBounds interface {
	Bounds(session string) (dir, tmp string, confined bool)
}

// ServiceWritable names the service offering the [sandbox] rules as
// WritableRules. Without it a confined session's writes are left to the
// OS alone.
const ServiceWritable = "sandbox-writable"

// outsideRule is the rule a reason names when a target is outside the
// session's writable paths.
func outsideRule(ws Workspace) string {
	return "outside this session's writable paths (workspace " + ws.Dir + ", temp, caches)"
}

// bound adds to d, as ask, every write or delete the analyzer derived
// that a confined run of the session could not make: approving a plan of
// it is what widens the confinement for one run.
func (p *Provider) bound(d policy.Decision, an *analyze.Analysis, b bounds) policy.Decision {
	if !b.confined || p.writable == nil {
		return d
	}
	rule := outsideRule(b.ws)
	seen := map[string]bool{}
	for _, e := range an.Effects {
		if (e.Kind != policy.FSWrite && e.Kind != policy.FSDelete) || e.Dynamic || e.Target == "" {
			continue
		}
		t := e.Target
		if e.Glob {
			t = policy.StaticPrefix(t)
		}
		if p.writable.Writable(t, b.ws) || seen[e.Kind+"\x00"+e.Target] {
			continue
		}
		seen[e.Kind+"\x00"+e.Target] = true
		d.Reasons = append(d.Reasons, policy.Reason{Effect: e.Kind, Target: e.Target, Head: e.Head, Rule: rule, Verdict: policy.Ask})
		d.Verdict = policy.Stricter(d.Verdict, policy.Ask)
	}
	return d
}

// bounds is what scope learned of the session's confinement.
type bounds struct {
	ws       Workspace
	confined bool
}

// outsideOnly returns the message exec refuses with when all that blocks
// a source is writes outside the session's writable paths, or "".
func outsideOnly(d policy.Decision) string {
	var parts []string
	rule := ""
	for _, r := range d.Blocking() {
		if r.Verdict != policy.Ask || !strings.HasPrefix(r.Rule, "outside this session's writable paths") {
			return ""
		}
		rule = r.Rule
		verb := "writes "
		if r.Effect == policy.FSDelete {
			verb = "deletes "
		}
		parts = append(parts, verb+r.Target)
	}
	if len(parts) == 0 {
		return ""
	}
	const most = 3
	if len(parts) > most {
		parts = append(parts[:most], "more")
	}
	return strings.Join(parts, ", ") + ", " + rule + ": plan it with shoal_plan and have it approved"
}
