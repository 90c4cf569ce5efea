package plan

import (
	"cmp"
	"context"
	"crypto/rand"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"path/filepath"
	"slices"
	"strings"

	"github.com/zeebo/blake3"

	"github.com/shoal-sh/shoal/core"
	"github.com/shoal-sh/shoal/core/bus"
	"github.com/shoal-sh/shoal/core/policy"
	"github.com/shoal-sh/shoal/core/rpc"
	"github.com/shoal-sh/shoal/providers/journal"
	"github.com/shoal-sh/shoal/providers/plan/analyze"
)

// Methods implements core.MethodProvider.
func (p *Provider) Methods() map[string]core.Method {
	return map[string]core.Method{
		"plan.create":  p.mCreate,
		"plan.get":     p.mGet,
		"plan.list":    p.mList,
		"plan.approve": p.mApprove,
		"plan.reject":  p.mReject,
		"plan.apply":   p.mApply,
	}
}

type createParams struct {
	Source string `json:"source"`
}

type refParams struct {
	Ref string `json:"ref"`
}

type decideParams struct {
	Ref    string `json:"ref"`
	Reason string `json:"reason,omitempty"`
	// Via "elicitation": the decision is a person's, asked by the
	// caller's MCP host (see [ViaElicitation]).
	Via string `json:"via,omitempty"`
}

type applyParams struct {
	Ref       string `json:"ref"`
	TimeoutMS int64  `json:"timeout_ms,omitempty"`
}

func (p *Provider) mCreate(ctx context.Context, c *core.Caller, raw json.RawMessage) (any, error) {
	var a createParams
	if err := rpc.DecodeParams(raw, &a); err != nil {
		return nil, err
	}
	return p.Create(ctx, c, a.Source)
}

// Create makes a plan of source for the caller: analysis, verdict,
// approval state, and a snapshot of its targets for the staleness check.
func (p *Provider) Create(_ context.Context, c *core.Caller, source string) (Record, error) {
	if strings.TrimSpace(source) == "" {
		return Record{}, rpc.Errorf(rpc.InvalidParams, "source is empty: give the shell source to plan, e.g. {\"source\": \"rm -rf build\"}")
	}
	env, dctx, b := p.scope(c, "")
	an, err := analyze.Analyze(source, env)
	if err != nil {
		return Record{}, syntaxError(err)
	}
	d := p.bound(p.Policy().Decide(c.Principal, an.PolicyEffects(), dctx), an, b)
	approval := NotRequired
	if d.Verdict == policy.Ask {
		approval = Pending
	}
	e := &entry{
		rec: Record{
			Session: c.Session, Principal: c.Principal, Source: source, Cwd: env.Cwd,
			Created:       p.now().UnixNano(),
			Effects:       an.Kinds(),
			EffectDetails: an.Effects,
			Heads:         an.Heads,
			Reversible:    an.Reversible,
			Estimates:     an.Estimates,
			Dynamic:       an.Dynamic,
			Uncertain:     an.Uncertain,
			Verdict:       d.Verdict,
			Reasons:       d.Reasons,
			Approval:      approval,
		},
		snap:    takeSnapshot(an.Effects),
		effects: an.PolicyEffects(),
	}
	p.mu.Lock()
	for {
		h := refHash(c.Session, c.Principal, source)
		if _, dup := p.plans[h]; !dup {
			e.rec.Ref, e.rec.URI = "plan:"+h, "shoal://plan/"+h
			p.seq++
			e.seq = p.seq
			p.plans[h] = e
			break
		}
	}
	p.evictLocked()
	p.mu.Unlock()

	e.mu.Lock()
	rec := e.view()
	e.mu.Unlock()
	if approval == Pending {
		p.announce(rec, "requested", c.Principal, "")
	}
	return rec, nil
}

// refHash binds session, principal and source, plus a nonce so that two
// plans of the same source never share a ref (SPEC P4).
func refHash(session, principal, source string) string {
	var nonce [16]byte
	if _, err := rand.Read(nonce[:]); err != nil {
		panic("plan: no randomness: " + err.Error())
	}
	h := blake3.New()
	for _, f := range []string{session, principal, source} {
		var n [8]byte
		binary.BigEndian.PutUint64(n[:], uint64(len(f)))
		h.Write(n[:])
		h.Write([]byte(f))
	}
	h.Write(nonce[:])
	return hex.EncodeToString(h.Sum(nil))[:16]
}

