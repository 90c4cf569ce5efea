// Package interop checks shoal-mcp against the official MCP TypeScript SDK
// client (interop.mjs), over stdio and streamable HTTP. It needs node and
// npm; without node the test skips and says so.
package interop

import (
	"bytes"
	"context"
	"github.com/shoal-sh/shoal/internal/testkernel"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// runTimeout bounds one run of the script; a safety net, not a speed test.
const runTimeout = 3 * time.Minute

// setup finds node, installs the SDK when node_modules is missing, and
// builds the facade. It skips the test, saying why, when node or the npm
// registry is not there.
func setup(t *testing.T) (bin string) {
	t.Helper()
	node, err := exec.LookPath("node")
	if err != nil {
		t.Skip("SKIP: node is not installed, so the TypeScript SDK interop test cannot run (install Node.js ≥ 18 to run it)")
	}
	if _, err := os.Stat("node_modules/@modelcontextprotocol/sdk"); err != nil {
		npm, err := exec.LookPath("npm")
		if err != nil {
			t.Skipf("SKIP: node is at %s but npm is not, so @modelcontextprotocol/sdk cannot be installed", node)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
		defer cancel()
		out, err := exec.CommandContext(ctx, npm, "ci", "--no-audit", "--no-fund").CombinedOutput()
		if err != nil {
			t.Skipf("SKIP: npm ci could not install the TypeScript SDK (no registry access?): %v\n%s", err, out)
		}
	}
	bin = filepath.Join(t.TempDir(), "shoal-mcp")
	out, err := exec.Command("go", "build", "-o", bin, "github.com/shoal-sh/shoal/cmd/shoal-mcp").CombinedOutput()
	if err != nil {
		t.Fatalf("build shoal-mcp: %v\n%s", err, out)
	}
	return bin
}

// shortDir is a state directory short enough for a unix socket path.
func shortDir(t *testing.T) string {
	dir, err := os.MkdirTemp(testkernel.StateParent(), "shli")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	return dir
}

func runScript(t *testing.T, args ...string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), runTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, "node", append([]string{"interop.mjs"}, args...)...)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	if err != nil || !strings.Contains(out.String(), "interop ok") {
		t.Fatalf("node interop.mjs %s: %v\n%s", args[0], err, out.String())
	}
	t.Log(strings.TrimSpace(out.String()))
}

func TestTypeScriptSDKStdio(t *testing.T) {
	bin := setup(t)
	// --in-process: the kernel ends with the facade the SDK closes.
	runScript(t, "stdio", bin, shortDir(t))
}

func TestTypeScriptSDKHTTP(t *testing.T) {
	bin := setup(t)
	url, token := testkernel.ServeMCPHTTP(t, bin, shortDir(t), "agent:interop")
	runScript(t, "http", url, token)
}
