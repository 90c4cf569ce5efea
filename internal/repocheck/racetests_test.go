package repocheck

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// makeVar returns the words of a Makefile variable assigned with :=,
// following backslash continuations.
func makeVar(t *testing.T, makefile, name string) []string {
	t.Helper()
	var words []string
	in := false
	for _, line := range strings.Split(makefile, "\n") {
		if !in {
			rest, ok := strings.CutPrefix(line, name+" :=")
			if !ok {
				continue
			}
			line, in = rest, true
		}
		more := strings.HasSuffix(line, "\\")
		words = append(words, strings.Fields(strings.TrimSuffix(line, "\\"))...)
		if !more {
			return words
		}
	}
	t.Fatalf("Makefile has no %s := …", name)
	return nil
}

// testFuncs maps each top-level Test function name of the module's test
// files to the directories declaring it.
func testFuncs(t *testing.T) map[string][]string {
	t.Helper()
	re := regexp.MustCompile(`(?m)^func (Test\w+)\(`)
	out := map[string][]string{}
	err := filepath.WalkDir(root, func(p string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && p != root && (d.Name() == "testdata" || d.Name() == "node_modules" || strings.HasPrefix(d.Name(), ".")) {
			return filepath.SkipDir
		}
		if d.IsDir() || !strings.HasSuffix(p, "_test.go") {
			return nil
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		for _, m := range re.FindAllSubmatch(b, -1) {
			dir, _ := filepath.Rel(root, filepath.Dir(p))
			out[string(m[1])] = append(out[string(m[1])], filepath.ToSlash(dir))
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// TestMCPRaceTests: make test runs the facade tests named by
// MCP_RACE_TESTS under -race and skips them (by name, in every package)
// in the run without it. A name that is no test of cmd/shoal-mcp would
// leave a concurrency test without the race detector; a name that is a
// test of another package too would skip that one.
func TestMCPRaceTests(t *testing.T) {
	mk, err := os.ReadFile(filepath.Join(root, "Makefile"))
	if err != nil {
		t.Fatal(err)
	}
	names := makeVar(t, string(mk), "MCP_RACE_TESTS")
	if len(names) == 0 {
		t.Fatal("MCP_RACE_TESTS is empty")
	}
	funcs := testFuncs(t)
	for _, n := range names {
		dirs := funcs[n]
		switch {
		case len(dirs) == 0:
			t.Errorf("MCP_RACE_TESTS names %s, which is no test: rename it there too", n)
		case len(dirs) > 1 || dirs[0] != "cmd/shoal-mcp":
			t.Errorf("MCP_RACE_TESTS names %s, declared in %v: only tests of cmd/shoal-mcp belong there, and the name must be unique (make test skips it everywhere in its run without -race)", n, dirs)
		}
	}
}
