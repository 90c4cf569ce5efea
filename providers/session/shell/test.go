package shell

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"
	"mvdan.cc/sh/v3/interp"
)

// testBuiltin is the name test and [ calls are rewritten to (compat.go).
// The interpreter parses their arguments as a syntax tree, so `[ a b c ]`
// is a parse error with the parser's message, `[ b \> a ]` is not
// understood and `[ abc -gt 1 ]` is silently false; bash's test follows
// POSIX's rules by argument count and says what is wrong, with status 2.
const testBuiltin = "\x00test"

// testError is a malformed test expression; its message is printed
// after "test: " or "[: ".
type testError struct{ msg string }

func (e *testError) Error() string { return e.msg }

func testErrorf(format string, args ...any) error {
	return &testError{fmt.Sprintf(format, args...)}
}

func builtinTest(c *call) error {
	name, args := c.args[1], c.args[2:]
	if name == "[" {
		if len(args) == 0 || args[len(args)-1] != "]" {
			fmt.Fprintf(c.hc.Stderr, "[: missing `]'\n")
			return interp.ExitStatus(2)
		}
		args = args[:len(args)-1]
	}
	t := &tester{hc: c.hc, args: args}
	ok, err := t.posix()
	if err != nil {
		fmt.Fprintf(c.hc.Stderr, "%s: %s\n", name, err)
		return interp.ExitStatus(2)
	}
	if !ok {
		return interp.ExitStatus(1)
	}
	return nil
}

type tester struct {
	hc   interp.HandlerContext
	args []string
	pos  int
}

// posix applies POSIX's rules for up to four arguments, then the general
// grammar, as bash's test does.
func (t *tester) posix() (bool, error) {
	a := t.args
	switch len(a) {
	case 0:
		return false, nil
	case 1:
		return a[0] != "", nil
	case 2:
		return t.two(a[0], a[1])
	case 3:
		return t.three(a)
	case 4:
		switch {
		case a[0] == "!":
			ok, err := t.three(a[1:])
			return !ok && err == nil, err
		case a[0] == "(" && a[3] == ")":
			return t.two(a[1], a[2])
		}
	}
	return t.expr()
}

func (t *tester) two(op, arg string) (bool, error) {
	if op == "!" {
		return arg == "", nil
	}
	if isUnaryTest(op) {
		return t.unary(op, arg)
	}
	return false, testErrorf("%s: unary operator expected", op)
}

func (t *tester) three(a []string) (bool, error) {
	switch {
	case isBinaryTest(a[1]):
		return t.binary(a[0], a[1], a[2])
	case a[1] == "-a":
		return a[0] != "" && a[2] != "", nil
	case a[1] == "-o":
		return a[0] != "" || a[2] != "", nil
	case a[0] == "!":
		ok, err := t.two(a[1], a[2])
		return !ok && err == nil, err
	case a[0] == "(" && a[2] == ")":
		return a[1] != "", nil
	}
	return false, testErrorf("%s: binary operator expected", a[1])
}

// expr is the general grammar: or-expressions of and-expressions of
// factors.
func (t *tester) expr() (bool, error) {
	ok, err := t.or()
	if err == nil && t.pos < len(t.args) {
		err = testErrorf("too many arguments")
	}
	return ok, err
}

func (t *tester) or() (bool, error) {
	ok, err := t.and()
	for err == nil && t.peek() == "-o" {
		t.pos++
		var r bool
		r, err = t.and()
		ok = ok || r
	}
	return ok, err
}

func (t *tester) and() (bool, error) {
	ok, err := t.factor()
	for err == nil && t.peek() == "-a" {
		t.pos++
		var r bool
		r, err = t.factor()
		ok = ok && r
	}
	return ok, err
}

func (t *tester) peek() string {
	if t.pos < len(t.args) {
		return t.args[t.pos]
	}
	return ""
}

func (t *tester) factor() (bool, error) {
	if t.pos >= len(t.args) {
		return false, testErrorf("argument expected")
	}
	a := t.args[t.pos]
	switch {
	case a == "!":
		t.pos++
		ok, err := t.factor()
		return !ok, err
	case a == "(":
		t.pos++
		ok, err := t.or()
		if err != nil {
			return false, err
		}
		if t.peek() != ")" {
			return false, testErrorf("`)' expected")
		}
		t.pos++
		return ok, nil
	case t.pos+2 < len(t.args) && isBinaryTest(t.args[t.pos+1]):
		t.pos += 3
		return t.binary(a, t.args[t.pos-2], t.args[t.pos-1])
	case isUnaryTest(a) && t.pos+1 < len(t.args):
		t.pos += 2
		return t.unary(a, t.args[t.pos-1])
	}
	t.pos++
	return a != "", nil
}

