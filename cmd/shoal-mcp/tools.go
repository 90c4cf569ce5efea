package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"

	"github.com/shoal-sh/shoal/core/render"
	"github.com/shoal-sh/shoal/core/rpc"
	"github.com/shoal-sh/shoal/core/wire"
)

// defaultExecTimeout applies when shoal_exec names no timeout_ms. MCP
// clients give up on a request after a while (often 60 s); returning a
// task ref before that beats a client-side timeout that loses the run.
const defaultExecTimeout = 45 * time.Second

// toolDef is one tool: its advertised shape and its handler.
type toolDef struct {
	name, description string
	input, output     string
	readOnly          bool
	destructive       bool
	handler           toolHandler
}

func (f *Facade) addTools() {
	for _, t := range f.toolDefs() {
		tool := mcp.NewToolWithRawSchema(t.name, t.description, json.RawMessage(t.input))
		tool.RawOutputSchema = json.RawMessage(t.output)
		tool.Annotations = mcp.ToolAnnotation{
			ReadOnlyHint:    mcp.ToBoolPtr(t.readOnly),
			DestructiveHint: mcp.ToBoolPtr(t.destructive),
			IdempotentHint:  mcp.ToBoolPtr(t.readOnly),
			OpenWorldHint:   mcp.ToBoolPtr(!t.readOnly),
		}
		f.mcp.AddTool(tool, validated(t.name, t.input, t.handler.fn))
	}
}

// Schemas shared by several tools.
const (
	execOutput = `{
  "type": "object",
  "properties": {
    "ref": {"type": "string", "description": "out:N, the transcript entry that keeps the complete value"},
    "uri": {"type": "string", "description": "shoal://out/N, the same entry as a resource"},
    "ok": {"type": ["boolean", "null"], "description": "true when the run succeeded; null while it runs as a task"},
    "exit": {"type": ["integer", "null"], "description": "exit status; null while it runs as a task"},
    "task": {"type": "string", "description": "task:N when the run continues in the background"},
    "task_uri": {"type": "string", "description": "shoal://task/N"},
    "state": {"type": "string", "enum": ["running"], "description": "present while the run continues as a task"},
    "ms": {"type": "number", "description": "how long it ran, in milliseconds"},
    "effects": {"type": "array", "items": {"type": "string"}, "description": "what the run did: fs.read, fs.write, proc.spawn, net, …"},
    "stdout": {"type": "string", "description": "a command's standard output (bounded; see cut)"},
    "stderr": {"type": "string", "description": "a command's standard error (bounded; see cut)"},
    "preview": {"type": "string", "description": "a builtin's value rendered as text (bounded; see cut)"},
    "value": {"description": "the typed-JSON preview, only with typed: true"},
    "cut": {"type": "array", "items": {"type": "string"}, "description": "what the result leaves out"},
    "next": {"type": "string", "description": "the call that shows what was left out, or waits for a running task"},
    "val_ref": {"type": "string", "description": "val:blake3:<hex> when the value lives in the content store"},
    "marks": {"type": "array", "items": {"type": "string"}},
    "confined": {"type": "object", "description": "present when the OS confinement refused the run something: the paths and what to do", "properties": {"denied": {"type": "array", "items": {"type": "string"}}, "hint": {"type": "string"}}}
  },
  "required": ["ref", "uri", "ok", "exit"]
}`
	screenOutput = `{
  "type": "object",
  "properties": {
    "pty": {"type": "string", "description": "pty:N"},
    "uri": {"type": "string", "description": "shoal://pty/N"},
    "command": {"type": "string"},
    "lines": {"type": "array", "items": {"type": "string"}, "description": "one string per screen row"},
    "cursor": {"type": "object"},
    "cols": {"type": "integer"},
    "rows": {"type": "integer"},
    "alive": {"type": "boolean"},
    "exit": {"type": ["integer", "null"]},
    "change": {"type": "integer", "description": "grows whenever the screen changed"}
  },
  "required": ["pty"]
}`
	ptyArg = `"pty": {"type": "string", "description": "The terminal's id as shoal_pty_open returned it, e.g. \"pty:3\"."}`
)

// toolDefs lists every tool in tools/list order: running shell source,
// interactive terminals, then tasks.
func (f *Facade) toolDefs() []toolDef {
	return slices.Concat(f.execToolDefs(), f.ptyToolDefs(), f.taskToolDefs())
}

