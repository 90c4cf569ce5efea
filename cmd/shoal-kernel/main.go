// Command shoal-kernel runs the Shoal kernel in the foreground; `shoal
// kernel` hands over to it. The kernel lives in its own binary so that the
// command line client, started once per command, stays small: it links
// neither the providers, the WebAssembly runtime nor the JSON Schema
// library, whose package initialisation alone cost about 7 ms a start.
package main

import (
	"os"

	"github.com/shoal-sh/shoal/internal/boot"
)

func main() { os.Exit(boot.Main(os.Args[1:], os.Stderr)) }
