package shell

import (
	"bytes"
	"fmt"
	"math"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"
)

// The interpreter's printf knows few formats (no precision, no %x or %e,
// no -v), and models write printf the way bash's builtin takes it. bashPrintf
// is that builtin: escapes in the format, flags, width and precision (also
// as *), the conversions d i o u x X c s b q e E f F g G a A and %%, the
// format reused while arguments remain, missing arguments as 0 or "",
// numbers in C syntax ('c for a character code), and bash's messages.

// printfResult is one printf's output, its messages and its status.
type printfResult struct {
	out    []byte
	errs   []string
	status int
}

func (r *printfResult) fail(format string, args ...any) {
	r.errs = append(r.errs, "printf: "+fmt.Sprintf(format, args...))
	r.status = 1
}

// bashPrintf formats args (format first). utf8Text says whether the
// locale treats valid UTF-8 as printable text, which %q leaves unquoted.
func bashPrintf(args []string, utf8Text bool) *printfResult {
	r := &printfResult{}
	if len(args) == 0 {
		r.errs = append(r.errs, "printf: usage: printf [-v var] format [arguments]")
		r.status = 2
		return r
	}
	format, args := args[0], args[1:]
	p := &printer{r: r, args: args, utf8Text: utf8Text}
	for {
		consumed, stop := p.once(format)
		if stop || !consumed || len(p.args) == 0 {
			break
		}
	}
	return r
}

type printer struct {
	r        *printfResult
	args     []string
	utf8Text bool
	used     bool // an argument was taken in this pass
}

func (p *printer) next() (string, bool) {
	if len(p.args) == 0 {
		return "", false
	}
	a := p.args[0]
	p.args = p.args[1:]
	p.used = true
	return a, true
}

// once runs the format one time. consumed reports whether it took an
// argument (a format without conversions is not repeated); stop that
// output ended early (\c, a bad conversion).
func (p *printer) once(format string) (consumed, stop bool) {
	p.used = false
	out := &p.r.out
	for i := 0; i < len(format); i++ {
		ch := format[i]
		if ch == '\\' {
			n, text, end := escape(format[i:], false)
			*out = append(*out, text...)
			if end {
				return p.used, true
			}
			i += n - 1
			continue
		}
		if ch != '%' {
			*out = append(*out, ch)
			continue
		}
		start := i
		i++
		if i < len(format) && format[i] == '%' {
			*out = append(*out, '%')
			continue
		}
		// flags
		j := i
		for j < len(format) && strings.IndexByte("-+ #0'", format[j]) >= 0 {
			j++
		}
		flags := format[i:j]
		width, prec := "", ""
		var ok bool
		if width, j, ok = p.number(format, j); !ok {
			return p.used, true
		}
		if j < len(format) && format[j] == '.' {
			j++
			if prec, j, ok = p.number(format, j); !ok {
				return p.used, true
			}
			if prec == "" {
				prec = "0"
			}
		}
		for j < len(format) && strings.IndexByte("hlLjzt", format[j]) >= 0 {
			j++
		}
		if j >= len(format) {
			p.r.fail("`%s': missing format character", format[start:])
			return p.used, true
		}
		verb := format[j]
		i = j
		if !p.convert(verb, flags, width, prec) {
			return p.used, true
		}
	}
	return p.used, false
}

// number reads a width or precision: digits, or * taking an argument.
func (p *printer) number(format string, j int) (string, int, bool) {
	if j < len(format) && format[j] == '*' {
		a, _ := p.next()
		n, _ := p.integer(a)
		return strconv.FormatInt(n, 10), j + 1, true
	}
	k := j
	for k < len(format) && format[k] >= '0' && format[k] <= '9' {
		k++
	}
	return format[j:k], k, true
}

