package wire

import (
	"encoding/json"
	"strings"
)

// The answers of the kernel methods (docs/kernel.md, Methods), one type
// each, shared by the kernel, sdk/client, the facade and the CLI. Types
// that replaced a map keep their members in alphabetical order, the order
// encoding/json gave the map's keys, so the bytes on the wire did not
// change. TestAnswersMatchWire (internal/boot) keeps the records that a
// provider declares in its own package (plans, PTY screens, journal rows,
// events) member-for-member equal to the ones here.

// Attached is session.attach's answer.
type Attached struct {
	Channels []string `json:"channels"`
	// Confinement says how the OS confines the session's executions
	// (docs/security.md).
	Confinement *Confinement `json:"confinement,omitempty"`
	// Credential is "agent" or "operator": which token attached.
	Credential string         `json:"credential"`
	Cwd        string         `json:"cwd"`
	Epoch      string         `json:"epoch"`
	Grants     []string       `json:"grants"`
	Kernel     AttachedKernel `json:"kernel"`
	Principal  string         `json:"principal"`
	Session    string         `json:"session"`
	Workspace  string         `json:"workspace"`
}

// Confinement is how the OS confines a session's executions
// (session.attach's confinement, docs/security.md).
type Confinement struct {
	// ABI is the Landlock ABI version of the running kernel (0: none).
	ABI      int  `json:"abi"`
	Confined bool `json:"confined"`
	// Error is why the session's confinement could not start.
	Error string `json:"error,omitempty"`
	// MaxTasks is the limit on the processes and threads the session
	// holds at once (a pids cgroup); absent when none could be set.
	MaxTasks int `json:"max_tasks,omitempty"`
	// Mode is the policy's sandbox mode: required or best-effort.
	Mode string `json:"mode"`
	// ReadOnlyMounts is true when everything but the writable paths is
	// mounted read-only for the session, so chmod, chown and touch
	// (which Landlock does not govern) are refused outside them too.
	ReadOnlyMounts bool `json:"read_only_mounts"`
	// Reason says why the session is not (fully) confined.
	Reason string `json:"reason,omitempty"`
	// Scoped is true when signals and abstract unix sockets are scoped
	// to the session (Landlock ABI 6 and later).
	Scoped bool   `json:"scoped"`
	Tmp    string `json:"tmp"`
	// WorkspaceNote says why the workspace is not writable;
	// WorkspaceWritable is set, to false, only then.
	WorkspaceNote     string `json:"workspace_note,omitempty"`
	WorkspaceWritable *bool  `json:"workspace_writable,omitempty"`
	// Writable are the paths the session may write.
	Writable []string `json:"writable"`
}

// AttachedKernel is the kernel session.attach reached.
type AttachedKernel struct {
	PID      int    `json:"pid"`
	Socket   string `json:"socket"`
	StateDir string `json:"state_dir"`
	Version  string `json:"version"`
}

// SessionClosed is session.close's answer.
type SessionClosed struct {
	Closed  bool   `json:"closed"`
	Session string `json:"session"`
}

// Progress is exec.progress's answer; Running is false once the
// execution ended (or never was).
type Progress struct {
	Running   bool   `json:"running"`
	Ref       string `json:"ref,omitempty"`
	ElapsedMS int64  `json:"elapsed_ms"`
	// Bytes and lines written so far, and the last line of output
	// (stdout's, or stderr's when stdout has none), at most 200 bytes.
	StdoutBytes int64  `json:"stdout_bytes"`
	StdoutLines int64  `json:"stdout_lines"`
	StderrBytes int64  `json:"stderr_bytes"`
	StderrLines int64  `json:"stderr_lines"`
	LastLine    string `json:"last_line,omitempty"`
}

// BlobGet is blob.get's answer for a whole blob.
type BlobGet struct {
	Hash string `json:"hash"`
	Size int64  `json:"size"`
	B64  string `json:"b64"`
}

// BlobRange is blob.get's answer for a range ({offset, length}): Size is
// the whole blob's, B64 the range's bytes.
type BlobRange struct {
	Hash   string `json:"hash"`
	Size   int64  `json:"size"`
	Offset int64  `json:"offset"`
	B64    string `json:"b64"`
}

// BlobGetTicket is blob.get's answer to {stream: true}: the ticket that
// reads the blob raw from the side socket.
type BlobGetTicket struct {
	Hash   string       `json:"hash"`
	Size   int64        `json:"size"`
	Stream StreamTicket `json:"stream"`
}

