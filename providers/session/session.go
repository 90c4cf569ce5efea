// Package session owns the named sessions' evaluators: the exec method,
// the Executor service plans apply through, and the session views
// shoal://session/cwd, env and reef.
//
// Each session has one evaluator (providers/session/shell). Foreground
// executions of a session run one at a time; an execution that passes its
// timeout_ms becomes a task and the session is free again, and a
// background execution is a task from the start. A task runs on its own
// copy of the session state: its cd and variables stay in the task.
package session

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/shoal-sh/shoal/core"
	"github.com/shoal-sh/shoal/core/bus"
	"github.com/shoal-sh/shoal/core/policy"
	"github.com/shoal-sh/shoal/core/render"
	"github.com/shoal-sh/shoal/core/rpc"
	"github.com/shoal-sh/shoal/core/uri"
	"github.com/shoal-sh/shoal/core/value"
	"github.com/shoal-sh/shoal/core/wire"
	"github.com/shoal-sh/shoal/providers/journal"
	"github.com/shoal-sh/shoal/providers/out"
	"github.com/shoal-sh/shoal/providers/session/shell"
	"github.com/shoal-sh/shoal/providers/task"
	"mvdan.cc/sh/v3/syntax"
)

// Views served under shoal://session/{view}.
var Views = []string{"cwd", "env", "reef"}

// Preview bounds: the reply and the render event carry a small preview.
const (
	previewLimit = 8 << 10
	previewText  = 4 << 10
)

// Provider serves sessions.
type Provider struct {
	host  *core.Host
	bus   *bus.Bus
	trans *out.Transcript
	tasks *task.Registry
	// The services an execution uses, set at start-up (Needs); nil when
	// not offered. check is the plan provider's, provisioned after this
	// one.
	check      core.PolicyCheck
	journal    core.Journal
	blobs      core.Blobs
	policy     *policy.Policy
	workspaces core.Workspaces

	mu       sync.Mutex
	sessions map[string]*sess
	closed   bool

	// running are the executions followed with exec.progress, by
	// session and key.
	running sync.Map
}

type sess struct {
	name string
	ev   *shell.Evaluator
	// dir is the directory the session was created for: its workspace.
	dir string
	// conf is the session's OS confinement.
	conf *confinement
}

var (
	_ core.Provider        = (*Provider)(nil)
	_ core.Provisioner     = (*Provider)(nil)
	_ core.MethodProvider  = (*Provider)(nil)
	_ core.SessionObserver = (*Provider)(nil)
	_ core.Closer          = (*Provider)(nil)
	_ core.Executor        = (*Provider)(nil)
	_ core.Sessions        = (*Provider)(nil)
	_ core.Needer          = (*Provider)(nil)
	_ core.Offerer         = (*Provider)(nil)
)

// New returns the session provider.
func New() *Provider { return &Provider{sessions: map[string]*sess{}} }

// Family implements core.Provider.
func (*Provider) Family() string { return "session" }

// Provision implements core.Provisioner.
func (p *Provider) Provision(h *core.Host) error {
	p.host, p.bus = h, h.Bus
	core.Offer[core.Executor](h, core.ServiceExecutor, p)
	core.Offer[core.Sessions](h, core.ServiceSessions, p)
	return nil
}

// Needs implements core.Needer. Executions are recorded in the transcript
// and run in the background as tasks; without a policy check they are
// not judged, without a journal not journaled, and without a content
// store large values stay in memory.
func (p *Provider) Needs() []core.Dependency {
	return []core.Dependency{
		core.Need(out.ServiceTranscript, &p.trans),
		core.Need(task.ServiceTasks, &p.tasks),
		core.Optional(core.ServicePolicyCheck, &p.check),
		core.Optional(core.ServiceJournal, &p.journal),
		core.Optional(core.ServiceBlobs, &p.blobs),
		core.Optional(core.ServicePolicy, &p.policy),
		core.Optional(core.ServiceWorkspaces, &p.workspaces),
	}
}

// Offers implements core.Offerer.
func (p *Provider) Offers() []core.AnyKey {
	return []core.AnyKey{core.ServiceExecutor, core.ServiceSessions}
}

