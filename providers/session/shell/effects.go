package shell

import (
	"path/filepath"
	"slices"
	"strings"

	"github.com/shoal-sh/shoal/providers/plan/analyze"
)

// The evaluator cannot see what a process does inside, so for well-known
// programs it reads the effect off the command line: what rm deletes, what
// curl reaches, and which command a wrapper (sudo, env, timeout, xargs,
// find -exec) or a nested shell (sh -c) really runs. It does so with the
// planner's own command model (analyze.Line): one set of heads, options
// and targets, so that what a plan shows and what the journal records of
// the same command agree.

// observedKinds are the effect kinds a command line tells the observer;
// variables, events and terminals are recorded where they happen.
var observedKinds = []string{EffectFSRead, EffectFSWrite, EffectFSDelete, EffectProcSpawn, EffectNet}

// observeCommand records the effects, heads and marks one command line
// implies. The process itself is recorded by the caller, with its path.
// depth is how deep in wrappers the line is; the evaluator passes 0, and
// the model follows wrappers and nested shells itself.
func observeCommand(ru *run, dir string, args []string, offset uint, depth int) {
	if len(args) == 0 || depth > 0 {
		return
	}
	for _, a := range args[1:] {
		if isDotEnv(a) {
			ru.mark(MarkSecretSource)
		}
	}
	name := filepath.Base(args[0])
	if name == "printenv" || (name == "env" && envOnlyPrints(args[1:])) {
		ru.mark(MarkSecretSource)
	}
	an := analyze.Line(args, dir)
	for _, h := range an.Heads[1:] {
		ru.head(h, offset)
	}
	self := true // the first spawn is the process the caller recorded
	for _, e := range an.Effects {
		if !slices.Contains(observedKinds, e.Kind) {
			continue
		}
		if e.Kind == EffectProcSpawn && self && e.Head == name {
			self = false
			continue
		}
		target := e.Target
		if e.Dynamic {
			// What only the command's own run knows (its stdin, code it
			// is given): the kind is known, the target is not.
			target = ""
		}
		ru.effect(e.Kind, target)
	}
}

// envOnlyPrints reports an env command line that runs no command: it
// prints the environment.
func envOnlyPrints(args []string) bool {
	for i := 0; i < len(args); i++ {
		a := args[i]
		switch {
		case a == "-u" || a == "--unset" || a == "-C" || a == "--chdir":
			i++
		case a == "-S" || a == "--split-string" || strings.HasPrefix(a, "--split-string="):
			return false
		case a == "--":
			return i+1 >= len(args)
		case strings.HasPrefix(a, "-") || strings.Contains(a, "="):
		default:
			return false
		}
	}
	return true
}