// BlobPutTicket is blob.put's answer to {stream: true}: the ticket that
// sends the blob raw on the side socket.
type BlobPutTicket struct {
	Stream StreamTicket `json:"stream"`
}

// StreamTicket is where and with what to open a side-socket transfer.
type StreamTicket struct {
	Socket string `json:"socket"`
	Ticket string `json:"ticket"`
	// File says a put may hand over an open regular file instead of its
	// bytes: "<ticket> fd" and a newline sent with the descriptor
	// (SCM_RIGHTS). The kernel reads the file itself, from its offset to
	// its end.
	File bool `json:"file,omitempty"`
}

// BlobPut is blob.put's answer once the blob is stored.
type BlobPut struct {
	Ref  string `json:"ref"`
	Hash string `json:"hash"`
	Size int64  `json:"size"`
}

// BlobUpload is blob.put's answer to a chunk with {more: true}: the open
// upload and the bytes it holds so far.
type BlobUpload struct {
	Size   int64  `json:"size"`
	Upload string `json:"upload"`
}

// Task is a task record (task.get, task.cancel, task.list's items).
type Task struct {
	ID          int    `json:"id"`
	Task        string `json:"task"` // task:N
	URI         string `json:"uri"`
	Session     string `json:"session"`
	Principal   string `json:"principal"`
	State       string `json:"state"`
	Source      string `json:"source"`
	Description string `json:"description"`
	Created     int64  `json:"created"`
	Started     int64  `json:"started"`
	Finished    int64  `json:"finished,omitempty"`
	Exit        *int   `json:"exit"`
	Error       string `json:"error,omitempty"`
	ResultRef   string `json:"result_ref,omitempty"`
	ValRef      string `json:"val_ref,omitempty"`
}

// TaskList is task.list's answer, newest first.
type TaskList struct {
	Tasks []Task `json:"tasks"`
}

// Plan is a plan record (plan.create, plan.get, plan.approve,
// plan.reject, plan.list's items).
type Plan struct {
	Ref       string `json:"ref"`
	URI       string `json:"uri"`
	Session   string `json:"session"`
	Principal string `json:"principal"`
	Source    string `json:"source"`
	// Cwd is the working directory the plan was made for.
	Cwd     string `json:"cwd"`
	Created int64  `json:"created"`
	// Effects are the distinct effect kinds; EffectDetails has every
	// effect with its target and reversibility.
	Effects       []string       `json:"effects"`
	EffectDetails []PlanEffect   `json:"effect_details"`
	Heads         []string       `json:"heads"`
	Reversible    bool           `json:"reversible"`
	Estimates     PlanEstimate   `json:"estimates"`
	Dynamic       bool           `json:"dynamic"`
	Uncertain     []string       `json:"uncertain"`
	Verdict       string         `json:"verdict"`
	Reasons       []PolicyReason `json:"reasons"`
	// Approval is pending, approved, rejected or not_needed.
	Approval       string `json:"approval"`
	ApprovedBy     string `json:"approved_by,omitempty"`
	RejectedBy     string `json:"rejected_by,omitempty"`
	DecisionReason string `json:"decision_reason,omitempty"`
	Decided        int64  `json:"decided,omitempty"`
	Applied        bool   `json:"applied"`
	AppliedRef     string `json:"applied_ref,omitempty"`
	// Next says what can be done with the plan now.
	Next string `json:"next"`
}

// PlanEffect is one effect of a plan (docs/policy.md names the kinds and
// the flags).
type PlanEffect struct {
	Kind   string `json:"kind"`
	Target string `json:"target,omitempty"`
	// Head is the command the effect comes from; Sub its subcommand.
	Head       string        `json:"head,omitempty"`
	Sub        string        `json:"sub,omitempty"`
	Recursive  bool          `json:"recursive,omitempty"`
	Force      bool          `json:"force,omitempty"`
	Dynamic    bool          `json:"dynamic,omitempty"`
	Glob       bool          `json:"glob,omitempty"`
	Overwrite  bool          `json:"overwrite,omitempty"`
	Unbounded  bool          `json:"unbounded,omitempty"`
	Machine    bool          `json:"machine,omitempty"`
	Reversible bool          `json:"reversible"`
	Reason     string        `json:"reason"`
	Estimate   *PlanEstimate `json:"estimate,omitempty"`
	Executes   bool          `json:"executes,omitempty"`
}

