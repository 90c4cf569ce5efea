package sdk

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/shoal-sh/shoal/sdk/abi"
)

// ABI is the name of the host–guest contract this package implements. The
// module exports a function of this name as its marker; the kernel refuses
// a module that does not.
const ABI = abi.Version

// Template is one URI template a provider advertises (RFC 6570), e.g.
// "shoal://kv/{key}{?path,slice,format}". MimeType defaults to
// application/json.
type Template struct {
	URITemplate string `json:"uriTemplate"`
	Name        string `json:"name"`
	Description string `json:"description,omitempty"`
	MimeType    string `json:"mimeType,omitempty"`
}

// Resource is one listed resource. MimeType defaults to application/json.
type Resource struct {
	URI         string `json:"uri"`
	Name        string `json:"name"`
	Description string `json:"description,omitempty"`
	MimeType    string `json:"mimeType,omitempty"`
}

// Caller says who reads: the session and principal the kernel bound to the
// connection. A provider may use it to scope what it shows.
type Caller struct {
	Session   string `json:"session"`
	Principal string `json:"principal"`
}

// Param is one decoded query parameter.
type Param struct {
	Key   string `json:"key"`
	Value string `json:"value"`
}

// ReadRequest is one read of a shoal://{family}/… URI, already parsed and
// percent-decoded by the kernel. Query holds every parameter, including
// path, slice, format and elide: the kernel applies those to what Read
// returns, so Read must not apply them itself.
type ReadRequest struct {
	URI      string   `json:"uri"`
	Family   string   `json:"family"`
	Segments []string `json:"segments"`
	Query    []Param  `json:"query"`
	Caller   Caller   `json:"caller"`
}

// Param returns the first value of a query parameter and whether it was
// given.
func (r *ReadRequest) Param(key string) (string, bool) {
	for _, p := range r.Query {
		if p.Key == key {
			return p.Value, true
		}
	}
	return "", false
}

// ListRequest asks a provider for its live entries.
type ListRequest struct {
	Caller Caller `json:"caller"`
}

// Provider describes a provider plugin: the family it serves and how.
type Provider struct {
	// Family is the URI host part, e.g. "kv" for shoal://kv/…. It must
	// equal the manifest's provider.family.
	Family string
	// Templates are advertised in resources/templates/list, in order.
	Templates []Template
	// Roots are listed first in resources/list.
	Roots []Resource
	// Read resolves one URI. Return a [Value] for typed content, or any
	// other Go value, which is encoded with encoding/json and served as a
	// plain JSON record. An error made with [Errorf] keeps its code
	// ([NotFound], [BadURI], [InvalidParams]); any other error is a
	// plugin failure.
	Read func(req *ReadRequest) (any, error)
	// List, when set, returns live entries listed after Roots.
	List func(req *ListRequest) ([]Resource, error)
}

// Validator describes a validator plugin for user.* event channels.
type Validator struct {
	// Channels are the channel names or patterns ending in ".*" it checks,
	// e.g. "user.build.v1" or "user.ci.*". They must equal the manifest's
	// validator.channels.
	Channels []string
	// Schema is an optional JSON Schema. The kernel compiles it once and
	// checks each payload natively before calling Validate, so Validate
	// only sees payloads that already match it.
	Schema json.RawMessage
	// Validate accepts a payload by returning nil. Any error rejects it
	// and its message is the reason the publisher sees; an error made with
	// Errorf(Failed, …) reports a failure of the validator instead.
	Validate func(channel string, payload json.RawMessage) error
}

// Code classifies an error returned to the kernel.
type Code string

// Codes a plugin can return. The kernel maps the first four to its own
// error codes of the same name; every other code, and a panic, is a
// PLUGIN_ERROR.
const (
	NotFound      Code = abi.NotFound      // no such resource
	BadURI        Code = abi.BadURI        // the URI's segments make no sense for this family
	InvalidParams Code = abi.InvalidParams // a query parameter is missing or malformed
	Rejected      Code = abi.Rejected      // a validator refuses the payload
	Failed        Code = abi.Failed        // the plugin itself failed
	codePanic     Code = abi.Panic         // an export panicked; the SDK recovered it
)

// Error is an error with a [Code].
type Error struct {
	Code    Code   `json:"code"`
	Message string `json:"message"`
}

func (e *Error) Error() string { return string(e.Code) + ": " + e.Message }

// Errorf builds an *Error. Write the message for the model reading it:
// say what was wrong and what to do next.
func Errorf(code Code, format string, args ...any) error {
	return &Error{Code: code, Message: fmt.Sprintf(format, args...)}
}

// registered is the one provider or validator this module serves. It is
// written by init functions only, which run before any export is called.
var registered struct {
	provider  *Provider
	validator *Validator
}

// RegisterProvider makes p the module's provider. Call it from init; a
// module serves exactly one provider or one validator, and registering a
// second panics (the kernel then refuses to load the module and shows the
// panic message).
func RegisterProvider(p Provider) {
	mustBeFirst("RegisterProvider")
	if p.Family == "" || p.Read == nil {
		panic("sdk.RegisterProvider: Family and Read are required")
	}
	registered.provider = &p
}

// RegisterValidator makes v the module's validator. Call it from init; see
// [RegisterProvider].
func RegisterValidator(v Validator) {
	mustBeFirst("RegisterValidator")
	if len(v.Channels) == 0 || v.Validate == nil {
		panic("sdk.RegisterValidator: Channels and Validate are required")
	}
	if len(v.Schema) > 0 && !json.Valid(v.Schema) {
		panic("sdk.RegisterValidator: Schema is not valid JSON")
	}
	registered.validator = &v
}