// execToolDefs are the tools that run, read and plan shell source.
func (f *Facade) execToolDefs() []toolDef {
	return []toolDef{
		{
			name: "shoal_exec",
			description: `Run shell source (bash syntax) in the persistent Shoal session. The working directory, environment, variables and functions carry over between calls. Returns a short preview and a ref (out:N) that keeps the complete value: to see more of a big result, never run the command again; call shoal_get on the ref with grep (search), path/slice (slice "-20.." is the tail), or feed the stored output to new commands with the out builtin: "out 17 | grep -n FAIL | head", "out 17 .stderr | tail -3".

A command that exits non-zero is a normal result with ok:false and its exit status. Past timeout_ms (default 45000) the call returns with task:N while the run continues: shoal_wait {"target":"task:N"} waits for it, then shoal_get {"target":"out:N"} reads the value. background:true returns the task at once.

Sources the policy marks ask or deny (recursive deletes, installs, sudo, …) are refused: use shoal_plan, then shoal_apply.`,
			input: `{
  "type": "object",
  "properties": {
    "source": {"type": "string", "description": "Shell source, e.g. \"ls -la\", \"go test ./... 2>&1 | tail -20\", \"open package.json | jq .scripts\"."},
    "timeout_ms": {"type": "integer", "minimum": 1, "description": "Milliseconds to wait before returning a task ref instead (the run is not killed). Default 45000."},
    "background": {"type": "boolean", "description": "Start as a task and return immediately."},
    "typed": {"type": "boolean", "description": "Also return the typed-JSON preview of the value (for programs; models rarely need it)."}
  },
  "required": ["source"],
  "additionalProperties": false
}`,
			output:      execOutput,
			destructive: true,
			handler:     tool(f.toolExec),
		},
		{
			name: "shoal_get",
			description: `Read a value or record by ref or URI without re-running anything: out:17 (an execution's value), task:9, val:blake3:<hex>, plan:<hex>, pty:3, or any shoal:// URI (shoal://out/17, shoal://task/9/out, shoal://journal?head=git&limit=20, shoal://events/journal?since=81, shoal://session/cwd).

Big values come back elided with a note saying what was cut. Drill down instead of re-running: path selects inside the value (.name, ."a b", [3], [-1], chained like .rows[0].name), then slice pages it (0..50, 50..100, -20.. for the last twenty; items of a list, rows of a table, characters of a string). grep searches server-side: {"target":"out:17","path":".stdout","grep":"FAIL","context":2} returns the matching lines with their numbers and the total count; with grep, slice pages the matches (grep "^" and slice "-3.." are the last three lines). elide sets a display budget such as {"max_rows": 20}.`,
			input: `{
  "type": "object",
  "properties": {
    "target": {"type": "string", "description": "A short ref (out:17, task:9, val:blake3:<hex>, plan:<hex>, pty:3) or a shoal:// URI."},
    "path": {"type": "string", "description": "Selector applied first: .field, .\"quoted field\", [index], [-1] from the end, chained (.rows[0].name). No expressions."},
    "slice": {"type": "string", "pattern": "^-?[0-9]+\\.\\.(-?[0-9]+)?$", "description": "a..b, end exclusive, applied after path: 0..100, 100.. (to the end); a negative bound counts from the end: -20.. is the last twenty. With grep it pages the matches."},
    "grep": {"type": "string", "description": "Regular expression (RE2) searched server-side in the value path reached: a string or bytes line by line, a list by item, a table by row. Returns the matching lines with their numbers and the total count. grep \"^\" with slice \"-3..\" is the last three lines."},
    "context": {"type": "integer", "minimum": 0, "maximum": 20, "description": "With grep: lines shown before and after each match."},
    "typed": {"type": "boolean", "description": "Return the value in Shoal's typed JSON ({\"$\":\"int\",\"v\":3}) instead of plain JSON."},
    "elide": {"type": ["object", "string"], "description": "Display budget, e.g. {\"max_rows\": 20, \"max_items\": 50, \"max_string\": 2000, \"max_depth\": 4}."}
  },
  "required": ["target"],
  "additionalProperties": false
}`,
			output: `{
  "type": "object",
  "properties": {
    "uri": {"type": "string", "description": "the URI that was read"},
    "ref": {"type": "string"},
    "mimeType": {"type": "string"},
    "value": {"description": "the value or record read, as plain JSON (a table as {cols, rows}, bytes as {base64}); typed JSON with a \"$\" tag when typed is true"},
    "elided": {"type": "boolean", "description": "true when the value was cut to fit; page with path/slice"},
    "cut": {"type": "array", "items": {"type": "string"}, "description": "what was left out"},
    "next": {"type": "string", "description": "the call that shows what was left out"},
    "output": {"type": "object", "description": "for shoal://task/N/stdout?since=… reads: state of the task, next (the since of the following read), size so far; from and skipped when the bytes start later than asked (the middle of a long output is not kept)"},
    "marks": {"type": "array", "items": {"type": "string"}}
  },
  "required": ["uri", "value"]
}`,
			readOnly: true,
			handler:  tool(f.toolGet),
		},
		{
			name:        "shoal_plan",
			description: `Analyse shell source without running it: the effects it would have (files written or deleted, processes, network), whether it can be undone, estimates, and the policy verdict (allow, ask, deny) with its approval state. Use it before anything destructive, and whenever shoal_exec was refused by policy. Returns a plan ref (plan:<hex>) for shoal_apply. A plan whose verdict is ask runs only after a human approves it, in the host when it can show a form, else with the shoal command shoal_plan's result names.`,
			input: `{
  "type": "object",
  "properties": {
    "source": {"type": "string", "description": "Shell source to analyse, e.g. \"rm -rf build/\"."}
  },
  "required": ["source"],
  "additionalProperties": false
}`,
			output: `{
  "type": "object",
  "properties": {
    "ref": {"type": "string", "description": "plan:<hex>, for shoal_apply"},
    "uri": {"type": "string"},
    "effects": {"type": "array"},
    "reversible": {"type": "boolean"},
    "verdict": {"type": "string", "enum": ["allow", "ask", "deny"]},
    "approval": {"type": "string"},
    "next": {"type": "string", "description": "what to do with the plan next"}
  },
  "required": ["ref", "effects", "reversible", "verdict", "approval"]
}`,
			readOnly: true,
			handler:  tool(f.toolPlan),
		},
		{
			name:        "shoal_apply",
			description: `Run a plan made by shoal_plan, once. Works when its verdict is allow, or ask and a human approved it; otherwise it says what is missing. Returns the same result as shoal_exec (ref out:N, ok, exit, preview).`,
			input: `{
  "type": "object",
  "properties": {
    "plan": {"type": "string", "description": "The plan ref, e.g. \"plan:3f9a1c\"."}
  },
  "required": ["plan"],
  "additionalProperties": false
}`,
			output:      execOutput,
			destructive: true,
			handler:     tool(f.toolApply),
		},
	}
}

