package shell

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"time"
	"unicode/utf8"

	"mvdan.cc/sh/v3/interp"

	"github.com/shoal-sh/shoal/core/value"
)

// maxInput bounds what one builtin reads into memory (a file for open, its
// standard input for from/jq/emit). Bigger data is for streaming tools.
const maxInput = 256 << 20

// builtinFunc runs one Shoal builtin. It returns nil, an
// interp.ExitStatus, or the run context's error.
type builtinFunc func(c *call) error

// builtins are the Shoal builtins. They shadow programs of the same name;
// a path (/bin/ls) reaches the program.
var builtins map[string]builtinFunc

func init() {
	builtins = map[string]builtinFunc{
		"ls": builtinLs,
		// printf calls are rewritten to this name (compat.go).
		printfBuiltin: builtinPrintf,
		failBuiltin:   builtinFail,
		bashBuiltin:   builtinBash,
		testBuiltin:   builtinTest,
		"open":        builtinOpen,
		"from":        builtinFrom,
		"to":          builtinTo,
		"jq":          builtinJq,
		"emit":        builtinEmit,
		"recv":        builtinRecv,
		"out":         builtinOut,
	}
}

// call is one invocation of a builtin.
type call struct {
	e    *Evaluator
	ctx  context.Context
	hc   interp.HandlerContext
	ru   *run
	args []string
	next interp.ExecHandlerFunc
}

// failf reports an error the way shell commands do, "name: message" on
// stderr, and returns the exit status.
func (c *call) failf(status uint8, format string, args ...any) error {
	fmt.Fprintf(c.hc.Stderr, "%s: %s\n", c.args[0], fmt.Sprintf(format, args...))
	return interp.ExitStatus(status)
}

func (c *call) abs(p string) string { return absIn(c.hc.Dir, p) }

// deliver hands on the value of a Shoal-only builtin (open, from, emit,
// recv). On the run's own stdout it becomes the candidate value of the
// run; anywhere else (a pipe, a command substitution, a redirection) it is
// written as its text, see [valueText]. write overrides that text form;
// such output is never handed off typed.
func (c *call) deliver(v value.Value, write func(io.Writer) error) error {
	plain := write == nil
	if plain {
		write = func(w io.Writer) error {
			_, err := w.Write(valueText(v))
			return err
		}
	}
	if c.valueWanted() {
		offset := c.hc.Pos.Offset()
		c.ru.setPending(&pendingValue{v: v, write: write, offset: offset, siblingsFrom: c.ru.pipelineStart(offset)})
		return nil
	}
	if !plain {
		_ = write(c.hc.Stdout) // a reader that went away (| head) is not an error
		return nil
	}
	return c.deliverText(v, valueText(v), true)
}

// deliverText is how a builtin named like a standard command (ls, jq)
// hands on its output: data, the bytes that command prints, always goes
// to stdout. On the run's own stdout v (when not nil) also becomes the
// candidate value of the run; into a pipe it is offered to a builtin
// reading the other end (handoff) when that builtin reads exactly data.
func (c *call) deliverText(v value.Value, data []byte, handoff bool) error {
	if c.valueWanted() {
		_, _ = c.ru.stdout.Write(data)
		if v != nil {
			c.setValue(v)
		}
		return nil
	}
	if f, ok := c.hc.Stdout.(*os.File); ok && v != nil && handoff {
		c.e.offerHandoff(c.ru, f, v, data)
	}
	_, _ = c.hc.Stdout.Write(data) // a reader that went away (| head) is not an error
	return nil
}

// valueWanted reports whether the builtin writes to the run's own stdout,
// where its value may become the run's value.
func (c *call) valueWanted() bool { return c.hc.Stdout == io.Writer(c.ru.stdout) }

// setValue makes v the candidate value of the run, its bytes already
// written.
func (c *call) setValue(v value.Value) {
	offset := c.hc.Pos.Offset()
	c.ru.setPending(&pendingValue{v: v, write: func(io.Writer) error { return nil }, offset: offset, siblingsFrom: c.ru.pipelineStart(offset)})
}