// PlanEstimate is how much a plan's deletes and overwrites touch.
type PlanEstimate struct {
	Files     int64 `json:"files"`
	Bytes     int64 `json:"bytes"`
	Truncated bool  `json:"truncated,omitempty"`
}

// PolicyReason is one rule's part in a verdict.
type PolicyReason struct {
	Effect  string `json:"effect"`
	Target  string `json:"target,omitempty"`
	Head    string `json:"head,omitempty"`
	Rule    string `json:"rule"`
	Verdict string `json:"verdict"`
}

// PlanList is plan.list's answer.
type PlanList struct {
	Plans []Plan `json:"plans"`
}

// Screen is a PTY's screen (pty.open, pty.write, pty.read, pty.resize,
// pty.wait).
type Screen struct {
	PTY     string `json:"pty"`
	URI     string `json:"uri"`
	Command string `json:"command"`
	// Lines holds one string per row, trailing blanks trimmed.
	Lines  []string `json:"lines"`
	Cursor Cursor   `json:"cursor"`
	Cols   int      `json:"cols"`
	Rows   int      `json:"rows"`
	Alive  bool     `json:"alive"`
	// Exit is null while the program runs; 128+N when signal N ended it.
	Exit   *int   `json:"exit"`
	Signal string `json:"signal,omitempty"`
	// Change grows each time output reached the screen or it was resized.
	Change     uint64   `json:"change"`
	Title      string   `json:"title,omitempty"`
	AltScreen  bool     `json:"alt_screen"`
	Scrollback []string `json:"scrollback,omitempty"`
}

// Text is the screen as one string: rows joined by "\n", blank rows at
// the bottom left out, so "$" in a wait pattern means "end of the last
// non-blank row".
func (s Screen) Text() string {
	lines := s.Lines
	for len(lines) > 0 && lines[len(lines)-1] == "" {
		lines = lines[:len(lines)-1]
	}
	return strings.Join(lines, "\n")
}

// Cursor is a screen's cursor, 0-based, row first like Lines.
type Cursor struct {
	Row     int  `json:"row"`
	Col     int  `json:"col"`
	Visible bool `json:"visible"`
}

// PTYInfo is one entry of pty.list.
type PTYInfo struct {
	PTY     string `json:"pty"`
	URI     string `json:"uri"`
	Command string `json:"command"`
	Cwd     string `json:"cwd"`
	Cols    int    `json:"cols"`
	Rows    int    `json:"rows"`
	Alive   bool   `json:"alive"`
	Exit    *int   `json:"exit"`
	Signal  string `json:"signal,omitempty"`
	// Created is when the PTY was opened, ns since the Unix epoch.
	Created int64 `json:"created"`
}

// PTYList is pty.list's answer.
type PTYList struct {
	PTYs []PTYInfo `json:"ptys"`
}

// PTYClosed is pty.close's answer.
type PTYClosed struct {
	PTY    string `json:"pty"`
	Closed bool   `json:"closed"`
	Exit   *int   `json:"exit"`
	Signal string `json:"signal,omitempty"`
}

// JournalRow is one journal row.
type JournalRow struct {
	EntryID   uint64 `json:"entry_id"`
	TS        int64  `json:"ts"`
	Session   string `json:"session"`
	Principal string `json:"principal"`
	// Kind says what was journaled: exec, plan.apply, approval, pty.open.
	Kind       string   `json:"kind"`
	Head       string   `json:"head"`
	Source     string   `json:"source"`
	Effects    []string `json:"effects"`
	OK         bool     `json:"ok"`
	Exit       int      `json:"exit"`
	Ref        string   `json:"ref,omitempty"`
	DurationNS int64    `json:"duration_ns,omitempty"`
}

// JournalRows is journal.query's answer for the local journal.
type JournalRows struct {
	Rows []JournalRow `json:"rows"`
}

// ClusterJournalRow is a row of journal.query with scope "cluster": the
// kernel that journaled it and its host beside the row.
type ClusterJournalRow struct {
	JournalRow
	Kernel string `json:"kernel"`
	Host   string `json:"host"`
}

