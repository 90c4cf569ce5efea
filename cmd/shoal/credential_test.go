package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/shoal-sh/shoal/core/kernel"
	"github.com/shoal-sh/shoal/internal/testkernel"
	"github.com/shoal-sh/shoal/sdk/client"
)

// TestCLICredential: the CLI a person runs approves with the operator
// credential; the same command where only the agent credential can be read
// (as inside a confined session) approves nothing.
func TestCLICredential(t *testing.T) {
	dir := testkernel.ShortDir(t)
	testkernel.Start(t, kernel.Options{StateDir: dir})
	agent := testkernel.Attach(t, dir, client.Options{Principal: "agent:worker"})
	if agent.Attached.Credential != "agent" {
		t.Fatalf("agent attached with %q", agent.Attached.Credential)
	}
	ctx := context.Background()
	victim := filepath.Join(testkernel.ShortDir(t), "victim") // outside the writable paths: it needs approval
	os.MkdirAll(filepath.Join(victim, "sub"), 0o755)
	var plan struct {
		Ref string `json:"ref"`
	}
	if err := agent.Call(ctx, "plan.create", map[string]string{"source": "rm -rf " + victim}, &plan); err != nil {
		t.Fatal(err)
	}
	cli := func(args ...string) (int, string) {
		var out, errb bytes.Buffer
		code := run(append(args, "--state-dir", dir), &out, &errb)
		return code, out.String() + errb.String()
	}
	approval := func() string {
		var p struct {
			Approval string `json:"approval"`
		}
		if err := agent.Call(ctx, "plan.get", map[string]string{"ref": plan.Ref}, &p); err != nil {
			t.Fatal(err)
		}
		return p.Approval
	}

	// Only the agent credential readable: human:cli is refused, and
	// acting as an agent holds no Approve.
	op := filepath.Join(dir, kernel.OperatorTokenName)
	hidden := op + ".hidden"
	if err := os.Rename(op, hidden); err != nil {
		t.Fatal(err)
	}
	if code, out := cli("plan", "approve", plan.Ref); code != 1 || !strings.Contains(out, "PRINCIPAL_REFUSED") || !strings.Contains(out, "operator.token") {
		t.Errorf("approve with only the agent token: exit %d %q", code, out)
	}
	if code, out := cli("plan", "approve", plan.Ref, "--principal", "agent:worker"); code != 1 || !strings.Contains(out, "FORBIDDEN") {
		t.Errorf("self-approval as the agent: exit %d %q", code, out)
	}
	if got := approval(); got != "pending" {
		t.Fatalf("approval %q after the refused attempts", got)
	}
	if err := os.Rename(hidden, op); err != nil {
		t.Fatal(err)
	}

	// A person at the CLI: operator credential, human:cli, approves.
	if code, out := cli("plan", "approve", plan.Ref); code != 0 {
		t.Fatalf("approve as the operator: exit %d %q", code, out)
	}
	if got := approval(); got != "approved" {
		t.Errorf("approval %q after the operator approved", got)
	}
}
