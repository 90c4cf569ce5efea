package journal_test

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/shoal-sh/shoal/core/kernel"
	"github.com/shoal-sh/shoal/internal/testkernel"
	"github.com/shoal-sh/shoal/providers/journal"
	"github.com/shoal-sh/shoal/sdk/client"
)

// TestNoCredentialLeaves: every shape of the credential corpus goes
// through an execution (its source and its output), a background task,
// a plan and an approval reason. None is left in journal rows, in the
// events of any kernel channel, in plan or task records, or in the
// bytes of journal.db; the execution's own value still has it (read
// deliberately through its ref).
func TestNoCredentialLeaves(t *testing.T) {
	k := testkernel.Start(t, kernel.Options{})
	ctx := context.Background()
	agent := testkernel.Attach(t, k.StateDir(), client.Options{Session: "leak", Principal: "agent:leak"})
	human := testkernel.Attach(t, k.StateDir(), client.Options{Session: "leak", Principal: "human:owner"})
	var records []string // every record read back, as JSON
	keep := func(what string, v any) {
		b, err := json.Marshal(v)
		if err != nil {
			t.Fatal(err)
		}
		records = append(records, what+": "+string(b))
	}
	var tasks []string
	for _, c := range journal.CredentialCorpus {
		src := "cat <<'EOF'\n" + c.Line + "\nEOF"
		r, err := agent.Exec(ctx, src, client.ExecOptions{})
		if err != nil {
			t.Fatalf("%s: exec: %v", c.Name, err)
		}
		keep("exec reply", r)
		if !strings.Contains(strings.Join(r.Marks, ","), "redacted") {
			t.Errorf("%s: the reply's preview is not marked redacted: %v", c.Name, r.Marks)
		}
		val, err := agent.Read(ctx, r.URI+"?format=raw")
		if err != nil {
			t.Fatal(err)
		}
		if raw, _ := json.Marshal(val); !strings.Contains(string(raw), jsonInner(c.Secret)) {
			t.Errorf("%s: the value read through its ref lost the secret: %s", c.Name, raw)
		}
		bg, err := agent.Exec(ctx, src, client.ExecOptions{Background: true})
		if err != nil {
			t.Fatalf("%s: background: %v", c.Name, err)
		}
		tasks = append(tasks, bg.Task)
		var plan struct {
			Ref      string `json:"ref"`
			Approval string `json:"approval"`
		}
		if err := agent.Call(ctx, "plan.create", map[string]any{"source": src + "\nsudo true"}, &plan); err != nil {
			t.Fatalf("%s: plan: %v", c.Name, err)
		}
		var decided json.RawMessage
		if err := human.Call(ctx, "plan.approve", map[string]any{"ref": plan.Ref, "reason": "ok: " + c.Line}, &decided); err != nil {
			t.Fatalf("%s: approve %s (%s): %v", c.Name, plan.Ref, plan.Approval, err)
		}
		keep("approve reply", decided)
	}
	// A value of the session's own environment, with no credential
	// shape, named like a secret: used literally, it is still kept out.
	const envSecret = "qq7Lr2mZp0vXn4kT"
	for _, src := range []string{"export SVC_TOKEN=" + envSecret, "echo " + envSecret} {
		r, err := agent.Exec(ctx, src, client.ExecOptions{})
		if err != nil {
			t.Fatal(err)
		}
		keep("exec reply", r)
	}
	for _, task := range tasks {
		var rec json.RawMessage
		if err := agent.Call(ctx, "wait", map[string]any{"target": task, "timeout_ms": 30000}, &rec); err != nil {
			t.Logf("wait %s: %v", task, err)
		}
		if err := agent.Call(ctx, "task.get", map[string]any{"id": strings.TrimPrefix(task, "task:")}, &rec); err == nil {
			keep("task", rec)
		}
	}
	for _, m := range []string{"task.list", "plan.list"} {
		var v json.RawMessage
		if err := agent.Call(ctx, m, nil, &v); err != nil {
			t.Fatalf("%s: %v", m, err)
		}
		keep(m, v)
	}
	var rows json.RawMessage
	if err := agent.Call(ctx, "journal.query", map[string]any{"limit": 1000}, &rows); err != nil {
		t.Fatal(err)
	}
	keep("journal rows", rows)
	channels := []string{"journal", "session.transcript", "render", "approval"}
	for _, task := range tasks {
		channels = append(channels, "task."+strings.TrimPrefix(task, "task:"))
	}
	for _, ch := range channels {
		page, err := agent.Events(ctx, ch, nil, 1024)
		if err != nil {
			t.Fatal(err)
		}
		if len(page.Events) == 0 && (ch == "journal" || ch == "render" || ch == "approval") {
			t.Errorf("channel %s has no events", ch)
		}
		keep("events "+ch, page)
	}
	k.Stop()
	db, err := os.ReadFile(filepath.Join(k.StateDir(), journal.FileName))
	if err != nil {
		t.Fatal(err)
	}
	leaks := 0
	for _, c := range journal.CredentialCorpus {
		for _, r := range records {
			if strings.Contains(r, jsonInner(c.Secret)) {
				leaks++
				t.Errorf("%s leaked in %.300s", c.Name, r)
				break
			}
		}
		if strings.Contains(string(db), c.Secret) {
			leaks++
			t.Errorf("%s is in the bytes of journal.db", c.Name)
		}
	}
	for _, r := range records {
		if strings.Contains(r, envSecret) {
			leaks++
			t.Errorf("the session's SVC_TOKEN value leaked in %.300s", r)
			break
		}
	}
	if strings.Contains(string(db), envSecret) {
		leaks++
		t.Error("the session's SVC_TOKEN value is in the bytes of journal.db")
	}
	t.Logf("%d credential shapes through exec, task, plan and approval: %d leaks in %d records and journal.db (%d bytes)",
		len(journal.CredentialCorpus), leaks, len(records), len(db))
}

// jsonInner is s as it appears inside a JSON string.
func jsonInner(s string) string {
	b, _ := json.Marshal(s)
	return string(b[1 : len(b)-1])
}
