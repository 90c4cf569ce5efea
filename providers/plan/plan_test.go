package plan

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"mvdan.cc/sh/v3/syntax"

	"github.com/shoal-sh/shoal/core"
	"github.com/shoal-sh/shoal/core/bus"
	"github.com/shoal-sh/shoal/core/policy"
	"github.com/shoal-sh/shoal/core/rpc"
	"github.com/shoal-sh/shoal/core/uri"
)

type fakeJournal struct {
	mu   sync.Mutex
	rows []core.JournalRow
}

func (j *fakeJournal) Append(_ context.Context, r core.JournalRow) (core.JournalRow, error) {
	j.mu.Lock()
	defer j.mu.Unlock()
	r.EntryID = uint64(len(j.rows) + 1)
	j.rows = append(j.rows, r)
	return r, nil
}

type fakeExecutor struct {
	mu   sync.Mutex
	reqs []core.ExecRequest
	fail error
}

func (x *fakeExecutor) Exec(_ context.Context, c *core.Caller, req core.ExecRequest) (*core.ExecReply, error) {
	x.mu.Lock()
	defer x.mu.Unlock()
	if x.fail != nil {
		return nil, x.fail
	}
	x.reqs = append(x.reqs, req)
	n := len(x.reqs)
	ok, exit := true, 0
	return &core.ExecReply{Ref: "out:" + string(rune('0'+n)), URI: "shoal://out/" + string(rune('0'+n)), OK: &ok, Exit: &exit, State: "completed"}, nil
}

func (x *fakeExecutor) count() int {
	x.mu.Lock()
	defer x.mu.Unlock()
	return len(x.reqs)
}

// fakeSessions is the sessions service: one cwd per session, no variables.
type fakeSessions struct {
	mu  sync.Mutex
	cwd map[string]string
}

func (s *fakeSessions) Cwd(session string) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.cwd[session]
}

type rig struct {
	p   *Provider
	bus *bus.Bus
	j   *fakeJournal
	x   *fakeExecutor
	ss  *fakeSessions
	dir string
	ctx context.Context
	pol *policy.Policy
}

