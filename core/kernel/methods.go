package kernel

import (
	"context"
	"encoding/json"
	"os"
	"time"

	"github.com/shoal-sh/shoal/core"
	"github.com/shoal-sh/shoal/core/bus"
	"github.com/shoal-sh/shoal/core/rpc"
	"github.com/shoal-sh/shoal/core/uri"
	"github.com/shoal-sh/shoal/core/wire"
)

// EventMethod is the notification method carrying event frames (K5).
const EventMethod = "events.event"

type coreMethod func(k *Kernel, ctx context.Context, c *conn, caller *core.Caller, params json.RawMessage) (any, error)

// coreMethodTable is every method the kernel serves itself (session.attach
// aside, which dispatch handles before a caller exists). It is the one
// place they are listed: New gives each kernel this table, so no init()
// and no file order decides what is registered.
func coreMethodTable() map[string]coreMethod {
	return map[string]coreMethod{
		"events.read":         (*Kernel).eventsRead,
		"events.publish":      (*Kernel).eventsPublish,
		"events.subscribe":    (*Kernel).eventsSubscribe,
		"events.unsubscribe":  (*Kernel).eventsUnsubscribe,
		"resources.list":      (*Kernel).resourcesList,
		"resources.templates": (*Kernel).resourcesTemplates,
		"resources.read":      (*Kernel).resourcesRead,
		"value.get":           (*Kernel).valueGet,
		"session.view":        (*Kernel).sessionView,
		"session.close":       (*Kernel).sessionClose,
		"kernel.status":       (*Kernel).status,
		"plugin.list":         (*Kernel).pluginList,
		"wait":                (*Kernel).wait,
	}
}

type readParams struct {
	Channel string  `json:"channel"`
	Since   *uint64 `json:"since"`
	Limit   int     `json:"limit"`
}

func (k *Kernel) eventsRead(_ context.Context, _ *conn, caller *core.Caller, raw json.RawMessage) (any, error) {
	var p readParams
	if err := rpc.DecodeParams(raw, &p); err != nil {
		return nil, err
	}
	if p.Channel == "" {
		return nil, rpc.Errorf(rpc.InvalidParams, "channel is required, e.g. {\"channel\":\"journal\",\"since\":81}")
	}
	// Zero or a negative limit means the default (docs/events.md), as in
	// shoal://events/{channel}?limit=.
	res, err := k.bus.Read(p.Channel, p.Since, p.Limit)
	if err != nil {
		return nil, err
	}
	return res.ForSession(caller.Session), nil
}

type publishParams struct {
	Channel string          `json:"channel"`
	Payload json.RawMessage `json:"payload"`
}

func (k *Kernel) eventsPublish(_ context.Context, _ *conn, _ *core.Caller, raw json.RawMessage) (any, error) {
	var p publishParams
	if err := rpc.DecodeParams(raw, &p); err != nil {
		return nil, err
	}
	ev, err := k.bus.PublishClient(p.Channel, p.Payload)
	if err != nil {
		return nil, err
	}
	return wire.Published{Channel: ev.Channel, Seq: ev.Seq, TS: ev.TS}, nil
}

type subscribeParams struct {
	Channel string `json:"channel"`
	URI     string `json:"uri"`
}

// channelParam decodes {channel} or {uri} params into a channel name.
func (k *Kernel) channelParam(raw json.RawMessage) (string, error) {
	var p subscribeParams
	if err := rpc.DecodeParams(raw, &p); err != nil {
		return "", err
	}
	return k.channelOf(p)
}

// channelOf resolves {channel} or {uri} to a channel name.
func (k *Kernel) channelOf(p subscribeParams) (string, error) {
	if p.Channel != "" {
		return p.Channel, nil
	}
	if p.URI == "" {
		return "", rpc.Errorf(rpc.InvalidParams, "give channel (e.g. \"user.build\") or uri (e.g. \"shoal://task/9\")")
	}
	u, err := uri.Parse(p.URI)
	if err != nil {
		return "", err
	}
	ch, ok := k.router.Channel(u)
	if !ok {
		return "", rpc.Errorf(rpc.InvalidParams, "%s is not subscribable; subscribe to shoal://events/{channel}, shoal://task/{id} or shoal://task/{id}/out", p.URI)
	}
	return ch, nil
}

