package rpc

import (
	"fmt"
	"os"
	"strings"
	"testing"
)

// TestCodesDocumented keeps docs/kernel.md's error table equal to Codes.
func TestCodesDocumented(t *testing.T) {
	doc, err := os.ReadFile("../../docs/kernel.md")
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range Codes {
		row := fmt.Sprintf("| %d | `%s` | %s |", int(c.Code), c.Name, c.Doc)
		if !strings.Contains(string(doc), row) {
			t.Errorf("docs/kernel.md lacks the row:\n%s", row)
		}
	}
	if Code(-32005).Name() != "BAD_PATH" || Code(-32022).Name() != "UNKNOWN_PTY" || Code(-32602).Name() != "INVALID_PARAMS" {
		t.Error("fixed codes moved")
	}
}