func newRig(t testing.TB) *rig {
	t.Helper()
	dir := t.TempDir()
	work := filepath.Join(dir, "work")
	for name, content := range map[string]string{
		"existing.txt": "hello world\n",
		"build/a.o":    "aaaa",
		"build/b.o":    "bbbb",
	} {
		p := filepath.Join(work, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	r := &rig{
		bus: bus.New(bus.Options{}),
		j:   &fakeJournal{},
		x:   &fakeExecutor{},
		ss:  &fakeSessions{cwd: map[string]string{"main": work, "other": work}},
		dir: work,
		ctx: context.Background(),
		pol: policy.Default(),
	}
	h := &core.Host{StateDir: dir, Bus: r.bus}
	core.Offer(h, core.ServicePolicy, r.pol)
	core.Offer[core.Journal](h, core.ServiceJournal, r.j)
	core.Offer[core.Executor](h, core.ServiceExecutor, r.x)
	core.Offer[core.Sessions](h, core.ServiceSessions, r.ss)
	r.p = New()
	if err := core.Wire(h, r.p); err != nil {
		t.Fatal(err)
	}
	if got, ok := core.Get(h, core.ServicePolicyCheck); !ok || got != core.PolicyCheck(r.p) {
		t.Fatal("the provider does not offer the policy-check service")
	}
	t.Cleanup(r.bus.Close)
	return r
}

func (r *rig) caller(session, principal string) *core.Caller {
	return &core.Caller{Session: session, Principal: principal, Grants: r.pol.Grants(principal)}
}

func (r *rig) call(t *testing.T, c *core.Caller, method string, params any) (any, error) {
	t.Helper()
	raw, err := json.Marshal(params)
	if err != nil {
		t.Fatal(err)
	}
	return r.p.Methods()[method](r.ctx, c, raw)
}

func (r *rig) create(t *testing.T, c *core.Caller, src string) Record {
	t.Helper()
	out, err := r.call(t, c, "plan.create", map[string]string{"source": src})
	if err != nil {
		t.Fatalf("plan.create %q: %v", src, err)
	}
	return out.(Record)
}

func (r *rig) approvalEvents(t *testing.T) []map[string]any {
	t.Helper()
	res, err := r.bus.Read(bus.ChannelApproval, nil, 100)
	if err != nil {
		t.Fatal(err)
	}
	var out []map[string]any
	for _, ev := range res.Events {
		var m map[string]any
		if err := json.Unmarshal(ev.Payload, &m); err != nil {
			t.Fatal(err)
		}
		out = append(out, m)
	}
	return out
}

func wantCode(t *testing.T, err error, code rpc.Code, contains string) {
	t.Helper()
	if err == nil {
		t.Fatalf("want %s, got success", code.Name())
	}
	e := rpc.AsError(err)
	if e.Code != code {
		t.Fatalf("want %s, got %v", code.Name(), err)
	}
	if contains != "" && !strings.Contains(e.Message, contains) {
		t.Fatalf("message %q does not contain %q", e.Message, contains)
	}
}

var refRE = regexp.MustCompile(`^plan:[0-9a-f]{16}$`)

func TestAllowedPlanAppliesOnce(t *testing.T) {
	r := newRig(t)
	a := r.caller("main", "agent:a")
	rec := r.create(t, a, "echo hi > new.txt")
	if !refRE.MatchString(rec.Ref) || rec.URI != "shoal://plan/"+strings.TrimPrefix(rec.Ref, "plan:") {
		t.Fatalf("ref %q uri %q", rec.Ref, rec.URI)
	}
	if rec.Verdict != policy.Allow || rec.Approval != NotRequired || !rec.Reversible || rec.Applied {
		t.Fatalf("record %+v", rec)
	}
	if strings.Join(rec.Effects, ",") != "fs.write" || len(rec.EffectDetails) != 1 || rec.EffectDetails[0].Target != filepath.Join(r.dir, "new.txt") {
		t.Fatalf("effects %v %+v", rec.Effects, rec.EffectDetails)
	}
	if rec.Session != "main" || rec.Principal != "agent:a" || rec.Cwd != r.dir || rec.Created == 0 {
		t.Fatalf("metadata %+v", rec)
	}
	// Its JSON carries the names SPEC M1 gives shoal_plan.
	raw, _ := json.Marshal(rec)
	for _, k := range []string{`"ref"`, `"effects"`, `"reversible"`, `"verdict"`, `"approval"`} {
		if !strings.Contains(string(raw), k) {
			t.Fatalf("record JSON lacks %s: %s", k, raw)
		}
	}
	if len(r.approvalEvents(t)) != 0 {
		t.Fatal("an allowed plan asked for approval")
	}

	out, err := r.call(t, a, "plan.apply", map[string]string{"ref": rec.Ref})
	if err != nil {
		t.Fatal(err)
	}
	reply := out.(*core.ExecReply)
	if reply.Ref != "out:1" || r.x.count() != 1 {
		t.Fatalf("reply %+v, exec calls %d", reply, r.x.count())
	}
	req := r.x.reqs[0]
	if req.Source != rec.Source || req.Kind != "plan.apply" || !req.SkipPolicy || req.PlanRef != rec.Ref {
		t.Fatalf("exec request %+v", req)
	}
	_, err = r.call(t, a, "plan.apply", map[string]string{"ref": rec.Ref})
	wantCode(t, err, rpc.PlanUsed, "once")
	got, err := r.call(t, a, "plan.get", map[string]string{"ref": rec.Ref})
	if err != nil || !got.(Record).Applied || got.(Record).AppliedRef != "out:1" {
		t.Fatalf("after apply: %+v %v", got, err)
	}
	if r.x.count() != 1 {
		t.Fatal("applied twice")
	}
}

func TestVisibility(t *testing.T) {
	r := newRig(t)
	a := r.caller("main", "agent:a")
	b := r.caller("main", "agent:b")
	human := r.caller("main", "human:owner")
	elsewhere := r.caller("other", "agent:a")
	humanElsewhere := r.caller("other", "human:owner")
	rec := r.create(t, a, "rm -rf build")
	u, err := uri.Parse(rec.URI)
	if err != nil {
		t.Fatal(err)
	}

	for name, c := range map[string]*core.Caller{"other principal": b, "other session": elsewhere, "approver in other session": humanElsewhere} {
		t.Run(name, func(t *testing.T) {
			for _, ref := range []string{rec.Ref, strings.TrimPrefix(rec.Ref, "plan:"), rec.URI} {
				_, err := r.call(t, c, "plan.get", map[string]string{"ref": ref})
				wantCode(t, err, rpc.NotFound, "no plan")
			}
			_, err := r.p.Read(r.ctx, c, u)
			wantCode(t, err, rpc.NotFound, "")
			for _, m := range []string{"plan.apply", "plan.approve", "plan.reject"} {
				_, err := r.call(t, c, m, map[string]string{"ref": rec.Ref})
				wantCode(t, err, rpc.NotFound, "")
			}
			list, _ := r.call(t, c, "plan.list", map[string]string{})
			if n := len(list.(List).Plans); n != 0 {
				t.Fatalf("plan.list shows %d plans", n)
			}
			res, _ := r.p.List(r.ctx, c)
			if len(res) != 0 {
				t.Fatalf("resources %v", res)
			}
		})
	}
	for name, c := range map[string]*core.Caller{"owner": a, "approver in session": human} {
		t.Run(name, func(t *testing.T) {
			content, err := r.p.Read(r.ctx, c, u)
			if err != nil || content.Record.(Record).Ref != rec.Ref || content.Ref != rec.Ref {
				t.Fatalf("read: %+v %v", content, err)
			}
			res, _ := r.p.List(r.ctx, c)
			if len(res) != 1 || res[0].URI != rec.URI || res[0].MimeType != "application/json" {
				t.Fatalf("resources %+v", res)
			}
		})
	}
	// b's own plan is b's only: a does not see it, the approver sees both.
	other := r.create(t, b, "touch x")
	if _, err := r.call(t, a, "plan.get", map[string]string{"ref": other.Ref}); err == nil {
		t.Fatal("a sees b's plan")
	}
	list, _ := r.call(t, human, "plan.list", map[string]string{})
	plans := list.(List).Plans
	if len(plans) != 2 || plans[0].Ref != other.Ref {
		t.Fatalf("approver's list (newest first): %+v", plans)
	}
	if _, err := r.p.Read(r.ctx, a, &uri.URI{Family: "plan", Segments: []string{"a", "b"}}); rpc.CodeOf(err) != rpc.BadURI {
		t.Fatalf("two segments: %v", err)
	}
}

func TestApprovalFlow(t *testing.T) {
	r := newRig(t)
	a := r.caller("main", "agent:a")
	human := r.caller("main", "human:owner")
	rec := r.create(t, a, "rm -rf build")
	if rec.Verdict != policy.Ask || rec.Approval != Pending || rec.Reversible {
		t.Fatalf("record %+v", rec)
	}
	if rec.Estimates.Files != 2 || rec.Estimates.Bytes != 8 {
		t.Fatalf("estimates %+v", rec.Estimates)
	}
	if !strings.Contains(rec.Next, "approv") {
		t.Fatalf("next %q", rec.Next)
	}
	evs := r.approvalEvents(t)
	if len(evs) != 1 || evs[0]["event"] != "requested" || evs[0]["ref"] != rec.Ref {
		t.Fatalf("events %v", evs)
	}

	_, err := r.call(t, a, "plan.apply", map[string]string{"ref": rec.Ref})
	wantCode(t, err, rpc.PlanNotApproved, "waits for approval")
	_, err = r.call(t, a, "plan.approve", map[string]string{"ref": rec.Ref})
	wantCode(t, err, rpc.Forbidden, "Approve grant")
	if len(r.j.rows) != 0 {
		t.Fatal("a refused approval was journaled")
	}

	out, err := r.call(t, human, "plan.approve", map[string]string{"ref": rec.Ref, "reason": "build is disposable"})
	if err != nil {
		t.Fatal(err)
	}
	got := out.(Record)
	if got.Approval != Approved || got.ApprovedBy != "human:owner" || got.DecisionReason != "build is disposable" || got.Decided == 0 {
		t.Fatalf("approved %+v", got)
	}
	if len(r.j.rows) != 1 {
		t.Fatalf("journal rows %+v", r.j.rows)
	}
	row := r.j.rows[0]
	if row.Kind != "approval" || row.Head != "plan.approve" || row.Principal != "human:owner" || row.Ref != rec.Ref || row.Source != rec.Source || strings.Join(row.Effects, ",") != strings.Join(rec.Effects, ",") {
		t.Fatalf("journal row %+v", row)
	}
	evs = r.approvalEvents(t)
	if len(evs) != 2 || evs[1]["event"] != Approved || evs[1]["by"] != "human:owner" {
		t.Fatalf("events %v", evs)
	}
	// Approving again changes nothing.
	if _, err := r.call(t, human, "plan.approve", map[string]string{"ref": rec.Ref}); err != nil || len(r.j.rows) != 1 {
		t.Fatalf("re-approve: %v, rows %d", err, len(r.j.rows))
	}
	// Only the plan's principal applies it.
	_, err = r.call(t, human, "plan.apply", map[string]string{"ref": rec.Ref})
	wantCode(t, err, rpc.Forbidden, "belongs to agent:a")
	if _, err := r.call(t, a, "plan.apply", map[string]string{"ref": rec.Ref}); err != nil {
		t.Fatal(err)
	}
	if r.x.count() != 1 {
		t.Fatalf("exec calls %d", r.x.count())
	}
	_, err = r.call(t, human, "plan.reject", map[string]string{"ref": rec.Ref})
	wantCode(t, err, rpc.PlanUsed, "")
}

func TestGrantFromPolicyFile(t *testing.T) {
	r := newRig(t)
	pol, err := policy.Parse("[grants]\n\"agent:lead\" = [\"Approve\"]\n", "policy.toml")
	if err != nil {
		t.Fatal(err)
	}
	r.p.policy = pol
	a := r.caller("main", "agent:a")
	lead := &core.Caller{Session: "main", Principal: "agent:lead"} // grants not filled in by a kernel
	rec := r.create(t, a, "rm -rf build")
	// Attached with the agent credential, the grant is not held, whether
	// the kernel left it in Grants or not: the plan is not even visible.
	for _, g := range []core.Grants{nil, {policy.GrantApprove}} {
		viaFacade := &core.Caller{Session: "main", Principal: "agent:lead", Grants: g, Credential: core.CredentialAgent}
		_, err := r.call(t, viaFacade, "plan.approve", map[string]string{"ref": rec.Ref})
		wantCode(t, err, rpc.NotFound, "")
	}
	// Nor does it approve its own plan.
	own := &core.Caller{Session: "main", Principal: "agent:lead", Grants: core.Grants{policy.GrantApprove}, Credential: core.CredentialAgent}
	mine := r.create(t, own, "rm -rf build")
	_, err = r.call(t, own, "plan.approve", map[string]string{"ref": mine.Ref})
	wantCode(t, err, rpc.Forbidden, "Approve")
	out, err := r.call(t, lead, "plan.approve", map[string]string{"ref": rec.Ref})
	if err != nil || out.(Record).ApprovedBy != "agent:lead" {
		t.Fatalf("lead approval: %v %v", out, err)
	}
}

func TestReject(t *testing.T) {
	r := newRig(t)
	a := r.caller("main", "agent:a")
	human := r.caller("main", "human:owner")
	rec := r.create(t, a, "rm -rf build")
	out, err := r.call(t, human, "plan.reject", map[string]string{"ref": rec.Ref, "reason": "not today"})
	if err != nil {
		t.Fatal(err)
	}
	if got := out.(Record); got.Approval != Rejected || got.RejectedBy != "human:owner" || got.ApprovedBy != "" {
		t.Fatalf("rejected %+v", got)
	}
	if r.j.rows[0].Head != "plan.reject" {
		t.Fatalf("journal %+v", r.j.rows)
	}
	_, err = r.call(t, a, "plan.apply", map[string]string{"ref": rec.Ref})
	wantCode(t, err, rpc.PlanNotApproved, "rejected")
	_, err = r.call(t, human, "plan.approve", map[string]string{"ref": rec.Ref})
	wantCode(t, err, rpc.InvalidParams, "rejected")
	if r.x.count() != 0 {
		t.Fatal("a rejected plan ran")
	}
	if evs := r.approvalEvents(t); evs[len(evs)-1]["event"] != Rejected || evs[len(evs)-1]["reason"] != "not today" {
		t.Fatalf("events %v", evs)
	}
}

func TestDenyCannotBeApproved(t *testing.T) {
	r := newRig(t)
	a := r.caller("main", "agent:a")
	human := r.caller("main", "human:owner")
	for _, src := range []string{"rm -rf /", "sh -c 'rm -rf ~'", ":(){ :|:& };:"} {
		rec := r.create(t, a, src)
		if rec.Verdict != policy.Deny || rec.Approval != NotRequired {
			t.Fatalf("%q: %+v", src, rec)
		}
		_, err := r.call(t, human, "plan.approve", map[string]string{"ref": rec.Ref})
		wantCode(t, err, rpc.Forbidden, "denies")
		_, err = r.call(t, a, "plan.apply", map[string]string{"ref": rec.Ref})
		wantCode(t, err, rpc.PlanNotApproved, "denies")
		// Even a human's own denied plan does not run.
		own := r.create(t, human, src)
		_, err = r.call(t, human, "plan.apply", map[string]string{"ref": own.Ref})
		wantCode(t, err, rpc.PlanNotApproved, "denies")
	}
	if r.x.count() != 0 || len(r.j.rows) != 0 {
		t.Fatal("a denied plan ran or was journaled as approved")
	}
}

func TestStale(t *testing.T) {
	tests := []struct {
		name   string
		src    string
		change func(t *testing.T, dir string)
		want   string
	}{
		{"content", "rm existing.txt", func(t *testing.T, dir string) {
			write(t, filepath.Join(dir, "existing.txt"), "HELLO WORLD\n") // same size
		}, "content of"},
		{"size", "rm existing.txt", func(t *testing.T, dir string) {
			write(t, filepath.Join(dir, "existing.txt"), "more than before\n")
		}, "changed size"},
		{"gone", "echo x > existing.txt", func(t *testing.T, dir string) {
			if err := os.Remove(filepath.Join(dir, "existing.txt")); err != nil {
				t.Fatal(err)
			}
		}, "no longer describes"}, // the overwrite became a new file
		{"appeared", "echo x > fresh.txt", func(t *testing.T, dir string) {
			write(t, filepath.Join(dir, "fresh.txt"), "")
		}, "no longer describes"},
		{"tree", "rm -rf build", func(t *testing.T, dir string) {
			write(t, filepath.Join(dir, "build", "new.o"), "n")
		}, "tree below"},
		{"glob", "rm *.txt", func(t *testing.T, dir string) {
			write(t, filepath.Join(dir, "second.txt"), "2")
		}, "pattern"},
		{"script", "sh ./go.sh", func(t *testing.T, dir string) {
			write(t, filepath.Join(dir, "go.sh"), "rm -rf build\n")
		}, "no longer describes"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := newRig(t)
			write(t, filepath.Join(r.dir, "go.sh"), "echo hi\n")
			a := r.caller("main", "agent:a")
			rec := r.create(t, a, tt.src)
			if rec.Approval == Pending {
				if _, err := r.call(t, r.caller("main", "human:owner"), "plan.approve", map[string]string{"ref": rec.Ref}); err != nil {
					t.Fatal(err)
				}
			}
			tt.change(t, r.dir)
			_, err := r.call(t, a, "plan.apply", map[string]string{"ref": rec.Ref})
			wantCode(t, err, rpc.PlanStale, tt.want)
			if r.x.count() != 0 {
				t.Fatal("a stale plan ran")
			}
			// A stale plan stays unapplied, and says so.
			got, _ := r.call(t, a, "plan.get", map[string]string{"ref": rec.Ref})
			if got.(Record).Applied {
				t.Fatal("stale plan marked applied")
			}
		})
	}
}

func TestStaleCwd(t *testing.T) {
	r := newRig(t)
	a := r.caller("main", "agent:a")
	rec := r.create(t, a, "rm existing.txt")
	r.ss.mu.Lock()
	r.ss.cwd["main"] = t.TempDir()
	r.ss.mu.Unlock()
	_, err := r.call(t, a, "plan.apply", map[string]string{"ref": rec.Ref})
	wantCode(t, err, rpc.PlanStale, "cd back")
}

func write(t *testing.T, p, s string) {
	t.Helper()
	if err := os.WriteFile(p, []byte(s), 0o644); err != nil {
		t.Fatal(err)
	}
}

func TestExecutorFailureKeepsPlan(t *testing.T) {
	r := newRig(t)
	a := r.caller("main", "agent:a")
	rec := r.create(t, a, "touch x")
	r.x.fail = rpc.Errorf(rpc.Unavailable, "session closing")
	_, err := r.call(t, a, "plan.apply", map[string]string{"ref": rec.Ref})
	wantCode(t, err, rpc.Unavailable, "")
	r.x.fail = nil
	if _, err := r.call(t, a, "plan.apply", map[string]string{"ref": rec.Ref}); err != nil {
		t.Fatalf("retry after executor failure: %v", err)
	}
}

func TestConcurrentApplyRunsOnce(t *testing.T) {
	r := newRig(t)
	a := r.caller("main", "agent:a")
	rec := r.create(t, a, "touch x")
	var ok atomic.Int32
	var wg sync.WaitGroup
	for i := 0; i < 16; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if _, err := r.p.Apply(r.ctx, a, rec.Ref, 0); err == nil {
				ok.Add(1)
			} else if rpc.CodeOf(err) != rpc.PlanUsed {
				t.Errorf("apply: %v", err)
			}
		}()
	}
	wg.Wait()
	if ok.Load() != 1 || r.x.count() != 1 {
		t.Fatalf("%d applies succeeded, %d executions", ok.Load(), r.x.count())
	}
}

