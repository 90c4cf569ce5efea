package shell

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/shoal-sh/shoal/core/value"
)

func TestOutBuiltin(t *testing.T) {
	var lines strings.Builder
	for i := 1; i <= 1000; i++ {
		if i == 617 {
			lines.WriteString("FAIL: the needle\n")
		} else {
			fmt.Fprintf(&lines, "ok %d\n", i)
		}
	}
	stored := map[string]value.Value{
		"out:1": value.NewRecord(value.F("exit", value.Int(0)), value.F("stdout", value.Str(lines.String())), value.F("stderr", value.Str("warn\n"))),
		"out:2": value.Str("plain text\n"),
		"out:3": value.List{value.Int(1), value.Int(2)},
	}
	e, _ := newTestEvaluator(t, nil, Options{Values: func(_ context.Context, ref string) (value.Value, error) {
		if !strings.Contains(ref, ":") {
			ref = "out:" + ref
		}
		if v, ok := stored[ref]; ok {
			return v, nil
		}
		return nil, fmt.Errorf("%s does not exist", ref)
	}})
	cases := []struct {
		src, stdout, stderr string
		exit                int
	}{
		// An execution's record replays its output: grep finds the line.
		{src: "out 1 | grep -n FAIL | head", stdout: "617:FAIL: the needle\n", stderr: "warn\n"},
		{src: "out out:1 .stderr | cat", stdout: "warn\n"},
		{src: "out 2 | wc -l", stdout: "1\n"},
		{src: "out 3 | cat", stdout: "[1,2]\n"},
		{src: "out 9", stderr: "out: out:9 does not exist\n", exit: 1},
		{src: "out", stderr: "out: usage: out REF [PATH]", exit: 2},
		{src: "out 1 .nope", stderr: "out: ", exit: 1},
	}
	for _, tc := range cases {
		res := runSrc(t, e, tc.src)
		if res.Exit != tc.exit || res.Stdout != tc.stdout || !strings.HasPrefix(res.Stderr, tc.stderr) {
			t.Errorf("%s: exit %d stdout %q stderr %q; want %d %q %q", tc.src, res.Exit, res.Stdout, res.Stderr, tc.exit, tc.stdout, tc.stderr)
		}
	}
	// Ending the run, the value itself is its value.
	res := runSrc(t, e, "out 3")
	if !value.Equal(res.Value, stored["out:3"]) {
		t.Errorf("out 3 value = %v", res.Value)
	}
}
