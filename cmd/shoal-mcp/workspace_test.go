package main

import (
	"context"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	mcpclient "github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/client/transport"
	"github.com/mark3labs/mcp-go/mcp"
)

// startIn starts a facade as a host would from a project: its working
// directory is dir, and no --session is given unless extra says so.
// roots, when not nil, are offered to the facade (roots capability).
func startIn(t *testing.T, sd *stateDir, dir string, roots []string, extra ...string) *mcpPeer {
	t.Helper()
	return startHost(t, sd, dir, hostClient{roots: roots}, extra...)
}

// hostClient is what a test client offers the facade.
type hostClient struct {
	roots  []string
	elicit mcpclient.ElicitationHandler
}

func startHost(t *testing.T, sd *stateDir, dir string, hc hostClient, extra ...string) *mcpPeer {
	t.Helper()
	stderr := &syncBuffer{}
	args := append([]string{"--state-dir", sd.dir, "--principal", "agent:proj", "--idle-exit", "1m", "--log-level", "info"}, extra...)
	tr := stdioIn(dir, args, stderr)
	if err := tr.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	var opts []mcpclient.ClientOption
	if hc.roots != nil {
		opts = append(opts, mcpclient.WithRootsHandler(rootsList(hc.roots)))
	}
	if hc.elicit != nil {
		opts = append(opts, mcpclient.WithElicitationHandler(hc.elicit))
	}
	c := mcpclient.NewClient(tr, opts...)
	p, err := initializeWith(c, stderr, func(r *mcp.InitializeRequest) {
		if hc.roots != nil {
			r.Params.Capabilities.Roots = &struct {
				ListChanged bool `json:"listChanged,omitempty"`
			}{}
		}
		if hc.elicit != nil {
			r.Params.Capabilities.Elicitation = &mcp.ElicitationCapability{}
		}
	})
	if err != nil {
		t.Fatalf("start facade in %s: %v\n%s", dir, err, stderr.String())
	}
	p.adopt(t)
	return p
}

// stdioIn is the stdio transport of a facade started in dir.
func stdioIn(dir string, args []string, stderr io.Writer) *transport.Stdio {
	return transport.NewStdioWithOptions(facadeBin, nil, args, transport.WithCommandStderrWriter(stderr),
		transport.WithCommandFunc(func(ctx context.Context, command string, env, args []string) (*exec.Cmd, error) {
			cmd := exec.CommandContext(ctx, command, args...)
			cmd.Env = append(os.Environ(), env...)
			cmd.Dir = dir
			return cmd, nil
		}))
}

type rootsList []string

func (r rootsList) ListRoots(context.Context, mcp.ListRootsRequest) (*mcp.ListRootsResult, error) {
	res := &mcp.ListRootsResult{}
	for _, dir := range r {
		res.Roots = append(res.Roots, mcp.Root{URI: "file://" + dir, Name: filepath.Base(dir)})
	}
	return res, nil
}

// sh runs source and returns its stdout, trimmed.
func (p *mcpPeer) sh(source string) string {
	p.t.Helper()
	m, _ := p.callOK("shoal_exec", map[string]any{"source": source})
	out, _ := m["stdout"].(string)
	return strings.TrimSpace(out)
}

