package shell

import (
	"context"
	"fmt"
	"strings"

	"mvdan.cc/sh/v3/expand"
	"mvdan.cc/sh/v3/interp"
	"mvdan.cc/sh/v3/syntax"
)

// bashCalls adds to a call handler the rewrites that make a builtin of the
// interpreter behave as bash's: printf becomes Shoal's bashPrintf (a
// builtin of its own, or for -v an eval of the assignment it computed).
func bashCalls(h interp.CallHandlerFunc) interp.CallHandlerFunc {
	return func(ctx context.Context, args []string) ([]string, error) {
		args, err := h(ctx, args)
		if err != nil || len(args) == 0 {
			return args, err
		}
		switch args[0] {
		case "printf":
			return printfCall(interp.HandlerCtx(ctx), args), nil
		}
		return args, nil
	}
}

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

// utf8Locale reports whether the session's character type is UTF-8.
func utf8Locale(env expand.Environ) bool {
	for _, name := range []string{"LC_ALL", "LC_CTYPE", "LANG"} {
		if v := env.Get(name); v.IsSet() && v.String() != "" {
			s := strings.ToLower(v.String())
			return strings.Contains(s, "utf-8") || strings.Contains(s, "utf8")
		}
	}
	return false
}

// singleQuote quotes s for the shell with single quotes.
func singleQuote(s string) string {
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

// splitFuncBodies corrects how the parser reads a function definition
// followed by && or ||: `f() { a; } && b` is a definition and then b in
// bash, but the parser takes the whole list as the body of f, so nothing
// runs. The leftmost command of such a list (the real body, a compound
// command in bash) becomes the body again, and the definition takes its
// place in the list.
func splitFuncBodies(f *syntax.File) {
	syntax.Walk(f, func(n syntax.Node) bool {
		st, ok := n.(*syntax.Stmt)
		if !ok {
			return true
		}
		fd, ok := st.Cmd.(*syntax.FuncDecl)
		if !ok || fd.Body == nil {
			return true
		}
		list, ok := fd.Body.Cmd.(*syntax.BinaryCmd)
		if !ok {
			return true
		}
		first := list
		for {
			x, ok := first.X.Cmd.(*syntax.BinaryCmd)
			if !ok {
				break
			}
			first = x
		}
		def := *fd
		def.Body = first.X
		first.X = &syntax.Stmt{Position: fd.Pos(), Cmd: &def}
		body := fd.Body
		st.Cmd = list
		st.Negated = st.Negated || body.Negated
		st.Background = st.Background || body.Background
		st.Coprocess = st.Coprocess || body.Coprocess
		st.Disown = st.Disown || body.Disown
		st.Redirs = append(body.Redirs, st.Redirs...)
		return true
	})
}
