package shell

import (
	"os/exec"
	"slices"
	"testing"

	"github.com/shoal-sh/shoal/core/value"
)

// TestBytesFirst checks SPEC X2's rule that a builtin named like a
// standard command writes that command's bytes wherever it stands, and
// that its typed value is an addition when it ends the run.
func TestBytesFirst(t *testing.T) {
	e, _ := newTestEvaluator(t, map[string]string{
		"b.txt":  "two\nlines\n",
		"a.json": `{"k":[1,2]}`,
		"o.json": `{"z":1,"a":2}`,
	}, Options{Env: []string{"PATH=/usr/bin:/bin", "LC_ALL=C"}})

	res := runSrc(t, e, `ls`)
	tab, ok := res.Value.(*value.Table)
	if res.Stdout != "a.json\nb.txt\no.json\n" || !res.Builtin || !ok || len(tab.Rows) != 3 {
		t.Errorf("ls: stdout %q builtin %v value %v", res.Stdout, res.Builtin, res.Value)
	}
	if res := runSrc(t, e, `ls | wc -l`); res.Stdout != "3\n" || res.Builtin {
		t.Errorf("ls | wc -l: stdout %q builtin %v", res.Stdout, res.Builtin)
	}
	// Between two builtins the table travels typed although ls wrote names.
	if res := runSrc(t, e, `ls | jq -r '.[].name'`); res.Stdout != "a.json\nb.txt\no.json\n" {
		t.Errorf("ls | jq: stdout %q stderr %q", res.Stdout, res.Stderr)
	}
	// A Shoal-only builtin writes text as it is into a pipe.
	if res := runSrc(t, e, `open b.txt | wc -l`); res.Stdout != "2\n" {
		t.Errorf("open | wc -l: stdout %q", res.Stdout)
	}
	// ...and nothing when its value ends the run.
	if res := runSrc(t, e, `open b.txt`); res.Stdout != "" || !value.Equal(res.Value, value.Str("two\nlines\n")) {
		t.Errorf("open: stdout %q value %v", res.Stdout, res.Value)
	}

	// Handed over typed by open, the document still goes to the jq program,
	// which keeps its key order.
	if _, err := exec.LookPath("jq"); err == nil {
		if res := runSrc(t, e, `open o.json | jq -c .`); res.Stdout != "{\"z\":1,\"a\":2}\n" {
			t.Errorf("open | jq: stdout %q stderr %q", res.Stdout, res.Stderr)
		}
	}

	want := "{\n  \"k\": [\n    1,\n    2\n  ]\n}\n"
	res = runSrc(t, e, `jq . a.json`)
	if res.Stdout != want || !res.Builtin {
		t.Errorf("jq .: stdout %q builtin %v", res.Stdout, res.Builtin)
	}
	// Without a jq program the builtin formats gojq's results the same way.
	if _, err := exec.LookPath("jq"); err == nil {
		e2, _ := newTestEvaluator(t, map[string]string{"a.json": `{"k":[1,2]}`}, Options{Env: []string{"PATH=/nonexistent"}})
		if res := runSrc(t, e2, `jq . a.json`); res.Stdout != want {
			t.Errorf("gojq jq .: stdout %q stderr %q", res.Stdout, res.Stderr)
		}
	}
}

// TestRewritesKeepHeads checks that the calls rewritten to Shoal's own
// printf and test are still reported under the names the script used.
func TestRewritesKeepHeads(t *testing.T) {
	e, _ := newTestEvaluator(t, nil, Options{Env: []string{"PATH=/usr/bin:/bin"}})
	res := runSrc(t, e, `printf '%.2s\n' abc; [ -d . ] && test 1 -lt 2`)
	if res.Stdout != "ab\n" || res.Exit != 0 {
		t.Fatalf("stdout %q exit %d stderr %q", res.Stdout, res.Exit, res.Stderr)
	}
	for _, h := range []string{"printf", "[", "test"} {
		if !slices.Contains(res.Heads, h) {
			t.Errorf("heads %v lack %q", res.Heads, h)
		}
	}
	for _, h := range res.Heads {
		if h == printfBuiltin || h == testBuiltin {
			t.Errorf("heads %v show an internal name", res.Heads)
		}
	}
}