func mustBeFirst(fn string) {
	if registered.provider != nil || registered.validator != nil {
		panic("sdk." + fn + ": this module already registered a provider or validator; a module serves exactly one")
	}
}

// description is the answer of shoal_describe.
type description struct {
	ABI       string          `json:"abi"`
	Kind      string          `json:"kind"`
	Family    string          `json:"family,omitempty"`
	Templates []Template      `json:"templates,omitempty"`
	Roots     []Resource      `json:"roots,omitempty"`
	List      bool            `json:"list,omitempty"`
	Channels  []string        `json:"channels,omitempty"`
	Schema    json.RawMessage `json:"schema,omitempty"`
}

// The handlers below hold the export logic so that it can be tested
// natively; abi_wasip1.go only moves bytes across the module boundary.
// Each returns a complete response envelope and never panics.

// recoverInto, deferred by a handler, turns a panic into the handler's
// answer: a panic envelope instead of a trapped module.
func recoverInto(resp *[]byte) {
	if r := recover(); r != nil {
		*resp = panicEnvelope(r)
	}
}

func handleDescribe() (resp []byte) {
	defer recoverInto(&resp)
	switch {
	case registered.provider != nil:
		p := registered.provider
		return recordEnvelope(description{
			ABI: ABI, Kind: "provider", Family: p.Family,
			Templates: p.Templates, Roots: p.Roots, List: p.List != nil,
		})
	case registered.validator != nil:
		v := registered.validator
		return recordEnvelope(description{
			ABI: ABI, Kind: "validator", Channels: v.Channels, Schema: v.Schema,
		})
	}
	return errorEnvelope(Failed, "no provider or validator registered: call sdk.RegisterProvider or sdk.RegisterValidator from an init function")
}

// valueAnswer is the buffer of the last typed-value answer, reused by the
// next read: the host copies an answer out before it calls again (the
// ABI keeps an answer only until the next call), and an allocation in
// a guest costs a microsecond or two. One larger than retainedAnswer is
// not kept.
var valueAnswer []byte

const retainedAnswer = 64 << 10

func handleRead(req []byte) (resp []byte) {
	defer recoverInto(&resp)
	p := registered.provider
	if p == nil {
		return errorEnvelope(Failed, "this module registered no provider")
	}
	r, err := decodeRead(req)
	if err != nil {
		return errorEnvelope(Failed, "malformed read request: "+err.Error())
	}
	out, err := p.Read(r)
	if err != nil {
		return errorFrom(err, Failed)
	}
	if v, ok := out.(Value); ok {
		b := append(v.appendTo(append(valueAnswer[:0], abi.ValuePrefix...)), '}')
		if cap(b) <= retainedAnswer {
			valueAnswer = b
		}
		return b
	}
	return recordEnvelope(out)
}

func handleList(req []byte) (resp []byte) {
	defer recoverInto(&resp)
	p := registered.provider
	if p == nil {
		return errorEnvelope(Failed, "this module registered no provider")
	}
	if p.List == nil {
		return recordEnvelope([]Resource{})
	}
	r, err := decodeList(req)
	if err != nil {
		return errorEnvelope(Failed, "malformed list request: "+err.Error())
	}
	res, err := p.List(r)
	if err != nil {
		return errorFrom(err, Failed)
	}
	if res == nil {
		res = []Resource{}
	}
	return recordEnvelope(res)
}

var okEnvelope = []byte(abi.OKAnswer)

func handleValidate(req []byte) (resp []byte) {
	defer recoverInto(&resp)
	v := registered.validator
	if v == nil {
		return errorEnvelope(Failed, "this module registered no validator")
	}
	channel, payload, err := decodeValidate(req)
	if err != nil {
		return errorEnvelope(Failed, "malformed validate request: "+err.Error())
	}
	if err := v.Validate(channel, payload); err != nil {
		return errorFrom(err, Rejected)
	}
	return okEnvelope
}

func recordEnvelope(x any) []byte {
	rec, err := json.Marshal(x)
	if err != nil {
		return errorEnvelope(Failed, "cannot encode the answer as JSON: "+err.Error())
	}
	b := make([]byte, 0, len(rec)+22)
	b = append(b, abi.RecordPrefix...)
	b = append(b, rec...)
	return append(b, '}')
}

func errorFrom(err error, fallback Code) []byte {
	var e *Error
	if errors.As(err, &e) && e.Code != "" && e.Code != codePanic {
		return errorEnvelope(e.Code, e.Message)
	}
	return errorEnvelope(fallback, err.Error())
}

func errorEnvelope(code Code, msg string) []byte {
	return appendErrorEnvelope(make([]byte, 0, len(msg)+64), code, msg)
}

// panicEnvelope turns a panic in an export into a PANIC answer: a trap
// would leave the host no reason to report. The kernel retires the
// instance anyway, since the panic may have left its state half-updated.
// (Each export recovers in a func literal of its own: a deferred call
// given a pointer to the result would move the result to the heap.)
func panicEnvelope(r any) []byte {
	msg := fmt.Sprint(r)
	if len(msg) > 4096 {
		msg = strings.ToValidUTF8(msg[:4096], "") + "…"
	}
	return errorEnvelope(codePanic, msg)
}
