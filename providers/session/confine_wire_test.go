package session

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"runtime"
	"testing"

	"github.com/shoal-sh/shoal/core/policy"
	"github.com/shoal-sh/shoal/providers/session/sandbox"
)

// mapView is the confinement as View built it while it was a map (before
// wire.Confinement): the record whose bytes the typed answer keeps.
func mapView(c *confinement) map[string]any {
	v := map[string]any{
		"confined": c.status.Confined,
		"abi":      c.status.ABI,
		"scoped":   c.status.Scoped,
		// added with the read-only mounts, after the map
		"read_only_mounts": c.status.ReadOnlyMounts,
		"mode":             map[bool]string{true: policy.SandboxRequired, false: policy.SandboxBestEffort}[c.required],
		"writable":         c.rules.Writable,
		"tmp":              c.ws.Tmp,
	}
	if !policy.WorkspaceWritable(c.ws) {
		v["workspace_writable"] = false
		v["workspace_note"] = fmt.Sprintf("the workspace %s is not writable: a session created for /, the home directory or a directory holding the state directory would open the whole machine; start the client in a project directory", c.ws.Dir)
	}
	if c.status.Reason != "" {
		v["reason"] = c.status.Reason
	}
	if c.status.MaxTasks != 0 { // added with the pids cgroup, after the map
		v["max_tasks"] = c.status.MaxTasks
	}
	if c.err != nil {
		v["error"] = c.err.Error()
	}
	return v
}

func sameJSON(t *testing.T, what string, old, typed any) {
	t.Helper()
	want, err := json.Marshal(old)
	if err != nil {
		t.Fatal(err)
	}
	got, err := json.Marshal(typed)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("%s: the typed answer changed its bytes:\n%s\n%s", what, want, got)
	}
}

// TestConfinementBytes: session.attach's confinement, now a
// wire.Confinement, encodes as the map it replaced, empty or filled.
func TestConfinementBytes(t *testing.T) {
	dir := t.TempDir()
	for name, c := range map[string]*confinement{
		"empty": {},
		"filled": {required: true, err: errors.New("worker failed"),
			status: sandbox.Status{Confined: true, ABI: 7, Scoped: true, Net: true, ReadOnlyMounts: true, MaxTasks: 4096, Reason: "partly"},
			rules:  sandbox.Rules{Writable: []string{dir, "/tmp/x"}},
			ws:     policy.Workspace{Dir: "/", Tmp: "/tmp/x"}},
		"writable workspace": {status: sandbox.Status{Confined: true, ABI: 6},
			rules: sandbox.Rules{Writable: []string{dir}},
			ws:    policy.Workspace{Dir: dir, Tmp: dir + "/tmp", Home: "/nonexistent-home", State: "/nonexistent-state"}},
	} {
		sameJSON(t, name, mapView(c), c.View())
	}
	if v := (&confinement{ws: policy.Workspace{Dir: "/"}}).View(); v.WorkspaceWritable == nil {
		t.Errorf("a workspace at / is said writable: %+v", v)
	}
}

// TestSandboxStatusBytes: kernel.status's sandbox, now a
// wire.SandboxStatus, encodes as the map it replaced, with no session
// and with confined and unconfined ones.
func TestSandboxStatusBytes(t *testing.T) {
	old := func(p *Provider) map[string]any {
		sb := policy.DefaultSandbox()
		out := map[string]any{"landlock_abi": sandbox.ABI(), "mode": sb.Mode, "os": runtime.GOOS}
		sessions := map[string]any{}
		for name, s := range p.sessions {
			sessions[name] = map[string]any{"confined": s.conf.status.Confined && s.conf.err == nil, "reason": s.conf.status.Reason}
		}
		out["sessions"] = sessions
		return out
	}
	p := New()
	sameJSON(t, "no session", old(p), p.SandboxStatus())
	p.sessions["a"] = &sess{conf: &confinement{status: sandbox.Status{Confined: true, ABI: 7}}}
	p.sessions["b"] = &sess{conf: &confinement{status: sandbox.Status{Reason: "no Landlock"}}}
	p.sessions["c"] = &sess{conf: &confinement{status: sandbox.Status{Confined: true}, err: errors.New("worker failed")}}
	sameJSON(t, "sessions", old(p), p.SandboxStatus())
}
