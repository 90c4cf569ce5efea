package shell

import (
	"fmt"
	"strings"

	"mvdan.cc/sh/v3/interp"
)

// printfBuiltin is the name printf calls are rewritten to: not one a
// script can type, so it reaches only [builtinPrintf].
const printfBuiltin = "\x00printf"

func printfCall(hc interp.HandlerContext, args []string) []string {
	rest := args[1:]
	if len(rest) > 0 && rest[0] == "--" {
		rest = rest[1:]
	}
	if len(rest) == 0 || rest[0] != "-v" {
		return append([]string{printfBuiltin}, rest...)
	}
	if len(rest) < 2 {
		return []string{printfBuiltin, "-v"}
	}
	name, rest := rest[1], rest[2:]
	if len(rest) > 0 && rest[0] == "--" {
		rest = rest[1:]
	}
	r := bashPrintf(rest, utf8Locale(hc.Env))
	// eval assigns in the caller's scope, as printf -v does.
	var script strings.Builder
	fmt.Fprintf(&script, "%s=%s", name, singleQuote(string(r.out)))
	for _, e := range r.errs {
		fmt.Fprintf(&script, "; echo %s >&2", singleQuote(e))
	}
	if r.status != 0 {
		fmt.Fprintf(&script, "; (exit %d)", r.status)
	}
	return []string{"eval", script.String()}
}

// builtinPrintf is bash's printf; see [bashPrintf].
func builtinPrintf(c *call) error {
	args := c.args[1:]
	if len(args) > 0 && args[0] == "-v" {
		fmt.Fprintln(c.hc.Stderr, "printf: -v: option requires an argument")
		return interp.ExitStatus(2)
	}
	r := bashPrintf(args, utf8Locale(c.hc.Env))
	_, _ = c.hc.Stdout.Write(r.out)
	for _, e := range r.errs {
		fmt.Fprintln(c.hc.Stderr, e)
	}
	if r.status != 0 {
		return interp.ExitStatus(r.status)
	}
	return nil
}