// Templates implements core.Provider.
func (*Provider) Templates() []core.Template {
	return []core.Template{{
		URITemplate: "shoal://session/{view}",
		Name:        "session view",
		Description: "Live session state: cwd (working directory now), env (exported variable names; values only with the EnvRead grant), reef (the active reef.toml scope and whether each declared tool resolves).",
		MimeType:    "application/json",
	}}
}

// List implements core.Provider: the three session roots.
func (*Provider) List(context.Context, *core.Caller) ([]core.Resource, error) {
	return []core.Resource{
		{URI: "shoal://session/cwd", Name: "cwd", Root: true, MimeType: "application/json", Description: "The session's current working directory, read live."},
		{URI: "shoal://session/env", Name: "env", Root: true, MimeType: "application/json", Description: "The session's exported environment: names, and values only with the EnvRead grant."},
		{URI: "shoal://session/reef", Name: "reef", Root: true, MimeType: "application/json", Description: "The active Reef scope (nearest reef.toml and reef.lock) and where each declared tool resolves."},
	}, nil
}

// session returns (creating on first use) a session's evaluator.
func (p *Provider) session(name string) (*sess, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return nil, rpc.Errorf(rpc.Unavailable, "the kernel is stopping")
	}
	if s := p.sessions[name]; s != nil {
		return s, nil
	}
	wd := p.workspace(name)
	s := &sess{name: name, dir: wd, conf: p.newConfinement(name, wd)}
	ev, err := shell.New(shell.Options{
		Domain:    s.conf.domain,
		FifoDir:   s.conf.fifo,
		TempDir:   s.conf.ws.Tmp,
		Dir:       wd,
		Emit:      p.emit,
		NextEvent: p.nextEvent,
		Values:    func(_ context.Context, ref string) (value.Value, error) { return p.storedValue(name, ref) },
	})
	if err != nil {
		s.conf.close()
		return nil, fmt.Errorf("start evaluator: %w", err)
	}
	s.ev = ev
	p.sessions[name] = s
	return s, nil
}

// workspace is the directory a new session starts in: the one the kernel
// recorded for it at session.attach, else the kernel's own.
func (p *Provider) workspace(session string) string {
	if p.workspaces != nil {
		if dir := p.workspaces.Workspace(session); dir != "" {
			return dir
		}
	}
	wd, _ := os.Getwd()
	return wd
}

// emit is the language→wire bridge: the evaluator's emit builtin. The
// same user.* rules, declarations and validators apply as to a client's
// events.publish.
func (p *Provider) emit(_ context.Context, channel string, payload json.RawMessage) (uint64, error) {
	ev, err := p.bus.PublishClient(channel, payload)
	if err != nil {
		return 0, err
	}
	return ev.Seq, nil
}

// storedValue resolves a ref for the out builtin: out:N, N and
// shoal://out/N of the session, or val:blake3:<hex> (also blake3:<hex>,
// shoal://val/<hex>) from the content store.
func (p *Provider) storedValue(session, ref string) (value.Value, error) {
	hash, isVal := strings.CutPrefix(ref, "val:")
	if !isVal {
		hash, isVal = strings.CutPrefix(ref, "shoal://val/")
	}
	if !isVal {
		n, err := out.ParseRef(ref)
		if err != nil {
			return nil, rpc.Errorf(rpc.BadURI, "%q is not a ref: use out:N, N or val:blake3:<hex>", ref)
		}
		v, _, err := p.trans.Get(session, n)
		return v, err
	}
	hash = strings.TrimPrefix(hash, "blake3:")
	if p.blobs == nil {
		return nil, rpc.Errorf(rpc.NotFound, "this kernel has no content store; %s cannot be read", ref)
	}
	data, err := p.blobs.Get(hash)
	if err != nil {
		return nil, err
	}
	v, err := value.Unmarshal(data)
	if err != nil {
		return nil, rpc.Errorf(rpc.Corrupt, "%s does not decode as a value: %v", ref, err)
	}
	return v, nil
}

