// Command checker is a validator plugin for the plugins tests. It has no
// schema of its own (its manifest may give one) and does what the
// payload's "mode" says.
package main

import (
	"encoding/json"

	"github.com/shoal-sh/shoal/sdk"
)

func init() {
	sdk.RegisterValidator(sdk.Validator{
		Channels: []string{"user.check.*"},
		Validate: func(channel string, payload json.RawMessage) error {
			var p struct {
				Mode string `json:"mode"`
			}
			if err := json.Unmarshal(payload, &p); err != nil {
				return err
			}
			switch p.Mode {
			case "reject":
				return sdk.Errorf(sdk.Rejected, "mode reject on %s", channel)
			case "fail":
				return sdk.Errorf(sdk.Failed, "checker cannot decide")
			case "loop":
				for n := 0; n >= 0; n++ {
				}
			case "panic":
				panic("checker panics")
			}
			return nil
		},
	})
}

func main() {}
