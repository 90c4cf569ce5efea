// Package task keeps the kernel's tasks: executions that run in the
// background, either because they were started with background: true or
// because they outlived their timeout_ms. Records live in memory only.
//
// Every state change is published on the task's channel task.{id}, and
// shoal://task/{id}/out resolves the captured result once there is one.
package task

import (
	"context"
	"encoding/json"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/shoal-sh/shoal/core"
	"github.com/shoal-sh/shoal/core/bus"
	"github.com/shoal-sh/shoal/core/rpc"
	"github.com/shoal-sh/shoal/core/uri"
	"github.com/shoal-sh/shoal/core/wire"
	"github.com/shoal-sh/shoal/providers/journal"
	"github.com/shoal-sh/shoal/providers/out"
)

// ServiceTasks is the task registry, offered by this provider.
var ServiceTasks = core.NewKey[*Registry]("tasks")

// States of a task.
const (
	Running   = "running"
	Completed = "completed"
	Failed    = "failed"
	Cancelled = "cancelled"
)

// keepFinished bounds finished tasks kept per session (newest kept).
const keepFinished = 256

// Record is a task as clients see it (SPEC T1): task.get, task.cancel
// and task.list answer it.
type Record = wire.Task

// Outcome is how a task's run ended.
type Outcome struct {
	Exit      int
	ResultRef string // out:N of the captured value, "" when none
	ValRef    string
	Err       error // failed to run or capture (not a non-zero exit)
}

// Output is a running task's output as it is produced (the session's
// shell.Live behind an adapter).
type Output interface {
	// ReadStream returns up to limit bytes of stream (stdout or stderr)
	// from offset since: data starts at from (later than since when the
	// bytes in between are no longer kept); size is the stream's size so
	// far; open is false once the run's value holds the output.
	ReadStream(stream string, since int64, limit int) (data []byte, from, size int64, open bool)
}

// Task is one live task.
type Task struct {
	mu       sync.Mutex
	rec      Record
	cancel   context.CancelFunc
	done     chan struct{}
	finished bool
	out      Output // nil when the run's output cannot be followed
}

// Record returns a copy of the task's record.
func (t *Task) Record() Record {
	t.mu.Lock()
	defer t.mu.Unlock()
	r := t.rec
	if r.Exit != nil {
		e := *r.Exit
		r.Exit = &e
	}
	return r
}

// Done is closed when the task has ended.
func (t *Task) Done() <-chan struct{} { return t.done }

// Registry holds every task of the kernel.
type Registry struct {
	bus *bus.Bus

	mu    sync.Mutex
	next  int
	tasks map[int]*Task
}

// NewRegistry returns an empty registry publishing on b (may be nil).
func NewRegistry(b *bus.Bus) *Registry {
	return &Registry{bus: b, next: 1, tasks: map[int]*Task{}}
}

// Channel is the event channel of task id.
func Channel(id int) string { return "task." + strconv.Itoa(id) }

// Begin records a running task. cancel stops its run (it must kill the
// run's whole process group). Finish must be called when the run ends.
func (r *Registry) Begin(session, principal, source string, cancel context.CancelFunc, started time.Time) *Task {
	return r.BeginWithOutput(session, principal, source, cancel, started, nil)
}

// BeginWithOutput is [Registry.Begin] for a run whose output can be
// followed while it runs: shoal://task/{id}/stdout and …/stderr read it,
// and task.{id} carries its sizes at most once per [sizeEvery].
func (r *Registry) BeginWithOutput(session, principal, source string, cancel context.CancelFunc, started time.Time, out Output) *Task {
	now := time.Now().UnixNano()
	// The record is shown and published, never run: credentials in the
	// source are redacted, as in the journal.
	source = journal.Redact(source)
	r.mu.Lock()
	id := r.next
	r.next++
	t := &Task{cancel: cancel, done: make(chan struct{}), out: out, rec: Record{
		ID: id, Task: "task:" + strconv.Itoa(id), URI: "shoal://task/" + strconv.Itoa(id),
		Session: session, Principal: principal, State: Running, Source: source, Description: describe(source),
		Created: now, Started: started.UnixNano(),
	}}
	r.tasks[id] = t
	r.pruneLocked(session)
	r.mu.Unlock()
	r.publish(t.Record())
	if out != nil && r.bus != nil {
		go r.reportSizes(t)
	}
	return t
}

// sizeEvery bounds the rate of a running task's output events.
const sizeEvery = time.Second