// nextEvent is the wire→language bridge: a script waits for the next
// event on a channel after a cursor.
func (p *Provider) nextEvent(ctx context.Context, channel string, since *uint64) (uint64, json.RawMessage, error) {
	got := make(chan bus.Event, 1)
	sub, err := p.bus.Subscribe(channel, func(ev bus.Event) error {
		select {
		case got <- ev:
		default:
		}
		return nil
	})
	if err != nil {
		return 0, nil, err
	}
	defer sub.Close()
	// Events already retained after the cursor come first.
	if since != nil {
		if r, err := p.bus.Read(channel, since, 1); err == nil && len(r.Events) > 0 {
			r2, _ := p.bus.Read(channel, since, bus.MaxReadLimit)
			ev := r2.Events[0]
			return ev.Seq, ev.Payload, nil
		}
	}
	for {
		select {
		case ev := <-got:
			if since != nil && ev.Seq <= *since {
				continue
			}
			if _, _, marker := bus.IsMarker(ev); marker {
				continue
			}
			return ev.Seq, ev.Payload, nil
		case <-ctx.Done():
			return 0, nil, ctx.Err()
		}
	}
}

// Cwd is the session's live working directory.
func (p *Provider) Cwd(session string) string {
	s, err := p.session(session)
	if err != nil {
		wd, _ := os.Getwd()
		return wd
	}
	return s.ev.Cwd()
}

// Bounds implements plan.SessionBounds: the directory the session was
// created for (its workspace, what the policy's `.` means), its temp
// directory, and whether its runs are confined by the OS.
func (p *Provider) Bounds(session string) (dir, tmp string, confined bool) {
	s, err := p.session(session)
	if err != nil {
		return "", "", false
	}
	return s.dir, s.conf.ws.Tmp, s.conf.status.Confined && s.conf.err == nil
}

// Environ is the session's exported environment as KEY=VALUE pairs (for
// PTYs started in the session).
func (p *Provider) Environ(session string) []string {
	s, err := p.session(session)
	if err != nil {
		return nil
	}
	env := s.ev.Env()
	out := make([]string, len(env))
	for i, e := range env {
		out[i] = e.Name + "=" + e.Value
	}
	return out
}

type execParams struct {
	Source      string `json:"source"`
	TimeoutMS   int64  `json:"timeout_ms"`
	Background  bool   `json:"background"`
	ProgressKey string `json:"progress_key"`
}

// Methods implements core.MethodProvider.
func (p *Provider) Methods() map[string]core.Method {
	return map[string]core.Method{
		"exec": func(ctx context.Context, c *core.Caller, raw json.RawMessage) (any, error) {
			var ep execParams
			if err := rpc.DecodeParams(raw, &ep); err != nil {
				return nil, err
			}
			b, err := p.exec(ctx, c, core.ExecRequest{Source: ep.Source, TimeoutMS: ep.TimeoutMS, Background: ep.Background, ProgressKey: ep.ProgressKey}, true)
			if err != nil {
				return nil, err
			}
			if b.encoded != nil {
				return rpc.Encoded(b.encoded), nil
			}
			return b.reply, nil
		},
		"exec.progress": p.execProgress,
	}
}

// Exec implements core.Executor: it runs source in the caller's session.
func (p *Provider) Exec(ctx context.Context, c *core.Caller, req core.ExecRequest) (*core.ExecReply, error) {
	b, err := p.exec(ctx, c, req, false)
	if err != nil {
		return nil, err
	}
	return b.reply, nil
}