// ClusterJournalRows is journal.query's answer with scope "cluster".
// Scanned is how many cluster journal messages the query looked at;
// Complete is false when it stopped at its scan bound first.
type ClusterJournalRows struct {
	Scope    string              `json:"scope"` // "cluster"
	Rows     []ClusterJournalRow `json:"rows"`
	Scanned  int                 `json:"scanned"`
	Complete bool                `json:"complete"`
}

// JournalStats are the journal's counters in kernel.status.
type JournalStats struct {
	Rows     uint64 `json:"rows"`
	Commits  uint64 `json:"commits"`
	WaitNS   uint64 `json:"wait_ns"`
	CommitNS uint64 `json:"commit_ns"`
}

// Event is one event of a channel (events.read's items, and the params
// of an events.event notification).
type Event struct {
	Channel string          `json:"channel"`
	Seq     uint64          `json:"seq"`
	TS      int64           `json:"ts"`
	Payload json.RawMessage `json:"payload"`
}

// Page is events.read's answer.
type Page struct {
	Channel   string  `json:"channel"`
	Events    []Event `json:"events"`
	OldestSeq *uint64 `json:"oldest_seq"`
	LatestSeq *uint64 `json:"latest_seq"`
	NextSeq   uint64  `json:"next_seq"`
	Epoch     string  `json:"epoch"`
	Truncated bool    `json:"truncated"`
}

// Published is events.publish's answer.
type Published struct {
	Channel string `json:"channel"`
	Seq     uint64 `json:"seq"`
	TS      int64  `json:"ts"`
}

// Subscribed is events.subscribe's answer.
type Subscribed struct {
	Channel    string `json:"channel"`
	Epoch      string `json:"epoch"`
	NextSeq    uint64 `json:"next_seq"`
	Subscribed bool   `json:"subscribed"`
}

// Unsubscribed is events.unsubscribe's answer; Unsubscribed is false when
// the connection was not subscribed.
type Unsubscribed struct {
	Channel      string `json:"channel"`
	Unsubscribed bool   `json:"unsubscribed"`
}

// Resource is one listed resource.
type Resource struct {
	URI         string `json:"uri"`
	Name        string `json:"name"`
	Description string `json:"description,omitempty"`
	MimeType    string `json:"mimeType"`
}

// ResourceList is resources.list's answer; Warnings say which provider
// failed to list.
type ResourceList struct {
	Resources []Resource `json:"resources"`
	Warnings  []string   `json:"warnings,omitempty"`
}

// Template is one resource template.
type Template struct {
	URITemplate string `json:"uriTemplate"`
	Name        string `json:"name"`
	Description string `json:"description,omitempty"`
	MimeType    string `json:"mimeType"`
}

// TemplateList is resources.templates's answer.
type TemplateList struct {
	ResourceTemplates []Template `json:"resourceTemplates"`
}

// WaitResult is wait's answer. State is the target's state when the wait
// ended: a task record, a channel's position, or a PTY screen.
type WaitResult struct {
	Satisfied bool            `json:"satisfied"`
	State     json.RawMessage `json:"state"`
	Target    string          `json:"target"`
	TimedOut  bool            `json:"timed_out"`
}

// Status is kernel.status's answer.
type Status struct {
	// Cluster is the cluster's status when the kernel is in one.
	Cluster     *ClusterStatus `json:"cluster,omitempty"`
	Connections int            `json:"connections"`
	Epoch       string         `json:"epoch"`
	Families    []string       `json:"families"`
	IdleExit    string         `json:"idle_exit"`
	Journal     *JournalStats  `json:"journal,omitempty"`
	Methods     []string       `json:"methods"`
	PID         int            `json:"pid"`
	Plugins     []PluginStatus `json:"plugins"`
	// Sandbox is what the OS confinement offers and how each live
	// session is confined (docs/security.md).
	Sandbox  *SandboxStatus  `json:"sandbox,omitempty"`
	Sessions []SessionStatus `json:"sessions"`
	Socket   string          `json:"socket"`
	Started  int64           `json:"started"`
	StateDir string          `json:"state_dir"`
	UptimeMS int64           `json:"uptime_ms"`
	Version  string          `json:"version"`
}

// SandboxStatus is kernel.status's sandbox: what this system offers, the
// policy's mode, and how each live session is confined, by name.
type SandboxStatus struct {
	LandlockABI int                       `json:"landlock_abi"`
	Mode        string                    `json:"mode"`
	OS          string                    `json:"os"`
	Sessions    map[string]SandboxSession `json:"sessions"`
}

