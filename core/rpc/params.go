package rpc

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"reflect"
	"strings"
)

// DecodeParams decodes a request's params into v, a pointer to a struct,
// the one way every kernel method and every MCP tool of the facade reads
// its input. Absent or null params are {}. An unknown member (most often a
// typo), a member of the wrong JSON type, params that are not one JSON
// object: each is INVALID_PARAMS whose message names the member, and
// whose data.member carries it when there is one, so a caller can point at
// the field without parsing the message.
func DecodeParams(raw json.RawMessage, v any) error {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || bytes.Equal(raw, []byte("null")) {
		raw = []byte("{}")
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return paramsError(err, v)
	}
	if dec.More() {
		return Errorf(InvalidParams, "params must be one JSON object; more follows it")
	}
	return nil
}

// unknownPrefix is how encoding/json words an unknown member.
const unknownPrefix = `json: unknown field "`

func paramsError(err error, v any) *Error {
	var te *json.UnmarshalTypeError
	var se *json.SyntaxError
	var re *Error
	switch {
	case errors.As(err, &re):
		// A member's own decoder (UnmarshalJSON) said what is wrong.
		return re
	case strings.HasPrefix(err.Error(), unknownPrefix):
		name := strings.TrimSuffix(strings.TrimPrefix(err.Error(), unknownPrefix), `"`)
		msg := "unknown member " + quote(name)
		if known := Members(v); len(known) > 0 {
			msg += "; the members are " + strings.Join(known, ", ")
		} else {
			msg += "; this method takes no params"
		}
		return memberError(name, msg)
	case errors.As(err, &te) && te.Field != "":
		return memberError(te.Field, "member "+quote(te.Field)+" must be "+article(JSONKind(te.Type))+", not "+article(te.Value))
	case errors.As(err, &te):
		return Errorf(InvalidParams, "params must be a JSON object, not %s", article(te.Value))
	case errors.As(err, &se), errors.Is(err, io.ErrUnexpectedEOF):
		return Errorf(InvalidParams, "params are not valid JSON: %v", err)
	}
	return Errorf(InvalidParams, "bad params: %v", err)
}

func memberError(name, msg string) *Error {
	return &Error{Code: InvalidParams, Message: msg, Data: map[string]any{"member": name}}
}

func quote(s string) string { return `"` + s + `"` }

func article(kind string) string {
	switch kind {
	case "array", "integer", "object":
		return "an " + kind
	case "":
		return "a value"
	}
	return "a " + kind
}

// JSONKind names the JSON type a Go type decodes from: string, boolean,
// integer, number, array or object; "" for any (json.RawMessage, any).
func JSONKind(t reflect.Type) string {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if t == reflect.TypeFor[json.RawMessage]() || reflect.PointerTo(t).Implements(reflect.TypeFor[json.Unmarshaler]()) {
		return ""
	}
	switch t.Kind() {
	case reflect.String:
		return "string"
	case reflect.Bool:
		return "boolean"
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return "integer"
	case reflect.Float32, reflect.Float64:
		return "number"
	case reflect.Slice:
		if t.Elem().Kind() == reflect.Uint8 {
			return "string" // base64
		}
		return "array"
	case reflect.Array:
		return "array"
	case reflect.Map, reflect.Struct:
		return "object"
	}
	return ""
}

// Members lists the JSON member names of the struct v points to, in
// declaration order (embedded structs' members in place).
func Members(v any) []string {
	t := reflect.TypeOf(v)
	if t == nil {
		return nil
	}
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if t.Kind() != reflect.Struct {
		return nil
	}
	var out []string
	for i := range t.NumField() {
		f := t.Field(i)
		if !f.IsExported() && !f.Anonymous {
			continue
		}
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		if name == "-" {
			continue
		}
		if f.Anonymous && name == "" {
			out = append(out, Members(reflect.New(f.Type).Interface())...)
			continue
		}
		if name == "" {
			name = f.Name
		}
		out = append(out, name)
	}
	return out
}

// NoParams checks the params of a method that takes none: absent, null or
// {}; any member is refused by name.
func NoParams(raw json.RawMessage) error { return DecodeParams(raw, &struct{}{}) }

// MemberErrorf is INVALID_PARAMS about one member: the error a member's
// own UnmarshalJSON returns so that DecodeParams passes it on by name.
func MemberErrorf(member, format string, args ...any) *Error {
	return memberError(member, fmt.Sprintf(format, args...))
}

// ExplainParams puts a method's own words around an INVALID_PARAMS
// error's message (e.g. "pty.open params: " before, the usage after),
// keeping its code and data; any other error passes unchanged.
func ExplainParams(err error, before, after string) error {
	var re *Error
	if !errors.As(err, &re) || re.Code != InvalidParams {
		return err
	}
	return &Error{Code: re.Code, Message: before + re.Message + after, Data: re.Data}
}