// exec is Exec, with the reply also encoded when it could be done off
// the critical path. ownRequest says that ctx is the exec request's own,
// whose reply is exec's reply: only then may a run that times out answer
// early (a Go caller such as plan.apply needs the reply returned to it).
func (p *Provider) exec(ctx context.Context, c *core.Caller, req core.ExecRequest, ownRequest bool) (*built, error) {
	if err := checkExecRequest(req); err != nil {
		return nil, err
	}
	if err := p.journalWritable(); err != nil {
		return nil, err // nothing runs unrecorded
	}
	if req.Kind == "" {
		req.Kind = "exec"
	}
	s, err := p.session(c.Session)
	if err != nil {
		return nil, err
	}
	if err := s.conf.refusal(p.host.StateDir); err != nil {
		return nil, err
	}
	// One parse serves the policy check and the run. A source that does
	// not parse goes to both unparsed: the check refuses it with the
	// parser's message, or, without a check, the run answers exit 2 as
	// bash would.
	file, perr := shell.Parse(req.Source)
	if perr != nil {
		file = nil
	}
	// The policy check runs inside the run's turn, on the state the run
	// starts from (a check made before the turn could be overtaken by
	// another connection's cd). refused is its verdict, read once the run
	// returned; checked is closed once it was made (or the run ended
	// without one).
	var (
		refused error
		checked = make(chan struct{})
		once    sync.Once
	)
	opts := shell.RunOptions{File: file}
	if wide := p.widened(s, req.Widen, req.HostCaps); wide != nil {
		// An approved plan's targets, for this run alone, in a worker of
		// its own; it ends (with whatever it started) after the run.
		opts.Domain = wide
		defer wide.Close()
	}
	if !req.SkipPolicy {
		if pc := p.check; pc != nil {
			if file == nil {
				// A run would stop at the syntax error; the check refuses
				// it with the parser's message, whatever the state.
				if err := pc.CheckExec(ctx, c, nil, req.Source, s.ev.Cwd(), nil, nil); err != nil {
					return nil, err
				}
			}
			opts.Check = func(st shell.State) error {
				refused = pc.CheckExec(ctx, c, file, req.Source, st.Dir, st.Var, st.Func)
				once.Do(func() { close(checked) })
				return refused
			}
		}
	}
	entry, err := p.trans.Reserve(c.Session)
	if err != nil {
		return nil, err
	}
	refuse := func() (*built, error) {
		p.trans.Unreserve(c.Session, entry.N)
		return nil, refused
	}
	// The run outlives this request when it becomes a task, so it gets its
	// own context; cancelling the task (or closing the session) ends it.
	runCtx, cancel := context.WithCancel(context.Background())
	started := time.Now()
	live := &shell.Live{}
	if req.ProgressKey != "" {
		key := progressKey{c.Session, req.ProgressKey}
		p.running.Store(key, &followed{live: live, started: started, ref: entry.Ref})
		defer p.running.Delete(key)
	}
	// A caller that cancels its request (rpc.CancelMethod, which the MCP
	// facade sends for notifications/cancelled) ends the run while it is
	// the request's own; once it became a task only task.cancel ends it.
	// A caller that just went away does not: the run completes and is
	// journaled.
	unfollow := context.AfterFunc(ctx, func() {
		if errors.Is(context.Cause(ctx), rpc.ErrCancelled) {
			cancel()
		}
	})
	defer unfollow()
	run := runner(runCtx, s, req.Source, opts, live, func() { once.Do(func() { close(checked) }) })
	if req.TimeoutMS == 0 && !req.Background {
		// It can never become a task: run it here, on the request's own
		// goroutine.
		defer cancel()
		res := run(nil)
		if refused != nil {
			return refuse()
		}
		return p.finish(ctx, c, s, req, entry, res)
	}
	if req.TimeoutMS > 0 && !req.Background && ownRequest && rpc.CanReplyNow(ctx) {
		b, err := p.runOrAnswerEarly(ctx, c, s, req, entry, run, cancel, started, live, unfollow, func() bool { return refused != nil })
		if b == nil && err == nil {
			return refuse()
		}
		return b, err
	}
	b, err := p.runOnAnother(ctx, c, s, req, entry, run, cancel, started, live, unfollow, checked, func() bool { return refused != nil })
	if b == nil && err == nil {
		return refuse()
	}
	return b, err
}

// runner returns the run of source in s, which a foreground caller or a
// task's goroutine calls with the channel that detaches it; ended is
// called when the run returns.
func runner(runCtx context.Context, s *sess, source string, opts shell.RunOptions, live *shell.Live, ended func()) func(detach <-chan struct{}) *shell.Result {
	return func(detach <-chan struct{}) *shell.Result {
		o := opts
		o.Detach = detach
		o.Live = live
		defer ended()
		res, err := s.ev.RunWith(runCtx, source, o)
		if err != nil && res == nil {
			// The evaluator could not run it at all (closed session).
			res = &shell.Result{Exit: 1, Stderr: err.Error(), Value: value.NewRecord(
				value.F("exit", value.Int(1)), value.F("stdout", value.Str("")), value.F("stderr", value.Str(err.Error())))}
		}
		// A cancelled run comes back with its partial result and exit 130.
		return res
	}
}

