package main

import (
	"encoding/json"
	"os"
	"slices"
	"strings"
	"testing"
)

// TestToolsDocumented walks docs/extending.md's checklist for a new MCP
// tool over every tool of toolDefs: its name is in toolNames (which
// TestHandshake compares with tools/list), docs/mcp.md's Tools section
// shows it, its input schema is an object schema that refuses unknown
// members and names every required member among its properties, and it
// has an output schema.
func TestToolsDocumented(t *testing.T) {
	doc, err := os.ReadFile("../../docs/mcp.md")
	if err != nil {
		t.Fatal(err)
	}
	tools := string(doc)
	start := strings.Index(tools, "\n## Tools\n")
	if start < 0 {
		t.Fatal("docs/mcp.md has no ## Tools section")
	}
	tools = tools[start+1:]
	if end := strings.Index(tools[1:], "\n## "); end >= 0 {
		tools = tools[:end+1]
	}
	defs := (*Facade)(nil).toolDefs()
	var names []string
	for _, d := range defs {
		names = append(names, d.name)
		if !slices.Contains(toolNames, d.name) {
			t.Errorf("%s is not in toolNames (tools_test.go)", d.name)
		}
		if !strings.Contains(tools, "`"+d.name) {
			t.Errorf("docs/mcp.md's Tools section does not show %s", d.name)
		}
		var in struct {
			Type                 string                     `json:"type"`
			Properties           map[string]json.RawMessage `json:"properties"`
			Required             []string                   `json:"required"`
			AdditionalProperties *bool                      `json:"additionalProperties"`
		}
		if err := json.Unmarshal([]byte(d.input), &in); err != nil {
			t.Errorf("%s: input schema: %v", d.name, err)
			continue
		}
		if in.Type != "object" || in.AdditionalProperties == nil || *in.AdditionalProperties {
			t.Errorf("%s: the input schema must be an object with additionalProperties false", d.name)
		}
		for _, r := range in.Required {
			if _, ok := in.Properties[r]; !ok {
				t.Errorf("%s: required member %s is not among the properties", d.name, r)
			}
		}
		if !json.Valid([]byte(d.output)) || d.output == "" {
			t.Errorf("%s: no valid output schema", d.name)
		}
		if d.description == "" {
			t.Errorf("%s has no description", d.name)
		}
	}
	for _, n := range toolNames {
		if !slices.Contains(names, n) {
			t.Errorf("toolNames lists %s, which toolDefs does not define", n)
		}
	}
}