// evictLocked keeps at most maxPlans. When over, it drops a tenth of the
// plans in one pass, finished ones (applied, rejected, denied) first, then
// the oldest, so the cost of a scan is shared by many creates.
func (p *Provider) evictLocked() {
	limit := p.maxPlans
	if limit <= 0 {
		limit = maxPlans
	}
	if len(p.plans) <= limit {
		return
	}
	type cand struct {
		key      string
		finished bool
		seq      uint64
	}
	cands := make([]cand, 0, len(p.plans))
	for k, e := range p.plans {
		e.mu.Lock()
		finished := e.rec.Applied || e.rec.Approval == Rejected || e.rec.Verdict == policy.Deny
		e.mu.Unlock()
		cands = append(cands, cand{k, finished, e.seq})
	}
	slices.SortFunc(cands, func(a, b cand) int {
		if a.finished != b.finished {
			if a.finished {
				return -1
			}
			return 1
		}
		return cmp.Compare(a.seq, b.seq)
	})
	for _, c := range cands[:len(cands)-limit*9/10] {
		delete(p.plans, c.key)
	}
}

func (p *Provider) mGet(_ context.Context, c *core.Caller, raw json.RawMessage) (any, error) {
	var a refParams
	if err := rpc.DecodeParams(raw, &a); err != nil {
		return nil, err
	}
	return p.get(c, a.Ref)
}

func (p *Provider) mList(_ context.Context, c *core.Caller, raw json.RawMessage) (any, error) {
	var a struct{}
	if err := rpc.DecodeParams(raw, &a); err != nil {
		return nil, err
	}
	plans := p.visible(c)
	if plans == nil {
		plans = []Record{}
	}
	return List{Plans: plans}, nil
}

// List is plan.list's answer (wire.PlanList on the wire).
type List struct {
	Plans []Record `json:"plans"`
}

func (p *Provider) mApprove(ctx context.Context, c *core.Caller, raw json.RawMessage) (any, error) {
	var a decideParams
	if err := rpc.DecodeParams(raw, &a); err != nil {
		return nil, err
	}
	return p.decideVia(ctx, c, a, true)
}

func (p *Provider) mReject(ctx context.Context, c *core.Caller, raw json.RawMessage) (any, error) {
	var a decideParams
	if err := rpc.DecodeParams(raw, &a); err != nil {
		return nil, err
	}
	return p.decideVia(ctx, c, a, false)
}

// ViaElicitation is plan.approve's and plan.reject's via for a decision a
// person made in the caller's MCP host (an elicitation form the facade
// showed them).
const ViaElicitation = "elicitation"

// HostApprover is the approver a decision via elicitation is recorded
// under: a person, reached through the host.
const HostApprover = "human:host-elicitation"

func (p *Provider) decideVia(ctx context.Context, c *core.Caller, a decideParams, approve bool) (Record, error) {
	switch a.Via {
	case "":
		return p.Decide(ctx, c, a.Ref, approve, a.Reason)
	case ViaElicitation:
	default:
		return Record{}, rpc.Errorf(rpc.InvalidParams, "via %q: the only way is \"elicitation\" (a person asked by the MCP host); leave it out to decide as yourself", a.Via)
	}
	e, err := p.lookup(c, a.Ref)
	if err != nil {
		return Record{}, err
	}
	e.mu.Lock()
	owner, session := e.rec.Principal, e.rec.Session
	e.mu.Unlock()
	if owner != c.Principal || session != c.Session {
		return Record{}, rpc.Errorf(rpc.Forbidden, "plan %s belongs to %s in session %s; a host asks its person only about its own plans", a.Ref, owner, session)
	}
	if !slices.Contains(p.Policy().Grants(owner), policy.GrantHostApproval) {
		return Record{}, rpc.Errorf(rpc.Forbidden, "the policy does not let the person at %s's host approve its plans (no HostApproval grant for it in [grants]); run `%s`", owner, ApproveCommand(session, a.Ref))
	}
	host := &core.Caller{Session: c.Session, Principal: HostApprover, Grants: core.Grants{policy.GrantApprove}, ConnID: c.ConnID}
	reason := a.Reason
	if reason == "" {
		reason = "decided in " + owner + "'s MCP host"
	}
	return p.Decide(ctx, host, a.Ref, approve, reason)
}

