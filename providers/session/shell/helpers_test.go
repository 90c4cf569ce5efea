package shell

import (
	"bytes"
	"mvdan.cc/sh/v3/expand"
	"slices"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/shoal-sh/shoal/core/value"
	"mvdan.cc/sh/v3/syntax"
)

var captureTests = []struct {
	limit  int
	writes []string
	want   string
}{
	{10, []string{"hello"}, "hello"},
	{10, []string{"0123456789"}, "0123456789"},
	{10, []string{"01234", "56789", "ab"}, "01234\n[shoal: 2 bytes elided here; the first 5 and last 5 bytes are kept]\n789ab"},
	{10, []string{"0123456789abcdefghij"}, "01234\n[shoal: 10 bytes elided here; the first 5 and last 5 bytes are kept]\nfghij"},
	{10, []string{"01234", "5", "6", "7", "8", "9", "a", "b", "c"}, "01234\n[shoal: 3 bytes elided here; the first 5 and last 5 bytes are kept]\n89abc"},
	// Cuts move to rune boundaries: é is two bytes.
	{6, []string{"abé", "xyz", "éq"}, "ab\n[shoal: 5 bytes elided here; the first 2 and last 3 bytes are kept]\néq"},
}

func TestCapture(t *testing.T) {
	for _, tt := range captureTests {
		c := newCapture(tt.limit)
		for _, w := range tt.writes {
			c.Write([]byte(w))
		}
		got, _, _ := c.bytes()
		if string(got) != tt.want {
			t.Errorf("capture(%d, %q) = %q, want %q", tt.limit, tt.writes, got, tt.want)
		}
	}
}

// FuzzCapture checks the capture against the plain concatenation: what is
// kept is a prefix and a suffix of the input, within the budget, and the
// counts add up.
func FuzzCapture(f *testing.F) {
	for _, tt := range captureTests {
		f.Add(tt.limit, []byte(strings.Join(tt.writes, "")), uint8(3))
	}
	f.Fuzz(func(t *testing.T, limit int, data []byte, chunk uint8) {
		if limit < 2 || limit > 1<<16 {
			return
		}
		c := newCapture(limit)
		step := int(chunk%17) + 1
		for i := 0; i < len(data); i += step {
			c.Write(data[i:min(i+step, len(data))])
		}
		got, dropped, _ := c.bytes()
		if c.plain() != plainASCII(string(data)) {
			t.Fatalf("plain() = %v for %q", c.plain(), data)
		}
		if dropped == 0 {
			if !bytes.Equal(got, data) {
				t.Fatalf("nothing dropped but output differs")
			}
			return
		}
		i := bytes.Index(got, []byte("\n[shoal: "))
		j := bytes.Index(got, []byte(" bytes are kept]\n"))
		if i < 0 || j < 0 {
			t.Fatalf("no marker in %q", got)
		}
		head, tail := got[:i], got[j+len(" bytes are kept]\n"):]
		if !bytes.HasPrefix(data, head) || !bytes.HasSuffix(data, tail) {
			t.Fatalf("kept parts are not prefix/suffix")
		}
		if len(head) > limit/2 || len(tail) > limit-limit/2 {
			t.Fatalf("over budget: %d+%d > %d", len(head), len(tail), limit)
		}
		if int64(len(head)+len(tail))+dropped != int64(len(data)) {
			t.Fatalf("counts: %d+%d+%d != %d", len(head), len(tail), dropped, len(data))
		}
	})
}

var overstrikeTests = []struct{ in, want string }{
	{"plain\n", "plain\n"},
	{"10%\r100%\n", "100%\n"},
	{"abcdef\rXY\n", "XYcdef\n"},
	{"N\bNA\bAM\bME", "NAME"},
	{"_\bu_\bl", "ul"},
	{"crlf\r\nnext\r\n", "crlf\r\nnext\r\n"},
	{"\b\bx", "x"},
	{"a\r\r\nb", "a\r\nb"},
}

