package plan

import (
	"strings"

	"github.com/shoal-sh/shoal/core/policy"
	"github.com/shoal-sh/shoal/providers/plan/analyze"
)

// SessionBounds is optionally implemented by the sessions service: a
// session's workspace directory (the one it was created for) and temp
// directory, and whether its runs are confined by the OS. With it the
// policy's `.` is the workspace (not wherever a cd went since), rules
// marked `confined` apply, and a write the analyzer sees outside the
// writable paths is refused up front.
type SessionBounds interface {
	Bounds(session string) (dir, tmp string, confined bool)
}

// outsideRule is the rule a reason names when a target is outside the
// session's writable paths.
func outsideRule(ws policy.Workspace) string {
	return "outside this session's writable paths (workspace " + ws.Dir + ", temp, caches)"
}

// bound adds to d, as ask, every write or delete the analyzer derived
// that a confined run of the session could not make under the policy's
// [sandbox] rules: approving a plan of it is what widens the confinement
// for one run.
func (p *Provider) bound(d policy.Decision, an *analyze.Analysis, b bounds) policy.Decision {
	if !b.confined {
		return d
	}
	sb := p.Policy().Sandbox()
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
		if sb.Writable(t, b.ws) || seen[e.Kind+"\x00"+e.Target] {
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
	ws       policy.Workspace
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