// readStdin reads the builtin's standard input to the end. ok is false when
// the builtin has none (it was not piped or redirected into).
func (c *call) readStdin() (data []byte, key pipeKey, ok bool, err error) {
	f, isFile := c.hc.Stdin.(*os.File)
	if c.hc.Stdin == nil || (isFile && f == nil) {
		return nil, pipeKey{}, false, nil
	}
	if isFile {
		key = pipeKeyOf(f)
		// Unblock the read when the run is cancelled; pipes support
		// deadlines, regular files never block.
		stop := context.AfterFunc(c.ctx, func() { _ = f.SetReadDeadline(time.Now()) })
		defer func() {
			if !stop() {
				_ = f.SetReadDeadline(time.Time{})
			}
		}()
	}
	data, err = io.ReadAll(io.LimitReader(c.hc.Stdin, maxInput+1))
	if err != nil {
		if c.ctx.Err() != nil {
			return nil, key, true, c.ctx.Err()
		}
		return nil, key, true, err
	}
	if len(data) > maxInput {
		return nil, key, true, fmt.Errorf("input is larger than %d MiB; use a streaming tool (grep, awk, an external jq) for data this size", maxInput>>20)
	}
	return data, key, true, nil
}

// stdinValues reads standard input as JSON documents. When the input is
// exactly what an upstream builtin wrote, its typed value is used instead
// of re-parsing (bytes stay bytes, a float 2.0 stays a float).
func (c *call) stdinValues() (vs []value.Value, ok bool, err error) {
	data, key, ok, err := c.readStdin()
	if !ok || err != nil {
		return nil, ok, err
	}
	if v, hit := c.e.takeHandoff(key, data); hit {
		return []value.Value{v}, true, nil
	}
	docs, err := jsonDocuments(data)
	if err != nil {
		return nil, true, fmt.Errorf("input is not JSON (%v); use from lines or from csv for text", err)
	}
	vs, err = valuesOf(docs)
	return vs, true, err
}

// ----- open -----

// builtinOpen reads a file as a typed value chosen by its name and content.
func builtinOpen(c *call) error {
	raw := false
	var files []string
	for _, a := range c.args[1:] {
		switch {
		case a == "-r" || a == "--raw":
			raw = true
		case len(a) > 1 && a[0] == '-':
			return c.failf(2, "unknown option %s; usage: open [-r] FILE", a)
		default:
			files = append(files, a)
		}
	}
	if len(files) != 1 {
		return c.failf(2, "usage: open [-r] FILE (one file; -r reads it as text or bytes without parsing)")
	}
	name := files[0]
	abs := c.abs(name)
	c.ru.effect(EffectFSRead, abs)
	fi, err := os.Stat(abs)
	if err != nil {
		return c.failf(1, "%s: %v", name, unwrapPathError(err))
	}
	if fi.IsDir() {
		return c.failf(1, "%s is a directory; use ls to list it", name)
	}
	if fi.Size() > maxInput {
		return c.failf(1, "%s is %d MiB, more than the %d MiB open reads; use head, grep or an external tool", name, fi.Size()>>20, maxInput>>20)
	}
	data, err := c.readFile(abs)
	if err != nil {
		return c.failf(1, "%s: %v", name, unwrapPathError(err))
	}
	secret := isDotEnv(abs)
	if secret {
		c.ru.mark(MarkSecretSource)
	}
	v, err := decodeFile(abs, data, raw)
	if err != nil {
		return c.failf(1, "%s: %v; use open -r to read it as text", name, err)
	}
	return c.deliver(v, nil)
}

// decodeFile picks the value of a file: by extension for structured
// formats, else text as str and anything else as bytes.
func decodeFile(path string, data []byte, raw bool) (value.Value, error) {
	if !raw {
		switch strings.ToLower(filepath.Ext(path)) {
		case ".json":
			if v, err := value.FromPlainJSON(data); err == nil {
				return v, nil
			}
			docs, err := jsonDocuments(data)
			if err != nil {
				return nil, fmt.Errorf("not valid JSON: %v", err)
			}
			vs, err := valuesOf(docs)
			if err != nil {
				return nil, err
			}
			return listOf(vs), nil
		case ".jsonl", ".ndjson":
			docs, err := jsonDocuments(data)
			if err != nil {
				return nil, fmt.Errorf("not valid JSON lines: %v", err)
			}
			vs, err := valuesOf(docs)
			if err != nil {
				return nil, err
			}
			return listOf(vs), nil
		case ".csv":
			return parseDelimited(data, ',')
		case ".tsv":
			return parseDelimited(data, '\t')
		}
		if isDotEnv(path) {
			if rec, ok := parseDotEnv(data); ok {
				return rec, nil
			}
		}
	}
	if utf8.Valid(data) && bytes.IndexByte(data, 0) < 0 {
		return value.Str(data), nil
	}
	return value.Bytes(data), nil
}

