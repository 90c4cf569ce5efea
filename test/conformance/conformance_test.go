// Package conformance runs the server scenarios of the MCP conformance
// suite (@modelcontextprotocol/conformance) against shoal-mcp over
// streamable HTTP. The suite needs Node ≥ 22; without it the test skips
// and says so. SHOAL_CONFORMANCE_NODE may name a node 22 binary when the
// one on PATH is older.
package conformance

import (
	"bytes"
	"context"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/shoal-sh/shoal/internal/testkernel"
)

// minNode is the oldest Node the suite runs on (it imports fs.globSync).
const minNode = 22

// runTimeout bounds one run of the suite; a safety net, not a speed test.
const runTimeout = 3 * time.Minute

// findNode returns a node binary of version ≥ minNode, or skips saying why.
func findNode(t *testing.T) string {
	t.Helper()
	node := os.Getenv("SHOAL_CONFORMANCE_NODE")
	if node == "" {
		var err error
		if node, err = exec.LookPath("node"); err != nil {
			t.Skipf("SKIP: node is not installed; the MCP conformance suite needs Node ≥ %d", minNode)
		}
	}
	out, err := exec.Command(node, "--version").Output()
	if err != nil {
		t.Skipf("SKIP: %s --version: %v", node, err)
	}
	v := strings.TrimSpace(string(out))
	major, _ := strconv.Atoi(strings.SplitN(strings.TrimPrefix(v, "v"), ".", 2)[0])
	if major < minNode {
		t.Skipf("SKIP: %s is Node %s; the MCP conformance suite needs Node ≥ %d (set SHOAL_CONFORMANCE_NODE to a newer node)", node, v, minNode)
	}
	return node
}

// install puts the pinned suite in node_modules when it is missing.
func install(t *testing.T) {
	t.Helper()
	if _, err := os.Stat("node_modules/@modelcontextprotocol/conformance"); err == nil {
		return
	}
	npm, err := exec.LookPath("npm")
	if err != nil {
		t.Skip("SKIP: npm is not installed, so the conformance suite cannot be installed")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	if out, err := exec.CommandContext(ctx, npm, "ci", "--no-audit", "--no-fund").CombinedOutput(); err != nil {
		t.Skipf("SKIP: npm ci could not install the conformance suite (no registry access?): %v\n%s", err, out)
	}
}

// startFacade builds shoal-mcp and serves it over HTTP with a kernel of
// its own; it returns the endpoint and the bearer token.
func startFacade(t *testing.T) (endpoint, token string) {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "shoal-mcp")
	if out, err := exec.Command("go", "build", "-o", bin, "github.com/shoal-sh/shoal/cmd/shoal-mcp").CombinedOutput(); err != nil {
		t.Fatalf("build shoal-mcp: %v\n%s", err, out)
	}
	return testkernel.ServeMCPHTTP(t, bin, testkernel.ShortDir(t), "agent:conformance")
}

var summary = regexp.MustCompile(`(?m)^Total: (\d+) passed, (\d+) failed`)

// TestServerScenarios: every server scenario of the suite passes except
// the ones in baseline.yml, which call fixtures of the suite's reference
// server (see there). The suite cannot send a bearer token, so it talks
// to a proxy that adds the facade's token, as a host holding it does;
// Host and Origin go through unchanged, so the DNS rebinding scenario
// still meets the facade's own checks.
func TestServerScenarios(t *testing.T) {
	node := findNode(t)
	install(t)
	endpoint, token := startFacade(t)
	target, err := url.Parse(endpoint)
	if err != nil {
		t.Fatal(err)
	}
	proxy := &httputil.ReverseProxy{
		Rewrite: func(r *httputil.ProxyRequest) {
			r.SetURL(&url.URL{Scheme: target.Scheme, Host: target.Host})
			r.Out.Host = r.In.Host
			r.Out.Header.Set("Authorization", "Bearer "+token)
		},
		FlushInterval: -1, // event streams pass as they come
	}
	front := httptest.NewServer(proxy)
	defer front.Close()

	ctx, cancel := context.WithTimeout(context.Background(), runTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, node, "node_modules/@modelcontextprotocol/conformance/dist/index.js", "server",
		"--url", front.URL+target.Path, "--expected-failures", "baseline.yml", "-o", t.TempDir())
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err = cmd.Run()
	m := summary.FindStringSubmatch(out.String())
	if err != nil || m == nil {
		t.Fatalf("conformance server: %v\n%s", err, out.String())
	}
	passed := regexp.MustCompile(`(?m)^✓ `).FindAllString(out.String(), -1)
	failed := regexp.MustCompile(`(?m)^✗ `).FindAllString(out.String(), -1)
	t.Logf("conformance 0.1.16: %d server scenarios passed, %d failed (all in baseline.yml); checks %s passed, %s failed",
		len(passed), len(failed), m[1], m[2])
}