// Decide approves (approve=true) or rejects a plan on behalf of c, who
// must hold the Approve grant. The decision is journaled (kind approval)
// and published on the approval channel.
func (p *Provider) Decide(ctx context.Context, c *core.Caller, ref string, approve bool, reason string) (Record, error) {
	e, err := p.lookup(c, ref)
	if err != nil {
		return Record{}, err
	}
	verb := "approve"
	if !approve {
		verb = "reject"
	}
	if !p.canApprove(c) {
		return Record{}, rpc.Errorf(rpc.Forbidden, "%s does not hold the Approve grant, so it cannot %s plans; a principal with the grant (human:* by default; see [grants] in policy.toml) can run `%s`", c.Principal, verb, strings.Replace(ApproveCommand(e.rec.Session, e.rec.Ref), "approve", verb, 1))
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	rec := &e.rec
	switch {
	case rec.Applied || e.applying:
		return Record{}, rpc.Errorf(rpc.PlanUsed, "plan %s was applied already (%s); there is nothing left to %s", rec.Ref, rec.AppliedRef, verb)
	case rec.Verdict == policy.Deny && approve:
		return Record{}, rpc.Errorf(rpc.Forbidden, "the policy denies plan %s (%s); no approval can override a deny: change the source", rec.Ref, policy.Decision{Verdict: rec.Verdict, Reasons: rec.Reasons}.Summary())
	case approve && rec.Approval == Approved, !approve && rec.Approval == Rejected:
		return e.view(), nil // already so
	case approve && rec.Approval == NotRequired:
		return Record{}, rpc.Errorf(rpc.InvalidParams, "plan %s needs no approval (the policy allows it); apply it with plan.apply", rec.Ref)
	case approve && rec.Approval == Rejected:
		return Record{}, rpc.Errorf(rpc.InvalidParams, "plan %s was rejected by %s; a rejection is final: make a new plan", rec.Ref, rec.RejectedBy)
	}
	state := Approved
	if !approve {
		state = Rejected
	}
	if j := p.journal; j != nil {
		row := core.JournalRow{
			Session: c.Session, Principal: c.Principal, Kind: "approval",
			Head: "plan." + verb, Source: rec.Source, Effects: rec.Effects, OK: true, Ref: rec.Ref,
		}
		if _, err := j.Append(ctx, row); err != nil {
			return Record{}, rpc.Errorf(rpc.JournalUnavailable, "journal the %s of %s: %v; nothing was changed, try again once the journal can be written", verb, rec.Ref, err)
		}
	} else if p.host != nil && p.host.Log != nil {
		p.host.Log.Warn("plan decision not journaled: no journal service", "ref", rec.Ref)
	}
	rec.Approval = state
	rec.Decided = p.now().UnixNano()
	rec.DecisionReason = reason
	if approve {
		rec.ApprovedBy, rec.RejectedBy = c.Principal, ""
	} else {
		rec.RejectedBy, rec.ApprovedBy = c.Principal, ""
	}
	out := e.view()
	p.announce(out, state, c.Principal, reason)
	return out, nil
}

// announce publishes a plan's approval news on the approval channel.
func (p *Provider) announce(rec Record, event, by, reason string) {
	if p.host == nil || p.host.Bus == nil {
		return
	}
	payload, err := json.Marshal(map[string]any{
		"event":     event,
		"ref":       rec.Ref,
		"uri":       rec.URI,
		"session":   rec.Session,
		"principal": rec.Principal,
		"by":        by,
		"reason":    journal.Redact(reason),
		"verdict":   rec.Verdict,
		"approval":  rec.Approval,
		"effects":   rec.Effects,
		"source":    oneLine(rec.Source, 200),
	})
	if err != nil {
		return
	}
	if _, err := p.host.Bus.Publish(bus.ChannelApproval, payload); err != nil && p.host.Log != nil {
		p.host.Log.Warn("publish approval event", "ref", rec.Ref, "err", err)
	}
}

func (p *Provider) mApply(ctx context.Context, c *core.Caller, raw json.RawMessage) (any, error) {
	var a applyParams
	if err := rpc.DecodeParams(raw, &a); err != nil {
		return nil, err
	}
	return p.Apply(ctx, c, a.Ref, a.TimeoutMS)
}

// Apply runs an allowed or approved plan, once, after checking that it
// still describes what would run: same working directory, same effects,
// unchanged targets. It returns the executor's reply.
func (p *Provider) Apply(ctx context.Context, c *core.Caller, ref string, timeoutMS int64) (*core.ExecReply, error) {
	e, err := p.lookup(c, ref)
	if err != nil {
		return nil, err
	}
	e.mu.Lock()
	rec := e.rec
	switch {
	case rec.Principal != c.Principal:
		e.mu.Unlock()
		return nil, rpc.Errorf(rpc.Forbidden, "plan %s belongs to %s; only the principal that made a plan applies it", rec.Ref, rec.Principal)
	case rec.Applied || e.applying:
		e.mu.Unlock()
		return nil, rpc.Errorf(rpc.PlanUsed, "plan %s was applied already (%s); plans run once: make a new plan to run it again", rec.Ref, rec.AppliedRef)
	case rec.Verdict == policy.Deny:
		e.mu.Unlock()
		return nil, rpc.Errorf(rpc.PlanNotApproved, "the policy denies plan %s (%s); it can never be applied: change the source", rec.Ref, policy.Decision{Verdict: rec.Verdict, Reasons: rec.Reasons}.Summary())
	case rec.Approval == Rejected:
		e.mu.Unlock()
		return nil, rpc.Errorf(rpc.PlanNotApproved, "plan %s was rejected by %s; it cannot be applied: change the source and make a new plan", rec.Ref, rec.RejectedBy)
	case rec.Approval == Pending:
		e.mu.Unlock()
		return nil, rpc.Errorf(rpc.PlanNotApproved, "plan %s waits for approval (%s); a principal with the Approve grant must approve it first (`%s`), then apply again", rec.Ref, policy.Decision{Verdict: rec.Verdict, Reasons: rec.Reasons}.Summary(), ApproveCommand(rec.Session, rec.Ref))
	}
	e.applying = true
	e.mu.Unlock()

	release := func() {
		e.mu.Lock()
		e.applying = false
		e.mu.Unlock()
	}
	if err := p.fresh(c, e); err != nil {
		release()
		return nil, err
	}
	ex := p.executor
	if ex == nil {
		release()
		return nil, rpc.Errorf(rpc.Unavailable, "no executor is loaded, so plan %s cannot run now; it stays unapplied", rec.Ref)
	}
	reply, err := ex.Exec(ctx, c, core.ExecRequest{Source: rec.Source, TimeoutMS: timeoutMS, Kind: "plan.apply", SkipPolicy: true, PlanRef: rec.Ref, Widen: widenTargets(rec.EffectDetails), HostCaps: reachesMachine(rec.EffectDetails)})
	if err == nil && reply == nil {
		err = rpc.Errorf(rpc.Internal, "the executor gave no reply for plan %s", rec.Ref)
	}
	if err != nil {
		// The executor could not start the source: the plan stays usable.
		release()
		return nil, err
	}
	e.mu.Lock()
	e.applying = false
	e.rec.Applied = true
	e.rec.AppliedRef = reply.Ref
	e.mu.Unlock()
	return reply, nil
}

// fresh checks that plan e still describes what applying it would do.
func (p *Provider) fresh(c *core.Caller, e *entry) error {
	rec := e.rec
	env, _, _ := p.scope(c, "")
	if env.Cwd != rec.Cwd {
		return rpc.Errorf(rpc.PlanStale, "plan %s was made in %s but the session is now in %s; cd back or make a new plan", rec.Ref, rec.Cwd, env.Cwd)
	}
	an, err := analyze.Analyze(rec.Source, env)
	if err != nil {
		return syntaxError(err)
	}
	now := an.PolicyEffects()
	if !slices.Equal(now, e.effects) {
		return rpc.Errorf(rpc.PlanStale, "plan %s no longer describes what would run (%s); review it again with plan.create", rec.Ref, effectDiff(e.effects, now))
	}
	if err := e.snap.check(); err != nil {
		return rpc.Errorf(rpc.PlanStale, "plan %s: %v since the plan was made; review it again with plan.create", rec.Ref, err)
	}
	return nil
}

func effectDiff(was, now []policy.Effect) string {
	for i := 0; i < len(was) || i < len(now); i++ {
		switch {
		case i >= len(now):
			return "no longer: " + describe(was[i])
		case i >= len(was):
			return "now also: " + describe(now[i])
		case was[i] != now[i]:
			return "was " + describe(was[i]) + ", now " + describe(now[i])
		}
	}
	return "effects differ"
}

func describe(e policy.Effect) string {
	s := e.Kind + " " + e.Target
	if e.Overwrite {
		s += " (overwrite)"
	}
	return s
}

func syntaxError(err error) error {
	if errors.Is(err, analyze.ErrSyntax) {
		return rpc.Errorf(rpc.InvalidParams, "%v; fix the shell syntax and try again", err)
	}
	return rpc.Errorf(rpc.Internal, "analyze source: %v", err)
}

// widenTargets are the paths an approved plan may write beyond the
// session's confinement, for its own run: the write and delete targets
// the analyzer derived. A glob or dynamic target names no path and
// widens nothing (the OS keeps holding that line).
// reachesMachine reports whether a plan has a whole-machine effect, which
// its approved run may need the kernel's capabilities for.
func reachesMachine(effects []analyze.Effect) bool {
	return slices.ContainsFunc(effects, func(e analyze.Effect) bool { return e.Machine })
}

func widenTargets(effects []analyze.Effect) []string {
	var out []string
	for _, e := range effects {
		if (e.Kind != "fs.write" && e.Kind != "fs.delete") || e.Glob || e.Dynamic || !filepath.IsAbs(e.Target) {
			continue
		}
		out = append(out, e.Target)
	}
	return out
}
