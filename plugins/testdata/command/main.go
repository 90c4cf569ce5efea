// Command command registers a provider but is built as a WASI command
// (with _start), not a reactor: the kernel must refuse it at load.
package main

import "github.com/shoal-sh/shoal/sdk"

func init() {
	sdk.RegisterProvider(sdk.Provider{
		Family: "command",
		Read:   func(*sdk.ReadRequest) (any, error) { return sdk.Int(1), nil },
	})
}

func main() {}