func TestRefsNeverCollide(t *testing.T) {
	r := newRig(t)
	a := r.caller("main", "agent:a")
	seen := map[string]bool{}
	for i := 0; i < 50; i++ {
		rec := r.create(t, a, "touch x")
		if seen[rec.Ref] {
			t.Fatalf("duplicate ref %s", rec.Ref)
		}
		seen[rec.Ref] = true
	}
}

func TestParams(t *testing.T) {
	r := newRig(t)
	a := r.caller("main", "agent:a")
	_, err := r.call(t, a, "plan.create", map[string]string{"source": "  "})
	wantCode(t, err, rpc.InvalidParams, "empty")
	_, err = r.call(t, a, "plan.create", map[string]string{"src": "ls"})
	wantCode(t, err, rpc.InvalidParams, `unknown member "src"`)
	_, err = r.call(t, a, "plan.create", map[string]string{"source": "if then ("})
	wantCode(t, err, rpc.InvalidParams, "syntax")
	_, err = r.call(t, a, "plan.get", map[string]string{"ref": ""})
	wantCode(t, err, rpc.InvalidParams, "")
	_, err = r.call(t, a, "plan.get", map[string]string{"ref": "plan:0000000000000000"})
	wantCode(t, err, rpc.NotFound, "plan.list")
}

