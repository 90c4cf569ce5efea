package core

import (
	"context"

	"github.com/shoal-sh/shoal/core/policy"
	"github.com/shoal-sh/shoal/core/wire"
	"mvdan.cc/sh/v3/syntax"
)

// The services of core's interfaces, each offered by one provider (or
// the kernel) and needed by others through [Need] or [Optional].
var (
	// ServiceJournal is the journal, offered by providers/journal.
	ServiceJournal = NewKey[Journal]("journal")
	// ServiceBlobs is the content store, offered by providers/val.
	ServiceBlobs = NewKey[Blobs]("blobs")
	// ServiceCluster is the cluster's state, offered by providers/cluster
	// when a cluster is configured.
	ServiceCluster = NewKey[ClusterStatus]("cluster")
	// ServiceExecutor runs source in a session, offered by
	// providers/session.
	ServiceExecutor = NewKey[Executor]("executor")
	// ServicePolicy is the kernel's policy, offered by the kernel.
	ServicePolicy = NewKey[*policy.Policy]("policy")
	// ServiceWorkspaces tells each session's workspace, offered by the
	// kernel.
	ServiceWorkspaces = NewKey[Workspaces]("workspaces")
	// ServiceSessions tells about live sessions, offered by
	// providers/session.
	ServiceSessions = NewKey[Sessions]("sessions")
	// ServicePolicyCheck judges what an execution or a PTY would run,
	// offered by providers/plan.
	ServicePolicyCheck = NewKey[PolicyCheck]("policy-check")
)

// ClusterStatus is the cluster's state as kernel.status shows it.
type ClusterStatus interface {
	Status() wire.ClusterStatus
}

// Sessions is what the session provider tells others about a session.
// It may also tell more through optional interfaces its users declare
// and assert once at start-up: the session's variables and functions and
// its writable bounds (providers/plan), its confinement (the kernel).
type Sessions interface {
	// Cwd is the session's live working directory.
	Cwd(session string) string
}

// PolicyCheck decides whether what an execution or a PTY would run may
// run without a plan. It returns nil when the verdict is allow, and a
// POLICY_REFUSED error naming the reasons otherwise.
type PolicyCheck interface {
	// CheckExec judges source, which file holds already parsed as bash
	// (nil: the check parses it, and refuses a syntax error), as it would
	// run in cwd with the session's variables and functions as vars and
	// funcs give them (nil: the session's as they are now).
	CheckExec(ctx context.Context, c *Caller, file *syntax.File, source, cwd string,
		vars func(string) (string, bool), funcs func(string) (*syntax.Stmt, bool)) error
	// CheckTerminal judges the command a PTY starts with (source, run in
	// cwd) as exec would.
	CheckTerminal(ctx context.Context, c *Caller, source, cwd string) error
}

// Workspaces tells the directory each session was created for (its
// workspace: where it starts, and the confinement's writable root). The
// kernel records it when a session is first attached (session.attach's
// workspace param, else the kernel's own directory); it does not change
// while the session lives, whatever the session's cd does.
type Workspaces interface {
	// Workspace is the session's workspace, "" for a session never
	// attached.
	Workspace(session string) string
}

// JournalRow is one journal entry (SPEC J1). Rows are plain JSON.
type JournalRow struct {
	EntryID   uint64 `json:"entry_id"`
	TS        int64  `json:"ts"`
	Session   string `json:"session"`
	Principal string `json:"principal"`
	// Kind says what was journaled: exec, plan.apply, approval, pty.open.
	Kind    string   `json:"kind"`
	Head    string   `json:"head"`
	Source  string   `json:"source"`
	Effects []string `json:"effects"`
	OK      bool     `json:"ok"`
	Exit    int      `json:"exit"`
	Ref     string   `json:"ref,omitempty"`
	// DurationNS is how long the execution ran (0 when not an execution).
	DurationNS int64 `json:"duration_ns,omitempty"`
	// Transcript marks rows that also get a session.transcript event.
	Transcript bool `json:"-"`
}

// Journal appends rows durably. Append returns after the row's commit
// (group commit: concurrent appends share one transaction) with EntryID
// and TS filled in; the journal and session.transcript events are
// published after that commit. Source is redacted before it is stored.
type Journal interface {
	Append(ctx context.Context, row JournalRow) (JournalRow, error)
}

// JournalGate is implemented by a Journal that can tell before an
// execution runs whether its row could be written: executions ask first
// and do not run when the answer is an error (JOURNAL_UNAVAILABLE), so
// nothing runs unrecorded.
type JournalGate interface {
	Writable() error
}

// JournalStats are a journal's cumulative counters since it was opened
// (kernel.status shows them). The difference between two readings around
// one execution is what that execution's reply waited for its row: Rows
// grows by one and WaitNS by the wait.
type JournalStats struct {
	// Rows is how many appends were answered with their row committed.
	Rows uint64 `json:"rows"`
	// Commits is how many transactions carried them; group commit puts
	// the rows of concurrent appends in one.
	Commits uint64 `json:"commits"`
	// WaitNS sums, over those appends, the time from the call to its
	// answer: queueing, the transaction and its fsyncs.
	WaitNS uint64 `json:"wait_ns"`
	// CommitNS sums the transactions' durations, fsyncs included.
	CommitNS uint64 `json:"commit_ns"`
}

// Blobs is the content store: blake3-addressed, on disk, verified on read.
type Blobs interface {
	// Put stores data and returns its lowercase hex blake3 hash.
	Put(data []byte) (string, error)
	// Get returns the blob; a blob failing its hash check is a CORRUPT
	// error and never returned.
	Get(hash string) ([]byte, error)
	// Has reports whether a blob is present.
	Has(hash string) bool
	// Flush returns once every blob put before the call is durable (puts
	// return before their fsync).
	Flush() error
	// FlushBlob flushes and returns nil only if that blob is durable; it
	// is what whoever hands out the ref of its own put calls first.
	FlushBlob(hash string) error
}

// ExecRequest asks the session evaluator to run source.
type ExecRequest struct {
	Source     string `json:"source"`
	TimeoutMS  int64  `json:"timeout_ms,omitempty"`
	Background bool   `json:"background,omitempty"`
	// Kind is the journal kind ("exec" by default, "plan.apply" for plans).
	Kind string `json:"-"`
	// SkipPolicy is set by plan.apply: the plan's verdict already holds.
	SkipPolicy bool `json:"-"`
	// PlanRef is the plan being applied, echoed in the journal row.
	PlanRef string `json:"-"`
	// ProgressKey, when set, lets the caller follow the run's progress
	// with exec.progress {key} while it runs.
	ProgressKey string `json:"progress_key,omitempty"`
	// Widen are paths an approved plan may write beyond the session's
	// confinement: its run gets a fresh domain with them added.
	Widen []string `json:"-"`
	// HostCaps: an approved plan with a whole-machine effect (reboot, a
	// firewall rule, a kernel module); its run keeps the capabilities a
	// root kernel's sessions otherwise lose (see sandbox.HostCaps).
	HostCaps bool `json:"-"`
}

// ExecReply is an execution reply (SPEC X6).
type ExecReply = wire.ExecReply

// ConfinedNote says what the confinement refused a run.
type ConfinedNote = wire.ConfinedNote

// Executor runs source in the caller's session.
type Executor interface {
	Exec(ctx context.Context, c *Caller, req ExecRequest) (*ExecReply, error)
}
