package shell

import (
	"bytes"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"unicode/utf16"

	"mvdan.cc/sh/v3/interp"

	"github.com/itchyny/gojq"

	"github.com/shoal-sh/shoal/core/value"
)

const jqUsage = "usage: jq [-r] [-j] [-c] [-n] [-s] [-S] [-e] [-a] [--tab] [--indent N] [--arg NAME VALUE] [--argjson NAME JSON] FILTER [FILE...]"

// jqArgs is a jq command line.
type jqArgs struct {
	filter                       string
	haveFilter                   bool
	files                        []string
	varNames                     []string
	varValues                    []any
	raw, join, compact, sortKeys bool
	nullInput, slurp, exitStatus bool
	ascii, tab                   bool
	indent                       int
	unknown                      string // the first option this builtin does not know
	usage                        string // why the command line is not usable
}

// jqShort are the one-letter forms of jq's switches.
var jqShort = map[rune]string{
	'r': "--raw-output", 'j': "--join-output", 'c': "--compact-output", 'n': "--null-input",
	's': "--slurp", 'S': "--sort-keys", 'e': "--exit-status", 'a': "--ascii-output",
}

// set turns on the switch named by its long form, reporting whether it is
// one.
func (j *jqArgs) set(long string) bool {
	switch long {
	case "--raw-output":
		j.raw = true
	case "--join-output":
		j.raw, j.join = true, true
	case "--compact-output":
		j.compact = true
	case "--null-input":
		j.nullInput = true
	case "--slurp":
		j.slurp = true
	case "--sort-keys":
		j.sortKeys = true
	case "--exit-status":
		j.exitStatus = true
	case "--ascii-output":
		j.ascii = true
	case "--tab":
		j.tab = true
	default:
		return false
	}
	return true
}

func parseJqArgs(args []string) *jqArgs {
	j := &jqArgs{indent: 2}
	onlyOperands := false
	for i := 0; i < len(args); i++ {
		a := args[i]
		if onlyOperands || len(a) < 2 || a[0] != '-' {
			switch {
			case !j.haveFilter:
				j.filter, j.haveFilter = a, true
			case a != "-": // - is standard input, read when no file is named
				j.files = append(j.files, a)
			}
			continue
		}
		if j.set(a) {
			continue
		}
		switch a {
		case "--":
			onlyOperands = true
		case "--indent":
			if i+1 >= len(args) {
				j.usage = "--indent needs a number"
				return j
			}
			n, err := strconv.Atoi(args[i+1])
			if err != nil || n < 0 || n > 7 {
				j.usage = "--indent takes a number from 0 to 7"
				return j
			}
			j.indent = n
			i++
		case "--arg", "--argjson":
			if i+2 >= len(args) {
				j.usage = a + " needs a name and a value"
				return j
			}
			name, val := args[i+1], args[i+2]
			i += 2
			j.varNames = append(j.varNames, "$"+name)
			if a == "--arg" {
				j.varValues = append(j.varValues, val)
				continue
			}
			x, err := value.FromPlainJSON([]byte(val))
			if err != nil {
				j.usage = fmt.Sprintf("--argjson %s: %v", name, err)
				return j
			}
			j.varValues = append(j.varValues, value.ToPlain(x))
		default:
			if strings.HasPrefix(a, "--") || strings.Trim(a[1:], "rjcnsSea") != "" {
				if j.unknown == "" {
					j.unknown = a
				}
				continue
			}
			for _, f := range a[1:] {
				j.set(jqShort[f])
			}
		}
	}
	return j
}

