package main

import (
	"context"
	"encoding/json"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/mark3labs/mcp-go/mcp"

	"github.com/shoal-sh/shoal/core/rpc"
)

// schemaProps reads a tool's input schema: each property's JSON types.
func schemaProps(t *testing.T, input string) map[string][]string {
	t.Helper()
	var s struct {
		Properties map[string]struct {
			Type json.RawMessage `json:"type"`
		} `json:"properties"`
		AdditionalProperties *bool `json:"additionalProperties"`
	}
	if err := json.Unmarshal([]byte(input), &s); err != nil {
		t.Fatal(err)
	}
	if s.AdditionalProperties == nil || *s.AdditionalProperties {
		t.Errorf("input schema does not say additionalProperties: false")
	}
	out := map[string][]string{}
	for name, p := range s.Properties {
		var one string
		var many []string
		switch {
		case len(p.Type) == 0:
		case json.Unmarshal(p.Type, &one) == nil:
			many = []string{one}
		default:
			if err := json.Unmarshal(p.Type, &many); err != nil {
				t.Fatalf("%s: type %s", name, p.Type)
			}
		}
		out[name] = many
	}
	return out
}

// fieldKinds is the JSON kind of each member of an arguments struct.
func fieldKinds(typ reflect.Type) map[string]string {
	out := map[string]string{}
	for i := range typ.NumField() {
		f := typ.Field(i)
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		out[name] = rpc.JSONKind(f.Type)
	}
	return out
}

// TestToolArgsAreTheSchema: every tool's arguments struct has exactly
// the members its input schema advertises, each of a JSON type the schema
// allows, so the schema and the decoder cannot drift apart.
func TestToolArgsAreTheSchema(t *testing.T) {
	var f Facade
	for _, def := range f.toolDefs() {
		t.Run(def.name, func(t *testing.T) {
			props := schemaProps(t, def.input)
			kinds := fieldKinds(def.handler.args)
			for name, kind := range kinds {
				types, ok := props[name]
				if !ok {
					t.Errorf("member %q is decoded but not in the input schema", name)
					continue
				}
				if kind != "" && len(types) > 0 && !slices.Contains(types, kind) && !(kind == "number" && slices.Contains(types, "integer")) {
					t.Errorf("member %q decodes a JSON %s; the schema says %v", name, kind, types)
				}
			}
			for name := range props {
				if _, ok := kinds[name]; !ok {
					t.Errorf("schema property %q is not a member of %v", name, def.handler.args)
				}
			}
		})
	}
}

// TestToolArgsStrict: every tool refuses an unknown argument and an
// argument of the wrong type, naming it, before anything reaches the
// kernel (the facade here has none).
func TestToolArgsStrict(t *testing.T) {
	var f Facade
	call := func(def toolDef, args map[string]any) string {
		var req mcp.CallToolRequest
		req.Params.Name = def.name
		req.Params.Arguments = args
		res, err := def.handler.fn(context.Background(), req)
		if err != nil || res == nil || !res.IsError {
			t.Fatalf("%s %v: result %+v, err %v; want a tool error", def.name, args, res, err)
		}
		return res.Content[0].(mcp.TextContent).Text
	}
	for _, def := range f.toolDefs() {
		t.Run(def.name, func(t *testing.T) {
			if text := call(def, map[string]any{"zz_unknown": 1}); !strings.Contains(text, `unknown member "zz_unknown"`) {
				t.Errorf("unknown member: %s", text)
			}
			for name, kind := range fieldKinds(def.handler.args) {
				var wrong any = "not-" + kind
				switch kind {
				case "":
					continue
				case "string":
					wrong = 7
				}
				if text := call(def, map[string]any{name: wrong}); !strings.Contains(text, `member "`+name+`" must be`) {
					t.Errorf("%s as %T: %s", name, wrong, text)
				}
			}
		})
	}
}