// reportSizes publishes a running task's output sizes on task.{id}
// whenever they changed, at most once per sizeEvery, until it ends: a
// follower learns there is more to read (the offset and size, not the
// bytes) without polling.
func (r *Registry) reportSizes(t *Task) {
	tick := time.NewTicker(sizeEvery)
	defer tick.Stop()
	var last [2]int64
	for {
		select {
		case <-t.done:
			return
		case <-tick.C:
		}
		var now [2]int64
		for i, s := range []string{"stdout", "stderr"} {
			_, _, now[i], _ = t.out.ReadStream(s, 0, 0)
		}
		if now == last {
			continue
		}
		last = now
		rec := t.Record()
		if rec.State != Running {
			return
		}
		raw, _ := json.Marshal(map[string]any{"id": rec.ID, "task": rec.Task, "state": rec.State, "output": map[string]int64{"stdout": now[0], "stderr": now[1]}})
		_, _ = r.bus.Publish(Channel(rec.ID), raw)
	}
}

func describe(src string) string {
	line, _, _ := strings.Cut(strings.TrimSpace(src), "\n")
	if len(line) > 120 {
		line = line[:117] + "…"
	}
	return line
}

// Finish ends a task with its outcome. A task that was cancelled stays
// cancelled whatever its run reports.
func (r *Registry) Finish(t *Task, o Outcome) {
	t.mu.Lock()
	if t.finished {
		t.mu.Unlock()
		return
	}
	t.finished = true
	t.rec.Finished = time.Now().UnixNano()
	exit := o.Exit
	t.rec.Exit = &exit
	t.rec.ResultRef, t.rec.ValRef = o.ResultRef, o.ValRef
	switch {
	case t.rec.State == Cancelled:
	case o.Err != nil:
		t.rec.State = Failed
		t.rec.Error = o.Err.Error()
	case o.Exit != 0:
		t.rec.State = Failed
		t.rec.Error = fmt.Sprintf("exit status %d", o.Exit)
	default:
		t.rec.State = Completed
	}
	rec := t.rec
	t.mu.Unlock()
	// The event is on task.{id} before anyone waiting sees the end.
	r.publish(rec)
	close(t.done)
}

func (r *Registry) publish(rec Record) {
	if r.bus == nil {
		return
	}
	// session: only the task's own session sees its events (bus.VisibleTo).
	payload := map[string]any{"id": rec.ID, "task": rec.Task, "session": rec.Session, "state": rec.State}
	if rec.Exit != nil {
		payload["exit"] = *rec.Exit
	}
	if rec.ResultRef != "" {
		payload["result_ref"] = rec.ResultRef
	}
	if rec.Error != "" {
		payload["error"] = rec.Error
	}
	raw, _ := json.Marshal(payload)
	_, _ = r.bus.Publish(Channel(rec.ID), raw)
}

// pruneLocked drops the oldest finished tasks of a session beyond
// keepFinished.
func (r *Registry) pruneLocked(session string) {
	var finished []int
	for id, t := range r.tasks {
		t.mu.Lock()
		if t.rec.Session == session && t.rec.State != Running {
			finished = append(finished, id)
		}
		t.mu.Unlock()
	}
	if len(finished) <= keepFinished {
		return
	}
	sort.Ints(finished)
	for _, id := range finished[:len(finished)-keepFinished] {
		delete(r.tasks, id)
	}
}

// Get returns a task the caller's session may see.
func (r *Registry) Get(session string, id int) (*Task, error) {
	r.mu.Lock()
	t := r.tasks[id]
	r.mu.Unlock()
	if t == nil || t.Record().Session != session {
		return nil, rpc.Errorf(rpc.NotFound, "task:%d does not exist in this session (tasks live in kernel memory; task.list shows the session's tasks)", id)
	}
	return t, nil
}

// List returns the session's tasks, newest first.
func (r *Registry) List(session string) []Record {
	r.mu.Lock()
	var out []Record
	for _, t := range r.tasks {
		rec := t.Record()
		if rec.Session == session {
			out = append(out, rec)
		}
	}
	r.mu.Unlock()
	sort.Slice(out, func(i, j int) bool { return out[i].ID > out[j].ID })
	if out == nil {
		out = []Record{}
	}
	return out
}

// Cancel cancels a running task: its process group is killed and its
// state becomes cancelled.
func (r *Registry) Cancel(session string, id int) (Record, error) {
	t, err := r.Get(session, id)
	if err != nil {
		return Record{}, err
	}
	t.mu.Lock()
	if t.rec.State != Running {
		st := t.rec.State
		t.mu.Unlock()
		return Record{}, rpc.Errorf(rpc.TaskState, "task:%d is %s already; only running tasks can be cancelled", id, st)
	}
	t.rec.State = Cancelled
	t.mu.Unlock()
	if t.cancel != nil {
		t.cancel()
	}
	// The run reports back through Finish; wait for it so the caller sees
	// the final record and no process is left.
	select {
	case <-t.done:
	case <-time.After(10 * time.Second):
	}
	return t.Record(), nil
}