func (k *Kernel) eventsSubscribe(_ context.Context, c *conn, caller *core.Caller, raw json.RawMessage) (any, error) {
	ch, err := k.channelParam(raw)
	if err != nil {
		return nil, err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.subs == nil {
		return nil, rpc.ErrClosedError()
	}
	if _, dup := c.subs[ch]; !dup {
		rc := c.rc
		session := caller.Session
		var frames [][]byte
		sub, err := k.bus.SubscribeBatches(ch, func(evs []bus.Event) error {
			frames = frames[:0]
			for i := range evs {
				if bus.VisibleTo(evs[i], session) { // not another session's render or task event
					frames = append(frames, evs[i].Wire())
				}
			}
			if len(frames) == 0 {
				return nil
			}
			return rc.NotifyEncoded(EventMethod, frames...)
		})
		if err != nil {
			return nil, err
		}
		c.subs[ch] = sub
	}
	r, err := k.bus.Read(ch, nil, 1)
	if err != nil {
		return nil, err
	}
	return wire.Subscribed{Channel: ch, Subscribed: true, NextSeq: r.NextSeq, Epoch: r.Epoch}, nil
}

func (k *Kernel) eventsUnsubscribe(_ context.Context, c *conn, _ *core.Caller, raw json.RawMessage) (any, error) {
	ch, err := k.channelParam(raw)
	if err != nil {
		return nil, err
	}
	c.mu.Lock()
	s, ok := c.subs[ch]
	delete(c.subs, ch)
	c.mu.Unlock()
	if ok {
		s.Close()
	}
	return wire.Unsubscribed{Channel: ch, Unsubscribed: ok}, nil
}

func (k *Kernel) resourcesList(ctx context.Context, _ *conn, caller *core.Caller, raw json.RawMessage) (any, error) {
	if err := rpc.NoParams(raw); err != nil {
		return nil, err
	}
	res, err := k.router.List(ctx, caller)
	out := wire.ResourceList{Resources: make([]wire.Resource, len(res))}
	for i, r := range res {
		out.Resources[i] = wire.Resource{URI: r.URI, Name: r.Name, Description: r.Description, MimeType: r.MimeType}
	}
	if err != nil {
		// One failing provider must not hide the rest; say what failed.
		out.Warnings = []string{err.Error()}
	}
	return out, nil
}

func (k *Kernel) resourcesTemplates(_ context.Context, _ *conn, _ *core.Caller, raw json.RawMessage) (any, error) {
	if err := rpc.NoParams(raw); err != nil {
		return nil, err
	}
	t := k.router.Templates()
	out := wire.TemplateList{ResourceTemplates: make([]wire.Template, len(t))}
	for i, tt := range t {
		out.ResourceTemplates[i] = wire.Template(tt)
	}
	return out, nil
}

type resourceReadParams struct {
	URI     string          `json:"uri"`
	Target  string          `json:"target"`
	Path    *string         `json:"path"`
	Slice   *string         `json:"slice"`
	Format  *string         `json:"format"`
	Grep    *string         `json:"grep"`
	Context *int            `json:"context"`
	Elide   json.RawMessage `json:"elide"`
}

func (k *Kernel) read(ctx context.Context, caller *core.Caller, p resourceReadParams) (any, error) {
	target := p.URI
	if target == "" {
		target = p.Target
	}
	if target == "" {
		return nil, rpc.Errorf(rpc.InvalidParams, "give uri (shoal://out/17) or target (out:17)")
	}
	u, err := uri.ParseTarget(target)
	if err != nil {
		return nil, err
	}
	elide := p.Elide
	if len(elide) > 0 && elide[0] == '"' {
		// Accept the budget as a JSON string too ("{\"max_rows\":20}").
		var s string
		if err := json.Unmarshal(elide, &s); err == nil {
			elide = json.RawMessage(s)
		}
	}
	return k.router.Read(ctx, caller, u, core.ReadOptions{Path: p.Path, Slice: p.Slice, Format: p.Format, Grep: p.Grep, Context: p.Context, Elide: elide})
}

func (k *Kernel) resourcesRead(ctx context.Context, _ *conn, caller *core.Caller, raw json.RawMessage) (any, error) {
	var p resourceReadParams
	if err := rpc.DecodeParams(raw, &p); err != nil {
		return nil, err
	}
	return k.read(ctx, caller, p)
}

func (k *Kernel) valueGet(ctx context.Context, _ *conn, caller *core.Caller, raw json.RawMessage) (any, error) {
	var p resourceReadParams
	if err := rpc.DecodeParams(raw, &p); err != nil {
		return nil, err
	}
	return k.read(ctx, caller, p)
}

func (k *Kernel) sessionView(ctx context.Context, _ *conn, caller *core.Caller, raw json.RawMessage) (any, error) {
	var p struct {
		View string `json:"view"`
	}
	if err := rpc.DecodeParams(raw, &p); err != nil {
		return nil, err
	}
	if p.View == "" {
		return nil, rpc.Errorf(rpc.InvalidParams, "view is required: cwd, env or reef")
	}
	prov, ok := k.router.Provider("session")
	if !ok {
		return nil, rpc.Errorf(rpc.Unavailable, "no session provider is loaded")
	}
	c, err := prov.Read(ctx, caller, uri.New("session", p.View))
	if err != nil {
		return nil, err
	}
	if c.Record != nil {
		return c.Record, nil
	}
	return c.Value, nil
}

func (k *Kernel) sessionClose(_ context.Context, _ *conn, caller *core.Caller, raw json.RawMessage) (any, error) {
	var p struct {
		Session string `json:"session"`
	}
	if err := rpc.DecodeParams(raw, &p); err != nil {
		return nil, err
	}
	name := p.Session
	if name == "" {
		name = caller.Session
	}
	if name != caller.Session {
		return nil, rpc.Errorf(rpc.Forbidden, "a connection can close only its own session (%s)", caller.Session)
	}
	k.CloseSession(name)
	return wire.SessionClosed{Session: name, Closed: true}, nil
}

// CloseSession ends a session's state in every provider: its evaluator,
// processes, PTYs and transcript.
func (k *Kernel) CloseSession(name string) {
	for _, p := range k.providers {
		if o, ok := p.(core.SessionObserver); ok {
			o.SessionClosed(name)
		}
	}
	k.mu.Lock()
	delete(k.sessions, name)
	k.mu.Unlock()
}

func (k *Kernel) status(_ context.Context, _ *conn, _ *core.Caller, raw json.RawMessage) (any, error) {
	if err := rpc.NoParams(raw); err != nil {
		return nil, err
	}
	k.mu.Lock()
	sessions := make([]wire.SessionStatus, 0, len(k.sessions))
	for _, s := range k.sessions {
		sessions = append(sessions, wire.SessionStatus{Name: s.name, Attached: s.attached, Created: s.created.UnixNano(), Workspace: s.workspace})
	}
	conns := len(k.conns)
	k.mu.Unlock()
	out := wire.Status{
		Version:     Version,
		PID:         os.Getpid(),
		StateDir:    k.stateDir,
		Socket:      k.socket,
		Started:     k.started.UnixNano(),
		UptimeMS:    time.Since(k.started).Milliseconds(),
		Connections: conns,
		Sessions:    sessions,
		Families:    k.router.Families(),
		Methods:     k.MethodNames(),
		Epoch:       k.bus.Epoch(),
		IdleExit:    k.opts.IdleExit.String(),
	}
	if js, ok := k.journal.(interface{ Stats() core.JournalStats }); ok {
		st := wire.JournalStats(js.Stats())
		out.Journal = &st
	}
	out.Plugins = k.pluginStatus()
	if s, ok := k.sessionSvc.(SessionConfinement); ok {
		sb := s.SandboxStatus()
		out.Sandbox = &sb
	}
	if k.cluster != nil {
		cs := k.cluster.Status()
		out.Cluster = &cs
	}
	return out, nil
}

func (k *Kernel) pluginList(_ context.Context, _ *conn, _ *core.Caller, raw json.RawMessage) (any, error) {
	if err := rpc.NoParams(raw); err != nil {
		return nil, err
	}
	return wire.PluginList{Plugins: k.pluginStatus()}, nil
}

// pluginStatus is the plugin host's status, [] when none is loaded.
func (k *Kernel) pluginStatus() []wire.PluginStatus {
	if k.plugins == nil {
		return []wire.PluginStatus{}
	}
	return k.plugins.Status()
}
