package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"
	"github.com/santhosh-tekuri/jsonschema/v6"
)

// validated wraps a tool handler with a check of its arguments against
// the tool's input schema. A failure is a tool result with isError whose
// text names each problem and where it is ("missing property 'source'"),
// so a model can correct the call.
func validated(name, schema string, h server.ToolHandlerFunc) server.ToolHandlerFunc {
	url := "mem:///shoal-mcp/" + name + ".json"
	doc, err := jsonschema.UnmarshalJSON(strings.NewReader(schema))
	if err != nil {
		panic(fmt.Sprintf("tool %s: input schema: %v", name, err))
	}
	c := jsonschema.NewCompiler()
	if err := c.AddResource(url, doc); err != nil {
		panic(fmt.Sprintf("tool %s: input schema: %v", name, err))
	}
	sch, err := c.Compile(url)
	if err != nil {
		panic(fmt.Sprintf("tool %s: input schema: %v", name, err))
	}
	return func(ctx context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		raw, err := json.Marshal(req.Params.Arguments)
		if err != nil {
			return mcp.NewToolResultError(fmt.Sprintf("bad arguments for %s: %v", name, err)), nil
		}
		if req.Params.Arguments == nil {
			raw = []byte("{}")
		}
		args, err := jsonschema.UnmarshalJSON(bytes.NewReader(raw))
		if err != nil {
			return mcp.NewToolResultError(fmt.Sprintf("bad arguments for %s: %v", name, err)), nil
		}
		if err := sch.Validate(args); err != nil {
			return mcp.NewToolResultError(fmt.Sprintf("bad arguments for %s: %s. See the tool's input schema.", name, schemaProblems(err))), nil
		}
		return h(ctx, req)
	}
}

// schemaProblems renders a validation error as "at /x: message" items.
func schemaProblems(err error) string {
	verr, ok := err.(*jsonschema.ValidationError)
	if !ok {
		return err.Error()
	}
	var parts []string
	var walk func(u jsonschema.OutputUnit)
	walk = func(u jsonschema.OutputUnit) {
		if u.Error != nil {
			where := u.InstanceLocation
			if where == "" {
				where = "the arguments"
			} else {
				where = "argument " + strings.TrimPrefix(where, "/")
			}
			parts = append(parts, where+": "+u.Error.String())
		}
		for _, e := range u.Errors {
			walk(e)
		}
	}
	walk(*verr.BasicOutput())
	if len(parts) == 0 {
		return verr.Error()
	}
	return strings.Join(parts, "; ")
}
