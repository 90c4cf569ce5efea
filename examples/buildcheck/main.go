// Command buildcheck is an example Shoal validator plugin for the
// user.build.v1 channel. Its JSON Schema (schema.json, embedded) fixes the
// shape of a payload and the kernel checks it natively; the Go code below
// adds the rules a schema states badly: what each phase must carry and
// that the counts add up.
//
// Build it beside its manifest and bind it in config.toml:
//
//	GOOS=wasip1 GOARCH=wasm go build -buildmode=c-shared -o examples/buildcheck/buildcheck.wasm ./examples/buildcheck
//
//	[[events.channel]]
//	name = "user.build.v1"
//	validator = "buildcheck"
package main

import (
	_ "embed"
	"encoding/json"
	"fmt"

	"github.com/shoal-sh/shoal/sdk"
)

//go:embed schema.json
var schema []byte

// report is a payload that already matched the schema.
type report struct {
	Phase  string `json:"phase"`
	Passed *int64 `json:"passed"`
	Failed *int64 `json:"failed"`
	Total  *int64 `json:"total"`
}

func init() {
	sdk.RegisterValidator(sdk.Validator{
		Channels: []string{"user.build.v1"},
		Schema:   schema,
		Validate: validate,
	})
}

func validate(channel string, payload json.RawMessage) error {
	var r report
	if err := json.Unmarshal(payload, &r); err != nil {
		return fmt.Errorf("payload is not a build report: %v", err)
	}
	counted := r.Passed != nil || r.Failed != nil
	switch r.Phase {
	case "queued":
		if counted || r.Total != nil {
			return fmt.Errorf("a queued build has run nothing yet: drop passed, failed and total")
		}
	case "done":
		if r.Passed == nil || r.Failed == nil {
			return fmt.Errorf(`phase "done" needs both passed and failed counts (0 when none)`)
		}
	}
	if r.Total != nil {
		var ran int64
		if r.Passed != nil {
			ran += *r.Passed
		}
		if r.Failed != nil {
			ran += *r.Failed
		}
		if ran > *r.Total {
			return fmt.Errorf("passed + failed = %d is more than total = %d", ran, *r.Total)
		}
		if r.Phase == "done" && ran != *r.Total {
			return fmt.Errorf("a done build ran every test: passed + failed = %d, total = %d", ran, *r.Total)
		}
	}
	return nil
}

// main never runs: the kernel loads this module as a reactor.
func main() {}