// ptyToolDefs are the tools of interactive terminals.
func (f *Facade) ptyToolDefs() []toolDef {
	return []toolDef{
		{
			name:        "shoal_pty_open",
			description: `Start an interactive program (a REPL, an editor, top, ssh, a TUI) in a terminal of its own and return its first screen. The terminal (pty:N) stays open between calls: type with shoal_pty_write, look with shoal_pty_read, end with shoal_pty_close. For ordinary commands use shoal_exec instead.`,
			input: `{
  "type": "object",
  "properties": {
    "command": {"type": "string", "description": "Shell command to run in the terminal, e.g. \"python3\" or \"htop\"."},
    "cols": {"type": "integer", "minimum": 2, "maximum": 1000, "default": 120, "description": "Width in columns (default 120)."},
    "rows": {"type": "integer", "minimum": 2, "maximum": 500, "default": 40, "description": "Height in rows (default 40)."}
  },
  "required": ["command"],
  "additionalProperties": false
}`,
			output:      screenOutput,
			destructive: true,
			handler:     tool(f.toolPTYOpen),
		},
		{
			name:        "shoal_pty_write",
			description: `Type into a terminal opened with shoal_pty_open and return the screen after the program reacted. input is sent as is: end a line with "\n" to press Enter. keys sends named keys after the input, e.g. ["Enter"], ["Ctrl-C"], ["Up", "Enter"], ["Esc", ":", "q", "Enter"].`,
			input: `{
  "type": "object",
  "properties": {
    ` + ptyArg + `,
    "input": {"type": "string", "description": "Text to type, e.g. \"print(2+2)\\n\". May be empty when keys are given."},
    "keys": {"type": "array", "items": {"type": "string"}, "description": "Named keys sent after input: Enter, Tab, Esc, Backspace, Up, Down, Left, Right, Home, End, PageUp, PageDown, Ctrl-C, Ctrl-D, …"}
  },
  "required": ["pty", "input"],
  "additionalProperties": false
}`,
			output:      screenOutput,
			destructive: true,
			handler:     tool(f.toolPTYWrite),
		},
		{
			name:        "shoal_pty_read",
			description: `Show a terminal's current screen: its lines, cursor, size, and whether the program is still alive (with its exit status once it ended). To wait until the screen shows something, use shoal_wait with a pattern instead of reading in a loop.`,
			input: `{
  "type": "object",
  "properties": {` + ptyArg + `},
  "required": ["pty"],
  "additionalProperties": false
}`,
			output:   screenOutput,
			readOnly: true,
			handler:  tool(f.toolPTYRead),
		},
		{
			name:        "shoal_pty_list",
			description: `List this session's terminals (pty:N) with their commands, sizes and whether they are alive.`,
			input:       `{"type": "object", "properties": {}, "additionalProperties": false}`,
			output: `{
  "type": "object",
  "properties": {"ptys": {"type": "array", "items": {"type": "object"}}},
  "required": ["ptys"]
}`,
			readOnly: true,
			handler:  tool(f.toolPTYList),
		},
		{
			name:        "shoal_pty_close",
			description: `Close a terminal: its program (and everything it started) is ended. Returns the exit status.`,
			input: `{
  "type": "object",
  "properties": {` + ptyArg + `},
  "required": ["pty"],
  "additionalProperties": false
}`,
			output: `{
  "type": "object",
  "properties": {
    "pty": {"type": "string"},
    "closed": {"type": "boolean"},
    "exit": {"type": ["integer", "null"]}
  },
  "required": ["pty"]
}`,
			destructive: true,
			handler:     tool(f.toolPTYClose),
		},
	}
}

// taskToolDefs are the tools that stop and wait for tasks.
func (f *Facade) taskToolDefs() []toolDef {
	return []toolDef{
		{
			name:        "shoal_cancel",
			description: `Stop a task: target "task:9" (or shoal://task/9). Its whole process group is ended (SIGTERM, then SIGKILL after a grace) and the task ends as cancelled; what it printed so far stays readable (shoal_get {"target":"shoal://task/9/stdout"}). A running shoal_exec that has not become a task is stopped by cancelling the call itself (the host's stop button, notifications/cancelled).`,
			input: `{
  "type": "object",
  "properties": {
    "target": {"type": "string", "description": "task:N or shoal://task/N, as shoal_exec returned it."}
  },
  "required": ["target"],
  "additionalProperties": false
}`,
			output: `{
  "type": "object",
  "properties": {
    "task": {"type": "string"},
    "state": {"type": "string", "enum": ["running", "completed", "failed", "cancelled"]},
    "exit": {"type": ["integer", "null"]},
    "ref": {"type": "string", "description": "out:N holding what the task produced"},
    "error": {"type": "string"}
  },
  "required": ["task", "state"]
}`,
			destructive: true,
			handler:     tool(f.toolCancel),
		},
		{
			name:        "shoal_wait",
			description: `Block until something happens, instead of polling: a task ends (target "task:9" or "shoal://task/9"), an event channel passes a sequence number (target "shoal://events/user.build" with until: 41), or a terminal's screen matches a regular expression (target "pty:3" with pattern: "\\$ $"). Returns satisfied:true, or timed_out:true after timeout_ms — then call it again to keep waiting. Keep timeout_ms below your client's request timeout (often 60000).`,
			input: `{
  "type": "object",
  "properties": {
    "target": {"type": "string", "description": "task:N, shoal://task/N, shoal://events/{channel}, or pty:N."},
    "until": {"type": "integer", "minimum": 0, "description": "For an events channel: wait until an event with a seq greater than or equal to this exists."},
    "pattern": {"type": "string", "description": "For a terminal: a regular expression (RE2) the screen text must match."},
    "timeout_ms": {"type": "integer", "minimum": 1, "maximum": 600000, "description": "How long to wait at most."}
  },
  "required": ["target", "timeout_ms"],
  "additionalProperties": false
}`,
			output: `{
  "type": "object",
  "properties": {
    "target": {"type": "string"},
    "satisfied": {"type": "boolean"},
    "timed_out": {"type": "boolean"},
    "state": {"description": "the target's state when the wait ended: a task record, a screen, or a channel position"}
  },
  "required": ["target", "satisfied", "timed_out"]
}`,
			readOnly: true,
			handler:  tool(f.toolWait),
		},
	}
}