func TestSessionClosedDropsPlans(t *testing.T) {
	r := newRig(t)
	a := r.caller("main", "agent:a")
	rec := r.create(t, a, "touch x")
	r.p.SessionClosed("main")
	_, err := r.call(t, a, "plan.get", map[string]string{"ref": rec.Ref})
	wantCode(t, err, rpc.NotFound, "")
}

func TestCheckExec(t *testing.T) {
	r := newRig(t)
	a := r.caller("main", "agent:a")
	if err := r.p.CheckExec(r.ctx, a, nil, "ls; cat existing.txt > copy", r.dir, nil, nil); err != nil {
		t.Fatalf("allowed source refused: %v", err)
	}
	err := r.p.CheckExec(r.ctx, a, nil, "sh -c 'rm -rf build'", r.dir, nil, nil)
	wantCode(t, err, rpc.PolicyRefused, "plan.create")
	if e := rpc.AsError(err); !strings.Contains(e.Message, "recursive delete") || !strings.Contains(e.Message, "shoal_plan") {
		t.Fatalf("refusal does not say why or what next: %q", e.Message)
	}
	data := rpc.AsError(err).Data.(map[string]any)
	if data["verdict"] != policy.Ask || len(data["reasons"].([]policy.Reason)) == 0 {
		t.Fatalf("data %+v", data)
	}
	wantCode(t, r.p.CheckExec(r.ctx, a, nil, "/bin/rm -rf /", r.dir, nil, nil), rpc.PolicyRefused, "denies")
	wantCode(t, r.p.CheckExec(r.ctx, a, nil, "rm -rf (", r.dir, nil, nil), rpc.InvalidParams, "syntax")

	// Source the session already parsed gets the same verdicts.
	for src, want := range map[string]rpc.Code{"ls; cat existing.txt > copy": 0, "sh -c 'rm -rf build'": rpc.PolicyRefused, "/bin/rm -rf /": rpc.PolicyRefused} {
		f, perr := syntax.NewParser().Parse(strings.NewReader(src), "")
		if perr != nil {
			t.Fatal(perr)
		}
		err := r.p.CheckExec(r.ctx, a, f, src, r.dir, nil, nil)
		if (err == nil) != (want == 0) || (err != nil && rpc.CodeOf(err) != want) {
			t.Fatalf("pre-parsed %q: %v, want code %d", src, err, want)
		}
	}

	// The same helper, without a provider.
	d, an, err := Check(policy.Default(), "agent:a", "git push --force", r.p.envFor(a, r.dir), policy.DecideContext{Cwd: r.dir})
	if err != nil || d.Verdict != policy.Ask || an.Head() != "git" {
		t.Fatalf("Check: %+v %v", d, err)
	}
	if Refusal(d).Code != rpc.PolicyRefused {
		t.Fatal("Refusal code")
	}
}

