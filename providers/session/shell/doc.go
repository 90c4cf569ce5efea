// Package shell is the session evaluator: bash syntax parsed with
// mvdan.cc/sh/v3/syntax and interpreted in-process by mvdan.cc/sh/v3/interp,
// with Shoal's builtins, effect tracking and process handling added as
// interpreter handlers (exec middleware, an open handler and a call
// handler) rather than by changing the interpreter.
//
// # State
//
// An [Evaluator] holds one shell session: working directory, variables,
// exported environment and functions. Every [Evaluator.Run] executes on a
// copy of that state. When the run finishes in the foreground its copy
// becomes the session state; when the caller turned it into a task first
// (see [RunOptions.Detach]) its changes stay with the task. Foreground
// runs take turns; tasks run beside them.
//
// # Values
//
// A run's value is the typed value of its last command when that command
// is a Shoal builtin (ls, open, from, jq, emit, recv), and otherwise the
// record {exit, stdout, stderr}. Bytes come first: ls and jq always write
// what the ls and jq programs print (the value is an addition when they
// end the run), and a Shoal-only builtin whose value does not end the run
// writes it to its standard output (text as is, other values as plain
// JSON), so builtins compose with each other and with external programs
// through pipes. The differential corpus in testdata/bash measures the
// whole against GNU bash.
//
// # Bash fidelity
//
// Where the interpreter reads or runs bash otherwise, the evaluator
// corrects it without changing the interpreter: the parsed tree is
// adjusted ([bashTree]: function definitions followed by && or ||, ${10},
// associative array counts and appends), the call handler rewrites
// builtins that fall short ([bashCalls]: printf, test and [, read -d/-n,
// cd, getopts, …) to Shoal's own versions or to an eval of what bash would
// do, and the open handler serves /dev/stdout and friends from the
// command's own streams. The corpus in testdata/bash measures the result
// against GNU bash; TestBashCorpus runs it.
//
// # Processes
//
// External commands run as real processes, each in its own process group,
// with standard input from /dev/null unless something is piped in and with
// pagers and prompts switched off. Cancelling a run's context ends the
// process groups it started; [Evaluator.Close] ends every group the
// evaluator started and reaps them.
//
// docs/shell.md describes the behaviour for users of the kernel.
package shell
