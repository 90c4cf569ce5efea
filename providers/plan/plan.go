// Package plan serves the plan family: plan.create analyzes shell source
// without running it and asks the policy for a verdict; plan.approve and
// plan.reject record a decision by a principal holding the Approve grant;
// plan.apply runs an allowed or approved plan once, through the session's
// executor, after checking that nothing it targets changed since (SPEC
// P1–P4). The package also offers the check exec uses to refuse sources
// the policy does not allow outright ([Provider.CheckExec]).
//
// Plans live in kernel memory and vanish on restart. A plan is visible to
// the principal that made it, in its session, and to principals holding
// the Approve grant in that session; to anyone else it does not exist.
package plan

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"mvdan.cc/sh/v3/syntax"

	"github.com/shoal-sh/shoal/core"
	"github.com/shoal-sh/shoal/core/policy"
	"github.com/shoal-sh/shoal/core/rpc"
	"github.com/shoal-sh/shoal/core/uri"
	"github.com/shoal-sh/shoal/internal/clip"
	"github.com/shoal-sh/shoal/providers/journal"
	"github.com/shoal-sh/shoal/providers/plan/analyze"
)

// SessionVars is optionally implemented by the sessions service: with it
// the analyzer resolves $NAME to the session's value instead of treating
// every variable as unknown (which makes such targets dynamic, so ask).
type SessionVars interface {
	Var(session, name string) (string, bool)
}

// SessionFuncs is optionally implemented by the sessions service: with it
// a call to a function defined by an earlier execution is analyzed as its
// body. Without it a command name that is no program on PATH is treated
// as unknown code (dynamic, so ask).
type SessionFuncs interface {
	Func(session, name string) (*syntax.Stmt, bool)
}

// Approval states.
const (
	NotRequired = "not_required"
	Pending     = "pending"
	Approved    = "approved"
	Rejected    = "rejected"
)

// maxPlans bounds the plans kept in memory; past it the oldest finished
// plans (applied, rejected, denied) go first, then the oldest.
const maxPlans = 4096

// Record is a plan as clients see it (plain JSON).
type Record struct {
	Ref       string `json:"ref"`
	URI       string `json:"uri"`
	Session   string `json:"session"`
	Principal string `json:"principal"`
	Source    string `json:"source"`
	// Cwd is the working directory the plan was made for; applying it
	// from another one is stale.
	Cwd     string `json:"cwd"`
	Created int64  `json:"created"`
	// Effects are the distinct effect kinds (the journal's vocabulary);
	// EffectDetails has every effect with its target and reversibility.
	Effects       []string         `json:"effects"`
	EffectDetails []analyze.Effect `json:"effect_details"`
	Heads         []string         `json:"heads"`
	Reversible    bool             `json:"reversible"`
	Estimates     analyze.Estimate `json:"estimates"`
	Dynamic       bool             `json:"dynamic"`
	// Uncertain says what the analysis could not know (see
	// analyze.Analysis.Uncertain); a plan with any is never reversible.
	Uncertain  []string        `json:"uncertain"`
	Verdict    string          `json:"verdict"`
	Reasons    []policy.Reason `json:"reasons"`
	Approval   string          `json:"approval"`
	ApprovedBy string          `json:"approved_by,omitempty"`
	RejectedBy string          `json:"rejected_by,omitempty"`
	// DecisionReason is the reason the approver or rejecter gave.
	DecisionReason string `json:"decision_reason,omitempty"`
	Decided        int64  `json:"decided,omitempty"`
	Applied        bool   `json:"applied"`
	AppliedRef     string `json:"applied_ref,omitempty"`
	// Next says what can be done with the plan now, for a model reading it.
	Next string `json:"next"`
}

// entry is a plan with its private state.
type entry struct {
	mu       sync.Mutex
	rec      Record
	snap     snapshot
	effects  []policy.Effect // as analyzed; compared again at apply
	applying bool
	seq      uint64 // creation order
}

// Provider serves the plan family.
type Provider struct {
	host   *core.Host
	policy *policy.Policy
	now    func() time.Time
	// The services the provider uses, set at start-up (Needs); nil
	// when not offered.
	journal  core.Journal
	executor core.Executor
	sessions core.Sessions

	mu       sync.Mutex
	plans    map[string]*entry // by hex
	seq      uint64
	maxPlans int // 0: the maxPlans constant
}

var (
	_ core.Provider        = (*Provider)(nil)
	_ core.Provisioner     = (*Provider)(nil)
	_ core.MethodProvider  = (*Provider)(nil)
	_ core.SessionObserver = (*Provider)(nil)
	_ core.Needer          = (*Provider)(nil)
	_ core.Offerer         = (*Provider)(nil)
	_ core.PolicyCheck     = (*Provider)(nil)
)

// New returns the plan provider. Its policy is the kernel's (the policy
// service), or $STATE/policy.toml when no service offers one.
func New() *Provider {
	return &Provider{plans: map[string]*entry{}, now: time.Now}
}

