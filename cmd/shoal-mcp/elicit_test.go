package main

import (
	"context"
	"encoding/json"
	"github.com/shoal-sh/shoal/internal/testkernel"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/mark3labs/mcp-go/mcp"
)

// person answers approval forms as the test says, and keeps what it was
// shown.
type person struct {
	decision, reason string
	mu               sync.Mutex
	shown            []mcp.ElicitationParams
}

func (p *person) Elicit(_ context.Context, req mcp.ElicitationRequest) (*mcp.ElicitationResult, error) {
	p.mu.Lock()
	p.shown = append(p.shown, req.Params)
	p.mu.Unlock()
	res := &mcp.ElicitationResult{}
	res.Action = mcp.ElicitationResponseActionAccept
	res.Content = map[string]any{"decision": p.decision, "reason": p.reason}
	return res, nil
}

// TestApprovalInHost: a real client that answers elicitation approves a
// pending plan from inside the host. shoal_apply shows the person the
// plan's effects, targets, reversibility and verdict, the plan runs, and
// the journal and the approval channel name the host's approver. A
// rejection in the form keeps the plan from running.
func TestApprovalInHost(t *testing.T) {
	sd := newStateDir(t)
	dir := t.TempDir()
	who := &person{decision: "approve", reason: "scratch dir"}
	p := startHost(t, sd, dir, hostClient{elicit: who})
	// Outside the session's writable paths: only an approved plan may
	// delete it (inside them, a confined session may without asking).
	out := testkernel.ShortDir(t)
	build, keep := filepath.Join(out, "build"), filepath.Join(out, "keep")
	os.MkdirAll(build, 0o755)
	os.WriteFile(filepath.Join(build, "a.o"), nil, 0o644)
	os.MkdirAll(keep, 0o755)
	plan, text := p.callOK("shoal_plan", map[string]any{"source": "rm -rf " + build})
	ref := plan["ref"].(string)
	if plan["approval"] != "pending" || !strings.Contains(text, "asks the person in this host") || !strings.Contains(text, "--session "+projectSession(dir)) {
		t.Fatalf("plan: %v\n%s", plan, text)
	}
	res := p.call("shoal_apply", map[string]any{"plan": ref})
	if res.IsError {
		t.Fatalf("apply after the person approved: %s", resultText(res))
	}
	if !strings.Contains(resultText(res), "The person approved "+ref) {
		t.Errorf("apply text: %s", resultText(res))
	}
	if _, err := os.Stat(build); !os.IsNotExist(err) {
		t.Errorf("build still there after the approved plan ran: %v", err)
	}
	who.mu.Lock()
	if len(who.shown) != 1 {
		t.Fatalf("the person was asked %d times", len(who.shown))
	}
	form := who.shown[0]
	who.mu.Unlock()
	for _, want := range []string{"rm -rf " + build, "fs.delete", build, "Verdict: ask", "outside this session's writable paths", ref} {
		if !strings.Contains(form.Message, want) {
			t.Errorf("the form does not show %q:\n%s", want, form.Message)
		}
	}
	schema, _ := json.Marshal(form.RequestedSchema)
	if !strings.Contains(string(schema), `"enum":["approve","reject"]`) {
		t.Errorf("form schema %s", schema)
	}

	k := sd.dial(t, "human:test", nil)
	var j struct {
		Rows []struct {
			Principal string `json:"principal"`
			Kind      string `json:"kind"`
			Ref       string `json:"ref"`
			Session   string `json:"session"`
		} `json:"rows"`
	}
	if err := k.Call(context.Background(), "journal.query", map[string]any{"principal": "human:host-elicitation"}, &j); err != nil {
		t.Fatal(err)
	}
	found := false
	for _, r := range j.Rows {
		found = found || (r.Kind == "approval" && r.Principal == "human:host-elicitation" && r.Ref == ref && r.Session == projectSession(dir))
	}
	if !found {
		t.Errorf("no approval row by human:host-elicitation for %s: %+v", ref, j.Rows)
	}
	page, err := k.Events(context.Background(), "approval", nil, 100)
	if err != nil {
		t.Fatal(err)
	}
	approved := false
	for _, ev := range page.Events {
		approved = approved || (strings.Contains(string(ev.Payload), `"by":"human:host-elicitation"`) && strings.Contains(string(ev.Payload), ref))
	}
	if !approved {
		t.Errorf("no approval event by the host's approver for %s", ref)
	}

	who.decision, who.reason = "reject", "not today"
	plan2, _ := p.callOK("shoal_plan", map[string]any{"source": "rm -rf " + keep})
	res = p.call("shoal_apply", map[string]any{"plan": plan2["ref"].(string)})
	if !res.IsError || !strings.Contains(resultText(res), "rejected") || !strings.Contains(resultText(res), "not today") {
		t.Errorf("apply after the person rejected: %s", resultText(res))
	}
	if _, err := os.Stat(keep); err != nil {
		t.Errorf("a rejected plan ran")
	}
}

// TestHintsNameSession: on a project session (not the CLI's default
// main) the commands the facade names for a person carry --session, and
// the one shoal_plan names, run verbatim in a terminal, approves the plan.
func TestHintsNameSession(t *testing.T) {
	sd := newStateDir(t)
	dir := t.TempDir()
	p := startHost(t, sd, dir, hostClient{})
	session := projectSession(dir)
	build := filepath.Join(testkernel.ShortDir(t), "build")
	os.MkdirAll(build, 0o755)

	res := p.call("shoal_exec", map[string]any{"source": "rm -rf " + build})
	if !res.IsError || !strings.Contains(resultText(res), "shoal plan approve --session "+session+" <ref>") {
		t.Errorf("refusal hint: %s", resultText(res))
	}
	plan, text := p.callOK("shoal_plan", map[string]any{"source": "rm -rf " + build})
	ref := plan["ref"].(string)
	want := "shoal plan approve --session " + session + " " + ref
	if !strings.Contains(text, want) {
		t.Fatalf("plan text lacks %q:\n%s", want, text)
	}
	if res := p.call("shoal_apply", map[string]any{"plan": ref}); !res.IsError || strings.Contains(resultText(res), "shoal plan approve <ref>") {
		t.Errorf("apply before approval: %s", resultText(res))
	}

	shoal := filepath.Join(t.TempDir(), "shoal")
	if out, err := exec.Command("go", "build", "-o", shoal, "github.com/shoal-sh/shoal/cmd/shoal").CombinedOutput(); err != nil {
		t.Fatalf("build shoal: %v\n%s", err, out)
	}
	cmd := exec.Command(shoal, strings.Fields(want)[1:]...)
	cmd.Env = append(os.Environ(), "SHOAL_STATE_DIR="+sd.dir, "SHOAL_SESSION=")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("%s: %v\n%s", want, err, out)
	}
	if res := p.call("shoal_apply", map[string]any{"plan": ref}); res.IsError {
		t.Fatalf("apply after the CLI approval: %s", resultText(res))
	}
	if _, err := os.Stat(build); !os.IsNotExist(err) {
		t.Errorf("%s is still there after the approved plan ran", build)
	}
}
