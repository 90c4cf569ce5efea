package plugins

import (
	"reflect"
	"strings"
	"testing"

	"github.com/shoal-sh/shoal/sdk"
)

// jsonShape describes the JSON members of a struct type, recursively:
// "name:kind" per member, nested structs and slices of structs spelled
// out. The omitempty option is left out: it changes what is written, not
// what is read.
func jsonShape(t reflect.Type) string {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	switch t.Kind() {
	case reflect.Struct:
		var parts []string
		for i := range t.NumField() {
			f := t.Field(i)
			name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
			if name == "-" || !f.IsExported() {
				continue
			}
			if name == "" {
				name = f.Name
			}
			parts = append(parts, name+":"+jsonShape(f.Type))
		}
		return "{" + strings.Join(parts, " ") + "}"
	case reflect.Slice:
		if t.Elem().Kind() == reflect.Uint8 && t.Name() != "" {
			return t.Name() // json.RawMessage
		}
		return "[" + jsonShape(t.Elem()) + "]"
	}
	return t.Kind().String()
}

// TestABIShapes: the requests the host encodes and the descriptions it
// decodes have the members the sdk decodes and encodes, with the same
// types. The constants of the contract are shared through package
// sdk/abi; these struct types are each side's own (the host's are
// unexported, the sdk's are its API), so this test keeps them equal. (The
// description as a whole is checked by loading the example plugins.)
func TestABIShapes(t *testing.T) {
	for _, tc := range []struct {
		what      string
		host, sdk any
	}{
		{"read request", readRequest{}, sdk.ReadRequest{}},
		{"list request", struct {
			Caller caller `json:"caller"`
		}{}, sdk.ListRequest{}},
		{"described template", descTemplate{}, sdk.Template{}},
		{"described or listed resource", descResource{}, sdk.Resource{}},
	} {
		host, guest := jsonShape(reflect.TypeOf(tc.host)), jsonShape(reflect.TypeOf(tc.sdk))
		if host != guest {
			t.Errorf("%s: the host speaks %s, the sdk %s", tc.what, host, guest)
		}
	}
}
