package pty

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/shoal-sh/shoal/core"
	"github.com/shoal-sh/shoal/core/rpc"
	"github.com/shoal-sh/shoal/core/uri"
	"github.com/shoal-sh/shoal/core/wire"
)

// Family is the URI family this package serves.
const Family = "pty"

// Root is the family's root resource, listing the session's PTYs. The
// kernel places it sixth among the roots (SPEC M2).
const Root = "shoal://pty"

// ServiceName is the *Manager, which Provision offers for code that
// waits on screens (shoal_wait).
var ServiceName = core.NewKey[*Manager]("pty")

// Interface guards: the kernel finds these by type assertion. A PTY is not
// subscribable: its screen changes too often to be an event stream.
var (
	_ core.Provider        = (*Manager)(nil)
	_ core.MethodProvider  = (*Manager)(nil)
	_ core.Provisioner     = (*Manager)(nil)
	_ core.SessionObserver = (*Manager)(nil)
	_ core.Closer          = (*Manager)(nil)
	_ core.Needer          = (*Manager)(nil)
	_ core.Offerer         = (*Manager)(nil)
)

// Family implements core.Provider.
func (m *Manager) Family() string { return Family }

// Templates implements core.Provider.
func (m *Manager) Templates() []core.Template {
	return []core.Template{{
		URITemplate: "shoal://pty/{id}",
		Name:        "pty",
		Description: "The rendered screen of one of this session's PTYs (as pty.read answers).",
		MimeType:    "application/json",
	}}
}

// List implements core.Provider: the root, then one entry per open PTY of
// the caller's session.
func (m *Manager) List(_ context.Context, c *core.Caller) ([]core.Resource, error) {
	session, _ := callerOf(c)
	out := []core.Resource{{
		URI:         Root,
		Name:        "pty",
		Description: "This session's PTYs (as pty.list answers).",
		MimeType:    "application/json",
		Root:        true,
	}}
	for _, in := range m.PTYs(session) {
		state := "running"
		if !in.Alive {
			state = fmt.Sprintf("exited %d", *in.Exit)
		}
		out = append(out, core.Resource{
			URI:         in.URI,
			Name:        in.PTY,
			Description: fmt.Sprintf("%s (%s, %d×%d)", in.Command, state, in.Cols, in.Rows),
			MimeType:    "application/json",
		})
	}
	return out, nil
}

// Read implements core.Provider.
func (m *Manager) Read(_ context.Context, c *core.Caller, u *uri.URI) (*core.Content, error) {
	session, _ := callerOf(c)
	switch len(u.Segments) {
	case 0:
		return &core.Content{Record: wire.PTYList{PTYs: m.PTYs(session)}}, nil
	case 1:
		s, err := m.Screen(session, u.Segments[0], 0)
		if err != nil {
			return nil, err
		}
		return &core.Content{Record: s, Ref: s.PTY}, nil
	default:
		return nil, rpc.Errorf(rpc.NotFound, "no resource %s: PTY URIs are shoal://pty and shoal://pty/{id}", u.Path())
	}
}

// Provision implements core.Provisioner.
func (m *Manager) Provision(h *core.Host) error {
	if h.Log != nil {
		m.log = h.Log
	}
	core.Offer(h, ServiceName, m)
	return nil
}

// Offers implements core.Offerer.
func (m *Manager) Offers() []core.AnyKey { return []core.AnyKey{ServiceName} }

// Needs implements core.Needer: without a journal pty.open goes
// unrecorded, and without a policy check it is not judged (unit tests,
// minimal builds).
func (m *Manager) Needs() []core.Dependency {
	return []core.Dependency{
		core.Optional(core.ServiceJournal, &m.rows),
		core.Optional(core.ServicePolicyCheck, &m.check),
	}
}

// Methods implements core.MethodProvider.
func (m *Manager) Methods() map[string]core.Method {
	return map[string]core.Method{
		"pty.open":   m.methodOpen,
		"pty.write":  m.methodWrite,
		"pty.read":   m.methodRead,
		"pty.resize": m.methodResize,
		"pty.close":  m.methodClose,
		"pty.list":   m.methodList,
		"pty.wait":   m.methodWait,
	}
}

// ptyID is a PTY id parameter: "pty:3", "3" or 3.
type ptyID string

func (p *ptyID) UnmarshalJSON(b []byte) error {
	b = bytes.TrimSpace(b)
	if len(b) > 0 && b[0] == '"' {
		var s string
		if err := json.Unmarshal(b, &s); err != nil {
			return rpc.MemberErrorf("pty", "member \"pty\" is not a valid JSON string: %v", err)
		}
		*p = ptyID(s)
		return nil
	}
	var n uint64
	if err := json.Unmarshal(b, &n); err != nil {
		return rpc.MemberErrorf("pty", `member "pty" must be an id like "pty:3" (or 3)`)
	}
	*p = ptyID(strconv.FormatUint(n, 10))
	return nil
}

