package shell

import (
	"errors"
	"io"
	"os"
	"strings"

	"github.com/itchyny/gojq"

	"github.com/shoal-sh/shoal/core/value"
)

const jqUsage = "usage: jq [-r] [-c] [-n] [-s] [--arg NAME VALUE] [--argjson NAME JSON] FILTER [FILE...]"

// builtinJq runs a jq filter (gojq) over the JSON documents of its input:
// the named files, else standard input (the typed value when an upstream
// builtin produced it). Its value is the single result, or the list (or
// table) of results when there are several, or an empty list when there
// are none. In a pipe it writes one JSON text per result, like jq; -r
// writes strings without quotes.
func builtinJq(c *call) error {
	var (
		raw, nullInput, slurp bool
		filter                string
		haveFilter            bool
		files                 []string
		varNames              []string
		varValues             []any
		onlyOperands          bool
	)
	args := c.args[1:]
	for i := 0; i < len(args); i++ {
		a := args[i]
		if onlyOperands || len(a) < 2 || a[0] != '-' {
			if !haveFilter {
				filter, haveFilter = a, true
			} else {
				files = append(files, a)
			}
			continue
		}
		switch a {
		case "--":
			onlyOperands = true
		case "--raw-output":
			raw = true
		case "--compact-output":
		case "--null-input":
			nullInput = true
		case "--slurp":
			slurp = true
		case "--arg", "--argjson":
			if i+2 >= len(args) {
				return c.failf(2, "%s needs a name and a value; %s", a, jqUsage)
			}
			name, val := args[i+1], args[i+2]
			i += 2
			varNames = append(varNames, "$"+name)
			if a == "--arg" {
				varValues = append(varValues, val)
				continue
			}
			x, err := value.FromPlainJSON([]byte(val))
			if err != nil {
				return c.failf(2, "--argjson %s: %v", name, err)
			}
			varValues = append(varValues, value.ToPlain(x))
		default:
			if strings.HasPrefix(a, "--") || strings.Trim(a[1:], "rcns") != "" {
				return c.failf(2, "unknown option %s; %s", a, jqUsage)
			}
			raw = raw || strings.Contains(a, "r")
			nullInput = nullInput || strings.Contains(a, "n")
			slurp = slurp || strings.Contains(a, "s")
		}
	}
	if !haveFilter {
		return c.failf(2, "%s", jqUsage)
	}
	if strings.Contains(strings.ToLower(filter), "env") {
		// $ENV and env read the environment: the result may hold secrets.
		c.ru.mark(MarkSecretSource)
	}

	q, err := gojq.Parse(filter)
	if err != nil {
		return c.failf(3, "compile error: %v", err)
	}

	var inputs []any
	switch {
	case len(files) > 0:
		for _, f := range files {
			abs := c.abs(f)
			c.ru.effect(EffectFSRead, abs)
			data, err := os.ReadFile(abs)
			if err != nil {
				return c.failf(2, "%s: %v", f, unwrapPathError(err))
			}
			docs, err := jsonDocuments(data)
			if err != nil {
				return c.failf(2, "%s is not JSON: %v", f, err)
			}
			vs, err := valuesOf(docs)
			if err != nil {
				return c.failf(2, "%s: %v", f, err)
			}
			for _, v := range vs {
				inputs = append(inputs, value.ToPlain(v))
			}
		}
	default:
		vs, ok, err := c.stdinValues()
		if err != nil {
			if c.ctx.Err() != nil {
				return c.ctx.Err()
			}
			return c.failf(2, "%v", err)
		}
		if !ok && !nullInput {
			return c.failf(2, "no input; pipe a value in (open f.json | jq .x), name a file (jq .x f.json) or use -n")
		}
		for _, v := range vs {
			inputs = append(inputs, value.ToPlain(v))
		}
	}
	if slurp {
		inputs = []any{inputs}
	}

	iter := &sliceIter{items: inputs}
	code, err := gojq.Compile(q,
		gojq.WithVariables(varNames),
		gojq.WithInputIter(iter),
		gojq.WithEnvironLoader(func() []string { return processEnv(c.hc.Env) }),
	)
	if err != nil {
		return c.failf(3, "compile error: %v", err)
	}

	var results []any
	runOne := func(in any) (halt bool, err error) {
		it := code.RunWithContext(c.ctx, in, varValues...)
		for {
			r, ok := it.Next()
			if !ok {
				return false, nil
			}
			if e, isErr := r.(error); isErr {
				var he *gojq.HaltError
				if errors.As(e, &he) && he.Value() == nil {
					return true, nil
				}
				return true, e
			}
			results = append(results, r)
		}
	}
	var runErr error
	if nullInput {
		_, runErr = runOne(nil)
	} else {
		for {
			in, ok := iter.Next()
			if !ok {
				break
			}
			halt, err := runOne(in)
			if err != nil {
				runErr = err
			}
			if halt {
				break
			}
		}
	}
	if runErr != nil {
		if c.ctx.Err() != nil {
			return c.ctx.Err()
		}
		// Results before the error were printed by jq; keep them visible.
		writeJqResults(c.hc.Stdout, results, raw)
		return c.failf(5, "error: %v", runErr)
	}

	var v value.Value
	switch len(results) {
	case 0:
		v = value.List{}
	case 1:
		v = value.FromAny(results[0])
	default:
		v = value.FromAny(results)
	}
	return c.deliver(v, func(w io.Writer) error { return writeJqResults(w, results, raw) })
}

// writeJqResults writes results the way jq does: one compact JSON text per
// line, strings bare with -r.
func writeJqResults(w io.Writer, results []any, raw bool) error {
	var buf []byte
	for _, r := range results {
		if s, ok := r.(string); ok && raw {
			buf = append(buf, s...)
		} else {
			b, err := gojq.Marshal(r)
			if err != nil {
				return err
			}
			buf = append(buf, b...)
		}
		buf = append(buf, '\n')
	}
	_, err := w.Write(buf)
	return err
}

// sliceIter feeds jq's main loop and its input/inputs builtins from one
// queue, as the jq command does.
type sliceIter struct {
	items []any
}

func (it *sliceIter) Next() (any, bool) {
	if len(it.items) == 0 {
		return nil, false
	}
	v := it.items[0]
	it.items = it.items[1:]
	return v, true
}
