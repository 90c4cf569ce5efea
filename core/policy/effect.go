package policy

import "strings"

// Effect kinds: the vocabulary shared by plans, the journal and the policy
// (SPEC J3). An effect of any other kind is unknown: no rule allows it.
const (
	FSRead       = "fs.read"
	FSWrite      = "fs.write"
	FSDelete     = "fs.delete"
	ProcSpawn    = "proc.spawn"
	Net          = "net"
	EnvWrite     = "env.write"
	PTY          = "pty"
	EventPublish = "event.publish"
)

// Kinds lists every known effect kind, in the order docs/policy.md uses.
var Kinds = []string{FSRead, FSWrite, FSDelete, ProcSpawn, Net, EnvWrite, PTY, EventPublish}

// KnownKind reports whether kind is in [Kinds].
func KnownKind(kind string) bool {
	for _, k := range Kinds {
		if k == kind {
			return true
		}
	}
	return false
}

// Verdicts, from the most to the least permissive.
const (
	Allow = "allow"
	Ask   = "ask"
	Deny  = "deny"
)

// Grant names a policy can give a principal.
const (
	// GrantApprove lets a principal approve or reject plans in its session.
	GrantApprove = "Approve"
	// GrantHostApproval lets the person at an MCP host approve or reject
	// this principal's plans through the host: the facade asks them with
	// an elicitation form and passes on their answer (plan.approve with
	// via "elicitation"). A deny verdict stays a deny.
	GrantHostApproval = "HostApproval"
	// GrantEnvRead lets a principal see environment values.
	GrantEnvRead = "EnvRead"
)

var knownGrants = []string{GrantApprove, GrantEnvRead, GrantHostApproval}

// Effect is one thing a source would do, as the analyzer (or a run-time
// hook) describes it to the policy. It is the neutral input of
// [Policy.Decide]: the policy knows nothing about shells.
type Effect struct {
	// Kind is one of [Kinds].
	Kind string `json:"kind"`
	// Target is what the effect touches: an absolute path for fs.*, a host
	// for net, a variable name for env.write, a channel for event.publish,
	// the command for proc.spawn. When Glob is set it is a shell pattern;
	// when Dynamic is set it is the unresolved source text.
	Target string `json:"target,omitempty"`
	// Head is the command that causes the effect (rm, git, curl), by base
	// name: /bin/rm is rm.
	Head string `json:"head,omitempty"`
	// Sub is the head's subcommand when it has one (git push, npm install).
	Sub string `json:"sub,omitempty"`

	// Recursive: the effect reaches a whole tree (rm -r, chmod -R, find -delete).
	Recursive bool `json:"recursive,omitempty"`
	// Force: the command was told to override a safeguard (rm -f, push
	// --force, reset --hard, clean -f).
	Force bool `json:"force,omitempty"`
	// Dynamic: the command or the target is only known at run time
	// (variables without a value, command substitution, stdin scripts).
	Dynamic bool `json:"dynamic,omitempty"`
	// Glob: Target is a pattern that may name many paths.
	Glob bool `json:"glob,omitempty"`
	// Overwrite: an existing file's content would be replaced.
	Overwrite bool `json:"overwrite,omitempty"`
	// Unbounded: a function that calls itself unconditionally (a fork bomb).
	Unbounded bool `json:"unbounded,omitempty"`
	// Machine: the effect reaches past the session to the whole machine or
	// out of its confinement (signals to every process, reboot, firewall,
	// passwords, block devices, jobs handed to a daemon).
	Machine bool `json:"machine,omitempty"`
}

// flag names usable in a rule's flags list.
var flagNames = []string{"recursive", "force", "dynamic", "glob", "overwrite", "unbounded", "machine"}

func (e *Effect) flag(name string) bool {
	switch name {
	case "recursive":
		return e.Recursive
	case "force":
		return e.Force
	case "dynamic":
		return e.Dynamic
	case "glob":
		return e.Glob
	case "overwrite":
		return e.Overwrite
	case "unbounded":
		return e.Unbounded
	case "machine":
		return e.Machine
	}
	return false
}

// DecideContext anchors the path patterns of a decision: `~` in a rule is
// Home, `.` is Cwd. Cwd is the session's workspace (the directory the
// session was created for), not where a `cd` has taken it since: the work
// tree does not follow the agent around.
type DecideContext struct {
	Cwd  string
	Home string
	// Confined says the source would run confined by the OS (its writes
	// held to the session's writable paths): rules with `confined = true`
	// apply only then, rules with `confined = false` only otherwise.
	Confined bool
	// Resolve, when set, maps Cwd and Home to their real paths (symbolic
	// links resolved) the first time a rule's `~` or `.` pattern is
	// compared with a target. Most decisions never compare one, so the
	// file system is not touched for them.
	Resolve func(dir string) string
}

// Reason says which rule gave which verdict to one effect.
type Reason struct {
	Effect  string `json:"effect"`
	Target  string `json:"target,omitempty"`
	Head    string `json:"head,omitempty"`
	Rule    string `json:"rule"`
	Verdict string `json:"verdict"`
}

// Decision is the policy's answer for a set of effects: the strictest
// verdict over all of them, and one reason per distinct effect.
type Decision struct {
	Verdict string   `json:"verdict"`
	Reasons []Reason `json:"reasons"`
}

// Blocking returns the reasons whose verdict is not allow: what a person
// must look at before approving.
func (d Decision) Blocking() []Reason {
	var out []Reason
	for _, r := range d.Reasons {
		if r.Verdict != Allow {
			out = append(out, r)
		}
	}
	return out
}

// Summary renders the blocking reasons on one line each, for error
// messages ("ask fs.delete /x (rm): recursive delete").
func (d Decision) Summary() string {
	var b strings.Builder
	for i, r := range d.Blocking() {
		if i > 0 {
			b.WriteString("; ")
		}
		b.WriteString(r.Verdict)
		b.WriteByte(' ')
		b.WriteString(r.Effect)
		if r.Target != "" {
			b.WriteByte(' ')
			b.WriteString(r.Target)
		}
		if r.Head != "" {
			b.WriteString(" (")
			b.WriteString(r.Head)
			b.WriteByte(')')
		}
		b.WriteString(": ")
		b.WriteString(r.Rule)
	}
	return b.String()
}

func severity(v string) int {
	switch v {
	case Allow:
		return 0
	case Ask:
		return 1
	}
	return 2
}

// Stricter returns the stricter of two verdicts.
func Stricter(a, b string) string {
	if severity(b) > severity(a) {
		return b
	}
	return a
}
