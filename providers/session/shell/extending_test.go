package shell

import (
	"os"
	"regexp"
	"sort"
	"strings"
	"testing"

	"github.com/shoal-sh/shoal/core/policy"
	"github.com/shoal-sh/shoal/providers/plan/analyze"
)

// publicBuiltins are the builtins a user types: the map's names less the
// internal ones compat.go rewrites calls to (they start with a NUL).
func publicBuiltins() []string {
	var names []string
	for n := range builtins {
		if !strings.HasPrefix(n, "\x00") {
			names = append(names, n)
		}
	}
	sort.Strings(names)
	return names
}

// TestBuiltinsDocumented: every builtin has its section in docs/shell.md
// (### `NAME …`), and every such section under Builtins names a builtin
// (checklist "A new shell builtin" of docs/extending.md, item 6).
func TestBuiltinsDocumented(t *testing.T) {
	doc, err := os.ReadFile("../../../docs/shell.md")
	if err != nil {
		t.Fatal(err)
	}
	text := string(doc)
	start := strings.Index(text, "\n## Builtins\n")
	if start < 0 {
		t.Fatal("docs/shell.md has no ## Builtins section")
	}
	section := text[start+1:]
	if end := strings.Index(section[1:], "\n## "); end >= 0 {
		section = section[:end+1]
	}
	documented := map[string]bool{}
	for _, m := range regexp.MustCompile("(?m)^### `([a-z]+)[ `]").FindAllStringSubmatch(section, -1) {
		documented[m[1]] = true
	}
	names := publicBuiltins()
	for _, n := range names {
		if !documented[n] {
			t.Errorf("builtin %s has no ### `%s …` section under docs/shell.md's Builtins", n, n)
		}
	}
	for n := range documented {
		if _, ok := builtins[n]; !ok {
			t.Errorf("docs/shell.md documents a builtin %s that the shell does not have", n)
		}
	}
}

// TestBuiltinsPlanned: the planner knows every builtin (checklist item
// 3): a plan of `NAME` alone spawns no program of that name. Without its
// head, the planner takes a builtin for an unknown program.
func TestBuiltinsPlanned(t *testing.T) {
	for _, n := range publicBuiltins() {
		a, err := analyze.Analyze(n+" x", analyze.Env{Cwd: t.TempDir()})
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range a.Effects {
			if e.Kind == policy.ProcSpawn && e.Target == n {
				t.Errorf("the planner takes builtin %s for a program (%+v): add it to the head table of providers/plan/analyze/heads.go", n, e)
			}
		}
	}
}