// SandboxSession is how one live session is confined.
type SandboxSession struct {
	Confined bool   `json:"confined"`
	Reason   string `json:"reason"`
}

// ClusterStatus is kernel.status's cluster, and what shoal://cluster
// reads, when the kernel is in a cluster (docs/cluster.md).
type ClusterStatus struct {
	Channels  ClusterChannels `json:"channels"`
	Connected bool            `json:"connected"`
	Enabled   bool            `json:"enabled"` // true
	Host      string          `json:"host"`
	Journal   ClusterExport   `json:"journal"`
	// Kernel is this kernel's id in the cluster.
	Kernel    string `json:"kernel"`
	LastError string `json:"last_error"`
	// NATS are the configured URLs, credentials masked; Server is the
	// node the kernel talks to while connected.
	NATS   string `json:"nats"`
	Server string `json:"server,omitempty"`
	// State is the connection's: connected, reconnecting, closed, ….
	State  string        `json:"state"`
	Values ClusterValues `json:"values"`
}

// ClusterChannels are the shared channel patterns declared and the
// channels followed from the cluster.
type ClusterChannels struct {
	Declared []string `json:"declared"`
	Followed []string `json:"followed"`
}

// ClusterExport is the journal export: Cursor is the last row exported,
// Behind how many rows are still to go; LastExport (ns) is absent
// before the first export.
type ClusterExport struct {
	Behind      uint64 `json:"behind"`
	Cursor      uint64 `json:"cursor"`
	Exported    uint64 `json:"exported"`
	LastEntryID uint64 `json:"last_entry_id"`
	LastError   string `json:"last_error"`
	LastExport  int64  `json:"last_export,omitempty"`
}

// ClusterValues are the content store's uploads to the cluster's object
// store and the blobs fetched from it.
type ClusterValues struct {
	Bucket         string `json:"bucket"`
	Fetched        uint64 `json:"fetched"`
	LastError      string `json:"last_error"`
	PendingUploads int    `json:"pending_uploads"`
	Uploaded       uint64 `json:"uploaded"`
}

// SessionStatus is one session in kernel.status.
type SessionStatus struct {
	Attached  int    `json:"attached"`
	Created   int64  `json:"created"`
	Name      string `json:"name"`
	Workspace string `json:"workspace"`
}

// PluginList is plugin.list's answer.
type PluginList struct {
	Plugins []PluginStatus `json:"plugins"`
}

// PluginStatus is one plugin, loaded or not (docs/plugins.md).
type PluginStatus struct {
	Name      string   `json:"name"`
	Version   string   `json:"version,omitempty"`
	Kind      string   `json:"kind,omitempty"`
	Dir       string   `json:"dir"`
	Family    string   `json:"family,omitempty"`
	Channels  []string `json:"channels,omitempty"`
	Templates []string `json:"templates,omitempty"`
	// Schema tells whether payloads are checked against a JSON Schema.
	Schema bool `json:"schema,omitempty"`
	// Limits are the effective limits (defaults, grant and maximums applied).
	Limits PluginLimits `json:"limits"`
	// Granted are the capabilities the plugin has; Denied those its
	// manifest asks for and the operator did not grant.
	Granted PluginCapabilities `json:"granted"`
	Denied  PluginCapabilities `json:"denied"`
	// Health is loading, ok, failed or disabled.
	Health string `json:"health"`
	// LoadMS is how long the background load took.
	LoadMS int64 `json:"load_ms,omitempty"`
	// Error is why a plugin failed to load, or its last failed call.
	Error   string `json:"error,omitempty"`
	ErrorAt int64  `json:"error_at,omitempty"` // ns
	// Calls and Failures count guest calls and the ones that failed with
	// PLUGIN_ERROR since load; Instances is how many instances are alive.
	Calls     uint64 `json:"calls"`
	Failures  uint64 `json:"failures"`
	Instances int    `json:"instances"`
}

// PluginLimits are a plugin's effective limits.
type PluginLimits struct {
	MemoryMB  int `json:"memory_mb"`
	TimeoutMS int `json:"timeout_ms"`
	Instances int `json:"instances"`
}

// PluginCapabilities are what a plugin may touch outside its memory.
type PluginCapabilities struct {
	Env   []string `json:"env,omitempty"`
	FS    []string `json:"fs,omitempty"`
	Clock bool     `json:"clock,omitempty"`
}
