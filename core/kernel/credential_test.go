package kernel_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/shoal-sh/shoal/core/rpc"
	"github.com/shoal-sh/shoal/sdk/client"
)

// rawConn is one kernel connection driven frame by frame.
type rawConn struct {
	t  *testing.T
	c  net.Conn
	br *bufio.Reader
	id int
}

func openRaw(t *testing.T, sock string) *rawConn {
	t.Helper()
	c, err := net.Dial("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return &rawConn{t: t, c: c, br: bufio.NewReader(c)}
}

// send writes one request per params and returns their answers by id.
func (r *rawConn) send(method string, params ...any) map[int]map[string]any {
	r.t.Helper()
	var ids []int
	for _, p := range params {
		r.id++
		b, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": r.id, "method": method, "params": p})
		if _, err := r.c.Write(append(b, '\n')); err != nil {
			r.t.Fatal(err)
		}
		ids = append(ids, r.id)
	}
	out := map[int]map[string]any{}
	for range ids {
		line, err := r.br.ReadBytes('\n')
		if err != nil {
			r.t.Fatal(err)
		}
		var m map[string]any
		if err := json.Unmarshal(line, &m); err != nil {
			r.t.Fatal(err)
		}
		out[int(m["id"].(float64))] = m
	}
	return out
}

func (r *rawConn) call(method string, params any) map[string]any {
	r.t.Helper()
	return r.send(method, params)[r.id]
}

func attachParams(tok, principal string) map[string]string {
	return map[string]string{"token": tok, "principal": principal}
}

func grantsOf(m map[string]any) []string {
	var g []string
	for _, x := range m["result"].(map[string]any)["grants"].([]any) {
		g = append(g, x.(string))
	}
	return g
}

func TestCredentials(t *testing.T) {
	dir := shortDir(t)
	// The policy gives agent:lead the Approve grant; the agent credential
	// must not carry it anyway.
	if err := os.WriteFile(filepath.Join(dir, "policy.toml"), []byte("[grants]\n\"agent:lead\" = [\"Approve\", \"EnvRead\"]\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	r := start(t, dir)
	agent, operator := r.k.Token(), r.k.OperatorToken()
	if agent == operator || len(agent) != 64 || len(operator) != 64 {
		t.Fatalf("tokens %q %q: want two different 64-hex tokens", agent, operator)
	}
	// The default policy gives agent:* HostApproval: the person at its
	// MCP host may approve its plans there (policy.md).
	host := []string{"HostApproval"}
	for _, tc := range []struct {
		tok, principal string
		code           rpc.Code
		cred           string
		grants         []string
	}{
		{agent, "agent:x", 0, "agent", host},
		{agent, "agent:lead", 0, "agent", []string{"EnvRead", "HostApproval"}},
		{agent, "human:x", rpc.PrincipalRefused, "", nil},
		{agent, "human:cli", rpc.PrincipalRefused, "", nil},
		{agent, "agentx:y", rpc.PrincipalRefused, "", nil},
		{agent, "", 0, "agent", host}, // agent:default
		{operator, "human:x", 0, "operator", []string{"Approve", "EnvRead"}},
		{operator, "agent:lead", 0, "operator", []string{"Approve", "EnvRead", "HostApproval"}},
		{operator, "agent:x", 0, "operator", host},
		{agent + "0", "agent:x", rpc.Unauthorized, "", nil},
		{operator[:63], "human:x", rpc.Unauthorized, "", nil},
		{"", "agent:x", rpc.Unauthorized, "", nil},
	} {
		name := fmt.Sprintf("%s as %q", tc.cred, tc.principal)
		m := openRaw(t, r.k.Socket()).call("session.attach", attachParams(tc.tok, tc.principal))
		if got := rpc.Code(errCode(m)); got != tc.code {
			t.Errorf("%s: code %d, want %d (%v)", name, got, tc.code, m)
			continue
		}
		if tc.code != 0 {
			continue
		}
		res := m["result"].(map[string]any)
		if res["credential"] != tc.cred || !slices.Equal(grantsOf(m), tc.grants) {
			t.Errorf("%s: credential %v grants %v; want %s %v", name, res["credential"], grantsOf(m), tc.cred, tc.grants)
		}
	}
	// The refusal says what to do.
	m := openRaw(t, r.k.Socket()).call("session.attach", attachParams(agent, "human:x"))
	if msg := m["error"].(map[string]any)["message"].(string); !strings.Contains(msg, "agent:*") || !strings.Contains(msg, "operator.token") {
		t.Errorf("refusal message %q", msg)
	}
}

func TestOneAttachPerConnection(t *testing.T) {
	r := start(t, shortDir(t))
	agent, operator := r.k.Token(), r.k.OperatorToken()
	c := openRaw(t, r.k.Socket())
	// A failed attach does not bind the connection.
	if m := c.call("session.attach", attachParams("wrong", "agent:a")); rpc.Code(errCode(m)) != rpc.Unauthorized {
		t.Fatalf("wrong token: %v", m)
	}
	if m := c.call("session.attach", attachParams(agent, "human:x")); rpc.Code(errCode(m)) != rpc.PrincipalRefused {
		t.Fatalf("human with the agent token: %v", m)
	}
	if m := c.call("session.attach", map[string]string{"token": agent, "principal": "agent:a", "session": "s1"}); errCode(m) != 0 {
		t.Fatalf("attach: %v", m)
	}
	// Re-attaching as a human (even with the operator's token), as another
	// agent or to another session is refused, and the connection stays
	// what it was.
	for _, p := range []map[string]string{
		attachParams(agent, "human:x"),
		attachParams(operator, "human:x"),
		attachParams(agent, "agent:b"),
		{"token": agent, "principal": "agent:a", "session": "s2"},
		attachParams(agent, "agent:a"),
	} {
		m := c.call("session.attach", p)
		if rpc.Code(errCode(m)) != rpc.AlreadyAttached {
			t.Errorf("second attach %v: %v; want ALREADY_ATTACHED", p, m)
		}
	}
	m := c.call("resources.read", map[string]string{"uri": "shoal://fake"})
	rec, _ := m["result"].(map[string]any)["structuredContent"].(map[string]any)
	if rec["principal"] != "agent:a" || rec["session"] != "s1" {
		t.Errorf("after refused re-attaches the caller is %v", m)
	}

	// Two attaches sent at once on a fresh connection: exactly one binds.
	d := openRaw(t, r.k.Socket())
	ans := d.send("session.attach", attachParams(agent, "agent:first"), attachParams(operator, "human:second"))
	var ok, refused int
	for _, m := range ans {
		switch rpc.Code(errCode(m)) {
		case 0:
			ok++
		case rpc.AlreadyAttached:
			refused++
		default:
			t.Errorf("concurrent attach: %v", m)
		}
	}
	if ok != 1 || refused != 1 {
		t.Errorf("concurrent attaches: %d bound, %d refused; want 1 and 1", ok, refused)
	}

	// The session counts one attachment per connection.
	cl := dial(t, r.dir, client.Options{Principal: "agent:status", Session: "s1"})
	var st struct {
		Sessions []struct {
			Name     string `json:"name"`
			Attached int    `json:"attached"`
		} `json:"sessions"`
	}
	if err := cl.Call(context.Background(), "kernel.status", nil, &st); err != nil {
		t.Fatal(err)
	}
	for _, s := range st.Sessions {
		if s.Name == "s1" && s.Attached != 2 {
			t.Errorf("session s1 attached %d; want 2", s.Attached)
		}
		if s.Name == "s2" {
			t.Error("a refused attach created session s2")
		}
	}
}
