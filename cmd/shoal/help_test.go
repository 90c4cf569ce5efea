package main

import (
	"strings"
	"testing"
)

// TestHelpEveryCommand: --help and -h exit 0 on every command of the
// table and on every group of subcommands (shoal plan --help), and print
// its usage; kernel hands its flags to shoal-kernel (its
// --help is in testdata/script/cli.txtar).
func TestHelpEveryCommand(t *testing.T) {
	groups := map[string]bool{}
	for _, c := range commands() {
		if group, _, ok := strings.Cut(c.name, " "); ok && !groups[group] {
			groups[group] = true
			var out, errOut strings.Builder
			if code := run([]string{group, "--help"}, &out, &errOut); code != 0 || !strings.Contains(out.String(), "shoal "+c.name) {
				t.Errorf("shoal %s --help: exit %d:\n%s%s", group, code, out.String(), errOut.String())
			}
		}
		if c.raw {
			continue
		}
		for _, h := range []string{"--help", "-h"} {
			var out, errOut strings.Builder
			args := append(strings.Fields(c.name), h)
			if code := run(args, &out, &errOut); code != 0 {
				t.Errorf("shoal %s: exit %d: %s", strings.Join(args, " "), code, errOut.String())
			}
			if want := "Usage: shoal " + c.name; !strings.Contains(out.String(), want) {
				t.Errorf("shoal %s: no %q in\n%s", strings.Join(args, " "), want, out.String())
			}
		}
	}
}
