package shell

import (
	"bytes"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"mvdan.cc/sh/v3/interp"

	"github.com/shoal-sh/shoal/core/value"
)

var lsCols = []string{"name", "type", "size", "mode", "modified"}

// lsFlags are the flags the ls builtin understands itself: -a and -A
// (hidden entries), -1 (one name a line, which is what ls prints into a
// pipe anyway) and -l (long listing; its bytes come from the ls program).
const lsFlags = "aAl1"

// builtinLs lists directories and files. Its bytes are what GNU ls prints
// when its output is not a terminal; when it ends the run its value is
// also a table of the entries. Flags other than -a, -A, -l and -1 hand
// the whole command to the ls program, which then has no table.
func builtinLs(c *call) error {
	var (
		all, almost, long bool
		paths             []string
	)
	args := c.args[1:]
	for i, a := range args {
		if a == "--" {
			paths = append(paths, args[i+1:]...)
			break
		}
		if len(a) > 1 && a[0] == '-' {
			if strings.Trim(a[1:], lsFlags) != "" {
				return c.next(c.ctx, c.args)
			}
			all = all || strings.Contains(a, "a")
			almost = almost || strings.Contains(a, "A")
			long = long || strings.Contains(a, "l")
			continue
		}
		paths = append(paths, a)
	}
	named := len(paths) > 0
	if !named {
		paths = []string{"."}
	}
	for _, p := range paths {
		c.ru.effect(EffectFSRead, c.abs(p))
	}

	if long || !byteCollation(c) {
		// The long format (owners, link counts, dates) and the sort
		// order of other locales are the ls program's to get right.
		err := c.next(c.ctx, c.args)
		if err == nil && c.valueWanted() {
			c.setValue(lsTable(c, paths, named, all || almost))
		}
		return err
	}
	out, failed := lsText(c, paths, all, almost)
	var t value.Value
	if _, isFile := c.hc.Stdout.(*os.File); !failed && (isFile || c.valueWanted()) {
		t = lsTable(c, paths, named, all || almost)
	}
	if err := c.deliverText(t, out, true); err != nil {
		return err
	}
	if failed {
		return interp.ExitStatus(2)
	}
	return nil
}

// byteCollation reports whether ls sorts names byte by byte in the
// session's locale (C, POSIX, C.UTF-8), which is the order lsText uses.
func byteCollation(c *call) bool {
	for _, name := range []string{"LC_ALL", "LC_COLLATE", "LANG"} {
		if v := c.hc.Env.Get(name); v.IsSet() && v.String() != "" {
			switch v.String() {
			case "C", "POSIX", "C.UTF-8", "C.utf8":
				return true
			}
			return false
		}
	}
	return true
}

// lsText is what `ls -1 [-a|-A] PATHS…` prints: the file operands first,
// then each directory's entries under a "dir:" header when there is more
// than one operand, sections separated by a blank line. Errors go to
// stderr as ls words them; failed reports that one happened.
func lsText(c *call, paths []string, all, almost bool) (out []byte, failed bool) {
	var files, dirs []string
	for _, p := range paths {
		fi, err := os.Stat(c.abs(p))
		if err != nil {
			if li, lerr := os.Lstat(c.abs(p)); lerr == nil && li.Mode()&fs.ModeSymlink != 0 {
				files = append(files, p) // a dangling link is listed, not followed
				continue
			}
			fmt.Fprintf(c.hc.Stderr, "ls: cannot access %s: %s\n", lsQuote(p), strerror(err))
			failed = true
			continue
		}
		if fi.IsDir() {
			dirs = append(dirs, p)
		} else {
			files = append(files, p)
		}
	}
	slices.Sort(files)
	slices.Sort(dirs)
	var b bytes.Buffer
	for _, f := range files {
		b.WriteString(f)
		b.WriteByte('\n')
	}
	header := len(paths) > 1
	for i, d := range dirs {
		if i > 0 || len(files) > 0 {
			b.WriteByte('\n')
		}
		if header {
			b.WriteString(d)
			b.WriteString(":\n")
		}
		entries, err := c.e.readDir(c.ru, c.abs(d))
		if err != nil {
			fmt.Fprintf(c.hc.Stderr, "ls: cannot open directory %s: %s\n", lsQuote(d), strerror(err))
			failed = true
			continue
		}
		names := make([]string, 0, len(entries)+2)
		if all {
			names = append(names, ".", "..")
		}
		for _, de := range entries {
			if strings.HasPrefix(de.Name(), ".") && !all && !almost {
				continue
			}
			names = append(names, de.Name())
		}
		slices.Sort(names)
		for _, n := range names {
			b.WriteString(n)
			b.WriteByte('\n')
		}
	}
	return b.Bytes(), failed
}

// lsQuote quotes a name in an ls error message as GNU ls does in the C
// locale.
func lsQuote(s string) string {
	if strings.Contains(s, "'") {
		return `"` + s + `"`
	}
	return "'" + s + "'"
}

// lsTable is the value of ls: one row per entry, operands in the order
// given, a directory's entries sorted by name.
func lsTable(c *call, paths []string, named, hidden bool) *value.Table {
	t := &value.Table{Cols: lsCols, Rows: [][]value.Value{}}
	for _, p := range paths {
		fi, err := os.Stat(c.abs(p))
		if err != nil {
			continue // lsText or the ls program reports it
		}
		if !fi.IsDir() {
			t.Rows = append(t.Rows, lsRow(p, fi))
			continue
		}
		entries, err := c.e.readDir(c.ru, c.abs(p))
		if err != nil {
			continue
		}
		for _, de := range entries {
			if !hidden && strings.HasPrefix(de.Name(), ".") {
				continue
			}
			info, err := de.Info()
			if err != nil {
				continue // removed while listing
			}
			name := de.Name()
			if named {
				name = filepath.Join(p, name)
			}
			t.Rows = append(t.Rows, lsRow(name, info))
		}
	}
	return t
}

func lsRow(name string, fi fs.FileInfo) []value.Value {
	return []value.Value{
		value.Str(name),
		value.Str(fileType(fi.Mode())),
		value.Int(fi.Size()),
		value.Str(fi.Mode().String()),
		value.Str(fi.ModTime().UTC().Format(time.RFC3339)),
	}
}

func fileType(m fs.FileMode) string {
	switch {
	case m.IsRegular():
		return "file"
	case m.IsDir():
		return "dir"
	case m&fs.ModeSymlink != 0:
		return "symlink"
	case m&fs.ModeNamedPipe != 0:
		return "pipe"
	case m&fs.ModeSocket != 0:
		return "socket"
	case m&fs.ModeDevice != 0:
		return "device"
	}
	return "other"
}
