package rpc

import (
	"errors"
	"fmt"
)

// Code is a kernel error code. Every error a kernel method returns carries
// exactly one code from the table below; docs/kernel.md renders the same
// table (see TestCodesDocumented).
type Code int

// The code table. JSON-RPC's own codes first, then Shoal's.
const (
	ParseError     Code = -32700 // the frame is not valid JSON
	InvalidRequest Code = -32600 // valid JSON but not a JSON-RPC 2.0 request
	MethodNotFound Code = -32601 // no such method
	InvalidParams  Code = -32602 // params missing, of the wrong type, or refused
	Internal       Code = -32603 // a kernel bug or an I/O failure; the message says which

	NotAttached     Code = -32001 // the connection has not called session.attach
	Unauthorized    Code = -32002 // wrong or missing token
	Forbidden       Code = -32003 // the principal lacks the grant or does not own the object
	NotFound        Code = -32004 // unknown ref, task, plan, session or resource
	BadPath         Code = -32005 // malformed path selector, missing field, bad index, step into a scalar
	BadURI          Code = -32006 // malformed shoal:// URI or short ref
	BadSlice        Code = -32007 // malformed slice, or start after end
	TooLarge        Code = -32008 // a raw read or a frame passes its ceiling
	PolicyRefused   Code = -32010 // the policy says ask or deny: plan it first
	PlanNotApproved Code = -32011 // plan.apply of a plan whose verdict is ask and that is not approved, or is rejected/denied
	PlanStale       Code = -32012 // a plan's targets changed since it was made
	PlanUsed        Code = -32013 // the plan was applied already
	TaskState       Code = -32014 // the task is not in a state that allows this
	Corrupt         Code = -32015 // stored data failed its integrity check and is not served
	Timeout         Code = -32016 // a wait ended before its condition held
	UnknownPTY      Code = -32022 // unknown or closed PTY id
	PluginError     Code = -32030 // a plugin call failed: trap, deadline, memory, bad answer
	Rejected        Code = -32031 // a validator refused a user.* payload
	Unavailable     Code = -32032 // the kernel is stopping or the service is not loaded

	TooManyConnections Code = -32033 // the peer's user has as many connections open as allowed
	JournalUnavailable Code = -32034 // the journal cannot be written: nothing was run
	JournalWriteFailed Code = -32035 // it ran, but its journal row could not be written
	ClusterDown        Code = -32036 // the cluster (NATS) is unreachable: shared work is refused, local work goes on

	PrincipalRefused Code = -32040 // the credential may not attach this principal
	AlreadyAttached  Code = -32041 // a second session.attach on one connection

	SandboxUnavailable Code = -32050 // the policy requires confinement and the OS cannot provide it
	Confined           Code = -32051 // the source writes outside the session's confinement: plan it
)

// CodeInfo documents one code.
type CodeInfo struct {
	Code Code
	Name string
	Doc  string
}