func TestEvictionKeepsLivePlans(t *testing.T) {
	r := newRig(t)
	r.p.maxPlans = 10
	a := r.caller("main", "agent:a")
	first := r.create(t, a, "touch x")
	second := r.create(t, a, "touch y")
	if _, err := r.p.Apply(r.ctx, a, second.Ref, 0); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 9; i++ {
		r.create(t, a, "touch z")
	}
	if _, err := r.p.Apply(r.ctx, a, second.Ref, 0); rpc.CodeOf(err) != rpc.NotFound {
		t.Fatalf("the applied plan should go first: %v", err)
	}
	if _, err := r.call(t, a, "plan.get", map[string]string{"ref": first.Ref}); rpc.CodeOf(err) != rpc.NotFound {
		t.Fatalf("then the oldest: %v", err)
	}
	list, _ := r.call(t, a, "plan.list", map[string]string{})
	if n := len(list.(List).Plans); n != 9 {
		t.Fatalf("%d plans kept, want 9", n)
	}
}

// fullSessions also resolves variables and functions, as the sessions
// service may.
type fullSessions struct {
	*fakeSessions
	vars  map[string]string
	funcs map[string]*syntax.Stmt
}

func (s fullSessions) Var(_, name string) (string, bool) { v, ok := s.vars[name]; return v, ok }
func (s fullSessions) Func(_, name string) (*syntax.Stmt, bool) {
	f, ok := s.funcs[name]
	return f, ok
}

