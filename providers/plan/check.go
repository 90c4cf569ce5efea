package plan

import (
	"context"

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
	switch outside := outsideOnly(d); {
	case d.Verdict == policy.Deny:
		msg = "the policy denies this source (" + d.Summary() + "); it cannot run, and no approval can change that: change the source"
	case outside != "":
		msg = outside
	default:
		msg = "this source needs a plan: the policy says ask (" + d.Summary() + "). Call plan.create {source} (MCP: shoal_plan) to see every effect, have a principal with the Approve grant approve it, then run it with plan.apply (MCP: shoal_apply)"
	}
	return &rpc.Error{Code: rpc.PolicyRefused, Message: msg, Data: map[string]any{
		"name": rpc.PolicyRefused.Name(), "verdict": d.Verdict, "reasons": d.Blocking(),
	}}
}

// CheckExec implements the session provider's PolicyCheck: nil when the
// caller may run source in cwd without a plan, POLICY_REFUSED otherwise.
// file is source already parsed as bash, or nil to parse it here; vars and
// funcs give the session's variables and functions as the run will see
// them (nil: as the sessions service has them now). A source that does
// not parse is refused as invalid params, so it never runs unvetted.
func (p *Provider) CheckExec(_ context.Context, c *core.Caller, file *syntax.File, source, cwd string,
	vars func(string) (string, bool), funcs func(string) (*syntax.Stmt, bool)) error {
	d, err := p.judge(c, file, source, cwd, vars, funcs, false)
	if err != nil {
		return err
	}
	if d.Verdict == policy.Allow {
		return nil
	}
	return Refusal(d)
}

// CheckTerminal is CheckExec for a program started on a terminal
// (pty.open): the same analysis and refusal, except that a shell,
// interpreter or editor reading its commands from the terminal is
// interactive work, not unknown code (analyze.Env.Terminal).
func (p *Provider) CheckTerminal(_ context.Context, c *core.Caller, source, cwd string) error {
	d, err := p.judge(c, nil, source, cwd, nil, nil, true)
	if err != nil {
		return err
	}
	if d.Verdict == policy.Allow {
		return nil
	}
	return Refusal(d)
}

// judge is CheckExec's and CheckTerminal's decision.
func (p *Provider) judge(c *core.Caller, file *syntax.File, source, cwd string,
	vars func(string) (string, bool), funcs func(string) (*syntax.Stmt, bool), terminal bool) (policy.Decision, error) {
	env, dctx, b := p.scope(c, cwd)
	env.Terminal = terminal
	if vars != nil {
		env.Lookup = vars
		if h, ok := vars("HOME"); ok && h != "" && h[0] == '/' {
			env.Home, dctx.Home = h, h
		}
	}
	if funcs != nil {
		env.Func = funcs
	}
	var an *analyze.Analysis
	if file != nil {
		an = analyze.AnalyzeFile(file, env)
	} else {
		var err error
		if an, err = analyze.Analyze(source, env); err != nil {
			return policy.Decision{}, syntaxError(err)
		}
	}
	return p.bound(p.Policy().Decide(c.Principal, an.PolicyEffects(), dctx), an, b), nil
}