// toolFailure is a tool result with isError: the call could not do its
// work, and the text says why and what to do about it.
func (f *Facade) toolFailure(err error) *mcp.CallToolResult {
	text := kernelError(err)
	if hint := f.nextStep(err); hint != "" {
		text += "\n" + hint
	}
	return mcp.NewToolResultError(capText(text))
}

// nextStep suggests the tool call that gets a model past a kernel error.
// A command it names for a person (shoal plan approve) names the
// facade's session when that is not the CLI's default, so it works as
// written.
func (f *Facade) nextStep(err error) string {
	var re *rpc.Error
	if !errors.As(err, &re) {
		return ""
	}
	switch re.Code {
	case rpc.PolicyRefused:
		return `Next: shoal_plan {"source": …} shows the effects and the verdict; once the plan is allowed, or a human approved it (` + f.approveCommand("<ref>") + `), shoal_apply {"plan": <ref>} runs it.`
	case rpc.PlanNotApproved:
		// The kernel's message names the plan and, when it waits, the
		// exact approve command.
		return "Next: once a human approved it, call shoal_apply again; a denied or rejected plan never runs: plan a narrower command with shoal_plan."
	case rpc.PlanStale:
		return "Next: call shoal_plan again for the current state, then shoal_apply the new ref."
	case rpc.UnknownPTY:
		return "Next: shoal_pty_list shows the open terminals; shoal_pty_open starts a new one."
	case rpc.BadPath:
		return "Next: read the target without path (or with a shorter one) to see its shape."
	}
	return ""
}

// structured decodes a kernel answer into the object a tool returns as
// structuredContent.
// Numbers stay json.Number: nanosecond timestamps do not fit a float64.
func structured(raw json.RawMessage) (map[string]any, error) {
	var m map[string]any
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	if err := dec.Decode(&m); err != nil {
		return nil, fmt.Errorf("kernel answer is not a JSON object: %w", err)
	}
	return m, nil
}

// result is a successful tool result: text for the model, the object for
// machines.
func result(text string, obj any) *mcp.CallToolResult {
	return mcp.NewToolResultStructured(obj, capText(text))
}

// passOn is a successful tool result whose structuredContent is the
// kernel's answer as it came.
func (f *Facade) passOn(text string, raw json.RawMessage) (*mcp.CallToolResult, error) {
	m, err := structured(raw)
	if err != nil {
		return f.toolFailure(err), nil
	}
	return result(text, m), nil
}

// callTyped makes a kernel call for a tool and decodes the answer into
// into, its core/wire type; the answer comes back raw too, for a tool
// that passes the kernel's record on as it came.
func (f *Facade) callTyped(ctx context.Context, method string, params, into any) (json.RawMessage, error) {
	var raw json.RawMessage
	if err := f.link.call(ctx, method, params, &raw); err != nil {
		return nil, err
	}
	if err := json.Unmarshal(raw, into); err != nil {
		return nil, fmt.Errorf("kernel answer of %s: %w", method, err)
	}
	return raw, nil
}

// toolHandler is a tool's handler and the type of its arguments.
type toolHandler struct {
	fn   server.ToolHandlerFunc
	args reflect.Type
}

// tool adapts a handler of typed arguments, in the style of go-sdk's
// AddTool[In, Out]: the arguments are decoded into In by the kernel's
// params decoder (unknown members and wrong types refused by name), and
// In is checked against the tool's input schema by a test.
func tool[In any](h func(context.Context, mcp.CallToolRequest, In) (*mcp.CallToolResult, error)) toolHandler {
	fn := func(ctx context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		var in In
		raw, err := json.Marshal(req.Params.Arguments)
		if err == nil {
			err = rpc.DecodeParams(raw, &in)
		}
		if err != nil {
			return mcp.NewToolResultError(fmt.Sprintf("bad arguments for %s: %v; see the tool's input schema", req.Params.Name, err)), nil
		}
		return h(ctx, req, in)
	}
	return toolHandler{fn: fn, args: reflect.TypeFor[In]()}
}

// execArgs are shoal_exec's arguments (its input schema's properties).
type execArgs struct {
	Source     string `json:"source"`
	TimeoutMS  *int64 `json:"timeout_ms"`
	Background bool   `json:"background"`
	Typed      bool   `json:"typed"`
}

