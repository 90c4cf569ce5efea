// Package core is the host side of Shoal: the provider boundary, the router
// that maps shoal:// URIs to providers, and the services providers share.
// It knows no resource family by name; every family, built in or loaded
// from a WebAssembly plugin, is a [Provider].
package core

import (
	"context"
	"encoding/json"

	"github.com/shoal-sh/shoal/core/render"
	"github.com/shoal-sh/shoal/core/uri"
	"github.com/shoal-sh/shoal/core/value"
)

// Provider serves one resource family: every shoal://{family}/… URI.
type Provider interface {
	// Family is the URI host part this provider owns, e.g. "out".
	Family() string
	// Templates are the URI templates the provider advertises, in order.
	Templates() []Template
	// List returns the live entries the caller may see (roots first).
	List(ctx context.Context, c *Caller) ([]Resource, error)
	// Read resolves one URI. The router has already parsed and decoded it;
	// the provider must not apply path, slice, format or elision itself:
	// it returns the whole content and the router does the rest.
	Read(ctx context.Context, c *Caller, u *uri.URI) (*Content, error)
}

// PartReader is implemented by providers that can answer a read of a
// large stored value from the parts of it the selection covers, instead
// of handing the router the whole value (see package providers/val/spill).
// The router asks it first for every read without a grep (sel may select
// nothing: the whole value); ok false means "read it whole", and the
// router then calls Read and selects as usual. When ok, the content's
// Value (or Sparse) is what the path and then the slice select, and
// offset what value.ApplySliceAt reports for the slice. A selection that
// fails may fail here, with the error the whole value would give.
type PartReader interface {
	ReadPart(ctx context.Context, c *Caller, u *uri.URI, sel Selection) (content *Content, offset int, ok bool, err error)
}

// PartGrepper is implemented by providers that can answer a grep of a
// large stored value (or of what a path reaches in it) by searching its
// parts one at a time. The router asks it first for every read with grep;
// sel's slice pages the matches. ok false means "read it whole". When ok,
// the content's value is the grep's answer (value.Grep.Apply's record).
type PartGrepper interface {
	GrepPart(ctx context.Context, c *Caller, u *uri.URI, sel Selection, g value.Grep) (content *Content, ok bool, err error)
}

// Selection is the path and slice of a read, parsed.
type Selection struct {
	Path     value.Path
	HasPath  bool
	Slice    value.Slice
	HasSlice bool
}

// Page is the slice as a grep's page of matches: nil when there is none
// (the first page).
func (s Selection) Page() *value.Slice {
	if !s.HasSlice {
		return nil
	}
	return &s.Slice
}

// Subscribable is implemented by providers whose URIs map to event
// channels. Channel reports the channel for u, or false when u is not
// subscribable.
type Subscribable interface {
	Channel(u *uri.URI) (string, bool)
}

// MethodProvider is implemented by providers that add kernel JSON-RPC
// methods (exec, task.get, …). Method names must be unique across the
// kernel; a duplicate is a start-up error.
type MethodProvider interface {
	Methods() map[string]Method
}

// Provisioner is implemented by providers with something to open at
// start (state files, the bus) or services to [Offer]. The kernel calls
// Provision once, in registration order, before serving; the services a
// provider needs (see [Needer]) are set by then when their offerers come
// earlier in that order.
type Provisioner interface {
	Provision(h *Host) error
}

// SessionObserver is implemented by providers holding per-session state;
// the kernel calls SessionClosed when a session ends so the provider can
// kill processes and free memory.
type SessionObserver interface {
	SessionClosed(session string)
}

// Closer is implemented by providers with resources to release at kernel
// stop (processes, files). Close must leave no child process behind.
type Closer interface {
	Close() error
}

// Method is one kernel JSON-RPC method. params is the raw params member
// (may be nil). The result is marshalled with encoding/json. Errors should
// be *rpc.Error values built from the code table; any other error is
// reported as INTERNAL.
type Method func(ctx context.Context, c *Caller, params json.RawMessage) (any, error)

// Caller is who asks: the session and principal bound to the connection at
// session.attach, and the grants the policy gives that principal (less
// what its credential may not carry). Providers enforce visibility with it.
type Caller struct {
	Session   string
	Principal string
	Grants    Grants
	// Credential is the kernel credential the connection attached with:
	// CredentialAgent or CredentialOperator; empty for in-process callers.
	Credential Credential
	// ConnID identifies the kernel connection (unique per kernel run).
	ConnID uint64
	// Notify sends a JSON-RPC notification on the caller's connection; nil
	// when the caller has no connection (in-process calls).
	Notify func(method string, params any) error
}

// Credential names a kernel credential (see docs/kernel.md).
type Credential string

// The kernel's credentials.
const (
	// CredentialAgent is $STATE/token, what facades hold: it attaches
	// agent:* principals only and never carries the Approve grant,
	// whatever the policy says.
	CredentialAgent Credential = "agent"
	// CredentialOperator is $STATE/operator.token, what the CLI of a
	// person outside any session uses: any principal, its policy grants.
	CredentialOperator Credential = "operator"
)

// Grants is the set of named grants a principal holds (EnvRead, Approve…).
type Grants []string

// Has reports whether the grant is held.
func (g Grants) Has(name string) bool {
	for _, x := range g {
		if x == name {
			return true
		}
	}
	return false
}

// Template is one advertised URI template (RFC 6570).
type Template struct {
	URITemplate string `json:"uriTemplate"`
	Name        string `json:"name"`
	Description string `json:"description,omitempty"`
	MimeType    string `json:"mimeType"`
}

// Resource is one listed resource.
type Resource struct {
	URI         string `json:"uri"`
	Name        string `json:"name"`
	Description string `json:"description,omitempty"`
	MimeType    string `json:"mimeType"`
	// Root marks a stable root (shoal://jobs); the router lists roots
	// before live entries.
	Root bool `json:"-"`
}

// Content is what a provider's Read returns: either a typed Value (the
// router applies path, slice, format, elision and the 64 KiB text cap) or
// a plain JSON Record (bounded the same way, no typed wire form).
type Content struct {
	Value value.Value
	// Sparse, set by a PartReader instead of Value, is a large stored
	// value read part by part: the router renders it in formats json and
	// raw, and reads the whole value for format render.
	Sparse render.Sparse
	Record any
	// Ref is the short ref of the value (out:17, val:blake3:…), echoed in
	// render/raw envelopes.
	Ref string
	// Marks flag the content for the reader, e.g. "secret-source" for a
	// value read from an environment dump or a .env file.
	Marks []string
	// Meta describes the content beside it (a live output read's offsets);
	// the reply carries it as meta.
	Meta map[string]any
}

// Waiter is implemented by providers whose resources can be waited on in
// the kernel (the wait method, MCP shoal_wait): a task until it ends, a
// channel until it passes a seq, a PTY screen until it matches a pattern.
// Wait returns the resource's state when the condition holds, or when ctx
// ends with ctx.Err() and the state at that moment.
type Waiter interface {
	Wait(ctx context.Context, c *Caller, u *uri.URI, w WaitCond) (any, error)
}

// WaitCond is what a Wait waits for.
type WaitCond struct {
	// Until is a channel seq to pass (events).
	Until *uint64
	// Pattern is a regular expression a PTY screen must match.
	Pattern string
}
