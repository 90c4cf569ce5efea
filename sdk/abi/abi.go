// Package abi is the contract between the kernel's plugin host
// (package plugins) and the guest SDK (package sdk), written once: the
// ABI's name, the module's exports, the error codes a guest answers
// with, and the byte layouts both sides build or take apart without a
// JSON pass. docs/plugins.md describes the same contract for people.
//
// Like the sdk, it depends on nothing outside the standard library (it
// imports nothing at all), so a guest module links it at no cost.
//
// The sdk's //go:wasmexport directives must spell the export names
// literally; TestGuestExports keeps them equal to [Exports].
package abi

// Version is the name of the contract. A module proves it speaks it by
// exporting a function of this name (no parameters, no results), and its
// manifest's abi and its description's abi name it too.
const Version = "shoal_abi_v1"

// The module's exports. Every one takes and returns what the comment
// says; ptr and len are i32, an answer is an i64 packing ptr<<32 | len of
// a buffer the guest keeps alive until the host's next call.
const (
	// ExportAlloc (len) ptr: a request buffer of len bytes the host
	// writes into. Required.
	ExportAlloc = "shoal_alloc"
	// ExportFree (ptr): releases a buffer of ExportAlloc. Required.
	ExportFree = "shoal_free"
	// ExportDescribe () answer: the module's description. Required.
	ExportDescribe = "shoal_describe"
	// ExportRead (ptr, len) answer: a provider's read. Required of
	// providers.
	ExportRead = "shoal_read"
	// ExportList (ptr, len) answer: a provider's live entries. Optional.
	ExportList = "shoal_list"
	// ExportValidate (ptr, len) answer: a validator's verdict. Required of
	// validators.
	ExportValidate = "shoal_validate"
)

// Exports lists every export the SDK gives a module, the marker first.
var Exports = []string{Version, ExportAlloc, ExportFree, ExportDescribe, ExportRead, ExportList, ExportValidate}

// Reactor entry points: a Go reactor (-buildmode=c-shared) exports
// Initialize, which the host runs before any other call; a command module
// exports Start instead, and is refused.
const (
	Initialize = "_initialize"
	Start      = "_start"
)

// WASIModule is the one module a plugin may import functions from.
const WASIModule = "wasi_snapshot_preview1"

// Error codes of a guest's error answer ({"ok":false,"error":{"code",
// "message"}}). The host maps NotFound, BadURI, InvalidParams and
// Rejected to its own codes; every other code is a PLUGIN_ERROR.
const (
	NotFound      = "NOT_FOUND"      // no such resource
	BadURI        = "BAD_URI"        // the URI's segments make no sense for this family
	InvalidParams = "INVALID_PARAMS" // a query parameter is missing or malformed
	Rejected      = "REJECTED"       // a validator refuses the payload
	Failed        = "FAILED"         // the plugin itself failed
	Panic         = "PANIC"          // an export panicked; the SDK recovered it
)

// Answers. An answer is a JSON envelope: {"ok":true} alone, with a typed
// value (value, Shoal's typed JSON) or with a plain record (record), or
// an error. The SDK writes the ok forms with exactly these prefixes (and a
// closing brace), so the host can take them apart without decoding the
// whole answer; any other spelling is decoded as JSON.
const (
	OKAnswer     = `{"ok":true}`
	ValuePrefix  = `{"ok":true,"value":`
	RecordPrefix = `{"ok":true,"record":`
)

// The validate request's layout: the host sends exactly
// ValidateHead + channel + `"` + ValidatePayload + payload + `}`, the
// channel name unescaped (channel names need no escapes) and the payload
// JSON it has already checked, so a guest can split it without scanning
// the payload.
const (
	ValidateHead    = `{"channel":"`
	ValidatePayload = `,"payload":`
)