func (f *Facade) toolExec(ctx context.Context, req mcp.CallToolRequest, a execArgs) (*mcp.CallToolResult, error) {
	timeout := defaultExecTimeout.Milliseconds()
	if a.TimeoutMS != nil {
		timeout = *a.TimeoutMS
	}
	params := map[string]any{"source": a.Source, "timeout_ms": timeout, "background": a.Background}
	if req.Params.Meta != nil && req.Params.Meta.ProgressToken != nil && !a.Background {
		key := progressKeyFor()
		params["progress_key"] = key
		stop := f.reportProgress(ctx, req.Params.Meta.ProgressToken, key)
		defer stop()
	}
	return f.execLike(ctx, "exec", params, a.Typed)
}

// applyArgs are shoal_apply's arguments (its input schema's properties).
type applyArgs struct {
	Plan string `json:"plan"`
}

func (f *Facade) toolApply(ctx context.Context, req mcp.CallToolRequest, a applyArgs) (*mcp.CallToolResult, error) {
	// A plan waiting for approval: the person at the host may decide it
	// there, when the client can show a form (elicit.go).
	var note string
	if server.IsModernRequest(ctx) {
		var form *mcp.CallToolResult
		if form, note = f.askApprovalStateless(ctx, req, a.Plan); form != nil {
			return form, nil
		}
	} else {
		note = f.askApproval(ctx, a.Plan)
	}
	res, err := f.execLike(ctx, "plan.apply", map[string]any{"ref": a.Plan}, false)
	if note != "" && res != nil {
		res.Content = append([]mcp.Content{mcp.NewTextContent(note)}, res.Content...)
	}
	return res, err
}

// execLike runs exec or plan.apply and shapes their common reply.
func (f *Facade) execLike(ctx context.Context, method string, params any, typed bool) (*mcp.CallToolResult, error) {
	var r wire.ExecReply
	if err := f.link.call(ctx, method, params, &r); err != nil {
		return f.toolFailure(err), nil
	}
	text := execText(&r)
	o, next, err := execObject(&r, typed)
	if err != nil {
		return f.toolFailure(err), nil
	}
	confinementNotice(ctx, &r)
	if next != "" {
		text += "\nnext: " + next
	}
	return modelResult(text, o), nil
}

// modelResult is a tool result whose structuredContent o is fitted to the
// text's size and the result budget.
func modelResult(text string, o *obj) *mcp.CallToolResult {
	text = capText(text)
	fit(o, min(max(len(text), minFit), resultBudget()))
	raw, err := compactJSON(o)
	if err != nil {
		return mcp.NewToolResultError("encode result: " + err.Error())
	}
	return mcp.NewToolResultStructured(json.RawMessage(raw), text)
}

// minFit is the floor of the fit: a result's required members (ref, uri,
// ok, exit, …) are never cut, and for a tiny result they alone can be
// longer than its text.
const minFit = 256

// execObject is an execution reply written for a model: status and refs,
// the output (stdout and stderr of a command, the rendered preview of a
// builtin's value), what was cut and the exact next call. typed adds the
// typed preview.
func execObject(r *wire.ExecReply, typed bool) (*obj, string, error) {
	// The preview keeps its members' order: a model reads them as sent.
	var preview any
	if len(r.Preview) > 0 {
		var err error
		if preview, err = decodeInOrder(r.Preview); err != nil {
			return nil, "", err
		}
	}
	o := newObj()
	o.set("ref", r.Ref).set("uri", r.URI).set("ok", r.OK).set("exit", r.Exit)
	ref, state := r.Ref, r.State
	if task := r.Task; task != "" {
		o.set("task", task)
		o.set("task_uri", r.TaskURI)
		if state == "running" {
			o.set("state", state)
			id := strings.TrimPrefix(task, "task:")
			next := fmt.Sprintf(`shoal_wait {"target":%q,"timeout_ms":30000} waits for the end; %s reads its output so far (then since= the next offset); shoal_cancel {"target":%q} stops it`,
				task, getCall("shoal://task/"+id+"/stdout?since=0"), task)
			o.set("next", next)
			return o, next, nil
		}
	}
	o.set("ms", json.Number(strconv.FormatFloat(float64(r.DurationNS)/1e6, 'f', 1, 64)))
	if len(r.Effects) > 0 {
		o.set("effects", r.Effects)
	}
	if r.ValRef != "" {
		o.set("val_ref", r.ValRef)
	}
	if r.Marks != nil {
		o.set("marks", r.Marks)
	}
	if r.Confined != nil {
		o.set("confined", r.Confined)
	}
	var cuts []cut
	typedPreview := preview
	if rec, ok := preview.(*obj); ok && rec.get("$") == "record" {
		if fields, ok := rec.get("v").(*obj); ok && isExecRecord(fields) {
			for _, k := range []string{"stdout", "stderr"} {
				if s := plainPreview(fields.get(k), "."+k, &cuts); s != "" {
					o.set(k, s)
				}
			}
			preview = nil
		}
	}
	if preview != nil {
		plainPreview(preview, "", &cuts)
		if r.PreviewText != "" {
			o.set("preview", r.PreviewText)
		}
	}
	if typed && typedPreview != nil {
		o.set("value", typedPreview)
	}
	next := nextForCuts(ref, cuts)
	if len(cuts) > 0 {
		o.set("cut", cutNotes(cuts))
		o.set("next", next)
	}
	return o, next, nil
}

// isExecRecord reports whether a preview record is an execution's
// {exit, stdout, stderr}.
func isExecRecord(fields *obj) bool {
	if len(fields.keys) != 3 {
		return false
	}
	for _, k := range []string{"exit", "stdout", "stderr"} {
		if _, ok := fields.vals[k]; !ok {
			return false
		}
	}
	return true
}

