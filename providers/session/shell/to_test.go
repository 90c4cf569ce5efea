package shell

import (
	"strings"
	"testing"

	"github.com/shoal-sh/shoal/core/value"
)

// TestTo: to writes a piped value as json, csv, tsv or lines text, and
// its value is that text. Round trips through from give the value back.
func TestTo(t *testing.T) {
	files := map[string]string{
		"c.csv":  "name,zip,n\nann,01234,1\n\"b, c\",99999,\n",
		"r.json": `[{"a":1,"b":"x"},{"b":"y","c":[1,2]},{"a":null}]`,
		"s.json": `["one","two 2",3,null]`,
		"o.json": `{"k":"v","n":2.5}`,
	}
	e, _ := newTestEvaluator(t, files, Options{})
	for _, tc := range []struct {
		src, stdout string
	}{
		// A table: the header, then its rows; a cell with the separator
		// is quoted; null is empty.
		{`open c.csv | to csv`, "name,zip,n\nann,01234,1\n\"b, c\",99999,\n"},
		{`open c.csv | to tsv`, "name\tzip\tn\nann\t01234\t1\nb, c\t99999\t\n"},
		{`open c.csv | to json`, `[{"name":"ann","zip":"01234","n":1},{"name":"b, c","zip":"99999","n":null}]` + "\n"},
		{`open c.csv | to lines`, `{"name":"ann","zip":"01234","n":1}` + "\n" + `{"name":"b, c","zip":"99999","n":null}` + "\n"},
		// Records with different fields: the columns in the order first
		// seen; nested values as plain JSON.
		{`open r.json | to csv`, "a,b,c\n1,x,\n,y,\"[1,2]\"\n,,\n"},
		// Scalars: one column named value; lines writes strings as they are.
		{`open s.json | to csv`, "value\none\ntwo 2\n3\n\n"},
		{`open s.json | to lines`, "one\ntwo 2\n3\nnull\n"},
		{`open o.json | to csv`, "k,n\nv,2.5\n"},
		{`echo '{"a":1}{"a":2}' | to json`, `{"a":1}` + "\n" + `{"a":2}` + "\n"},
		{`printf '' | to csv`, ""},
		// Round trips.
		{`open c.csv | to csv | from csv | to csv`, "name,zip,n\nann,01234,1\n\"b, c\",99999,\n"},
		{`printf 'x\ny\n' | from lines | to lines`, "x\ny\n"},
		// In the middle of a pipeline it is text for programs.
		{`open c.csv | to tsv | cut -f2 | tail -1`, "99999\n"},
	} {
		t.Run(tc.src, func(t *testing.T) {
			res := runSrc(t, e, tc.src)
			if res.Exit != 0 {
				t.Fatalf("exit %d, stderr %q", res.Exit, res.Stderr)
			}
			if res.Stdout != tc.stdout {
				t.Errorf("stdout %q, want %q", res.Stdout, tc.stdout)
			}
			if res.Builtin && !value.Equal(res.Value, value.Str(tc.stdout)) {
				t.Errorf("value %s, want the text", typedJSON(res.Value))
			}
		})
	}
}

// TestToRefusals: bad usage is status 2, input it cannot write is 1,
// each with the reason on stderr.
func TestToRefusals(t *testing.T) {
	e, _ := newTestEvaluator(t, map[string]string{"a.txt": "alpha\n", "m.json": `[{"a":1},2]`}, Options{})
	for _, tc := range []struct {
		src    string
		exit   int
		stderr string
	}{
		{`to`, 2, "usage: to json|csv|tsv|lines"},
		{`to csv extra`, 2, "usage: to"},
		{`echo 1 | to yaml`, 2, `unknown format "yaml"`},
		{`to json`, 2, "no input"},
		{`echo nope | to json`, 1, "not JSON"},
		{`open a.txt | to csv`, 1, "a str is not a table"},
		{`open m.json | to csv`, 1, "mixes records and other values"},
	} {
		t.Run(tc.src, func(t *testing.T) {
			res := runSrc(t, e, tc.src)
			if res.Exit != tc.exit || !strings.Contains(res.Stderr, tc.stderr) {
				t.Errorf("exit %d stderr %q, want %d and %q", res.Exit, res.Stderr, tc.exit, tc.stderr)
			}
		})
	}
}