func (p *printer) convert(verb byte, flags, width, prec string) bool {
	out := &p.r.out
	spec := func(v byte) string {
		s := "%" + strings.ReplaceAll(flags, "'", "") + width
		if prec != "" {
			s += "." + prec
		}
		return s + string(v)
	}
	switch verb {
	case 's':
		a, _ := p.next()
		*out = append(*out, pad(a, flags, width, prec)...)
	case 'b':
		a, _ := p.next()
		text, end := expandEscapes(a)
		*out = append(*out, pad(string(text), flags, width, prec)...)
		if end {
			return false
		}
	case 'q':
		a, _ := p.next()
		*out = append(*out, pad(shellQuote(a, p.utf8Text), flags, width, "")...)
	case 'c':
		a, _ := p.next()
		c := "\x00"
		if a != "" {
			c = a[:1]
		}
		*out = append(*out, pad(c, flags, width, "")...)
	case 'd', 'i':
		a, _ := p.next()
		n, _ := p.integer(a)
		*out = fmt.Appendf(*out, spec('d'), n)
	case 'o', 'u', 'x', 'X':
		a, _ := p.next()
		n, _ := p.integer(a)
		v := verb
		if v == 'u' {
			v = 'd'
		}
		*out = fmt.Appendf(*out, spec(v), uint64(n))
	case 'e', 'E', 'f', 'F', 'g', 'G', 'a', 'A':
		a, _ := p.next()
		f := p.float(a)
		if prec == "" && verb != 'a' && verb != 'A' {
			prec = "6"
		}
		v := verb
		switch verb {
		case 'F':
			v = 'f'
		case 'a':
			v = 'x'
		case 'A':
			v = 'X'
		}
		s := fmt.Sprintf(spec(v), f)
		if verb == 'F' {
			s = strings.ToUpper(s)
		}
		*out = append(*out, s...)
	default:
		p.r.fail("`%c': invalid format character", verb)
		return false
	}
	return true
}

// pad applies precision (bytes kept) and width to a string conversion.
func pad(s, flags, width, prec string) string {
	if prec != "" {
		if n, err := strconv.Atoi(prec); err == nil && n < len(s) {
			s = s[:n]
		}
	}
	w, _ := strconv.Atoi(width)
	if w <= len(s) {
		return s
	}
	fill := strings.Repeat(" ", w-len(s))
	if strings.Contains(flags, "-") {
		return s + fill
	}
	return fill + s
}

// integer reads a numeric argument as C's strtoimax would, with bash's
// additions: 'c and "c are character codes, an empty argument is 0. A
// malformed one is reported and gives the number its prefix spells.
func (p *printer) integer(a string) (int64, bool) {
	if a == "" {
		return 0, true
	}
	if a[0] == '\'' || a[0] == '"' {
		if len(a) == 1 {
			return 0, true
		}
		r, _ := utf8.DecodeRuneInString(a[1:])
		if r == utf8.RuneError {
			return int64(a[1]), true
		}
		return int64(r), true
	}
	s := strings.TrimLeft(a, " \t\n")
	neg := false
	if s != "" && (s[0] == '+' || s[0] == '-') {
		neg = s[0] == '-'
		s = s[1:]
	}
	base := 10
	switch {
	case len(s) > 1 && s[0] == '0' && (s[1] == 'x' || s[1] == 'X'):
		base, s = 16, s[2:]
	case len(s) > 1 && s[0] == '0':
		base = 8
	}
	end := 0
	for end < len(s) && digitValue(s[end]) < base {
		end++
	}
	var n uint64
	overflow := false
	for _, c := range []byte(s[:end]) {
		d := uint64(digitValue(c))
		if n > (math.MaxUint64-d)/uint64(base) {
			overflow = true
			break
		}
		n = n*uint64(base) + d
	}
	v := int64(n)
	switch {
	case overflow || (!neg && n > math.MaxInt64) || (neg && n > 1<<63):
		p.r.fail("%s: Numerical result out of range", a)
		if neg {
			return math.MinInt64, false
		}
		return math.MaxInt64, false
	case neg:
		v = -v
	}
	if end == 0 || end < len(s) {
		p.r.fail("%s: invalid number", a)
		return v, false
	}
	return v, true
}

func digitValue(c byte) int {
	switch {
	case c >= '0' && c <= '9':
		return int(c - '0')
	case c >= 'a' && c <= 'z':
		return int(c-'a') + 10
	case c >= 'A' && c <= 'Z':
		return int(c-'A') + 10
	}
	return 99
}

// float reads a floating-point argument (C syntax, 'c as a character).
func (p *printer) float(a string) float64 {
	if a == "" {
		return 0
	}
	if a[0] == '\'' || a[0] == '"' {
		n, _ := p.integer(a)
		return float64(n)
	}
	s := strings.TrimLeft(a, " \t\n")
	if f, err := strconv.ParseFloat(s, 64); err == nil {
		return f
	}
	// The longest prefix that is a number, as strtold takes it.
	for end := len(s) - 1; end > 0; end-- {
		if f, err := strconv.ParseFloat(s[:end], 64); err == nil {
			p.r.fail("%s: invalid number", a)
			return f
		}
	}
	p.r.fail("%s: invalid number", a)
	return 0
}