func isUnaryTest(op string) bool {
	return len(op) == 2 && op[0] == '-' && strings.IndexByte("abcdefghkprstuwxzGLNOSnov", op[1]) >= 0
}

func isBinaryTest(op string) bool {
	switch op {
	case "=", "==", "!=", "<", ">", "-eq", "-ne", "-lt", "-le", "-gt", "-ge", "-nt", "-ot", "-ef":
		return true
	}
	return false
}

func (t *tester) path(p string) string { return absIn(t.hc.Dir, p) }

func (t *tester) unary(op, arg string) (bool, error) {
	switch op {
	case "-z":
		return arg == "", nil
	case "-n":
		return arg != "", nil
	case "-v":
		return t.hc.Env.Get(arg).IsSet(), nil
	case "-o":
		return false, nil
	case "-t":
		fd, err := strconv.Atoi(strings.TrimSpace(arg))
		if err != nil {
			return false, testErrorf("%s: integer expression expected", arg)
		}
		_, err = unix.IoctlGetTermios(fd, unix.TCGETS)
		return err == nil, nil
	case "-r", "-w", "-x":
		mode := map[string]uint32{"-r": unix.R_OK, "-w": unix.W_OK, "-x": unix.X_OK}[op]
		return unix.Access(t.path(arg), mode) == nil, nil
	}
	stat := os.Stat
	if op == "-h" || op == "-L" {
		stat = os.Lstat
	}
	fi, err := stat(t.path(arg))
	if err != nil {
		return false, nil
	}
	m := fi.Mode()
	st, _ := fi.Sys().(*syscall.Stat_t)
	switch op {
	case "-a", "-e":
		return true, nil
	case "-f":
		return m.IsRegular(), nil
	case "-d":
		return m.IsDir(), nil
	case "-b":
		return m&os.ModeDevice != 0 && m&os.ModeCharDevice == 0, nil
	case "-c":
		return m&os.ModeCharDevice != 0, nil
	case "-p":
		return m&os.ModeNamedPipe != 0, nil
	case "-S":
		return m&os.ModeSocket != 0, nil
	case "-h", "-L":
		return m&os.ModeSymlink != 0, nil
	case "-s":
		return fi.Size() > 0, nil
	case "-g":
		return m&os.ModeSetgid != 0, nil
	case "-u":
		return m&os.ModeSetuid != 0, nil
	case "-k":
		return m&os.ModeSticky != 0, nil
	case "-O":
		return st != nil && int(st.Uid) == os.Geteuid(), nil
	case "-G":
		return st != nil && int(st.Gid) == os.Getegid(), nil
	case "-N":
		return st != nil && st.Mtim.Nano() > st.Atim.Nano(), nil
	}
	return false, nil
}

func (t *tester) binary(x, op, y string) (bool, error) {
	switch op {
	case "=", "==":
		return x == y, nil
	case "!=":
		return x != y, nil
	case "<":
		return x < y, nil
	case ">":
		return x > y, nil
	case "-nt", "-ot":
		a, aerr := os.Stat(t.path(x))
		b, berr := os.Stat(t.path(y))
		if op == "-ot" {
			a, aerr, b, berr = b, berr, a, aerr
		}
		switch {
		case aerr != nil:
			return false, nil
		case berr != nil:
			return true, nil
		}
		return a.ModTime().After(b.ModTime()), nil
	case "-ef":
		a, aerr := os.Stat(t.path(x))
		b, berr := os.Stat(t.path(y))
		return aerr == nil && berr == nil && os.SameFile(a, b), nil
	}
	n, err := testInt(x)
	if err != nil {
		return false, err
	}
	m, err := testInt(y)
	if err != nil {
		return false, err
	}
	switch op {
	case "-eq":
		return n == m, nil
	case "-ne":
		return n != m, nil
	case "-lt":
		return n < m, nil
	case "-le":
		return n <= m, nil
	case "-gt":
		return n > m, nil
	}
	return n >= m, nil // -ge
}

// testInt reads an integer operand as bash does: decimal, optional sign,
// surrounding blanks allowed.
func testInt(s string) (int64, error) {
	n, err := strconv.ParseInt(strings.Trim(s, " \t\n"), 10, 64)
	if err != nil {
		return 0, testErrorf("%s: integer expression expected", s)
	}
	return n, nil
}
