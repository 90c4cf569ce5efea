package shell

import (
	"context"
	"os"
	"strconv"
	"strings"
	"time"

	"mvdan.cc/sh/v3/interp"
)

// readCall fits read to bash where the interpreter's read falls short.
// -p PROMPT is dropped when standard input is not a terminal (bash shows
// the prompt only to a person typing). -d DELIM, -n N and -N N, which the
// interpreter refuses, are done here: the record is read from standard
// input, then handed to the interpreter's read -r through a here-string
// (or assigned directly when it holds a newline and goes to one name), so
// field splitting stays the interpreter's.
func readCall(ctx context.Context, hc interp.HandlerContext, args []string) []string {
	if f, ok := hc.Stdin.(*os.File); ok && f != nil {
		if fi, err := f.Stat(); err == nil && fi.Mode()&os.ModeCharDevice != 0 && f.Name() != os.DevNull {
			return args
		}
	}
	ro := parseReadArgs(args[1:])
	if !ro.ownRecord() {
		return append(append([]string{args[0]}, ro.opts...), ro.names...)
	}
	record, eof := readRecord(ctx, hc, ro)
	var script string
	if strings.Contains(record, "\n") && len(ro.names) <= 1 && ro.array == "" {
		name := "REPLY"
		if len(ro.names) == 1 {
			name = ro.names[0]
			record = trimIFS(record, hc)
		}
		script = name + "=" + singleQuote(record)
	} else {
		inner := []string{"read", "-r"}
		if ro.array != "" {
			inner = append(inner, "-a", singleQuote(ro.array))
		}
		for _, n := range ro.names {
			inner = append(inner, singleQuote(n))
		}
		script = strings.Join(inner, " ") + " <<< " + singleQuote(record)
	}
	if eof {
		script += "; (exit 1)"
	}
	return []string{"eval", script}
}

// readArgs is a read command line.
type readArgs struct {
	opts, names []string // options passed on as they are; variable names
	raw         bool
	delim       string
	delimSet    bool
	count       int // -n or -N; -1 when neither
	exact       bool
	array       string
	timeoutOrFD bool // -t or -u: left to the interpreter
}

func (ro *readArgs) ownRecord() bool { return (ro.delimSet || ro.count >= 0) && !ro.timeoutOrFD }

func parseReadArgs(args []string) *readArgs {
	ro := &readArgs{count: -1}
	for i := 0; i < len(args); i++ {
		a := args[i]
		if a == "--" || len(a) < 2 || a[0] != '-' {
			if a == "--" {
				i++
			}
			ro.names = append(ro.names, args[min(i, len(args)):]...)
			return ro
		}
		kept := []byte{'-'}
		for j := 1; j < len(a); j++ {
			c := a[j]
			if strings.IndexByte("adinNptu", c) < 0 {
				ro.raw = ro.raw || c == 'r'
				kept = append(kept, c)
				continue
			}
			// An option with a value: the rest of the word, or the next.
			if len(kept) > 1 {
				ro.opts = append(ro.opts, string(kept))
				kept = kept[:1]
			}
			val := a[j+1:]
			if val == "" && i+1 < len(args) {
				val = args[i+1]
				i++
			}
			switch c {
			case 'p':
			case 'd':
				ro.delim, ro.delimSet = val, true
			case 'n', 'N':
				n, err := strconv.Atoi(val)
				if err != nil || n < 0 {
					ro.timeoutOrFD = true // let the interpreter word the error
					ro.opts = append(ro.opts, "-"+string(c), val)
					break
				}
				ro.count, ro.exact = n, c == 'N'
			case 'a':
				ro.array = val
				ro.opts = append(ro.opts, "-a", val)
			default:
				ro.timeoutOrFD = ro.timeoutOrFD || c == 't' || c == 'u'
				ro.opts = append(ro.opts, "-"+string(c), val)
			}
			break
		}
		if len(kept) > 1 {
			ro.opts = append(ro.opts, string(kept))
		}
	}
	return ro
}

// readRecord reads up to the delimiter (newline unless -d; NUL for -d
// ”), or N characters with -n/-N, decoding backslashes unless -r. eof
// reports that input ended first, when read fails.
func readRecord(ctx context.Context, hc interp.HandlerContext, ro *readArgs) (string, bool) {
	if hc.Stdin == nil {
		return "", true
	}
	if f, ok := hc.Stdin.(*os.File); ok {
		stop := context.AfterFunc(ctx, func() { _ = f.SetReadDeadline(time.Now()) })
		defer func() {
			if !stop() {
				_ = f.SetReadDeadline(time.Time{})
			}
		}()
	}
	delim := byte('\n')
	if ro.delimSet {
		delim = 0
		if ro.delim != "" {
			delim = ro.delim[0]
		}
	}
	chars := utf8Locale(hc.Env)
	var rec []byte
	count, pending := 0, 0 // characters read; continuation bytes still due
	escaped := false
	b := make([]byte, 1)
	for ro.count < 0 || count < ro.count || pending > 0 {
		if n, _ := hc.Stdin.Read(b); n == 0 {
			return string(rec), true
		}
		c := b[0]
		if pending > 0 {
			pending--
			rec = append(rec, c)
			continue
		}
		if escaped {
			escaped = false
			if c != '\n' {
				rec = append(rec, c)
				count++
			}
			continue
		}
		if c == delim && !ro.exact {
			return string(rec), false
		}
		if c == '\\' && !ro.raw {
			escaped = true
			continue
		}
		rec = append(rec, c)
		count++
		if chars && c >= 0xC0 {
			pending = utf8Len(c) - 1
		}
	}
	return string(rec), false
}

func utf8Len(lead byte) int {
	switch {
	case lead >= 0xF0:
		return 4
	case lead >= 0xE0:
		return 3
	}
	return 2
}

// trimIFS removes leading and trailing IFS whitespace, as read does for
// the value of its last name.
func trimIFS(s string, hc interp.HandlerContext) string {
	ifs := " \t\n"
	if v := hc.Env.Get("IFS"); v.IsSet() {
		ifs = v.String()
	}
	var ws []byte
	for _, c := range []byte(ifs) {
		if c == ' ' || c == '\t' || c == '\n' {
			ws = append(ws, c)
		}
	}
	return strings.Trim(s, string(ws))
}