// checkExecRequest refuses an execution request that cannot run.
func checkExecRequest(req core.ExecRequest) error {
	if strings.TrimSpace(req.Source) == "" {
		return rpc.Errorf(rpc.InvalidParams, "source is empty: give shell source such as \"ls -la\"")
	}
	if req.TimeoutMS < 0 {
		return rpc.Errorf(rpc.InvalidParams, "timeout_ms must be positive (milliseconds after which the execution becomes a task)")
	}
	if i := strings.IndexByte(req.Source, 0); i >= 0 {
		return rpc.Errorf(rpc.InvalidParams, "source has a NUL byte at offset %d; shell source cannot carry one (write binary data with printf '\\0' or a file)", i)
	}
	return nil
}

// runOnAnother runs an execution on a goroutine of its own: a
// background one as a task from the start, one with a timeout (whose
// request cannot be answered early) as a task once the timeout passes.
// checked is closed once the run's policy check was made.
//
// When the run was refused by its policy check, it returns nil and no
// error: the caller answers the refusal.
func (p *Provider) runOnAnother(ctx context.Context, c *core.Caller, s *sess, req core.ExecRequest, entry out.Entry,
	run func(detach <-chan struct{}) *shell.Result, cancel context.CancelFunc, started time.Time, live *shell.Live,
	unfollow func() bool, checked <-chan struct{}, refused func() bool) (*built, error) {
	detach := make(chan struct{})
	done := make(chan *shell.Result, 1)
	if req.Background {
		unfollow()
		close(detach) // a task from the start
	}
	// The evaluator takes foreground runs in turn; a detached run gives
	// the session back at once.
	go func() { done <- run(detach) }()

	var timeout <-chan time.Time
	if req.TimeoutMS > 0 && !req.Background {
		t := time.NewTimer(time.Duration(req.TimeoutMS) * time.Millisecond)
		defer t.Stop()
		timeout = t.C
	}
	if req.Background {
		// A task from the start takes no turn: its check is made at once,
		// and a refusal is the reply.
		<-checked
		if refused() {
			<-done
			cancel()
			return nil, nil
		}
		return &built{reply: p.becomeTask(c, s, req, entry, cancel, done, started, live)}, nil
	}
	select {
	case res := <-done:
		defer cancel()
		if refused() {
			return nil, nil
		}
		return p.finish(ctx, c, s, req, entry, res)
	case <-timeout:
		unfollow()
		close(detach)
		return &built{reply: p.becomeTask(c, s, req, entry, cancel, done, started, live)}, nil
	}
}

// runOrAnswerEarly runs an execution with a timeout on the request's own
// goroutine. If the timeout comes first, the run becomes a task: the reply
// naming the task goes out at once (rpc.ReplyNow) and this goroutine runs
// on as the task, then records its outcome; what it returns then is
// dropped. (Running on another goroutine and waiting for it would cost
// every execution two goroutine hand-offs.)
//
// When the run was refused by its policy check before the timeout, it
// returns nil and no error: the caller answers the refusal.
func (p *Provider) runOrAnswerEarly(ctx context.Context, c *core.Caller, s *sess, req core.ExecRequest, entry out.Entry,
	run func(detach <-chan struct{}) *shell.Result, cancel context.CancelFunc, started time.Time, live *shell.Live, unfollow func() bool, refused func() bool) (*built, error) {
	defer cancel()
	detach := make(chan struct{})
	var mu sync.Mutex
	ended := false
	var t *task.Task              // set when the timeout turned the run into a task
	var taskReply *core.ExecReply // the reply that says so
	timer := time.AfterFunc(time.Duration(req.TimeoutMS)*time.Millisecond, func() {
		mu.Lock()
		if ended {
			mu.Unlock()
			return
		}
		unfollow() // a task now: the caller's cancel no longer ends it
		close(detach)
		t, taskReply = p.startTask(c, req, entry, cancel, started, live)
		reply := taskReply
		mu.Unlock()
		rpc.ReplyNow(ctx, reply)
	})
	res := run(detach)
	mu.Lock()
	ended = true
	became, reply := t, taskReply
	mu.Unlock()
	if became == nil {
		timer.Stop()
		if refused() {
			return nil, nil
		}
		return p.finish(ctx, c, s, req, entry, res)
	}
	p.finishTask(became, c, s, req, entry, res)
	// Whichever goes out, this or the timer's ReplyNow, it is the reply
	// that names the task: the caller learns of the task either way, and
	// reads its outcome from it.
	return &built{reply: reply}, nil
}