// execText is an execution reply as a model reads it: one status line,
// then the preview.
func execText(r *wire.ExecReply) string {
	ref, task, state := r.Ref, r.Task, r.State
	succeeded := r.OK != nil && *r.OK
	if state == "" {
		switch {
		case task != "" && r.Exit == nil:
			state = "running"
		case succeeded:
			state = "completed"
		default:
			state = "failed"
		}
	}
	var b strings.Builder
	switch state {
	case "running":
		fmt.Fprintf(&b, "%s running as %s; once it ended, shoal_get {\"target\":%q} reads its value.", ref, task, ref)
	default:
		status := "ok"
		if !succeeded {
			status = "failed"
		}
		fmt.Fprintf(&b, "%s %s", ref, status)
		if r.Exit != nil {
			fmt.Fprintf(&b, ", exit %d", *r.Exit)
		}
		fmt.Fprintf(&b, ", %s", time.Duration(r.DurationNS).Round(time.Microsecond*100))
		if task != "" {
			fmt.Fprintf(&b, ", as %s", task)
		}
		if r.URI != "" {
			fmt.Fprintf(&b, "; value kept at %s", r.URI)
		}
	}
	if effects := strings.Join(r.Effects, ", "); effects != "" {
		fmt.Fprintf(&b, "\neffects: %s", effects)
	}
	if r.ValRef != "" {
		fmt.Fprintf(&b, "\nvalue stored as %s", r.ValRef)
	}
	if marks := strings.Join(r.Marks, ", "); marks != "" {
		fmt.Fprintf(&b, "\nmarks: %s", marks)
	}
	if c := r.Confined; c != nil {
		fmt.Fprintf(&b, "\nconfined: %s", c.Hint)
		if d := strings.Join(c.Denied, ", "); d != "" {
			fmt.Fprintf(&b, " (refused: %s)", d)
		}
	}
	if r.PreviewText != "" {
		b.WriteString("\n")
		b.WriteString(r.PreviewText)
	}
	return b.String()
}

// getArgs are shoal_get's arguments (its input schema's properties).
type getArgs struct {
	Target  string          `json:"target"`
	Path    *string         `json:"path"`
	Slice   *string         `json:"slice"`
	Grep    *string         `json:"grep"`
	Context *int            `json:"context"`
	Elide   json.RawMessage `json:"elide"`
	Typed   bool            `json:"typed"`
}

func (f *Facade) toolGet(ctx context.Context, req mcp.CallToolRequest, a getArgs) (*mcp.CallToolResult, error) {
	p := map[string]any{"target": a.Target}
	if a.Grep != nil {
		p["grep"] = *a.Grep
	}
	if a.Context != nil {
		p["context"] = *a.Context
	}
	if a.Path != nil {
		p["path"] = *a.Path
	}
	if a.Slice != nil {
		p["slice"] = *a.Slice
	}
	if len(a.Elide) > 0 && string(a.Elide) != "null" {
		p["elide"] = a.Elide
	}
	var r kernelRead
	if err := f.link.call(ctx, "value.get", p, &r); err != nil {
		return f.toolFailure(err), nil
	}
	o := newObj()
	var text string
	if len(r.Contents) > 0 {
		c := r.Contents[0]
		o.set("uri", c.URI)
		text = c.Text
	} else {
		o.set("uri", a.Target)
	}
	if len(r.Meta) > 0 {
		// A live output read: its offsets, and the read that continues it.
		o.set("output", liveMeta(r.Meta))
		text = liveHeader(o.get("uri"), r.Meta) + "\n" + text
	} else {
		// Say what was read, as the structured content does.
		text = fmt.Sprintf("%v", o.get("uri")) + "\n" + text
		if r.Ref != "" && !sameAs(o.get("uri"), r.Ref) {
			o.set("ref", r.Ref)
		}
	}
	var cuts []cut
	var v any
	if len(r.StructuredContent) > 0 {
		d, err := decodeInOrder(r.StructuredContent)
		if err != nil {
			return f.toolFailure(err), nil
		}
		if a.Typed {
			v = d
		} else {
			v = plainPreview(d, pathOr(a.Path), &cuts)
		}
	}
	o.set("value", v)
	if r.Elided {
		o.set("elided", true)
	}
	if len(cuts) > 0 {
		o.set("cut", cutNotes(cuts))
		o.set("next", nextForCuts(targetRef(a.Target, r.Ref), cuts))
	}
	if g, ok := v.(*obj); ok && a.Grep != nil {
		// A grep's own next names the page of matches after this one.
		if more, _ := g.get("next").(string); more != "" {
			o.set("next", getCall(a.Target, "path", pathOr(a.Path), "grep", *a.Grep, "slice", strings.TrimPrefix(more, "slice=")))
		}
	}
	if len(r.Marks) > 0 {
		o.set("marks", r.Marks)
		text = "marks: " + strings.Join(r.Marks, ", ") + "\n" + text
	}
	return modelResult(text, o), nil
}

// liveHeader is the status line of a live output read.
func liveHeader(uri any, m map[string]any) string {
	line := fmt.Sprintf("%v: %v, bytes %v..%v of %v", uri, m["state"], m["from"], m["next"], m["size"])
	if sk, ok := m["skipped"]; ok {
		line += fmt.Sprintf(" (%v bytes before them are no longer kept)", sk)
	}
	if m["state"] == "running" {
		line += fmt.Sprintf("; read on with since=%v", m["next"])
	}
	return line
}