// Family implements core.Provider.
func (*Provider) Family() string { return "plan" }

// Needs implements core.Needer. Without the policy service the provider
// reads $STATE/policy.toml; without the sessions service it judges in the
// kernel's directory; decisions go unjournaled without a journal, and
// plan.apply needs the executor.
func (p *Provider) Needs() []core.Dependency {
	return []core.Dependency{
		core.Optional(core.ServicePolicy, &p.policy),
		core.Optional(core.ServiceJournal, &p.journal),
		core.Optional(core.ServiceExecutor, &p.executor),
		core.Optional(core.ServiceSessions, &p.sessions),
	}
}

// Offers implements core.Offerer.
func (p *Provider) Offers() []core.AnyKey { return []core.AnyKey{core.ServicePolicyCheck} }

// Provision implements core.Provisioner.
func (p *Provider) Provision(h *core.Host) error {
	p.host = h
	if p.policy == nil {
		pol, err := policy.Load(filepath.Join(h.StateDir, "policy.toml"))
		if err != nil {
			return err
		}
		p.policy = pol
	}
	core.Offer[core.PolicyCheck](h, core.ServicePolicyCheck, p)
	return nil
}

// Policy returns the policy the provider decides with.
func (p *Provider) Policy() *policy.Policy {
	if p.policy == nil {
		return policy.Default()
	}
	return p.policy
}

// Templates implements core.Provider.
func (*Provider) Templates() []core.Template {
	return []core.Template{{
		URITemplate: "shoal://plan/{ref}",
		Name:        "plan",
		Description: "A plan made by shoal_plan / plan.create: source, derived effects with targets and reversibility, estimates, policy verdict with reasons, approval state. Reading never applies it.",
		MimeType:    "application/json",
	}}
}

// List implements core.Provider: one entry per plan the caller may see.
func (p *Provider) List(_ context.Context, c *core.Caller) ([]core.Resource, error) {
	var out []core.Resource
	for _, rec := range p.visible(c) {
		out = append(out, core.Resource{
			URI:         rec.URI,
			Name:        rec.Ref,
			Description: fmt.Sprintf("%s, %s: %s", rec.Verdict, rec.Approval, oneLine(rec.Source, 80)),
			MimeType:    "application/json",
		})
	}
	return out, nil
}

// Read implements core.Provider.
func (p *Provider) Read(_ context.Context, c *core.Caller, u *uri.URI) (*core.Content, error) {
	if len(u.Segments) != 1 {
		return nil, rpc.Errorf(rpc.BadURI, "a plan URI is shoal://plan/{ref} with one segment, e.g. shoal://plan/7b2fd854cb805ba1")
	}
	rec, err := p.get(c, u.Segments[0])
	if err != nil {
		return nil, err
	}
	return &core.Content{Record: rec, Ref: rec.Ref}, nil
}

// SessionClosed implements core.SessionObserver: a session's plans go
// with it.
func (p *Provider) SessionClosed(session string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for k, e := range p.plans {
		if e.rec.Session == session {
			delete(p.plans, k)
		}
	}
}

// canApprove reports whether the caller holds the Approve grant. A
// caller attached with the agent credential never does, whatever the
// policy says.
func (p *Provider) canApprove(c *core.Caller) bool {
	if c.Credential == core.CredentialAgent {
		return false
	}
	if c.Grants.Has(policy.GrantApprove) {
		return true
	}
	for _, g := range p.Policy().Grants(c.Principal) {
		if g == policy.GrantApprove {
			return true
		}
	}
	return false
}

// sees reports whether c may see a plan: its owner, or an approver in its
// session.
func (p *Provider) sees(c *core.Caller, rec *Record) bool {
	if rec.Session != c.Session {
		return false
	}
	return rec.Principal == c.Principal || p.canApprove(c)
}

// lookup finds a plan the caller may see; anything else is NOT_FOUND, so
// other sessions' and principals' plans do not leak their existence.
func (p *Provider) lookup(c *core.Caller, ref string) (*entry, error) {
	hex := strings.TrimSpace(ref)
	hex = strings.TrimPrefix(hex, "shoal://plan/")
	hex = strings.TrimPrefix(hex, "plan:")
	if hex == "" {
		return nil, rpc.Errorf(rpc.InvalidParams, "ref is empty: give the plan's ref (plan:<hex>) from plan.create or plan.list")
	}
	p.mu.Lock()
	e := p.plans[hex]
	p.mu.Unlock()
	if e != nil {
		e.mu.Lock()
		ok := p.sees(c, &e.rec)
		e.mu.Unlock()
		if ok {
			return e, nil
		}
	}
	return nil, rpc.Errorf(rpc.NotFound, "no plan %s in this session for %s; plan.list shows the plans you can see (plans vanish when the kernel restarts)", oneLine(ref, 40), c.Principal)
}

