// Package wire holds the answers of the kernel protocol that the kernel
// and its clients share: the execution reply and the read envelope. It
// uses only the standard library, so sdk/client can import it.
package wire

import "encoding/json"

// ExecReply is an execution reply (SPEC X6).
type ExecReply struct {
	Ref string `json:"ref"`
	URI string `json:"uri"`
	// OK and Exit are null while the execution runs on as a task.
	OK   *bool `json:"ok"`
	Exit *int  `json:"exit"`
	// State is completed, failed, or running (it became a task).
	State       string          `json:"state"`
	DurationNS  int64           `json:"duration_ns"`
	Effects     []string        `json:"effects"`
	Preview     json.RawMessage `json:"preview,omitempty"`
	PreviewText string          `json:"preview_text,omitempty"`
	// ValRef is val:blake3:<hex> when the value lives in the content store.
	ValRef string `json:"val_ref,omitempty"`
	// Task is task:N when the execution became a task.
	Task    string   `json:"task,omitempty"`
	TaskURI string   `json:"task_uri,omitempty"`
	Marks   []string `json:"marks,omitempty"`
	// Confined, when set, says the run hit the OS confinement: paths the
	// sandbox refused (the first few), with what to do about it.
	Confined *ConfinedNote `json:"confined,omitempty"`
}

// ConfinedNote is what an execution reply says when the confinement
// refused the run something.
type ConfinedNote struct {
	Denied []string `json:"denied"`
	Hint   string   `json:"hint"`
}

// Content is one item of a read, shaped as an MCP resource content.
type Content struct {
	URI      string `json:"uri"`
	MimeType string `json:"mimeType"`
	Text     string `json:"text"`
}

// ReadResult is the envelope of a read: MCP's resources/read shape with
// structuredContent beside contents.
type ReadResult struct {
	Contents          []Content       `json:"contents"`
	StructuredContent json.RawMessage `json:"structuredContent"`
	// Ref is the short ref of the value read, when it has one.
	Ref string `json:"ref,omitempty"`
	// Elided is true when the JSON text or structured value was cut to fit.
	Elided bool `json:"elided,omitempty"`
	// Marks flag the content, e.g. "secret-source".
	Marks []string `json:"marks,omitempty"`
	// Meta describes the content beside it, e.g. the offsets of a live
	// output read ({task, stream, state, since, from, next, size}).
	Meta map[string]any `json:"meta,omitempty"`
}
