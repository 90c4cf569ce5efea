package shell

import (
	"time"

	"github.com/shoal-sh/shoal/core/value"
	"github.com/shoal-sh/shoal/providers/val/spill"
)

// Effect kinds, the vocabulary of SPEC J3. The planner derives the same
// kinds statically; the evaluator reports what a run actually did.
const (
	EffectFSRead       = "fs.read"       // a file opened for reading (redirect, open, ls, jq FILE)
	EffectFSWrite      = "fs.write"      // a file opened for writing, or the destination of cp, mv, touch, …
	EffectFSDelete     = "fs.delete"     // rm, unlink, rmdir, shred, and the sources of mv
	EffectProcSpawn    = "proc.spawn"    // an external process was started; the target is its program path
	EffectNet          = "net"           // a known network tool ran; the target is the host when it is known
	EffectEnvWrite     = "env.write"     // an exported variable changed; the target is its name, never its value
	EffectPTY          = "pty"           // recorded by the PTY provider, never by the evaluator
	EffectEventPublish = "event.publish" // emit published an event; the target is the channel
)

// MarkSecretSource marks a run whose value may hold secrets because it read
// an environment dump (env, printenv, set, export -p, declare -p) or a
// dotenv file. Reading such a value is allowed; previews must say so.
const MarkSecretSource = "secret-source"

// Effect is one observed side effect of a run.
type Effect struct {
	Kind   string `json:"kind"`
	Target string `json:"target,omitempty"`
}

// EnvVar is one exported variable of the session.
type EnvVar struct {
	Name  string `json:"name"`
	Value string `json:"value"`
}

// Result is what one [Evaluator.Run] produced.
type Result struct {
	// Value is the run's value (SPEC X2): the typed value of the last
	// command when that is a Shoal builtin, otherwise the record
	// {exit, stdout, stderr}. stdout and stderr are str, or bytes when the
	// captured output is not valid UTF-8.
	Value value.Value
	// Exit is the status of the last command: 0 for success, N after
	// `exit N`, 2 for a syntax error, 130 when the run was cancelled.
	Exit int
	// Stdout and Stderr are the captured output after cleaning (ANSI
	// escapes removed, carriage-return rewrites and backspace overstrikes
	// applied) unless Options.RawOutput is set. When a stream passed
	// Options.MaxCapture its middle is replaced by a marker line and the
	// Dropped counters say how many bytes went.
	Stdout, Stderr               string
	StdoutDropped, StderrDropped int64
	// Ahead holds the parts of a long Stdout and Stderr already encoded
	// for the content store while the run wrote them (stopped), for
	// spill.EncodeAhead; empty for short output.
	Ahead []*spill.Ahead
	// Effects are the side effects observed while the run ran, in first
	// occurrence order, each kind/target pair once. EffectsDropped counts
	// the ones left out past the cap.
	Effects        []Effect
	EffectsDropped int
	// Heads are the command names that ran (base names, so /bin/rm is rm),
	// each once in first occurrence order, including commands reached
	// through wrappers (sudo, env, xargs, timeout, …) and inside sh -c
	// strings, and declaration commands (export, declare, …) present in
	// the source.
	Heads []string
	// Builtin reports that Value is a Shoal builtin's typed value.
	Builtin bool
	// Marks are value marks such as [MarkSecretSource] and [MarkConfined].
	Marks []string
	// Denied are paths the confinement refused during the run (the
	// interpreter's own opens and the programs it started), the first few.
	Denied []string
	// Detached reports that the run became a task before it finished: its
	// state changes (cd, variables, functions) were not merged back.
	Detached bool
	// Duration is the wall time of the run.
	Duration time.Duration
}

// Head is the first command name that ran, or "" when none did.
func (r *Result) Head() string {
	if len(r.Heads) == 0 {
		return ""
	}
	return r.Heads[0]
}

// OK reports whether the run exited with status 0.
func (r *Result) OK() bool { return r.Exit == 0 }