// builtinJq runs a jq filter over the JSON documents of its input: the
// named files, else standard input. Its bytes are what jq prints: the jq
// program's own output when one is installed, so formatting, key order and
// messages are jq's; else gojq's results written the way jq writes them.
// When it ends the run its value is the single result, or the list (or
// table) of results when there are several, or an empty list when there
// are none (computed with gojq, from the typed value an upstream builtin
// handed over when there is one). When the upstream's bytes are not JSON
// (ls | jq wrote names) gojq also makes the bytes, from the typed value.
func builtinJq(c *call) error {
	j := parseJqArgs(c.args[1:])
	program, haveProgram := c.program("jq")
	switch {
	case j.unknown != "" && haveProgram:
		return c.next(c.ctx, c.args)
	case j.unknown != "":
		return c.failf(2, "unknown option %s; %s", j.unknown, jqUsage)
	case j.usage != "":
		return c.failf(2, "%s; %s", j.usage, jqUsage)
	case !j.haveFilter:
		return c.failf(2, "%s", jqUsage)
	}
	if strings.Contains(strings.ToLower(j.filter), "env") {
		// $ENV and env read the environment: the result may hold secrets.
		c.ru.mark(MarkSecretSource)
	}
	for _, f := range j.files {
		c.ru.effect(EffectFSRead, c.abs(f))
	}

	var (
		stdin      []byte
		haveStdin  bool
		typed      value.Value
		typedInput bool
	)
	if len(j.files) == 0 {
		data, key, ok, err := c.readStdin()
		if err != nil {
			if c.ctx.Err() != nil {
				return c.ctx.Err()
			}
			return c.failf(2, "%v", err)
		}
		if !ok && !j.nullInput {
			return c.failf(2, "no input; pipe a value in (open f.json | jq .x), name a file (jq .x f.json) or use -n")
		}
		stdin, haveStdin = data, ok
		typed, typedInput = c.e.takeHandoff(key, data)
	}

	// The program reads the bytes; input handed over typed goes to it too
	// when those bytes are JSON (open data.json | jq .), and to gojq when
	// they are not (ls | jq wrote names).
	if haveProgram && (!typedInput || jsonText(stdin)) {
		hc := c.hc
		hc.Stdin = nil
		if haveStdin {
			hc.Stdin = bytes.NewReader(stdin)
		}
		c.ru.effect(EffectProcSpawn, program)
		err := c.e.spawn(c.ctx, c.ru, hc, program, c.args)
		if err == nil && c.valueWanted() {
			if inputs, ierr := c.jqInputs(j, stdin, typed); ierr == nil {
				if results, rerr := c.runJq(j, inputs); rerr == nil {
					c.setValue(jqValue(results))
				}
			}
		}
		return err
	}

	inputs, err := c.jqInputs(j, stdin, typed)
	if err != nil {
		return c.failf(2, "%v", err)
	}
	results, err := c.runJq(j, inputs)
	var ce *jqCompileError
	switch {
	case errors.As(err, &ce):
		return c.failf(3, "compile error: %v", ce.err)
	case err != nil:
		if c.ctx.Err() != nil {
			return c.ctx.Err()
		}
		// Results before the error were printed by jq; keep them visible.
		_, _ = c.hc.Stdout.Write(formatJq(results, j))
		return c.failf(5, "error: %v", err)
	}
	if err := c.deliverText(jqValue(results), formatJq(results, j), !j.raw); err != nil {
		return err
	}
	if j.exitStatus {
		return jqExitStatus(results)
	}
	return nil
}

// jsonText reports whether data is a stream of JSON documents.
func jsonText(data []byte) bool {
	_, err := jsonDocuments(data)
	return err == nil
}

// program finds an external command on the session's PATH.
func (c *call) program(name string) (string, bool) {
	path, err := interp.LookPathDir(c.hc.Dir, c.hc.Env, name)
	return path, err == nil
}

// jqInputs are the documents jq filters: the typed value handed over, or
// the documents of the named files, or of stdin; slurped into one array
// with -s.
func (c *call) jqInputs(j *jqArgs, stdin []byte, typed value.Value) ([]any, error) {
	var inputs []any
	add := func(name string, data []byte) error {
		docs, err := jsonDocuments(data)
		if err != nil {
			return fmt.Errorf("%s is not JSON: %v", name, err)
		}
		vs, err := valuesOf(docs)
		if err != nil {
			return fmt.Errorf("%s: %v", name, err)
		}
		for _, v := range vs {
			inputs = append(inputs, value.ToPlain(v))
		}
		return nil
	}
	switch {
	case typed != nil:
		inputs = append(inputs, value.ToPlain(typed))
	case len(j.files) > 0:
		for _, f := range j.files {
			data, err := c.readFile(c.abs(f))
			if err != nil {
				return nil, fmt.Errorf("%s: %v", f, unwrapPathError(err))
			}
			if err := add(f, data); err != nil {
				return nil, err
			}
		}
	default:
		if err := add("input", stdin); err != nil {
			return nil, err
		}
	}
	if j.slurp {
		if inputs == nil {
			inputs = []any{}
		}
		inputs = []any{inputs}
	}
	return inputs, nil
}

type jqCompileError struct{ err error }

func (e *jqCompileError) Error() string { return e.err.Error() }

