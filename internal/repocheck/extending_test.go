package repocheck

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/shoal-sh/shoal/core/kernel"
	"github.com/shoal-sh/shoal/internal/testkernel"
	"github.com/shoal-sh/shoal/providers/all"
)

// The checks of docs/extending.md's checklists that need the whole
// kernel; the others live next to what they check (TestCodesDocumented
// in core/rpc, TestKindsDocumented in core/policy, TestToolsDocumented in
// cmd/shoal-mcp, TestBuiltinsDocumented and TestBuiltinsPlanned in
// providers/session/shell).

func readDocs(t *testing.T) map[string]string {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(root, "docs", "*.md"))
	if err != nil || len(files) == 0 {
		t.Fatalf("docs/*.md: %v (%d files)", err, len(files))
	}
	out := map[string]string{}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		out["docs/"+filepath.Base(f)] = string(b)
	}
	return out
}

// TestFamiliesDocumented: every built-in family (providers/all) has its
// URI forms in a page of docs/ (checklist "A new resource family", item
// 5), and the listing order names only families that exist (item 3).
func TestFamiliesDocumented(t *testing.T) {
	docs := readDocs(t)
	var families []string
	for _, p := range all.Providers() {
		fam := p.Family()
		families = append(families, fam)
		found := false
		for _, text := range docs {
			if strings.Contains(text, "shoal://"+fam) {
				found = true
				break
			}
		}
		if !found {
			t.Errorf("no page of docs/ shows shoal://%s: document the family's URI forms (docs/extending.md)", fam)
		}
	}
	o := all.Order()
	for _, group := range [][]string{o.Roots, o.Entries, o.Templates} {
		for _, fam := range group {
			if !slices.Contains(families, fam) {
				t.Errorf("providers/all.Order names %q, which no provider serves", fam)
			}
		}
	}
}

// TestMethodsDocumented: every kernel method of a kernel with every
// built-in family has a row in docs/kernel.md's method table (checklist
// "A new kernel method", item 6), and every row names a method.
func TestMethodsDocumented(t *testing.T) {
	doc := readDocs(t)["docs/kernel.md"]
	start := strings.Index(doc, "\n## Methods\n")
	if start < 0 {
		t.Fatal("docs/kernel.md has no ## Methods section")
	}
	table := doc[start:]
	if end := strings.Index(table[1:], "\n## "); end >= 0 {
		table = table[:end+1]
	}
	// The first cell of each row: `a` or `a` / `b`.
	documented := map[string]bool{}
	for _, line := range strings.Split(table, "\n") {
		if !strings.HasPrefix(line, "| `") {
			continue
		}
		cell, _, _ := strings.Cut(strings.TrimPrefix(line, "| "), " |")
		for _, name := range strings.Split(cell, " / ") {
			documented[strings.Trim(name, "`")] = true
		}
	}
	k := testkernel.Start(t, kernel.Options{})
	names := k.MethodNames()
	if len(names) < 10 {
		t.Fatalf("the kernel has only %d methods: %v", len(names), names)
	}
	for _, m := range names {
		if !documented[m] {
			t.Errorf("kernel method %s has no row in docs/kernel.md's method table", m)
		}
	}
	for m := range documented {
		if !slices.Contains(names, m) {
			t.Errorf("docs/kernel.md documents method %s, which the kernel does not have", m)
		}
	}
}
