package main

import (
	"strings"
	"testing"
)

// A plugin still loading shows no load time; a failed one is followed by
// its reason, so an operator sees why without --json.
func TestPrintPlugins(t *testing.T) {
	var b strings.Builder
	err := printPlugins(&b, []map[string]any{
		{"name": "kv", "version": "0.1.0", "kind": "provider", "family": "kv", "health": "ok", "load_ms": float64(84)},
		{"name": "buildcheck", "version": "0.2.0", "kind": "validator", "channels": []any{"user.build.v1"}, "health": "loading"},
		{"name": "broken", "version": "1.0.0", "kind": "provider", "family": "br", "health": "failed", "load_ms": float64(12),
			"error": "plugin broken: failed to load: describe names family \"x\", the manifest says \"br\""},
	})
	if err != nil {
		t.Fatal(err)
	}
	out := b.String()
	for _, want := range []string{"LOAD", "84ms", "user.build.v1", "loading", "broken: plugin broken: failed to load: describe names family"} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if len(lines) != 5 || !strings.HasSuffix(strings.TrimSpace(lines[2]), "-") {
		t.Errorf("want header, three rows (the loading one with load \"-\"), one reason:\n%s", out)
	}
}