// becomeTask hands a running execution to the task registry; the reply
// names the task and the out:N its value will have.
func (p *Provider) becomeTask(c *core.Caller, s *sess, req core.ExecRequest, entry out.Entry, cancel context.CancelFunc, done chan *shell.Result, started time.Time, live *shell.Live) *core.ExecReply {
	t, reply := p.startTask(c, req, entry, cancel, started, live)
	go func() {
		defer cancel()
		p.finishTask(t, c, s, req, entry, <-done)
	}()
	return reply
}

// startTask registers a running execution as a task and returns the reply
// that names it.
func (p *Provider) startTask(c *core.Caller, req core.ExecRequest, entry out.Entry, cancel context.CancelFunc, started time.Time, live *shell.Live) (*task.Task, *core.ExecReply) {
	t := p.tasks.BeginWithOutput(c.Session, c.Principal, req.Source, cancel, started, liveOutput{live})
	rec := t.Record()
	return t, &core.ExecReply{Ref: entry.Ref, URI: entry.URI, State: "running", Task: rec.Task, TaskURI: rec.URI, Effects: []string{}}
}

// liveOutput lets the task registry follow a run's output.
type liveOutput struct{ l *shell.Live }

func (o liveOutput) ReadStream(stream string, since int64, limit int) ([]byte, int64, int64, bool) {
	ch := o.l.Read(stream, since, limit)
	return ch.Data, ch.From, ch.Size, ch.Open
}

// finishTask records a task's run once it ended, like a foreground one,
// and its outcome in the task.
func (p *Provider) finishTask(t *task.Task, c *core.Caller, s *sess, req core.ExecRequest, entry out.Entry, res *shell.Result) {
	b, err := p.finish(context.Background(), c, s, req, entry, res)
	o := task.Outcome{Exit: res.Exit, Err: err}
	if b != nil {
		o.ResultRef, o.ValRef = b.reply.Ref, b.reply.ValRef
	}
	p.tasks.Finish(t, o)
}