// ----- from -----

// builtinFrom parses standard input: from json|csv|tsv|lines.
func builtinFrom(c *call) error {
	if len(c.args) != 2 {
		return c.failf(2, "usage: from json|csv|tsv|lines (parses standard input, e.g. cat data.csv | from csv)")
	}
	format := c.args[1]
	switch format {
	case "json", "jsonl", "ndjson":
		vs, ok, err := c.stdinValues()
		if err := c.inputError(ok, err); err != nil {
			return err
		}
		switch len(vs) {
		case 0:
			return c.deliver(value.Null{}, nil)
		case 1:
			return c.deliver(vs[0], nil)
		}
		return c.deliver(listOf(vs), nil)
	case "csv", "tsv", "lines":
		data, _, ok, err := c.readStdin()
		if err := c.inputError(ok, err); err != nil {
			return err
		}
		if format == "lines" {
			return c.deliver(lines(data), nil)
		}
		comma := ','
		if format == "tsv" {
			comma = '\t'
		}
		t, err := parseDelimited(data, comma)
		if err != nil {
			return c.failf(1, "input is not %s: %v", strings.ToUpper(format), err)
		}
		return c.deliver(t, nil)
	}
	return c.failf(2, "unknown format %q; use json, csv, tsv or lines", format)
}

func (c *call) inputError(ok bool, err error) error {
	if err != nil {
		if c.ctx.Err() != nil {
			return c.ctx.Err()
		}
		return c.failf(1, "%v", err)
	}
	if !ok {
		return c.failf(2, "no input; pipe data in, e.g. cat data.json | %s", strings.Join(c.args, " "))
	}
	return nil
}

// lines splits text into a list of lines without their terminators.
func lines(data []byte) value.List {
	s := string(data)
	s = strings.TrimSuffix(s, "\n")
	out := value.List{}
	if s == "" && len(data) <= 1 {
		return out
	}
	for l := range strings.SplitSeq(s, "\n") {
		out = append(out, value.Str(strings.TrimSuffix(l, "\r")))
	}
	return out
}

// ----- handoff of typed values between builtins -----

// pipeKey identifies a pipe: both of its ends share one inode.
type pipeKey struct{ dev, ino uint64 }

type handoff struct {
	data []byte
	v    value.Value
	run  *run
}

func pipeKeyOf(f *os.File) pipeKey {
	fi, err := f.Stat()
	if err != nil || fi.Mode()&fs.ModeNamedPipe == 0 {
		return pipeKey{}
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return pipeKey{}
	}
	return pipeKey{dev: uint64(st.Dev), ino: st.Ino}
}

// offerHandoff remembers the typed value a builtin is about to write into
// a pipe. A builtin reading that pipe takes the value instead of parsing,
// provided it read exactly these bytes (nothing else wrote into the pipe).
func (e *Evaluator) offerHandoff(ru *run, f *os.File, v value.Value, data []byte) {
	key := pipeKeyOf(f)
	if key == (pipeKey{}) {
		return
	}
	e.mu.Lock()
	e.handoffs[key] = handoff{data: data, v: v, run: ru}
	e.mu.Unlock()
	ru.mu.Lock()
	ru.handoffs = append(ru.handoffs, key)
	ru.mu.Unlock()
}

func (e *Evaluator) takeHandoff(key pipeKey, data []byte) (value.Value, bool) {
	if key == (pipeKey{}) {
		return nil, false
	}
	e.mu.Lock()
	h, ok := e.handoffs[key]
	if ok {
		delete(e.handoffs, key)
	}
	e.mu.Unlock()
	if !ok || !bytes.Equal(h.data, data) {
		return nil, false
	}
	return h.v, true
}

// dropHandoffs forgets the offers of a finished run that no builtin took
// (the reader was an external program).
func (e *Evaluator) dropHandoffs(ru *run) {
	ru.mu.Lock()
	keys := ru.handoffs
	ru.handoffs = nil
	ru.mu.Unlock()
	e.mu.Lock()
	for _, k := range keys {
		if h, ok := e.handoffs[k]; ok && h.run == ru {
			delete(e.handoffs, k)
		}
	}
	e.mu.Unlock()
}