func TestOverstrike(t *testing.T) {
	for _, tt := range overstrikeTests {
		if got := overstrike(tt.in); got != tt.want {
			t.Errorf("overstrike(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
}

func FuzzCleanOutput(f *testing.F) {
	for _, tt := range overstrikeTests {
		f.Add([]byte(tt.in))
	}
	f.Add([]byte("\x1b[31mred\x1b[0m\x1b]0;t\x07"))
	f.Fuzz(func(t *testing.T, in []byte) {
		s, text := cleanOutput(in, false, false)
		if !text {
			if s != string(in) {
				t.Fatal("binary output changed")
			}
			return
		}
		if strings.ContainsAny(s, "\b\x1b") {
			t.Fatalf("left a control: %q", s)
		}
		for i := range len(s) {
			if s[i] == '\r' && (i+1 >= len(s) || s[i+1] != '\n') {
				t.Fatalf("bare \\r in %q", s)
			}
		}
		if !utf8.ValidString(s) {
			t.Fatalf("invalid UTF-8 out of valid in")
		}
	})
}

func TestExportsChanged(t *testing.T) {
	exp := func(v string) expand.Variable {
		return expand.Variable{Set: true, Exported: true, Kind: expand.String, Str: v}
	}
	before := newExports(map[string]expand.Variable{"A": exp("1"), "B": exp("2"), "C": exp("3"), "E": exp("5"),
		"local": {Set: true, Kind: expand.String, Str: "not exported"}})
	if want := []EnvVar{{"A", "1"}, {"B", "2"}, {"C", "3"}, {"E", "5"}}; !slices.Equal(before.sorted, want) {
		t.Fatalf("sorted %v, want %v", before.sorted, want)
	}
	e := exp("5")
	e.Exported = false // still set, no longer exported
	after := map[string]expand.Variable{"A": exp("1"), "B": exp("x"), "D": exp("4"), "E": e, "local": exp("now exported")}
	if got := before.changed(after); !slices.Equal(got, []string{"B", "C", "D", "E", "local"}) {
		t.Errorf("changed = %v", got)
	}
	if got := before.changed(map[string]expand.Variable{"A": exp("1"), "B": exp("2"), "C": exp("3"), "E": exp("5")}); got != nil {
		t.Errorf("nothing changed, got %v", got)
	}
}

func TestDeclDumps(t *testing.T) {
	tests := map[string]bool{
		"export":        true,
		"export -p":     true,
		"declare -p":    true,
		"declare -px A": true,
		"declare":       true,
		"export A=1":    false,
		"declare -x A":  false,
		"local x":       false,
		"readonly R=1":  false,
	}
	for src, want := range tests {
		f, err := syntax.NewParser().Parse(strings.NewReader(src), "")
		if err != nil {
			t.Fatal(err)
		}
		d := f.Stmts[0].Cmd.(*syntax.DeclClause)
		if got := declDumps(d); got != want {
			t.Errorf("declDumps(%q) = %v, want %v", src, got, want)
		}
	}
}

var delimitedTests = []struct {
	in   string
	want string
}{
	{"a,b\n1,2\n", `{"$":"table","cols":["a","b"],"rows":[[{"$":"int","v":1},{"$":"int","v":2}]]}`},
	{"\xef\xbb\xbfa,a,\n1,x,y,z\n", `{"$":"table","cols":["a","a_2","_3","_4"],"rows":[[{"$":"int","v":1},{"$":"str","v":"x"},{"$":"str","v":"y"},{"$":"str","v":"z"}]]}`},
	{"n,f\n007,1e3\n,\n", `{"$":"table","cols":["n","f"],"rows":[[{"$":"str","v":"007"},{"$":"float","v":1000}],[{"$":"str","v":""},{"$":"null"}]]}`},
	{"x\n1\n2.5\n", `{"$":"table","cols":["x"],"rows":[[{"$":"float","v":1}],[{"$":"float","v":2.5}]]}`},
	{"a,b\n1\n", `{"$":"table","cols":["a","b"],"rows":[[{"$":"int","v":1},{"$":"null"}]]}`},
	{"", `{"$":"table","cols":[],"rows":[]}`},
	{"h\nnan\ninf\n", `{"$":"table","cols":["h"],"rows":[[{"$":"str","v":"nan"}],[{"$":"str","v":"inf"}]]}`},
}

func TestParseDelimited(t *testing.T) {
	for _, tt := range delimitedTests {
		got, err := parseDelimited([]byte(tt.in), ',')
		if err != nil {
			t.Errorf("%q: %v", tt.in, err)
			continue
		}
		if !value.Equal(got, mustValue(t, tt.want)) {
			t.Errorf("%q: got %s, want %s", tt.in, typedJSON(got), tt.want)
		}
	}
}

func FuzzParseDelimited(f *testing.F) {
	for _, tt := range delimitedTests {
		f.Add([]byte(tt.in), true)
	}
	f.Fuzz(func(t *testing.T, in []byte, tsv bool) {
		comma := ','
		if tsv {
			comma = '\t'
		}
		tbl, err := parseDelimited(in, comma)
		if err != nil {
			return
		}
		seen := map[string]bool{}
		for _, c := range tbl.Cols {
			if seen[c] {
				t.Fatalf("duplicate column %q", c)
			}
			seen[c] = true
		}
		for _, row := range tbl.Rows {
			if len(row) != len(tbl.Cols) {
				t.Fatalf("row of %d cells for %d columns", len(row), len(tbl.Cols))
			}
		}
	})
}

func TestParseDotEnv(t *testing.T) {
	rec, ok := parseDotEnv([]byte("# c\nexport A=1\nB='x # y'\nC=\"q\\\"t\" \nD=v # comment\n\nE=\n"))
	if !ok {
		t.Fatal("not parsed")
	}
	want := `{"$":"record","v":{"A":{"$":"str","v":"1"},"B":{"$":"str","v":"x # y"},"C":{"$":"str","v":"q\"t"},"D":{"$":"str","v":"v"},"E":{"$":"str","v":""}}}`
	if !value.Equal(rec, mustValue(t, want)) {
		t.Errorf("got %s", typedJSON(rec))
	}
	for _, bad := range []string{"not a line", "A='open", "1X=2"} {
		if _, ok := parseDotEnv([]byte(bad)); ok {
			t.Errorf("%q parsed", bad)
		}
	}
}

// FuzzObserveCommand: any command line is classified without panicking,
// and effect targets never carry an assignment's value.
func FuzzObserveCommand(f *testing.F) {
	seeds := []string{
		"rm -rf /tmp/x", "sudo -u root env A=secret rm x", "sh -c 'rm a; echo > b'", "curl https://h/x?t=1",
		"find . -exec rm {} +", "git -C d push origin", "timeout", "xargs", "env -S", "cp -t", "bash -c",
	}
	for _, s := range seeds {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, line string) {
		args := strings.Fields(line)
		if len(args) == 0 {
			return
		}
		ru := &run{effectSet: map[Effect]struct{}{}, headSet: map[string]int{}, marks: map[string]struct{}{}}
		observeCommand(ru, "/work", args, 0, 0)
		if len(ru.effects) > maxEffects || len(ru.heads) > maxHeads {
			t.Fatal("caps exceeded")
		}
	})
}

// TestPlainASCII: the eight-bytes-at-a-time check agrees with its
// definition for each byte that matters at every position and alignment.
func TestPlainASCII(t *testing.T) {
	for _, c := range []string{"", "a", " ", "\n", "\t", "~", "\x7f", "\x00", "\x1f", "\x1b", "\b", "\r", "\n\x1b", "\x1b\n", "é", "\u009b", "\xff"} {
		for n := range 20 {
			for at := range n + 1 {
				s := strings.Repeat("x", at) + c + strings.Repeat("y", n-at)
				want := !strings.ContainsAny(s, "\x1b\b\r")
				for i := range len(s) {
					want = want && s[i] < utf8.RuneSelf
				}
				if got := plainASCII(s); got != want {
					t.Fatalf("plainASCII(%q) = %v, want %v", s, got, want)
				}
			}
		}
	}
}