func (p *Provider) get(c *core.Caller, ref string) (Record, error) {
	e, err := p.lookup(c, ref)
	if err != nil {
		return Record{}, err
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.view(), nil
}

// view returns the record with its Next hint; e.mu must be held.
func (e *entry) view() Record {
	r := e.rec
	// What is shown and published has its credentials redacted; the
	// entry keeps the source as written, which is what apply runs.
	r.Source, r.DecisionReason = journal.Redact(r.Source), journal.Redact(r.DecisionReason)
	ref := r.Ref
	switch {
	case r.Applied:
		r.Next = "applied already as " + r.AppliedRef + "; plans run once: make a new plan to run the source again"
	case r.Verdict == policy.Deny:
		r.Next = "the policy denies this source; no approval can change that: change the source"
	case r.Approval == Rejected:
		r.Next = "rejected by " + r.RejectedBy + "; it cannot be applied: change the source and make a new plan"
	case r.Approval == Pending:
		r.Next = "waiting for approval by a principal with the Approve grant (e.g. `" + ApproveCommand(r.Session, ref) + "`); then apply it with plan.apply {ref: \"" + ref + "\"} (MCP: shoal_apply)"
	default:
		r.Next = "apply it with plan.apply {ref: \"" + ref + "\"} (MCP: shoal_apply); it runs once"
	}
	return r
}

// ApproveCommand is the shoal command a person runs to approve ref of
// session: it names the session unless it is the CLI's default (main),
// so the line works as it is.
func ApproveCommand(session, ref string) string {
	if session == "" || session == "main" {
		return "shoal plan approve " + ref
	}
	return "shoal plan approve --session " + session + " " + ref
}

// visible returns the plans c may see, newest first.
func (p *Provider) visible(c *core.Caller) []Record {
	p.mu.Lock()
	es := make([]*entry, 0, len(p.plans))
	for _, e := range p.plans {
		es = append(es, e)
	}
	p.mu.Unlock()
	type item struct {
		seq uint64
		rec Record
	}
	var items []item
	for _, e := range es {
		e.mu.Lock()
		if p.sees(c, &e.rec) {
			items = append(items, item{e.seq, e.view()})
		}
		e.mu.Unlock()
	}
	// Newest first.
	for i := 1; i < len(items); i++ {
		for j := i; j > 0 && items[j].seq > items[j-1].seq; j-- {
			items[j], items[j-1] = items[j-1], items[j]
		}
	}
	out := make([]Record, len(items))
	for i, it := range items {
		out[i] = it.rec
	}
	return out
}

// envFor is the analyzer's view of c's session with the given cwd (the
// session's live one when empty).
func (p *Provider) envFor(c *core.Caller, cwd string) analyze.Env {
	env, _, _ := p.scope(c, cwd)
	return env
}

// scope is what the analyzer and the policy need to know of c's session:
// the analyzer's view (cwd, variables, functions), the policy's anchors
// (`.` is the session's workspace when the sessions service says which,
// else the cwd), and the session's confinement.
func (p *Provider) scope(c *core.Caller, cwd string) (analyze.Env, policy.DecideContext, bounds) {
	if cwd == "" && p.sessions != nil {
		cwd = p.sessions.Cwd(c.Session)
	}
	if cwd == "" {
		cwd, _ = os.Getwd()
	}
	home, _ := os.UserHomeDir()
	env := analyze.Env{Cwd: cwd, Home: home}
	if sv, ok := p.sessions.(SessionVars); ok {
		session := c.Session
		env.Lookup = func(name string) (string, bool) { return sv.Var(session, name) }
		if h, ok := sv.Var(session, "HOME"); ok && filepath.IsAbs(h) {
			env.Home = h
		}
	}
	if sf, ok := p.sessions.(SessionFuncs); ok {
		session := c.Session
		env.Func = func(name string) (*syntax.Stmt, bool) { return sf.Func(session, name) }
	}
	dctx := policy.DecideContext{Cwd: env.Cwd, Home: env.Home, Resolve: realDir}
	var b bounds
	if p.host != nil {
		if sb, ok := p.sessions.(SessionBounds); ok {
			b.ws.Dir, b.ws.Tmp, b.confined = sb.Bounds(c.Session)
			b.ws.Home, b.ws.State = env.Home, p.host.StateDir
			if b.ws.Dir != "" {
				dctx.Cwd = b.ws.Dir
			}
			dctx.Confined = b.confined
		}
	}
	return env, dctx, b
}

// realDir resolves symbolic links in a directory, as the analyzer does
// for targets, so `~` and `.` in rules compare like with like.
func realDir(d string) string {
	if d == "" {
		return d
	}
	if r, err := filepath.EvalSymlinks(d); err == nil {
		return r
	}
	return filepath.Clean(d)
}

// oneLine is s with its whitespace runs made single spaces, clipped to n
// bytes.
func oneLine(s string, n int) string {
	return clip.String(strings.Join(strings.Fields(s), " "), n)
}