// escape decodes one backslash escape at the start of s: its length, its
// bytes and whether it is \c (end all output). inArg selects %b's rules,
// where octal escapes are \0NNN.
func escape(s string, inArg bool) (n int, text []byte, end bool) {
	if len(s) < 2 {
		return 1, []byte{'\\'}, false
	}
	switch c := s[1]; c {
	case 'a':
		return 2, []byte{7}, false
	case 'b':
		return 2, []byte{8}, false
	case 'e', 'E':
		return 2, []byte{27}, false
	case 'f':
		return 2, []byte{12}, false
	case 'n':
		return 2, []byte{'\n'}, false
	case 'r':
		return 2, []byte{'\r'}, false
	case 't':
		return 2, []byte{'\t'}, false
	case 'v':
		return 2, []byte{11}, false
	case '\\':
		return 2, []byte{'\\'}, false
	case '"', '?':
		if inArg {
			return 2, []byte{'\\', c}, false
		}
		return 2, []byte{c}, false
	case '\'':
		if inArg {
			return 2, []byte{'\\', c}, false
		}
		return 2, []byte{c}, false
	case 'c':
		return 2, nil, true
	case 'x':
		v, k := prefixNumber(s[2:], 16, 2)
		if k == 0 {
			return 2, []byte{'\\', 'x'}, false
		}
		return 2 + k, []byte{byte(v)}, false
	case 'u', 'U':
		max := 4
		if c == 'U' {
			max = 8
		}
		v, k := prefixNumber(s[2:], 16, max)
		if k == 0 {
			return 2, []byte{'\\', c}, false
		}
		return 2 + k, utf8.AppendRune(nil, rune(v)), false
	}
	if s[1] >= '0' && s[1] <= '7' {
		if inArg && s[1] == '0' {
			v, k := prefixNumber(s[2:], 8, 3)
			return 2 + k, []byte{byte(v)}, false
		}
		v, k := prefixNumber(s[1:], 8, 3)
		return 1 + k, []byte{byte(v)}, false
	}
	return 2, []byte{'\\', s[1]}, false
}

func prefixNumber(s string, base, max int) (v, k int) {
	for k < len(s) && k < max && digitValue(s[k]) < base {
		v = v*base + digitValue(s[k])
		k++
	}
	return v, k
}

// expandEscapes is %b: the argument's backslash escapes decoded; end
// reports a \c.
func expandEscapes(a string) ([]byte, bool) {
	var out []byte
	for i := 0; i < len(a); i++ {
		if a[i] != '\\' {
			out = append(out, a[i])
			continue
		}
		n, text, end := escape(a[i:], true)
		out = append(out, text...)
		if end {
			return out, true
		}
		i += n - 1
	}
	return out, false
}

// shellQuote is %q: a word the shell reads back as s. Text with
// characters that are not printable is written as $'…'; otherwise the
// characters special to the shell get a backslash.
func shellQuote(s string, utf8Text bool) string {
	if s == "" {
		return "''"
	}
	printable := func(r rune, size int) bool {
		if r == utf8.RuneError && size <= 1 {
			return false
		}
		if r >= 0x80 && !utf8Text {
			return false
		}
		return unicode.IsPrint(r)
	}
	for i := 0; i < len(s); {
		r, size := utf8.DecodeRuneInString(s[i:])
		if !printable(r, size) {
			return ansiQuote(s, printable)
		}
		i += size
	}
	var b strings.Builder
	for i, c := range []byte(s) {
		switch {
		case strings.IndexByte(" !\"$&()*,;<>?[\\]^`{|}'", c) >= 0,
			i == 0 && (c == '~' || c == '#'):
			b.WriteByte('\\')
		}
		b.WriteByte(c)
	}
	return b.String()
}

func ansiQuote(s string, printable func(rune, int) bool) string {
	var b bytes.Buffer
	b.WriteString("$'")
	for i := 0; i < len(s); {
		r, size := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == '\'' || r == '\\':
			b.WriteByte('\\')
			b.WriteRune(r)
		case r == '\t':
			b.WriteString(`\t`)
		case r == '\n':
			b.WriteString(`\n`)
		case r == '\r':
			b.WriteString(`\r`)
		case r == 27:
			b.WriteString(`\E`)
		case r == 7:
			b.WriteString(`\a`)
		case r == 8:
			b.WriteString(`\b`)
		case r == 12:
			b.WriteString(`\f`)
		case r == 11:
			b.WriteString(`\v`)
		case printable(r, size):
			b.WriteString(s[i : i+size])
		default:
			for _, c := range []byte(s[i : i+size]) {
				fmt.Fprintf(&b, "\\%03o", c)
			}
		}
		i += size
	}
	b.WriteByte('\'')
	return b.String()
}