// Wait blocks until the task ends or ctx is done.
func (r *Registry) Wait(ctx context.Context, session string, id int) (Record, error) {
	t, err := r.Get(session, id)
	if err != nil {
		return Record{}, err
	}
	select {
	case <-t.done:
		return t.Record(), nil
	case <-ctx.Done():
		return t.Record(), ctx.Err()
	}
}

// Busy reports whether any task is running.
func (r *Registry) Busy() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, t := range r.tasks {
		select {
		case <-t.done:
		default:
			return true
		}
	}
	return false
}

// CancelAll cancels every running task (of one session, or all when
// session is "") and waits for them to end.
func (r *Registry) CancelAll(session string) {
	r.mu.Lock()
	var running []*Task
	for _, t := range r.tasks {
		if session == "" || t.Record().Session == session {
			running = append(running, t)
		}
	}
	r.mu.Unlock()
	for _, t := range running {
		t.mu.Lock()
		if t.rec.State == Running {
			t.rec.State = Cancelled
		}
		t.mu.Unlock()
		if t.cancel != nil {
			t.cancel()
		}
	}
	for _, t := range running {
		select {
		case <-t.done:
		case <-time.After(10 * time.Second):
		}
	}
}

// ParseID accepts task:9, 9 (string or number) and shoal://task/9.
func ParseID(raw json.RawMessage) (int, error) {
	var n int
	if json.Unmarshal(raw, &n) == nil && n > 0 {
		return n, nil
	}
	var s string
	if err := json.Unmarshal(raw, &s); err != nil {
		return 0, rpc.MemberErrorf("task", "member \"task\" must be task:N, N, or shoal://task/N")
	}
	n, err := parseIDString(s)
	if err != nil {
		return 0, rpc.MemberErrorf("task", "member \"task\" must be task:N, N, or shoal://task/N (got %q)", s)
	}
	return n, nil
}

func parseIDString(s string) (int, error) {
	s = strings.TrimPrefix(strings.TrimPrefix(strings.TrimSpace(s), "shoal://task/"), "task:")
	n, err := strconv.Atoi(s)
	if err != nil || n < 1 {
		return 0, rpc.Errorf(rpc.InvalidParams, "task must be task:N, N, or shoal://task/N (got %q)", s)
	}
	return n, nil
}

// ValueSource resolves a result ref to content; the transcript service
// (providers/out) implements it.
type ValueSource interface {
	Content(session, ref string) (*core.Content, error)
}

// Provider serves the task family and the task.* methods.
type Provider struct {
	R      *Registry
	values ValueSource
	// transcript is the transcript service, set at start-up.
	transcript *out.Transcript
}

var (
	_ core.Provider       = (*Provider)(nil)
	_ core.Provisioner    = (*Provider)(nil)
	_ core.Subscribable   = (*Provider)(nil)
	_ core.MethodProvider = (*Provider)(nil)
	_ core.Closer         = (*Provider)(nil)
	_ core.Needer         = (*Provider)(nil)
	_ core.Offerer        = (*Provider)(nil)
	_ core.Starter        = (*Provider)(nil)
)

// New returns the task provider.
func New() *Provider { return &Provider{} }

// Family implements core.Provider.
func (*Provider) Family() string { return "task" }

// Provision implements core.Provisioner: it offers the registry service.
func (p *Provider) Provision(h *core.Host) error {
	p.R = NewRegistry(h.Bus)
	core.Offer(h, ServiceTasks, p.R)
	return nil
}

// Offers implements core.Offerer.
func (p *Provider) Offers() []core.AnyKey { return []core.AnyKey{ServiceTasks} }

// Needs implements core.Needer: with the transcript, a task's result ref
// reads as its value.
func (p *Provider) Needs() []core.Dependency {
	return []core.Dependency{core.Optional(out.ServiceTranscript, &p.transcript)}
}

// Start implements core.Starter.
func (p *Provider) Start() error {
	if p.transcript != nil {
		p.values = p.transcript
	}
	return nil
}

// Templates implements core.Provider.
func (*Provider) Templates() []core.Template {
	return []core.Template{
		{URITemplate: "shoal://task/{id}", Name: "task", MimeType: "application/json",
			Description: "A background or timed-out execution: state (running, completed, failed, cancelled), source, times, exit, error and result_ref. Subscribable: state changes, and while it runs its output sizes, arrive as events of channel task.{id}. Its output so far: shoal://task/{id}/stdout?since=BYTES (and …/stderr) answers the bytes after that offset and meta.next, the offset to ask for next; without since, all output kept so far (grep and slice work on it)."},
		{URITemplate: "shoal://task/{id}/out{?path,slice,grep,context,format}", Name: "task output", MimeType: "application/json",
			Description: "The task's captured value once it has one (same path, slice and format as shoal://out/{n}); while running, or failed without a value, the task record itself. Subscribable like shoal://task/{id}."},
	}
}

