package plan

import (
	"context"
	"errors"

	"github.com/shoal-sh/shoal/core"
	"github.com/shoal-sh/shoal/core/policy"
	"github.com/shoal-sh/shoal/core/rpc"
	"github.com/shoal-sh/shoal/providers/plan/analyze"
	"mvdan.cc/sh/v3/syntax"
)

// Check analyzes src and decides it for principal under pol. It is the
// whole plan-time judgement without a plan: exec uses it to refuse what is
// not allowed outright.
func Check(pol *policy.Policy, principal, src string, env analyze.Env, ctx policy.DecideContext) (policy.Decision, *analyze.Analysis, error) {
	an, err := analyze.Analyze(src, env)
	if err != nil {
		return policy.Decision{}, nil, err
	}
	return pol.Decide(principal, an.PolicyEffects(), ctx), an, nil
}

// Refusal is the POLICY_REFUSED error for a decision that is not allow:
// it names what needs a look and says how to go on.
func Refusal(d policy.Decision) *rpc.Error {
	var msg string
	if d.Verdict == policy.Deny {
		msg = "the policy denies this source (" + d.Summary() + "); it cannot run, and no approval can change that: change the source"
	} else {
		msg = "this source needs a plan: the policy says ask (" + d.Summary() + "). Call plan.create {source} (MCP: shoal_plan) to see every effect, have a principal with the Approve grant approve it, then run it with plan.apply (MCP: shoal_apply)"
	}
	return &rpc.Error{Code: rpc.PolicyRefused, Message: msg, Data: map[string]any{
		"name": rpc.PolicyRefused.Name(), "verdict": d.Verdict, "reasons": d.Blocking(),
	}}
}

// CheckExec implements the session provider's PolicyCheck: nil when the
// caller may run source in cwd without a plan, POLICY_REFUSED otherwise.
// file is source already parsed as bash, or nil to parse it here. A
// source that does not parse is refused as invalid params, so it never
// runs unvetted.
func (p *Provider) CheckExec(_ context.Context, c *core.Caller, file *syntax.File, source, cwd string) error {
	env, dctx := p.scope(c, cwd)
	var d policy.Decision
	if file != nil {
		d = p.Policy().Decide(c.Principal, analyze.AnalyzeFile(file, env).PolicyEffects(), dctx)
	} else {
		var err error
		if d, _, err = Check(p.Policy(), c.Principal, source, env, dctx); err != nil {
			if errors.Is(err, analyze.ErrSyntax) {
				return syntaxError(err)
			}
			return err
		}
	}
	if d.Verdict == policy.Allow {
		return nil
	}
	return Refusal(d)
}