// finish records the value, journals the execution, publishes the
// preview and builds the reply.
func (p *Provider) finish(ctx context.Context, c *core.Caller, s *sess, req core.ExecRequest, entry out.Entry, res *shell.Result) (*built, error) {
	v := res.Value
	if v == nil {
		v = value.Null{}
	}
	e, err := p.trans.Fill(c.Session, entry.N, v, res.Marks, res.Ahead...)
	if err != nil {
		return nil, err
	}
	kinds := effectKinds(res.Effects)
	head := res.Head()
	if head == "" {
		// Nothing ran to completion in the foreground (a lone `cmd &`,
		// a cancelled run): name the command the source starts with.
		head = firstCommand(req.Source)
	}
	ok, exit := res.Exit == 0, res.Exit
	state := "completed"
	if !ok {
		state = "failed"
	}
	secrets := secretValues(s.ev.Env())
	row := core.JournalRow{Session: c.Session, Principal: c.Principal, Kind: req.Kind, Head: head, Source: scrub(req.Source, secrets),
		Effects: kinds, OK: ok, Exit: exit, Ref: e.Ref, DurationNS: res.Duration.Nanoseconds(), Transcript: true}
	// The reply waits for the row's durable commit (and, when the value
	// spilled to the content store, for the blob's). Meanwhile another
	// goroutine builds the preview, the reply and the render event, and
	// encodes both, so that little is left to do once the commit is in.
	prev := make(chan built, 1)
	go func() {
		raw, text := p.preview(v, res.Marks)
		if len(secrets) > 0 {
			raw, text = scrubJSON(raw, secrets), scrub(text, secrets)
		}
		// Credential shapes too: the preview is shown and published (the
		// render event); the value itself stays readable through its ref.
		marks := res.Marks
		if r, t := journal.RedactJSON(raw), journal.Redact(text); t != text || !bytes.Equal(r, raw) {
			raw, text = r, t
			marks = append(slices.Clone(marks), MarkRedacted)
		}
		b := built{reply: &core.ExecReply{Ref: e.Ref, URI: e.URI, OK: &ok, Exit: &exit, State: state, DurationNS: res.Duration.Nanoseconds(),
			Effects: kinds, Preview: raw, PreviewText: text, ValRef: e.ValRef, Marks: marks}}
		if note := confinedNote(s, res); note != nil {
			b.reply.Confined = note
		}
		b.encoded, _ = rpc.Marshal(b.reply) // nil on failure: the connection encodes the reply itself
		ev := map[string]any{"session": c.Session, "principal": c.Principal, "ref": e.Ref, "ok": ok, "exit": exit, "head": head, "preview": text}
		b.render, _ = json.Marshal(ev)
		prev <- b
	}()
	flushed := make(chan error, 1)
	if e.ValRef != "" {
		go func() { flushed <- p.flushBlob(e.ValRef) }()
	} else {
		flushed <- nil
	}
	if j := p.journal; j != nil {
		// The row is written even if the caller went away meanwhile: the
		// execution happened.
		if _, err := j.Append(context.WithoutCancel(ctx), row); err != nil {
			return nil, rpc.Errorf(rpc.JournalWriteFailed, "it ran, but its journal row could not be written: %v (its value is %s); do not simply retry: check what it did", err, e.Ref)
		}
	}
	if err := <-flushed; err != nil {
		return nil, rpc.Errorf(rpc.Internal, "store the value of %s: %v", e.Ref, err)
	}
	b := <-prev
	if b.render != nil {
		_, _ = p.bus.Publish(bus.ChannelRender, b.render)
	}
	return &b, nil
}

// MarkRedacted marks a reply whose preview had credentials redacted: the
// value itself, read through its ref, has them as they were.
const MarkRedacted = "redacted"

// journalWritable refuses an execution before it runs when the journal
// could not record it.
func (p *Provider) journalWritable() error {
	if g, ok := p.journal.(core.JournalGate); ok {
		return g.Writable()
	}
	return nil
}

// built is a finished execution's reply, with its encoding (nil if it
// could not be encoded) and its render event.
type built struct {
	reply           *core.ExecReply
	encoded, render json.RawMessage
}

// flushBlob makes a spilled value's blob durable: content-store puts
// become durable in the background, and the reply hands out the ref.
func (p *Provider) flushBlob(valRef string) error {
	if p.blobs == nil {
		return nil
	}
	return p.blobs.FlushBlob(strings.TrimPrefix(valRef, "val:blake3:"))
}

// preview is the bounded preview of a value. A value marked as coming
// from an environment dump or a .env file is not shown: the reply says
// where to read it instead, so secrets never reach previews or events.
func (p *Provider) preview(v value.Value, marks []string) (json.RawMessage, string) {
	for _, m := range marks {
		if m == shell.MarkSecretSource {
			msg := "«secret-source: this value came from an environment dump or a .env file; it is not previewed. Read the ref to see it.»"
			raw, _ := value.Marshal(value.Str(msg))
			return raw, msg
		}
	}
	structured, _, _, err := render.JSON(v, render.Budget{MaxRows: 20, MaxItems: 20, MaxString: 2048}, previewLimit)
	if err != nil {
		return nil, ""
	}
	return structured, render.Render(v, previewText)
}

func effectKinds(es []shell.Effect) []string {
	seen := map[string]bool{}
	out := []string{}
	for _, e := range es {
		if !seen[e.Kind] {
			seen[e.Kind] = true
			out = append(out, e.Kind)
		}
	}
	return out
}

