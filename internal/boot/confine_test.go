//go:build linux

package boot_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/shoal-sh/shoal/providers/session/sandbox"
	"github.com/shoal-sh/shoal/sdk/client"
)

// A PTY runs inside its session's confinement: an interactive shell's
// keystrokes cannot be analysed, so the OS is what holds there. Work in
// the workspace still works, in sh and in python3.
func TestPTYConfined(t *testing.T) {
	if sandbox.ABI() < 1 {
		t.Skip("no Landlock in this kernel")
	}
	dir := shortDir(t)
	startKernel(t, dir)
	ws := t.TempDir()
	c := attach(t, dir, client.Options{Principal: "agent:pty", Workspace: ws})
	ctx := context.Background()
	outside := shortDir(t) // neither the workspace nor the temp dir the test policy opens
	canary := filepath.Join(outside, "canary")
	os.WriteFile(canary, []byte("canary\n"), 0o644)
	token, _ := os.ReadFile(filepath.Join(dir, "token"))

	open := func(command string) string {
		var scr map[string]any
		if err := c.Call(ctx, "pty.open", map[string]any{"command": command, "cols": 100, "rows": 30}, &scr); err != nil {
			t.Fatalf("pty.open %s: %v", command, err)
		}
		return scr["pty"].(string)
	}
	until := func(id, input, pattern string) {
		t.Helper()
		if err := c.Call(ctx, "pty.write", map[string]any{"pty": id, "input": input}, nil); err != nil {
			t.Fatal(err)
		}
		var w map[string]any
		if err := c.Call(ctx, "wait", map[string]any{"target": id, "pattern": pattern, "timeout_ms": 20000}, &w); err != nil || w["satisfied"] != true {
			var scr map[string]any
			c.Call(ctx, "pty.read", map[string]any{"pty": id}, &scr)
			t.Fatalf("waiting for %q: %v %v; screen %v", pattern, w, err, scr["lines"])
		}
	}
	sh := open("sh")
	until(sh, "echo x > "+canary+"; echo rc-$?\r", "rc-[1-9]")
	until(sh, "cat "+filepath.Join(dir, "token")+" || echo denied-$?\r", "denied-1")
	until(sh, "echo made > in-ws && cat in-ws && echo ok-$?\r", "ok-0")
	until(sh, "rm -rf "+outside+"; echo gone-$?\r", "gone-[1-9]")
	py := open("python3")
	until(py, "open('py.txt','w').write('py'); print('w', open('py.txt').read())\r", "w py")
	until(py, "import os\r", ">>>")
	until(py, "try:\r open('"+canary+"','w')\rexcept OSError as e: print('refused', e.errno)\r\r", "refused 13")
	if b, _ := os.ReadFile(canary); string(b) != "canary\n" {
		t.Fatalf("canary = %q", b)
	}
	if b, _ := os.ReadFile(filepath.Join(ws, "in-ws")); strings.TrimSpace(string(b)) != "made" {
		t.Fatalf("workspace file = %q", b)
	}
	if b, _ := os.ReadFile(filepath.Join(dir, "token")); string(b) != string(token) {
		t.Fatal("the token changed")
	}
	var scr map[string]any
	c.Call(ctx, "pty.read", map[string]any{"pty": sh}, &scr)
	if strings.Contains(strings.Join(toStrings(scr["lines"]), "\n"), strings.TrimSpace(string(token))) {
		t.Fatal("the token was shown on the PTY")
	}
}

func toStrings(v any) []string {
	l, _ := v.([]any)
	out := make([]string, 0, len(l))
	for _, x := range l {
		s, _ := x.(string)
		out = append(out, s)
	}
	return out
}
