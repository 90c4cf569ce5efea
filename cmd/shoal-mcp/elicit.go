package main

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"

	"github.com/shoal-sh/shoal/core/wire"
)

// elicitTimeout bounds how long the facade waits for the person to answer
// an approval form.
const elicitTimeout = 10 * time.Minute

// approvalMessage is the form's text: what would run, what it would do,
// whether it can be undone, and why the policy asks.
func approvalMessage(p *wire.Plan) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s (%s) asks to run a plan the policy does not allow on its own.\n\n", p.Principal, p.Session)
	fmt.Fprintf(&b, "Source:\n  %s\n\n", strings.ReplaceAll(p.Source, "\n", "\n  "))
	b.WriteString("Effects:\n")
	if len(p.EffectDetails) == 0 {
		b.WriteString("  (none the analyzer could see)\n")
	}
	for _, d := range p.EffectDetails {
		rev := "reversible"
		if !d.Reversible {
			rev = "NOT reversible"
		}
		fmt.Fprintf(&b, "  %-12s %s (%s)\n", d.Kind, d.Target, rev)
	}
	overall := "can be undone"
	if !p.Reversible {
		overall = "can NOT be undone"
	}
	fmt.Fprintf(&b, "As a whole it %s.\n\nVerdict: %s", overall, p.Verdict)
	for _, r := range p.Reasons {
		if r.Verdict != "allow" {
			fmt.Fprintf(&b, "\n  %s %s: %s (%s)", r.Effect, r.Target, r.Verdict, r.Rule)
		}
	}
	fmt.Fprintf(&b, "\n\nApprove %s to let it run once, or reject it.", p.Ref)
	return b.String()
}

// approvalSchema is the form: a decision and an optional reason.
var approvalSchema = map[string]any{
	"type": "object",
	"properties": map[string]any{
		"decision": map[string]any{"type": "string", "title": "Decision", "enum": []string{"approve", "reject"},
			"enumNames": []string{"Approve: run it once", "Reject: it never runs"}},
		"reason": map[string]any{"type": "string", "title": "Reason", "description": "Kept in the journal with the decision"},
	},
	"required": []string{"decision"},
}

// askApproval asks the person at the host to decide a pending plan, when
// the client can show a form, and passes the answer to the kernel
// (plan.approve/plan.reject with via "elicitation"; the kernel checks
// that the policy lets this principal's host decide). It returns what
// happened for the tool's text, "" when nothing was asked.
func (f *Facade) askApproval(ctx context.Context, ref string) string {
	s, ok := server.ClientSessionFromContext(ctx).(*session)
	if !ok || !s.clientHas("elicitation", "form") {
		return ""
	}
	p, pending := f.pendingPlan(ctx, ref)
	if !pending {
		return ""
	}
	ectx, cancel := context.WithTimeout(ctx, elicitTimeout)
	defer cancel()
	res, err := s.request(ectx, "elicitation/create", map[string]any{
		"mode": "form", "message": approvalMessage(p), "requestedSchema": approvalSchema,
	})
	if err != nil {
		f.log.Info("approval form failed", "ref", ref, "err", err)
		return "The approval form could not be shown (" + err.Error() + ")."
	}
	var answer formAnswer
	if err := json.Unmarshal(res, &answer); err != nil {
		return fmt.Sprintf("The approval form's answer for %s was unreadable: %v.", ref, err)
	}
	return f.decide(ctx, ref, answer)
}

// pendingPlan is the plan ref names when it waits for a person's
// approval; ok is false otherwise (allowed, denied, decided, unknown).
func (f *Facade) pendingPlan(ctx context.Context, ref string) (*wire.Plan, bool) {
	p := new(wire.Plan)
	if err := f.link.call(ctx, "plan.get", map[string]string{"ref": ref}, p); err != nil {
		return p, false
	}
	return p, p.Verdict == "ask" && p.Approval == "pending"
}

// formAnswer is an elicitation result of the approval form.
type formAnswer struct {
	Action  string `json:"action"`
	Content struct {
		Decision string `json:"decision"`
		Reason   string `json:"reason"`
	} `json:"content"`
}

// decide passes the person's answer to the kernel (plan.approve or
// plan.reject with via "elicitation"; the kernel checks that the policy
// lets this principal's host decide) and says what happened.
func (f *Facade) decide(ctx context.Context, ref string, answer formAnswer) string {
	if answer.Action != "accept" {
		return fmt.Sprintf("The person did not decide on %s in the host (%s).", ref, answer.Action)
	}
	method := "plan.approve"
	if answer.Content.Decision != "approve" {
		method = "plan.reject"
	}
	params := map[string]string{"ref": ref, "via": "elicitation"}
	if answer.Content.Reason != "" {
		params["reason"] = answer.Content.Reason
	}
	if err := f.link.call(ctx, method, params, nil); err != nil {
		return "The host's decision was not accepted: " + kernelError(err)
	}
	if method == "plan.reject" {
		return fmt.Sprintf("The person rejected %s in the host: %s", ref, answer.Content.Reason)
	}
	return fmt.Sprintf("The person approved %s in the host.", ref)
}

// approvalInputID names the approval form among a call's input requests.
const approvalInputID = "approval"

// askApprovalStateless is askApproval for a 2026-07-28 client, which has
// no server-to-client requests: the first shoal_apply of a pending plan
// answers input_required with the form (SEP-2322), and the client calls
// again with the person's answer and the plan ref as requestState. It
// returns the result to send (the form), or the note of a decision taken.
func (f *Facade) askApprovalStateless(ctx context.Context, req mcp.CallToolRequest, ref string) (*mcp.CallToolResult, string) {
	info := server.RequestProtocolInfoFromContext(ctx)
	if info == nil || info.ClientCapabilities == nil || info.ClientCapabilities.Elicitation == nil {
		return nil, ""
	}
	if el := server.ElicitationResponse(req.Params.InputResponses, approvalInputID); el != nil && req.Params.RequestState == ref {
		var answer formAnswer
		answer.Action = string(el.Action)
		if m, ok := el.Content.(map[string]any); ok {
			answer.Content.Decision, _ = m["decision"].(string)
			answer.Content.Reason, _ = m["reason"].(string)
		}
		return nil, f.decide(ctx, ref, answer)
	}
	p, ok := f.pendingPlan(ctx, ref)
	if !ok {
		return nil, ""
	}
	return server.NewInputRequestBuilder(ref).Elicit(approvalInputID, mcp.ElicitationParams{
		Mode: "form", Message: approvalMessage(p), RequestedSchema: approvalSchema,
	}).ToolResult(), ""
}

// approveCommand is the shoal command a person runs to approve ref: it
// names the facade's session unless that is the CLI's default, main.
func (f *Facade) approveCommand(ref string) string {
	if f.target != nil && f.target.settled() && f.target.name != "main" {
		return "shoal plan approve --session " + f.target.name + " " + ref
	}
	return "shoal plan approve " + ref
}
