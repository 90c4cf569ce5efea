package boot_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/shoal-sh/shoal/core/rpc"
	"github.com/shoal-sh/shoal/sdk/client"
)

// wrongly is one member of a method's params and a value of the wrong
// JSON type for it.
type wrongly struct {
	member string
	value  any
}

// wrongTyped gives, for every kernel method, a member of the wrong JSON
// type; nil for a method that takes no params.
var wrongTyped = map[string]*wrongly{
	"session.attach":      {"session", 5},
	"session.view":        {"view", 5},
	"session.close":       {"session", 5},
	"exec":                {"source", 5},
	"exec.progress":       {"key", 5},
	"value.get":           {"target", 5},
	"resources.read":      {"uri", 5},
	"resources.list":      nil,
	"resources.templates": nil,
	"blob.get":            {"hash", 5},
	"blob.put":            {"text", 5},
	"task.list":           nil,
	"task.get":            {"task", true},
	"task.cancel":         {"task", []int{1}},
	"plan.create":         {"source", 5},
	"plan.get":            {"ref", 5},
	"plan.list":           nil,
	"plan.approve":        {"ref", 5},
	"plan.reject":         {"reason", 5},
	"plan.apply":          {"timeout_ms", "soon"},
	"pty.open":            {"cols", "wide"},
	"pty.write":           {"pty", true},
	"pty.read":            {"scrollback", "all"},
	"pty.resize":          {"rows", "tall"},
	"pty.close":           {"pty", map[string]any{}},
	"pty.list":            nil,
	"pty.wait":            {"timeout_ms", "soon"},
	"journal.query":       {"ok", "yes"},
	"events.read":         {"since", "now"},
	"events.publish":      {"channel", 5},
	"events.subscribe":    {"uri", 5},
	"events.unsubscribe":  {"channel", 5},
	"wait":                {"until", "later"},
	"kernel.status":       nil,
	"plugin.list":         nil,
}

// refusedMember calls method and requires INVALID_PARAMS naming member
// in its message and data.member.
func refusedMember(t *testing.T, c *client.Client, method string, params map[string]any, member string) {
	t.Helper()
	err := c.Call(context.Background(), method, params, nil)
	var re *rpc.Error
	if !errors.As(err, &re) || re.Code != rpc.InvalidParams {
		t.Errorf("%s %v: %v; want INVALID_PARAMS", method, params, err)
		return
	}
	data, _ := re.Data.(map[string]any)
	if !strings.Contains(re.Message, `"`+member+`"`) || data["member"] != member {
		t.Errorf("%s %v: %q data %v; want it to name %q", method, params, re.Message, re.Data, member)
	}
}

// TestParamsStrict: every method the kernel serves refuses an unknown
// member and a member of the wrong type, naming it (docs/kernel.md:
// params are checked strictly). A method added without a row here fails.
func TestParamsStrict(t *testing.T) {
	dir := shortDir(t)
	startKernel(t, dir)
	c := attach(t, dir, client.Options{})
	var st struct {
		Methods []string `json:"methods"`
	}
	if err := c.Call(context.Background(), "kernel.status", nil, &st); err != nil {
		t.Fatal(err)
	}
	if len(st.Methods) < 30 {
		t.Fatalf("kernel.status lists %d methods: %v", len(st.Methods), st.Methods)
	}
	for _, m := range st.Methods {
		wrong, ok := wrongTyped[m]
		if !ok {
			t.Errorf("method %s has no row in wrongTyped: add one", m)
			continue
		}
		refusedMember(t, c, m, map[string]any{"zz_unknown": 1}, "zz_unknown")
		if wrong != nil {
			refusedMember(t, c, m, map[string]any{wrong.member: wrong.value}, wrong.member)
		}
	}
}

// TestBlobPutRefusesTypos: the example of issue 16, on both of blob.put's
// decoding paths (the JSON one and the fast base64 one).
func TestBlobPutRefusesTypos(t *testing.T) {
	dir := shortDir(t)
	startKernel(t, dir)
	c := attach(t, dir, client.Options{})
	refusedMember(t, c, "blob.put", map[string]any{"text": "hi", "hsah": "typo"}, "hsah")
	refusedMember(t, c, "blob.put", map[string]any{"b64": "aGk=", "hsah": "typo"}, "hsah")
}