// List implements core.Provider: one entry per task of the session.
func (p *Provider) List(_ context.Context, c *core.Caller) ([]core.Resource, error) {
	var out []core.Resource
	for _, rec := range p.R.List(c.Session) {
		out = append(out, core.Resource{URI: rec.URI, Name: rec.Task + " (" + rec.State + ")", Description: rec.Description, MimeType: "application/json"})
	}
	return out, nil
}

// idOf reads a task URI: its id and the part asked for ("" for the
// record, out, stdout or stderr).
func idOf(u *uri.URI) (int, string, error) {
	part := ""
	switch {
	case len(u.Segments) == 1:
	case len(u.Segments) == 2 && (u.Segments[1] == "out" || u.Segments[1] == "stdout" || u.Segments[1] == "stderr"):
		part = u.Segments[1]
	default:
		return 0, "", rpc.Errorf(rpc.BadURI, "use shoal://task/{id}, shoal://task/{id}/out, or shoal://task/{id}/stdout?since=BYTES (…/stderr) for the output so far")
	}
	id, err := parseIDString(u.Segments[0])
	if err != nil {
		return 0, "", rpc.Errorf(rpc.BadURI, "%s", err.(*rpc.Error).Message)
	}
	return id, part, nil
}

// Read implements core.Provider.
func (p *Provider) Read(_ context.Context, c *core.Caller, u *uri.URI) (*core.Content, error) {
	id, part, err := idOf(u)
	if err != nil {
		return nil, err
	}
	t, err := p.R.Get(c.Session, id)
	if err != nil {
		return nil, err
	}
	if part == "stdout" || part == "stderr" {
		return p.readStream(c, t, part, u)
	}
	rec := t.Record()
	if part == "" || rec.ResultRef == "" || rec.State == Running || p.values == nil {
		return &core.Content{Record: rec, Ref: rec.Task}, nil
	}
	return p.values.Content(c.Session, rec.ResultRef)
}

// Channel implements core.Subscribable: both task forms map to task.{id}.
func (*Provider) Channel(u *uri.URI) (string, bool) {
	id, part, err := idOf(u)
	if part == "stdout" || part == "stderr" {
		return "", false
	}
	if err != nil {
		return "", false
	}
	return Channel(id), true
}

// Methods implements core.MethodProvider.
func (p *Provider) Methods() map[string]core.Method {
	return map[string]core.Method{
		"task.list": func(_ context.Context, c *core.Caller, raw json.RawMessage) (any, error) {
			if err := rpc.NoParams(raw); err != nil {
				return nil, err
			}
			return wire.TaskList{Tasks: p.R.List(c.Session)}, nil
		},
		"task.get": func(_ context.Context, c *core.Caller, raw json.RawMessage) (any, error) {
			id, err := taskParam(raw)
			if err != nil {
				return nil, err
			}
			t, err := p.R.Get(c.Session, id)
			if err != nil {
				return nil, err
			}
			return t.Record(), nil
		},
		"task.cancel": func(_ context.Context, c *core.Caller, raw json.RawMessage) (any, error) {
			id, err := taskParam(raw)
			if err != nil {
				return nil, err
			}
			return p.R.Cancel(c.Session, id)
		},
	}
}

func taskParam(raw json.RawMessage) (int, error) {
	var p struct {
		Task json.RawMessage `json:"task"`
		ID   json.RawMessage `json:"id"`
	}
	if err := rpc.DecodeParams(raw, &p); err != nil {
		return 0, err
	}
	if p.Task == nil {
		p.Task = p.ID
	}
	if p.Task == nil {
		return 0, rpc.Errorf(rpc.InvalidParams, "task is required, e.g. {\"task\": \"task:9\"}")
	}
	return ParseID(p.Task)
}

// Busy reports running tasks (keeps a background kernel alive).
func (p *Provider) Busy() bool { return p.R != nil && p.R.Busy() }

// SessionClosed cancels the session's tasks.
func (p *Provider) SessionClosed(session string) { p.R.CancelAll(session) }

// Close cancels every task.
func (p *Provider) Close() error {
	if p.R != nil {
		p.R.CancelAll("")
	}
	return nil
}

// Wait implements core.Waiter: it returns the task record once the task
// has ended.
func (p *Provider) Wait(ctx context.Context, c *core.Caller, u *uri.URI, _ core.WaitCond) (any, error) {
	id, _, err := idOf(u)
	if err != nil {
		return nil, err
	}
	return p.R.Wait(ctx, c.Session, id)
}