// liveMeta is what a model needs of a live read's meta: the task's state,
// the next offset and the size, and where the bytes start when that is
// not where it asked.
func liveMeta(m map[string]any) *obj {
	o := newObj().set("state", m["state"]).set("next", m["next"]).set("size", m["size"])
	if m["from"] != m["since"] {
		o.set("from", m["from"])
	}
	if sk, ok := m["skipped"]; ok {
		o.set("skipped", sk)
	}
	return o
}

// sameAs reports whether a URI read is the ref's own (shoal://out/17 for
// out:17), so naming the ref too would add nothing.
func sameAs(uri any, ref string) bool {
	u, _ := uri.(string)
	fam, id, ok := strings.Cut(ref, ":")
	if !ok {
		return false
	}
	own := "shoal://" + fam + "/" + id
	return u == own || strings.HasPrefix(u, own+"?")
}

// pathOr is the path argument, "" when absent.
func pathOr(p *string) string {
	if p == nil {
		return ""
	}
	return *p
}

// targetRef is what a next call names: the short ref of the value read,
// or the target as given.
func targetRef(target, ref string) string {
	if strings.HasPrefix(ref, "out:") || strings.HasPrefix(ref, "val:") {
		return ref
	}
	return target
}

// planArgs are shoal_plan's arguments (its input schema's properties).
type planArgs struct {
	Source string `json:"source"`
}

func (f *Facade) toolPlan(ctx context.Context, req mcp.CallToolRequest, a planArgs) (*mcp.CallToolResult, error) {
	var p wire.Plan
	raw, err := f.callTyped(ctx, "plan.create", map[string]any{"source": a.Source}, &p)
	if err != nil {
		return f.toolFailure(err), nil
	}
	o, err := objOf(raw)
	if err != nil {
		return f.toolFailure(err), nil
	}
	ref, verdict, approval := p.Ref, p.Verdict, p.Approval
	var b strings.Builder
	fmt.Fprintf(&b, "%s verdict %s, approval %s, reversible %v\n", ref, verdict, approval, p.Reversible)
	if effects := strings.Join(p.Effects, "; "); effects != "" {
		fmt.Fprintf(&b, "effects: %s\n", effects)
	}
	var next string
	switch {
	case verdict == "deny" || approval == "rejected":
		next = "It will not run: change the command."
	case verdict == "allow" || approval == "approved":
		next = fmt.Sprintf("shoal_apply {\"plan\": %q} runs it.", ref)
	default:
		next = fmt.Sprintf("shoal_apply {\"plan\": %q} asks the person in this host to approve it when the host can show a form; otherwise a human approves it first (%s).", ref, f.approveCommand(ref))
	}
	if strings.HasPrefix(next, "shoal_apply") {
		b.WriteString("Next: ")
	}
	b.WriteString(next + "\n")
	b.WriteString(indentJSON(raw))
	o.set("next", next)
	return modelResult(b.String(), o), nil
}

// ptyOpenArgs are shoal_pty_open's arguments (its input schema's properties).
type ptyOpenArgs struct {
	Command string `json:"command"`
	Cols    int    `json:"cols,omitempty"`
	Rows    int    `json:"rows,omitempty"`
}

func (f *Facade) toolPTYOpen(ctx context.Context, req mcp.CallToolRequest, a ptyOpenArgs) (*mcp.CallToolResult, error) {
	return f.screenCall(ctx, "pty.open", a)
}

// ptyWriteArgs are shoal_pty_write's arguments (its input schema's properties).
type ptyWriteArgs struct {
	PTY   string   `json:"pty"`
	Input string   `json:"input"`
	Keys  []string `json:"keys,omitempty"`
}

func (f *Facade) toolPTYWrite(ctx context.Context, req mcp.CallToolRequest, a ptyWriteArgs) (*mcp.CallToolResult, error) {
	return f.screenCall(ctx, "pty.write", a)
}

// ptyReadArgs are shoal_pty_read's arguments (its input schema's properties).
type ptyReadArgs struct {
	PTY string `json:"pty"`
}

func (f *Facade) toolPTYRead(ctx context.Context, req mcp.CallToolRequest, a ptyReadArgs) (*mcp.CallToolResult, error) {
	return f.screenCall(ctx, "pty.read", a)
}

func (f *Facade) screenCall(ctx context.Context, method string, params any) (*mcp.CallToolResult, error) {
	var s wire.Screen
	raw, err := f.callTyped(ctx, method, params, &s)
	if err != nil {
		return f.toolFailure(err), nil
	}
	o, err := objOf(raw)
	if err != nil {
		return f.toolFailure(err), nil
	}
	// Trailing blanks and empty rows carry nothing.
	if lines, ok := o.get("lines").([]any); ok {
		trimmed := make([]any, 0, len(lines))
		for _, l := range lines {
			str, _ := l.(string)
			trimmed = append(trimmed, strings.TrimRight(str, " "))
		}
		for len(trimmed) > 0 && trimmed[len(trimmed)-1] == "" {
			trimmed = trimmed[:len(trimmed)-1]
		}
		o.set("lines", trimmed)
	}
	return modelResult(screenText(&s), o), nil
}

// objOf is a kernel answer as an object that keeps its members' order.
func objOf(raw json.RawMessage) (*obj, error) {
	d, err := decodeInOrder(raw)
	if err != nil {
		return nil, err
	}
	o, ok := d.(*obj)
	if !ok {
		return nil, fmt.Errorf("kernel answer is not a JSON object")
	}
	return o, nil
}

