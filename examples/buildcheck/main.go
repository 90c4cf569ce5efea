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
	"errors"
	"fmt"

	"github.com/shoal-sh/shoal/sdk"
)

//go:embed schema.json
var schema []byte

func init() {
	sdk.RegisterValidator(sdk.Validator{
		Channels: []string{"user.build.v1"},
		Schema:   schema,
		Validate: validate,
	})
}

// validate sees only payloads that match the schema, so the members have
// their types; sdk.ParseObject reads the few it needs far faster than
// encoding/json would inside the sandbox.
func validate(channel string, payload json.RawMessage) error {
	o, err := sdk.ParseObject(payload)
	if err != nil {
		return fmt.Errorf("payload is not a build report: %v", err)
	}
	phase, _ := o.Str("phase")
	passed, hasPassed := o.Int("passed")
	failed, hasFailed := o.Int("failed")
	total, hasTotal := o.Int("total")
	switch phase {
	case "queued":
		if hasPassed || hasFailed || hasTotal {
			return errors.New("a queued build has run nothing yet: drop passed, failed and total")
		}
	case "done":
		if !hasPassed || !hasFailed {
			return errors.New(`phase "done" needs both passed and failed counts (0 when none)`)
		}
	}
	if hasTotal {
		ran := passed + failed
		if ran > total {
			return fmt.Errorf("passed + failed = %d is more than total = %d", ran, total)
		}
		if phase == "done" && ran != total {
			return fmt.Errorf("a done build ran every test: passed + failed = %d, total = %d", ran, total)
		}
	}
	return nil
}

// main never runs: the kernel loads this module as a reactor.
func main() {}