// decode reads params strictly: an unknown field is most often a typo, and
// saying so beats ignoring it.
func decode(method string, params json.RawMessage, v any, usage string) error {
	return rpc.ExplainParams(rpc.DecodeParams(params, v), method+" params: ", "; expected "+usage)
}

func needPTY(method string, id ptyID, usage string) error {
	if strings.TrimSpace(string(id)) == "" {
		return rpc.Errorf(rpc.InvalidParams, "%s needs pty (an id like \"pty:3\"); expected %s", method, usage)
	}
	return nil
}

// settle converts settle_ms (absent: default) to a duration.
func settle(ms *int64) (time.Duration, error) {
	if ms == nil {
		return -1, nil
	}
	if *ms < 0 || *ms > 10_000 {
		return 0, rpc.Errorf(rpc.InvalidParams, "settle_ms must be 0…10000 (0 answers without waiting)")
	}
	return time.Duration(*ms) * time.Millisecond, nil
}

const (
	usageOpen   = `{command: "shell source" | argv: ["prog", "arg"], cols?, rows?, env?: {"K": "V"}, cwd?, settle_ms?}`
	usageWrite  = `{pty: "pty:N", input?: "text sent as is", keys?: ["Enter", "Ctrl-C", …], settle_ms?}`
	usageRead   = `{pty: "pty:N", scrollback?: lines}`
	usageResize = `{pty: "pty:N", cols, rows}`
	usageClose  = `{pty: "pty:N"}`
	usageWait   = `{pty: "pty:N", pattern: "regexp" | until: "exit", timeout_ms?}`
)

func (m *Manager) methodOpen(ctx context.Context, c *core.Caller, params json.RawMessage) (any, error) {
	var p struct {
		Command  string            `json:"command"`
		Argv     []string          `json:"argv"`
		Cols     int               `json:"cols"`
		Rows     int               `json:"rows"`
		Env      map[string]string `json:"env"`
		Cwd      string            `json:"cwd"`
		SettleMS *int64            `json:"settle_ms"`
	}
	if err := decode("pty.open", params, &p, usageOpen); err != nil {
		return nil, err
	}
	d, err := settle(p.SettleMS)
	if err != nil {
		return nil, err
	}
	return m.Open(ctx, c, OpenOptions{
		Command: p.Command, Argv: p.Argv, Cols: p.Cols, Rows: p.Rows,
		Env: p.Env, Cwd: p.Cwd, Settle: d,
	})
}

func (m *Manager) methodWrite(ctx context.Context, c *core.Caller, params json.RawMessage) (any, error) {
	var p struct {
		PTY      ptyID    `json:"pty"`
		Input    string   `json:"input"`
		Keys     []string `json:"keys"`
		SettleMS *int64   `json:"settle_ms"`
	}
	if err := decode("pty.write", params, &p, usageWrite); err != nil {
		return nil, err
	}
	if err := needPTY("pty.write", p.PTY, usageWrite); err != nil {
		return nil, err
	}
	if p.Input == "" && len(p.Keys) == 0 {
		return nil, rpc.Errorf(rpc.InvalidParams, "pty.write has nothing to send: give input text and/or keys (to look at the screen, use pty.read)")
	}
	if len(p.Input) > maxPendingInput {
		return nil, rpc.Errorf(rpc.InvalidParams, "input is %d bytes; write at most %d at a time", len(p.Input), maxPendingInput)
	}
	d, err := settle(p.SettleMS)
	if err != nil {
		return nil, err
	}
	session, _ := callerOf(c)
	return m.Write(ctx, session, string(p.PTY), Input{Text: p.Input, Keys: p.Keys, Settle: d})
}

func (m *Manager) methodRead(_ context.Context, c *core.Caller, params json.RawMessage) (any, error) {
	var p struct {
		PTY        ptyID `json:"pty"`
		Scrollback int   `json:"scrollback"`
	}
	if err := decode("pty.read", params, &p, usageRead); err != nil {
		return nil, err
	}
	if err := needPTY("pty.read", p.PTY, usageRead); err != nil {
		return nil, err
	}
	if p.Scrollback < 0 || p.Scrollback > scrollbackLines {
		return nil, rpc.Errorf(rpc.InvalidParams, "scrollback must be 0…%d lines", scrollbackLines)
	}
	session, _ := callerOf(c)
	return m.Screen(session, string(p.PTY), p.Scrollback)
}

func (m *Manager) methodResize(_ context.Context, c *core.Caller, params json.RawMessage) (any, error) {
	var p struct {
		PTY  ptyID `json:"pty"`
		Cols int   `json:"cols"`
		Rows int   `json:"rows"`
	}
	if err := decode("pty.resize", params, &p, usageResize); err != nil {
		return nil, err
	}
	if err := needPTY("pty.resize", p.PTY, usageResize); err != nil {
		return nil, err
	}
	session, _ := callerOf(c)
	return m.Resize(session, string(p.PTY), p.Cols, p.Rows)
}

