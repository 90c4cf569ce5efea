//go:build linux

package render

import (
	"strings"
	"testing"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/shoal-sh/shoal/core/value"
)

// guardedString returns a string of readable bytes followed by a gigabyte
// of address space that faults when touched. Anything that reads past the
// readable head crashes the test, which proves what is only read.
func guardedString(t *testing.T, head string) value.Str {
	t.Helper()
	const guard = 1 << 30
	page := unix.Getpagesize()
	readable := (len(head) + page - 1) / page * page
	mem, err := unix.Mmap(-1, 0, readable+guard, unix.PROT_NONE, unix.MAP_PRIVATE|unix.MAP_ANON|unix.MAP_NORESERVE)
	if err != nil {
		t.Skipf("cannot reserve address space: %v", err)
	}
	t.Cleanup(func() { _ = unix.Munmap(mem) })
	if err := unix.Mprotect(mem[:readable], unix.PROT_READ|unix.PROT_WRITE); err != nil {
		t.Fatal(err)
	}
	n := copy(mem, head)
	for i := n; i < readable; i++ {
		mem[i] = 'x'
	}
	return value.Str(unsafe.String(&mem[0], len(mem)))
}

func TestReadsOnlyWhatItShows(t *testing.T) {
	big := guardedString(t, strings.Repeat("log line\n", 1000)+strings.Repeat("y", 300_000))
	line := guardedString(t, strings.Repeat("z", 300_000))
	for name, v := range map[string]value.Value{
		"str":          big,
		"single line":  line,
		"record field": value.NewRecord(value.F("stdout", big), value.F("other", line)),
		"list item":    value.List{line, big},
		"table cell":   &value.Table{Cols: []string{"text"}, Rows: [][]value.Value{{line}, {big}}},
	} {
		t.Run(name, func(t *testing.T) {
			if r := Render(v, TextLimit); len(r) > TextLimit {
				t.Fatalf("render: %d bytes", len(r))
			}
			for _, b := range []Budget{{}, {MaxString: 10}} {
				s, text, elided, err := JSON(v, b, TextLimit)
				if err != nil || !elided {
					t.Fatalf("json: elided %v, %v", elided, err)
				}
				checkJSONOutput(t, s, text, TextLimit)
			}
			if _, _, _, err := Raw(v, 100_000); err == nil {
				t.Fatal("raw of a gigabyte passed a 100 kB ceiling")
			}
		})
	}
	part, err := value.ApplySlice(big, value.Slice{Start: 5, End: 20})
	if err != nil || part != value.Str("ine\nlog line\nlo") {
		t.Fatalf("slice: %q %v", part, err)
	}
	if got, err := value.Select(value.NewRecord(value.F("s", big)), ".s"); err != nil || len(got.(value.Str)) != len(big) {
		t.Fatalf("select: %v", err)
	}
}