// screenText shows a terminal screen: a status line, then its rows.
func screenText(s *wire.Screen) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s", s.PTY)
	if s.Command != "" {
		fmt.Fprintf(&b, " %q", s.Command)
	}
	fmt.Fprintf(&b, " %dx%d", s.Cols, s.Rows)
	if s.Alive {
		b.WriteString(" alive")
	} else if s.Exit != nil {
		fmt.Fprintf(&b, " exited %d", *s.Exit)
	} else {
		b.WriteString(" ended")
	}
	fmt.Fprintf(&b, ", cursor row %d col %d", s.Cursor.Row, s.Cursor.Col)
	lines := s.Lines
	for len(lines) > 0 && strings.TrimSpace(lines[len(lines)-1]) == "" {
		lines = lines[:len(lines)-1]
	}
	b.WriteString("\n")
	b.WriteString(strings.Join(lines, "\n"))
	return b.String()
}

func (f *Facade) toolPTYList(ctx context.Context, _ mcp.CallToolRequest, _ struct{}) (*mcp.CallToolResult, error) {
	var l wire.PTYList
	raw, err := f.callTyped(ctx, "pty.list", struct{}{}, &l)
	if err != nil {
		return f.toolFailure(err), nil
	}
	var b strings.Builder
	if len(l.PTYs) == 0 {
		b.WriteString("no terminals open; shoal_pty_open starts one")
	}
	for i, p := range l.PTYs {
		if i > 0 {
			b.WriteString("\n")
		}
		state := "alive"
		if !p.Alive {
			state = "ended (exit <nil>)"
			if p.Exit != nil {
				state = fmt.Sprintf("ended (exit %d)", *p.Exit)
			}
		}
		fmt.Fprintf(&b, "%s %q %dx%d %s", p.PTY, p.Command, p.Cols, p.Rows, state)
	}
	return f.passOn(b.String(), raw)
}

// ptyCloseArgs are shoal_pty_close's arguments (its input schema's properties).
type ptyCloseArgs struct {
	PTY string `json:"pty"`
}

func (f *Facade) toolPTYClose(ctx context.Context, req mcp.CallToolRequest, a ptyCloseArgs) (*mcp.CallToolResult, error) {
	var c wire.PTYClosed
	raw, err := f.callTyped(ctx, "pty.close", a, &c)
	if err != nil {
		return f.toolFailure(err), nil
	}
	text := c.PTY + " closed"
	if c.Exit != nil {
		text += fmt.Sprintf(", exit %d", *c.Exit)
	}
	return f.passOn(text, raw)
}

// cancelArgs are shoal_cancel's arguments (its input schema's properties).
type cancelArgs struct {
	Target string `json:"target"`
}

func (f *Facade) toolCancel(ctx context.Context, req mcp.CallToolRequest, a cancelArgs) (*mcp.CallToolResult, error) {
	var t wire.Task
	if _, err := f.callTyped(ctx, "task.cancel", map[string]any{"task": a.Target}, &t); err != nil {
		return f.toolFailure(err), nil
	}
	o := newObj().set("task", t.Task).set("state", t.State)
	text := t.Task + " " + t.State
	if t.Exit != nil {
		o.set("exit", *t.Exit)
		text += fmt.Sprintf(", exit %d", *t.Exit)
	}
	if t.ResultRef != "" {
		o.set("ref", t.ResultRef)
		text += "; what it produced is " + t.ResultRef
	}
	if t.Error != "" {
		o.set("error", t.Error)
		text += "\n" + t.Error
	}
	return modelResult(text, o), nil
}

// waitArgs are shoal_wait's arguments (its input schema's properties).
type waitArgs struct {
	Target    string  `json:"target"`
	Until     *uint64 `json:"until,omitempty"`
	Pattern   string  `json:"pattern,omitempty"`
	TimeoutMS int64   `json:"timeout_ms"`
}

func (f *Facade) toolWait(ctx context.Context, req mcp.CallToolRequest, a waitArgs) (*mcp.CallToolResult, error) {
	var w wire.WaitResult
	raw, err := f.callTyped(ctx, "wait", a, &w)
	if err != nil {
		return f.toolFailure(err), nil
	}
	o, err := objOf(raw)
	if err != nil {
		return f.toolFailure(err), nil
	}
	var b strings.Builder
	if w.Satisfied {
		fmt.Fprintf(&b, "%s: done waiting", a.Target)
	} else {
		fmt.Fprintf(&b, "%s: timed out after %d ms; call shoal_wait again to keep waiting", a.Target, a.TimeoutMS)
	}
	if len(w.State) > 0 && string(w.State) != "null" {
		b.WriteString("\n")
		b.WriteString(indentJSON(w.State))
	}
	return modelResult(b.String(), o), nil
}

// indentJSON pretty-prints a kernel answer, keeping its field order.
func indentJSON(raw json.RawMessage) string {
	var b bytes.Buffer
	if err := json.Indent(&b, raw, "", "  "); err != nil {
		return string(raw)
	}
	return b.String()
}

// capText bounds text shown to a model at render.TextLimit bytes, cutting
// on a character boundary and saying so. The kernel already bounds what
// it renders; this keeps the facade's own additions within the limit.
func capText(s string) string {
	if len(s) <= render.TextLimit {
		return s
	}
	const note = "\n… [cut at 64 KiB: read the ref with shoal_get and a path/slice for the rest]"
	cut := render.TextLimit - len(note)
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + note
}
