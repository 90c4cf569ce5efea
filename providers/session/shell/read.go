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
// the prompt only to a person typing). With -d DELIM, -n N or -N N, which
// the interpreter refuses, or with an IFS holding a character other than
// blanks (the interpreter then loses empty fields: "a,,b" gives two), the
// record is read and split here, as bash splits it, and assigned by an
// eval in the caller's scope.
func readCall(ctx context.Context, hc interp.HandlerContext, args []string) []string {
	if f, ok := hc.Stdin.(*os.File); ok && f != nil {
		if fi, err := f.Stat(); err == nil && fi.Mode()&os.ModeCharDevice != 0 && f.Name() != os.DevNull {
			return args
		}
	}
	ro := parseReadArgs(args[1:])
	ifs := " \t\n"
	if v := hc.Env.Get("IFS"); v.IsSet() {
		ifs = v.String()
	}
	if ro.timeoutOrFD || !ro.delimSet && ro.count < 0 && strings.Trim(ifs, " \t\n") == "" {
		return append(append([]string{args[0]}, ro.opts...), ro.names...)
	}
	record, eof := readRecord(ctx, hc, ro)
	var script strings.Builder
	switch {
	case ro.array != "":
		script.WriteString(ro.array + "=(")
		for i, f := range splitFields(record, ifs) {
			if i > 0 {
				script.WriteByte(' ')
			}
			script.WriteString(singleQuote(f))
		}
		script.WriteString(")")
	case len(ro.names) == 0:
		script.WriteString("REPLY=" + singleQuote(record))
	default:
		for i, v := range assignFields(record, ifs, len(ro.names)) {
			if i > 0 {
				script.WriteString("; ")
			}
			script.WriteString(ro.names[i] + "=" + singleQuote(v))
		}
	}
	if eof {
		script.WriteString("; (exit 1)")
	}
	return []string{"eval", script.String()}
}

// ifsSplitter walks a record as bash's field splitting does: blanks of
// IFS gather around a delimiter, every other IFS character delimits on
// its own (so two in a row make an empty field), and a delimiter at the
// end starts no field.
type ifsSplitter struct {
	s, ifs string
	i      int
}

func (sp *ifsSplitter) isIFS(c byte) bool { return strings.IndexByte(sp.ifs, c) >= 0 }

func (sp *ifsSplitter) isBlank(c byte) bool {
	return (c == ' ' || c == '\t' || c == '\n') && sp.isIFS(c)
}

func (sp *ifsSplitter) skipBlanks() {
	for sp.i < len(sp.s) && sp.isBlank(sp.s[sp.i]) {
		sp.i++
	}
}

// field returns the next field; ok is false at the end.
func (sp *ifsSplitter) field() (string, bool) {
	if sp.i >= len(sp.s) {
		return "", false
	}
	start := sp.i
	for sp.i < len(sp.s) && !sp.isIFS(sp.s[sp.i]) {
		sp.i++
	}
	f := sp.s[start:sp.i]
	if sp.i < len(sp.s) {
		// The delimiter: blanks and at most one other IFS character
		// among them, or that character and the blanks after it.
		if sp.isBlank(sp.s[sp.i]) {
			sp.skipBlanks()
			if sp.i < len(sp.s) && sp.isIFS(sp.s[sp.i]) {
				sp.i++
				sp.skipBlanks()
			}
		} else {
			sp.i++
			sp.skipBlanks()
		}
	}
	return f, true
}

// splitFields splits a whole record (read -a).
func splitFields(s, ifs string) []string {
	if ifs == "" {
		return []string{s}
	}
	sp := &ifsSplitter{s: s, ifs: ifs}
	sp.skipBlanks()
	var out []string
	for {
		f, ok := sp.field()
		if !ok {
			return out
		}
		out = append(out, f)
	}
}

// assignFields gives n names their values: a field each, the last name
// the rest of the record (blanks of IFS trimmed, and a lone delimiter at
// its end dropped, as bash does).
func assignFields(s, ifs string, n int) []string {
	out := make([]string, n)
	if ifs == "" {
		out[0] = s
		return out
	}
	sp := &ifsSplitter{s: s, ifs: ifs}
	sp.skipBlanks()
	for k := 0; k < n-1; k++ {
		out[k], _ = sp.field()
	}
	rest := strings.TrimRight(sp.s[sp.i:], blanksOf(ifs))
	if f := splitFields(rest, ifs); len(f) == 1 {
		rest = f[0]
	}
	out[n-1] = rest
	return out
}

func blanksOf(ifs string) string {
	var b []byte
	for _, c := range []byte(" \t\n") {
		if strings.IndexByte(ifs, c) >= 0 {
			b = append(b, c)
		}
	}
	return string(b)
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