func TestSessionVarsAndFuncs(t *testing.T) {
	dir := t.TempDir()
	f, err := syntax.NewParser().Parse(strings.NewReader("wipe() { rm -rf \"$1\"; }"), "")
	if err != nil {
		t.Fatal(err)
	}
	ss := fullSessions{
		fakeSessions: &fakeSessions{cwd: map[string]string{"main": dir}},
		vars:         map[string]string{"TARGET": filepath.Join(dir, "x"), "HOME": dir},
		funcs:        map[string]*syntax.Stmt{"wipe": f.Stmts[0].Cmd.(*syntax.FuncDecl).Body},
	}
	h := &core.Host{StateDir: dir}
	core.Offer[core.Sessions](h, core.ServiceSessions, ss)
	p := New()
	if err := core.Wire(h, p); err != nil {
		t.Fatal(err)
	}
	a := &core.Caller{Session: "main", Principal: "agent:a"}
	rec, err := p.Create(context.Background(), a, `echo hi > "$TARGET"`)
	if err != nil {
		t.Fatal(err)
	}
	if rec.EffectDetails[0].Target != filepath.Join(dir, "x") || rec.Verdict != policy.Allow {
		t.Fatalf("variable not resolved: %+v", rec)
	}
	// HOME comes from the session: wiping it is the catastrophe rule.
	if rec, err = p.Create(context.Background(), a, "wipe ~"); err != nil || rec.Verdict != policy.Deny {
		t.Fatalf("session function: %+v %v", rec, err)
	}
}

