package main

import (
	"strings"
	"testing"

	"github.com/shoal-sh/shoal/core/wire"
)

// A plugin still loading shows no load time; a failed one is followed by
// its reason, so an operator sees why without --json.
func TestPrintPlugins(t *testing.T) {
	var b strings.Builder
	err := printPlugins(&b, []wire.PluginStatus{
		{Name: "kv", Version: "0.1.0", Kind: "provider", Family: "kv", Health: "ok", LoadMS: 84},
		{Name: "buildcheck", Version: "0.2.0", Kind: "validator", Channels: []string{"user.build.v1"}, Health: "loading"},
		{Name: "broken", Version: "1.0.0", Kind: "provider", Family: "br", Health: "failed", LoadMS: 12,
			Error: "plugin broken: failed to load: describe names family \"x\", the manifest says \"br\""},
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