// Codes is the table, in order. Names are stable and part of the protocol.
var Codes = []CodeInfo{
	{ParseError, "PARSE_ERROR", "The frame is not valid JSON."},
	{InvalidRequest, "INVALID_REQUEST", "Valid JSON but not a JSON-RPC 2.0 request object."},
	{MethodNotFound, "METHOD_NOT_FOUND", "No such method; the message lists close matches."},
	{InvalidParams, "INVALID_PARAMS", "Params missing, of the wrong type, or refused (e.g. publishing to a kernel channel)."},
	{Internal, "INTERNAL", "A kernel bug or an I/O failure; the message says which."},
	{NotAttached, "NOT_ATTACHED", "The connection must call session.attach first."},
	{Unauthorized, "UNAUTHORIZED", "The token is missing or wrong."},
	{Forbidden, "FORBIDDEN", "The principal lacks the grant, or the object belongs to another session or principal."},
	{NotFound, "NOT_FOUND", "Unknown ref, task, plan, session, channel or resource."},
	{BadPath, "BAD_PATH", "Malformed path selector, missing field, bad index, or a step into a scalar."},
	{BadURI, "BAD_URI", "Malformed shoal:// URI or short ref."},
	{BadSlice, "BAD_SLICE", "Malformed slice (a..b, non-negative) or a start after the end."},
	{TooLarge, "TOO_LARGE", "A raw read or a frame passes its configured ceiling; page it with slice."},
	{PolicyRefused, "POLICY_REFUSED", "The policy verdict for this source is ask or deny: create a plan with plan.create."},
	{PlanNotApproved, "PLAN_NOT_APPROVED", "The plan needs approval, was rejected, or its verdict is deny."},
	{PlanStale, "PLAN_STALE", "A target of the plan changed since the plan was made; plan again."},
	{PlanUsed, "PLAN_USED", "The plan was applied already; plans run once."},
	{TaskState, "TASK_STATE", "The task is not in a state that allows this (e.g. cancelling a finished task)."},
	{Corrupt, "CORRUPT", "Stored data failed its integrity check and is not served."},
	{Timeout, "TIMEOUT", "A wait ended before its condition held."},
	{UnknownPTY, "UNKNOWN_PTY", "Unknown or closed PTY id."},
	{PluginError, "PLUGIN_ERROR", "A plugin call failed: trap, deadline, memory ceiling, or a malformed answer."},
	{Rejected, "REJECTED", "A validator refused a user.* payload; nothing was published."},
	{Unavailable, "UNAVAILABLE", "The kernel is stopping, or the needed service is not loaded."},
	{TooManyConnections, "TOO_MANY_CONNECTIONS", "This user has as many connections open as limits.connections_per_uid allows; close some and retry."},
	{JournalUnavailable, "JOURNAL_UNAVAILABLE", "The journal cannot be written (the message says why: disk full, damaged, closed); nothing was run."},
	{JournalWriteFailed, "JOURNAL_WRITE_FAILED", "It ran, but its journal row could not be written: do not retry blindly, check its effects."},
	{ClusterDown, "CLUSTER_UNAVAILABLE", "The cluster's NATS servers are unreachable: a shared-channel publish or a remote value is refused (nothing was published); local work goes on. Retry once `shoal status` shows the cluster connected."},
	{PrincipalRefused, "PRINCIPAL_REFUSED", "The credential may not attach this principal: the agent token attaches only agent:* principals; a person's CLI uses operator.token."},
	{AlreadyAttached, "ALREADY_ATTACHED", "The connection is attached already; one session.attach per connection: open another connection."},
	{SandboxUnavailable, "SANDBOX_UNAVAILABLE", "The policy requires OS confinement (sandbox = \"required\") and this system cannot provide it (no Landlock); nothing was run. The message says how to opt out."},
	{Confined, "OUTSIDE_SANDBOX", "The source would write outside the session's writable paths (workspace, temp dir, caches); nothing was run. Plan it: an approved plan widens the confinement for its own run."},
}

// Name returns the code's stable name, or "ERROR" for an unknown code.
func (c Code) Name() string {
	for _, ci := range Codes {
		if ci.Code == c {
			return ci.Name
		}
	}
	return "ERROR"
}

// Error is a kernel error: a code, a message a model can act on, and
// optional data. Data always includes {"name": code name} on the wire.
type Error struct {
	Code    Code   `json:"code"`
	Message string `json:"message"`
	Data    any    `json:"data,omitempty"`
}

func (e *Error) Error() string {
	return fmt.Sprintf("%s (%d): %s", e.Code.Name(), int(e.Code), e.Message)
}

// Errorf builds an *Error with a formatted message.
func Errorf(code Code, format string, args ...any) *Error {
	return &Error{Code: code, Message: fmt.Sprintf(format, args...)}
}

// AsError returns err as an *Error: itself if it wraps one, else INTERNAL
// with err's text.
func AsError(err error) *Error {
	if err == nil {
		return nil
	}
	var e *Error
	if errors.As(err, &e) {
		return e
	}
	return &Error{Code: Internal, Message: err.Error()}
}

// CodeOf returns the code of err, or Internal.
func CodeOf(err error) Code { return AsError(err).Code }