// TestApproveViaElicitation: the person at an agent's host approves or
// rejects the agent's own plan through the facade (via elicitation); the
// decision is journaled and announced as human:host-elicitation's. It is
// refused for another principal's plan, for a principal the policy does
// not give HostApproval, and for a deny verdict.
func TestApproveViaElicitation(t *testing.T) {
	r := newRig(t)
	a := r.caller("main", "agent:a")
	rec := r.create(t, a, "rm -rf build")
	out, err := r.call(t, a, "plan.approve", map[string]string{"ref": rec.Ref, "via": ViaElicitation, "reason": "fine by me"})
	if err != nil {
		t.Fatal(err)
	}
	if got := out.(Record); got.Approval != Approved || got.ApprovedBy != HostApprover || got.DecisionReason != "fine by me" {
		t.Fatalf("approved %+v", got)
	}
	if len(r.j.rows) != 1 || r.j.rows[0].Principal != HostApprover || r.j.rows[0].Kind != "approval" || r.j.rows[0].Ref != rec.Ref {
		t.Fatalf("journal %+v", r.j.rows)
	}
	evs := r.approvalEvents(t)
	if last := evs[len(evs)-1]; last["event"] != Approved || last["by"] != HostApprover {
		t.Fatalf("approval event %v", last)
	}
	if _, err := r.call(t, a, "plan.apply", map[string]string{"ref": rec.Ref}); err != nil {
		t.Fatalf("apply after the host's approval: %v", err)
	}

	rej := r.create(t, a, "rm -rf build/a.o build/b.o")
	out, err = r.call(t, a, "plan.reject", map[string]string{"ref": rej.Ref, "via": ViaElicitation, "reason": "not now"})
	if err != nil || out.(Record).Approval != Rejected || out.(Record).RejectedBy != HostApprover {
		t.Fatalf("reject via elicitation: %v %+v", err, out)
	}

	other := r.create(t, r.caller("main", "agent:b"), "rm -rf build")
	_, err = r.call(t, a, "plan.approve", map[string]string{"ref": other.Ref, "via": ViaElicitation})
	wantCode(t, err, rpc.NotFound, "")
	bot := r.caller("main", "bot:x")
	botPlan := r.create(t, bot, "rm -rf build")
	_, err = r.call(t, bot, "plan.approve", map[string]string{"ref": botPlan.Ref, "via": ViaElicitation})
	wantCode(t, err, rpc.Forbidden, "HostApproval")
	denied := r.create(t, a, "rm -rf /")
	_, err = r.call(t, a, "plan.approve", map[string]string{"ref": denied.Ref, "via": ViaElicitation})
	wantCode(t, err, rpc.Forbidden, "deny")
	_, err = r.call(t, a, "plan.approve", map[string]string{"ref": rec.Ref, "via": "telepathy"})
	wantCode(t, err, rpc.InvalidParams, "elicitation")
}

// TestApproveHintNamesSession: the approval hint of a plan works when run
// as it is: it names --session unless the session is main.
func TestApproveHintNamesSession(t *testing.T) {
	r := newRig(t)
	main := r.create(t, r.caller("main", "agent:a"), "rm -rf build")
	if !strings.Contains(main.Next, "`shoal plan approve "+main.Ref+"`") {
		t.Errorf("main: next %q", main.Next)
	}
	other := r.create(t, r.caller("other", "agent:a"), "rm -rf build")
	if !strings.Contains(other.Next, "`shoal plan approve --session other "+other.Ref+"`") {
		t.Errorf("other: next %q", other.Next)
	}
}