// runJq runs the filter over the inputs with gojq, as jq's main loop
// does; results before a runtime error are returned with it.
func (c *call) runJq(j *jqArgs, inputs []any) ([]any, error) {
	q, err := gojq.Parse(j.filter)
	if err != nil {
		return nil, &jqCompileError{err}
	}
	iter := &sliceIter{items: inputs}
	code, err := gojq.Compile(q,
		gojq.WithVariables(j.varNames),
		gojq.WithInputIter(iter),
		gojq.WithEnvironLoader(func() []string { return processEnv(c.hc.Env) }),
	)
	if err != nil {
		return nil, &jqCompileError{err}
	}
	var results []any
	runOne := func(in any) (halt bool, err error) {
		it := code.RunWithContext(c.ctx, in, j.varValues...)
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
	if j.nullInput {
		_, err := runOne(nil)
		return results, err
	}
	var runErr error
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
	return results, runErr
}

// jqValue is the value of a jq run: its single result, the list (or
// table) of several, or an empty list for none.
func jqValue(results []any) value.Value {
	switch len(results) {
	case 0:
		return value.List{}
	case 1:
		return value.FromAny(results[0])
	}
	return value.FromAny(results)
}

// jqExitStatus is jq -e's status: 1 when the last result is false or
// null, 4 when there is none.
func jqExitStatus(results []any) error {
	if len(results) == 0 {
		return interp.ExitStatus(4)
	}
	if last := results[len(results)-1]; last == nil || last == false {
		return interp.ExitStatus(1)
	}
	return nil
}

// formatJq writes results the way jq does: each result indented (two
// spaces unless --indent or --tab say otherwise) or compact with -c,
// strings bare with -r, no newline between results with -j. gojq keeps
// object keys sorted, so keys come out in sorted order.
func formatJq(results []any, j *jqArgs) []byte {
	indent := strings.Repeat(" ", j.indent)
	if j.tab {
		indent = "\t"
	}
	if j.compact || (!j.tab && j.indent == 0) {
		indent = ""
	}
	var buf []byte
	for _, r := range results {
		if s, ok := r.(string); ok && j.raw {
			buf = append(buf, s...)
		} else {
			buf = appendJq(buf, r, indent, 0, j.ascii)
		}
		if !j.join {
			buf = append(buf, '\n')
		}
	}
	return buf
}

// appendJq appends one JSON text: containers laid out by appendJq, scalars
// encoded by gojq (which writes numbers and escapes strings as jq does).
func appendJq(buf []byte, v any, indent string, depth int, ascii bool) []byte {
	newline := func(d int) {
		if indent == "" {
			return
		}
		buf = append(buf, '\n')
		for range d {
			buf = append(buf, indent...)
		}
	}
	switch x := v.(type) {
	case []any:
		if len(x) == 0 {
			return append(buf, "[]"...)
		}
		buf = append(buf, '[')
		for i, it := range x {
			if i > 0 {
				buf = append(buf, ',')
			}
			newline(depth + 1)
			buf = appendJq(buf, it, indent, depth+1, ascii)
		}
		newline(depth)
		return append(buf, ']')
	case map[string]any:
		if len(x) == 0 {
			return append(buf, "{}"...)
		}
		keys := make([]string, 0, len(x))
		for k := range x {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		buf = append(buf, '{')
		for i, k := range keys {
			if i > 0 {
				buf = append(buf, ',')
			}
			newline(depth + 1)
			buf = appendJq(buf, k, indent, depth+1, ascii)
			buf = append(buf, ':')
			if indent != "" {
				buf = append(buf, ' ')
			}
			buf = appendJq(buf, x[k], indent, depth+1, ascii)
		}
		newline(depth)
		return append(buf, '}')
	}
	b, err := gojq.Marshal(v)
	if err != nil {
		b = []byte("null")
	}
	if ascii {
		b = asciiJSON(b)
	}
	return append(buf, b...)
}

// asciiJSON escapes the non-ASCII characters of a JSON text as \uXXXX
// (surrogate pairs beyond the BMP), as jq -a does.
func asciiJSON(b []byte) []byte {
	var out []byte
	for _, r := range string(b) {
		switch {
		case r < 0x80:
			out = append(out, byte(r))
		case r > 0xFFFF:
			r1, r2 := utf16.EncodeRune(r)
			out = fmt.Appendf(out, "\\u%04x\\u%04x", r1, r2)
		default:
			out = fmt.Appendf(out, "\\u%04x", r)
		}
	}
	return out
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