// Read implements core.Provider: the session views.
func (p *Provider) Read(_ context.Context, c *core.Caller, u *uri.URI) (*core.Content, error) {
	if len(u.Segments) != 1 {
		return nil, rpc.Errorf(rpc.NotFound, "session views are shoal://session/cwd, shoal://session/env and shoal://session/reef")
	}
	s, err := p.session(c.Session)
	if err != nil {
		return nil, err
	}
	switch view := u.Segments[0]; view {
	case "cwd":
		return &core.Content{Record: wire.CwdView{Session: c.Session, Cwd: s.ev.Cwd()}}, nil
	case "env":
		return &core.Content{Record: envView(c, s.ev.Env())}, nil
	case "reef":
		pathEnv := ""
		for _, e := range s.ev.Env() {
			if e.Name == "PATH" {
				pathEnv = e.Value
			}
		}
		return &core.Content{Record: reefView(s.ev.Cwd(), pathEnv)}, nil
	default:
		return nil, rpc.Errorf(rpc.NotFound, "no session view %q; the views are cwd, env and reef (shoal://session/{view})", view)
	}
}

// GrantEnvRead is the grant that shows environment values.
const GrantEnvRead = "EnvRead"

func envView(c *core.Caller, env []shell.EnvVar) wire.EnvView {
	sort.Slice(env, func(i, j int) bool { return env[i].Name < env[j].Name })
	granted := c.Grants.Has(GrantEnvRead)
	out := wire.EnvView{Session: c.Session, Count: len(env), ValuesGranted: granted, Vars: make([]wire.EnvVar, 0, len(env))}
	for _, e := range env {
		v := wire.EnvVar{Name: e.Name}
		if granted {
			v.Value = &e.Value
		}
		out.Vars = append(out.Vars, v)
	}
	if !granted {
		out.Values = "not granted: values need the EnvRead grant in policy.toml ([grants]); names only"
	}
	return out
}

// SessionClosed implements core.SessionObserver: the evaluator and every
// process it started end.
func (p *Provider) SessionClosed(name string) {
	p.mu.Lock()
	s := p.sessions[name]
	delete(p.sessions, name)
	p.mu.Unlock()
	if s != nil {
		s.ev.Close()
		s.conf.close()
	}
}

// Close implements core.Closer.
func (p *Provider) Close() error {
	p.mu.Lock()
	p.closed = true
	all := p.sessions
	p.sessions = map[string]*sess{}
	p.mu.Unlock()
	var errs []error
	for _, s := range all {
		if err := s.ev.Close(); err != nil {
			errs = append(errs, fmt.Errorf("session %s: %w", s.name, err))
		}
		s.conf.close()
	}
	return errors.Join(errs...)
}

// Sessions lists the sessions with an evaluator.
func (p *Provider) Sessions() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	out := make([]string, 0, len(p.sessions))
	for n := range p.sessions {
		out = append(out, n)
	}
	sort.Strings(out)
	return out
}

// Var implements plan.SessionVars: the analyzer resolves $NAME in a plan
// with the session's value.
func (p *Provider) Var(session, name string) (string, bool) {
	p.mu.Lock()
	s := p.sessions[session]
	p.mu.Unlock()
	if s == nil {
		return "", false
	}
	return s.ev.Var(name)
}

// Func implements plan.SessionFuncs: a call to a function an earlier
// execution defined is analyzed as its body.
func (p *Provider) Func(session, name string) (*syntax.Stmt, bool) {
	p.mu.Lock()
	s := p.sessions[session]
	p.mu.Unlock()
	if s == nil {
		return nil, false
	}
	return s.ev.Func(name)
}

// firstCommand is the name of the first simple command in src, as parsed
// (not run), with any directory stripped; "" when there is none.
func firstCommand(src string) string {
	f, err := syntax.NewParser().Parse(strings.NewReader(src), "")
	if err != nil {
		return ""
	}
	head := ""
	syntax.Walk(f, func(n syntax.Node) bool {
		if head != "" {
			return false
		}
		if call, ok := n.(*syntax.CallExpr); ok && len(call.Args) > 0 {
			if lit := call.Args[0].Lit(); lit != "" {
				head = filepath.Base(lit)
				return false
			}
		}
		return true
	})
	return head
}