// TestSessionPerProject: facades launched from two project directories
// get two sessions, each starting (and keeping its env) in its own
// directory; a facade launched again in a project finds its session; the
// client's roots, when offered, name the project; --session shares.
func TestSessionPerProject(t *testing.T) {
	sd := newStateDir(t)
	a, b, c := t.TempDir(), t.TempDir(), t.TempDir()

	pa := startIn(t, sd, a, nil)
	pb := startIn(t, sd, b, nil)
	if got := pa.sh("pwd"); got != a {
		t.Errorf("facade launched in A runs in %q; want %q", got, a)
	}
	if got := pb.sh("pwd"); got != b {
		t.Errorf("facade launched in B runs in %q; want %q", got, b)
	}
	pa.sh("export ONLY_A=1; mkdir -p sub && cd sub")
	if got := pb.sh(`echo "${ONLY_A-unset}"; pwd`); got != "unset\n"+b {
		t.Errorf("B sees A's env or cwd: %q", got)
	}
	pa.close()

	// The same project again: the same session, where A left it.
	pa2 := startIn(t, sd, a, nil)
	if got := pa2.sh(`echo "$ONLY_A"; pwd`); got != "1\n"+filepath.Join(a, "sub") {
		t.Errorf("relaunched in A: %q; want A's session back", got)
	}

	// Roots win over the launch directory.
	pc := startIn(t, sd, a, []string{c})
	if got := pc.sh(`echo "${ONLY_A-unset}"; pwd`); got != "unset\n"+c {
		t.Errorf("facade with root C: %q; want a fresh session in C", got)
	}

	// --session shares a session on purpose; it is not moved.
	pshared := startIn(t, sd, b, nil, "--session", projectSession(a))
	if got := pshared.sh(`echo "$ONLY_A"`); got != "1" {
		t.Errorf("--session %s from B: %q; want A's session", projectSession(a), got)
	}

	// A new session named on the command line starts where its host
	// launched it, not where the kernel happens to run (it started in A).
	pnamed := startIn(t, sd, b, nil, "--session", "named")
	if got := pnamed.sh("pwd"); got != b {
		t.Errorf("new --session named from B runs in %q; want %q", got, b)
	}

	var st struct {
		Sessions []struct {
			Name      string `json:"name"`
			Workspace string `json:"workspace"`
		} `json:"sessions"`
	}
	if err := sd.dial(t, "human:test", nil).Call(context.Background(), "kernel.status", struct{}{}, &st); err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	for _, s := range st.Sessions {
		got[s.Name] = s.Workspace
	}
	for _, dir := range []string{a, b, c} {
		if got[projectSession(dir)] != dir {
			t.Errorf("session %s has workspace %q; want %q (all: %v)", projectSession(dir), got[projectSession(dir)], dir, got)
		}
	}
}

// TestWorkspaceRoot: a host launched in / with no roots gets its tool
// calls refused with the reason, not a session that may write anywhere.
func TestWorkspaceRoot(t *testing.T) {
	sd := newStateDir(t)
	p := startIn(t, sd, "/", nil)
	res := p.call("shoal_exec", map[string]any{"source": "pwd"})
	if text := resultText(res); !res.IsError || !strings.Contains(text, "whole machine") || !strings.Contains(text, "--workspace") {
		t.Errorf("exec from a host in /: %s; want a refusal that says why and what to do", text)
	}
	p2 := startIn(t, sd, "/", nil, "--workspace", t.TempDir())
	if got := p2.sh("pwd"); got == "/" {
		t.Errorf("--workspace ignored: runs in /")
	}
	if out, err := exec.Command(facadeBin, "--state-dir", sd.dir, "--workspace", "/").CombinedOutput(); err == nil || !strings.Contains(string(out), "whole machine") {
		t.Errorf("--workspace /: %v %s", err, out)
	}
}

func TestProjectSessionName(t *testing.T) {
	for _, tc := range []struct{ dir, prefix string }{
		{"/home/me/src/shoal", "proj-shoal-"},
		{"/home/me/my project!", "proj-my-project--"},
		{"/", "proj-root-"},
		{"/x/" + strings.Repeat("long", 30), "proj-" + strings.Repeat("long", 10) + "-"},
	} {
		got := projectSession(tc.dir)
		if !strings.HasPrefix(got, tc.prefix) || len(got) != len(tc.prefix)+8 || len(got) > 64 {
			t.Errorf("projectSession(%q) = %q; want %s<8 hex>", tc.dir, got, tc.prefix)
		}
	}
	if projectSession("/a/shoal") == projectSession("/b/shoal") {
		t.Error("two projects of one name share a session")
	}
}
