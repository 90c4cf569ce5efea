package policy

import (
	"os"
	"strings"
	"testing"
)

// TestKindsDocumented: every effect kind has its row in docs/policy.md's
// kinds table, in the order of Kinds, and the table has no other kind
// (checklist "A new policy effect kind" of docs/extending.md, item 6).
func TestKindsDocumented(t *testing.T) {
	doc, err := os.ReadFile("../../docs/policy.md")
	if err != nil {
		t.Fatal(err)
	}
	start := strings.Index(string(doc), "| kind | target | examples |")
	if start < 0 {
		t.Fatal("docs/policy.md has no kinds table (| kind | target | examples |)")
	}
	var rows []string
	for _, line := range strings.Split(string(doc[start:]), "\n")[2:] {
		if !strings.HasPrefix(line, "| `") {
			break
		}
		cell, _, _ := strings.Cut(strings.TrimPrefix(line, "| "), " |")
		rows = append(rows, strings.Trim(cell, "`"))
	}
	if strings.Join(rows, " ") != strings.Join(Kinds, " ") {
		t.Errorf("docs/policy.md's kinds table lists %v; Kinds is %v", rows, Kinds)
	}
}