func (m *Manager) methodClose(_ context.Context, c *core.Caller, params json.RawMessage) (any, error) {
	var p struct {
		PTY ptyID `json:"pty"`
	}
	if err := decode("pty.close", params, &p, usageClose); err != nil {
		return nil, err
	}
	if err := needPTY("pty.close", p.PTY, usageClose); err != nil {
		return nil, err
	}
	session, _ := callerOf(c)
	return m.ClosePTY(session, string(p.PTY))
}

func (m *Manager) methodList(_ context.Context, c *core.Caller, params json.RawMessage) (any, error) {
	var p struct{}
	if err := decode("pty.list", params, &p, "{}"); err != nil {
		return nil, err
	}
	session, _ := callerOf(c)
	ptys := m.PTYs(session)
	if ptys == nil {
		ptys = []Info{}
	}
	return wire.PTYList{PTYs: ptys}, nil
}

// Wait bounds for pty.wait.
const (
	defaultWait = 30 * time.Second
	maxWait     = 10 * time.Minute
)

func (m *Manager) methodWait(ctx context.Context, c *core.Caller, params json.RawMessage) (any, error) {
	var p struct {
		PTY       ptyID  `json:"pty"`
		Pattern   string `json:"pattern"`
		Until     string `json:"until"`
		TimeoutMS *int64 `json:"timeout_ms"`
	}
	if err := decode("pty.wait", params, &p, usageWait); err != nil {
		return nil, err
	}
	if err := needPTY("pty.wait", p.PTY, usageWait); err != nil {
		return nil, err
	}
	var re *regexp.Regexp
	switch {
	case p.Until != "" && p.Until != "exit" && p.Until != "match":
		return nil, rpc.Errorf(rpc.InvalidParams, `pty.wait until must be "match" (with pattern) or "exit"`)
	case p.Until == "exit" && p.Pattern != "":
		return nil, rpc.Errorf(rpc.InvalidParams, `pty.wait takes a pattern or until:"exit", not both`)
	case p.Until == "exit":
	case p.Pattern == "":
		return nil, rpc.Errorf(rpc.InvalidParams, `pty.wait needs pattern, a regular expression (RE2) matched against the screen's lines joined by newlines, or until:"exit"`)
	default:
		var err error
		if re, err = regexp.Compile(p.Pattern); err != nil {
			return nil, rpc.Errorf(rpc.InvalidParams, "pattern %q is not a valid RE2 regular expression: %v", p.Pattern, err)
		}
	}
	d := defaultWait
	if p.TimeoutMS != nil {
		if *p.TimeoutMS <= 0 || time.Duration(*p.TimeoutMS)*time.Millisecond > maxWait {
			return nil, rpc.Errorf(rpc.InvalidParams, "timeout_ms must be 1…%d", maxWait.Milliseconds())
		}
		d = time.Duration(*p.TimeoutMS) * time.Millisecond
	}
	ctx, cancel := context.WithTimeout(ctx, d)
	defer cancel()
	session, _ := callerOf(c)
	if re == nil {
		return m.WaitExit(ctx, session, string(p.PTY))
	}
	return m.WaitScreen(ctx, session, string(p.PTY), re)
}

var _ core.Waiter = (*Manager)(nil)

// Wait implements core.Waiter for the kernel's wait method (shoal_wait):
// with a pattern it returns once the screen text matches it, without one
// once the program has exited. A bad pattern is INVALID_PARAMS.
func (m *Manager) Wait(ctx context.Context, c *core.Caller, u *uri.URI, w core.WaitCond) (any, error) {
	session, _ := callerOf(c)
	if len(u.Segments) != 1 {
		return nil, rpc.Errorf(rpc.InvalidParams, "wait on one PTY: pty:N or shoal://pty/N")
	}
	id := u.Segments[0]
	if w.Pattern == "" {
		s, err := m.WaitExit(ctx, session, id)
		return s, timeoutAsCtx(ctx, err)
	}
	re, err := regexp.Compile(w.Pattern)
	if err != nil {
		return nil, rpc.Errorf(rpc.InvalidParams, "pattern %q is not a regular expression: %v", w.Pattern, err)
	}
	s, err := m.WaitScreen(ctx, session, id, re)
	return s, timeoutAsCtx(ctx, err)
}

// timeoutAsCtx reports a wait that ran out of time as the context's error,
// which the kernel turns into timed_out: true with the last screen.
func timeoutAsCtx(ctx context.Context, err error) error {
	if err != nil && ctx.Err() != nil {
		return ctx.Err()
	}
	return err
}
