package shell

import (
	"context"
	"io"

	"github.com/shoal-sh/shoal/core/value"
)

// ValueFunc returns the stored value behind a ref: out:N (or N, or
// shoal://out/N) of the session, or val:blake3:<hex>. Its error says why
// a ref does not resolve.
type ValueFunc func(ctx context.Context, ref string) (value.Value, error)

// builtinOut writes a stored value to standard output, so an earlier
// result feeds new commands without running its source again:
//
//	out 17 | grep -n FAIL | head
//	out val:blake3:<hex> .rows | jq length
//
// A string or bytes value is written as it is; an execution's record
// {exit, stdout, stderr} replays its output (stdout to standard output,
// stderr to standard error); anything else is written as plain JSON, one
// line. An optional path selects inside the value first (out 17 .stderr).
// Ending a pipeline, the value itself is the run's value.
func builtinOut(c *call) error {
	if len(c.args) < 2 || len(c.args) > 3 {
		return c.failf(2, "usage: out REF [PATH] (REF is out:N, N or val:blake3:<hex>; PATH selects inside it, e.g. .stderr)")
	}
	if c.e.opts.Values == nil {
		return c.failf(1, "this session has no transcript to read values from")
	}
	v, err := c.e.opts.Values(c.ctx, c.args[1])
	if err != nil {
		return c.failf(1, "%s", err.Error())
	}
	if len(c.args) == 3 {
		p, err := value.ParsePath(c.args[2])
		if err != nil {
			return c.failf(2, "%s", err.Error())
		}
		if v, err = p.Eval(v); err != nil {
			return c.failf(1, "%s", err.Error())
		}
	}
	switch x := v.(type) {
	case value.Str:
		return c.deliver(v, func(w io.Writer) error { _, err := io.WriteString(w, string(x)); return err })
	case value.Bytes:
		return c.deliver(v, func(w io.Writer) error { _, err := w.Write(x); return err })
	case *value.Record:
		if stdout, stderr, ok := execOutput(x); ok {
			_, _ = io.WriteString(c.hc.Stderr, stderr)
			return c.deliver(v, func(w io.Writer) error { _, err := io.WriteString(w, stdout); return err })
		}
	}
	return c.deliver(v, nil)
}

// execOutput recognises an execution's value {exit, stdout, stderr}.
func execOutput(r *value.Record) (stdout, stderr string, ok bool) {
	if _, has := r.Get("exit"); !has {
		return "", "", false
	}
	out, ok1 := r.Get("stdout")
	errs, ok2 := r.Get("stderr")
	so, ok3 := out.(value.Str)
	se, ok4 := errs.(value.Str)
	if !ok1 || !ok2 || !ok3 || !ok4 {
		return "", "", false
	}
	return string(so), string(se), true
}
