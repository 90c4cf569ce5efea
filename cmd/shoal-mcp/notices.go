package main

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"slices"
	"sort"
	"strings"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"

	"github.com/shoal-sh/shoal/core/wire"
)

// Logging (notifications/message) and completion (completion/complete):
// the facade tells the client what goes wrong beside the tool results —
// kernel warnings, plugins that failed to load, the facade's own warnings
// — at the level the client chose with logging/setLevel (warning until it
// does), and completes the arguments of the resource templates from the
// kernel's live state.

// logLevels orders MCP's syslog levels, least severe first.
var logLevels = []mcp.LoggingLevel{
	mcp.LoggingLevelDebug, mcp.LoggingLevelInfo, mcp.LoggingLevelNotice, mcp.LoggingLevelWarning,
	mcp.LoggingLevelError, mcp.LoggingLevelCritical, mcp.LoggingLevelAlert, mcp.LoggingLevelEmergency,
}

func levelRank(l mcp.LoggingLevel) int { return slices.Index(logLevels, l) }

// defaultLogLevel is what a session gets before logging/setLevel.
const defaultLogLevel = mcp.LoggingLevelWarning

// SetLogLevel implements server.SessionWithLogging.
func (s *session) SetLogLevel(level mcp.LoggingLevel) {
	s.mu.Lock()
	s.logLevel = level
	s.mu.Unlock()
}

// GetLogLevel implements server.SessionWithLogging.
func (s *session) GetLogLevel() mcp.LoggingLevel {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.logLevel == "" {
		return defaultLogLevel
	}
	return s.logLevel
}

var _ server.SessionWithLogging = (*session)(nil)

// logTo sends one notifications/message to s when its level lets it
// through. It never blocks the caller on a slow client: a full queue
// drops the message.
func (s *session) logTo(level mcp.LoggingLevel, logger string, data any) {
	s.mu.Lock()
	silent := s.modern && s.logLevel == ""
	s.mu.Unlock()
	if silent || levelRank(level) < levelRank(s.GetLogLevel()) {
		// A 2026-07-28 client gets messages only at the level its
		// requests ask for in _meta.
		return
	}
	b, err := json.Marshal(notification{JSONRPC: "2.0", Method: string(mcp.MethodNotificationMessage),
		Params: map[string]any{"level": level, "logger": logger, "data": data}})
	if err != nil {
		return
	}
	select {
	case s.outbox <- b:
	default:
	}
}

// notify sends a log message to every session of the facade.
func (f *Facade) notify(level mcp.LoggingLevel, logger string, data any) {
	for _, s := range f.openSessions() {
		if s.Initialized() || s.sawInit.Load() {
			s.logTo(level, logger, data)
		}
	}
}

// startupNotices tells a newly initialized client about what already went
// wrong in the kernel: plugins that failed to load.
func (f *Facade) startupNotices(ctx context.Context, s *session) {
	var r wire.PluginList
	if err := f.link.call(ctx, "plugin.list", struct{}{}, &r); err != nil {
		s.logTo(mcp.LoggingLevelError, "shoal-kernel", "the kernel cannot be reached: "+kernelError(err))
		return
	}
	for _, p := range r.Plugins {
		if p.Health == "failed" {
			s.logTo(mcp.LoggingLevelError, "shoal-kernel", fmt.Sprintf("plugin %s failed to load: %s", p.Name, p.Error))
		}
	}
}

// confinementNotice tells the client of the request in ctx, as a
// warning, that the OS confinement refused a run something (the reply's
// confined note): the model reads it in the tool result, the person at
// the host sees it in the host's log.
func confinementNotice(ctx context.Context, reply *wire.ExecReply) {
	c := reply.Confined
	s, _ := server.ClientSessionFromContext(ctx).(*session)
	if c == nil || s == nil {
		return
	}
	msg := fmt.Sprintf("%s: %v", reply.Ref, c.Hint)
	if d := strings.Join(c.Denied, ", "); d != "" {
		msg += " (refused: " + d + ")"
	}
	s.logTo(mcp.LoggingLevelWarning, "shoal-kernel", msg)
}

// logTee passes the facade's log records to its handler and, from warn
// up, to the MCP clients as notifications/message.
type logTee struct {
	slog.Handler
	f *Facade
}

func (t *logTee) Handle(ctx context.Context, r slog.Record) error {
	if r.Level >= slog.LevelWarn && t.f != nil {
		var b strings.Builder
		b.WriteString(r.Message)
		r.Attrs(func(a slog.Attr) bool {
			fmt.Fprintf(&b, " %s=%v", a.Key, a.Value)
			return true
		})
		level := mcp.LoggingLevelWarning
		if r.Level >= slog.LevelError {
			level = mcp.LoggingLevelError
		}
		t.f.notify(level, "shoal-mcp", b.String())
	}
	if t.Handler.Enabled(ctx, r.Level) {
		return t.Handler.Handle(ctx, r)
	}
	return nil
}

func (t *logTee) Enabled(context.Context, slog.Level) bool { return true }

func (t *logTee) WithAttrs(as []slog.Attr) slog.Handler {
	return &logTee{Handler: t.Handler.WithAttrs(as), f: t.f}
}

func (t *logTee) WithGroup(name string) slog.Handler {
	return &logTee{Handler: t.Handler.WithGroup(name), f: t.f}
}

// maxCompletions is the most values one completion/complete returns
// (MCP's own cap).
const maxCompletions = 100

// CompleteResourceArgument implements server.ResourceCompletionProvider:
// out numbers, task ids, channels, session views, plan refs and terminal
// ids, from what the kernel holds now, filtered by the prefix typed.
func (f *Facade) CompleteResourceArgument(ctx context.Context, uri string, arg mcp.CompleteArgument, _ mcp.CompleteContext) (*mcp.Completion, error) {
	var values []string
	switch {
	case strings.HasPrefix(uri, "shoal://out/") && arg.Name == "n":
		values = f.outNumbers(ctx)
	case strings.HasPrefix(uri, "shoal://task/") && arg.Name == "id":
		values = f.listedIDs(ctx, "shoal://task/")
	case strings.HasPrefix(uri, "shoal://plan/") && arg.Name == "ref":
		values = f.listedIDs(ctx, "shoal://plan/")
	case strings.HasPrefix(uri, "shoal://pty/") && arg.Name == "id":
		values = f.listedIDs(ctx, "shoal://pty/")
	case strings.HasPrefix(uri, "shoal://session/") && arg.Name == "view":
		values = []string{"cwd", "env", "reef"}
	case strings.HasPrefix(uri, "shoal://events/") && arg.Name == "channel":
		values = []string{"journal", "approval", "render", "session.transcript"}
		for _, id := range f.listedIDs(ctx, "shoal://task/") {
			values = append(values, "task."+id)
		}
	}
	var out []string
	for _, v := range values {
		if strings.HasPrefix(v, arg.Value) && !slices.Contains(out, v) {
			out = append(out, v)
		}
	}
	c := &mcp.Completion{Values: out, Total: len(out)}
	if len(out) > maxCompletions {
		c.Values, c.HasMore = out[:maxCompletions], true
	}
	if c.Values == nil {
		c.Values = []string{}
	}
	return c, nil
}

// listedIDs are the last path segments of the live resources listed under
// prefix (tasks, plans, terminals), newest first as the kernel lists them.
func (f *Facade) listedIDs(ctx context.Context, prefix string) []string {
	var r wire.ResourceList
	if f.link.call(ctx, "resources.list", struct{}{}, &r) != nil {
		return nil
	}
	var ids []string
	for _, res := range r.Resources {
		if id, ok := strings.CutPrefix(res.URI, prefix); ok && id != "" && !strings.Contains(id, "/") {
			ids = append(ids, id)
		}
	}
	return ids
}

// outNumbers are the transcript numbers of this session's latest
// executions (the journal keeps each run's ref), newest first.
func (f *Facade) outNumbers(ctx context.Context) []string {
	var r wire.JournalRows
	if f.link.call(ctx, "journal.query", map[string]any{"limit": 200}, &r) != nil {
		return nil
	}
	session := ""
	if f.target != nil && f.target.settled() {
		session = f.target.name
	}
	var ns []string
	for _, row := range r.Rows {
		if n, ok := strings.CutPrefix(row.Ref, "out:"); ok && (session == "" || row.Session == session) {
			ns = append(ns, n)
		}
	}
	sort.SliceStable(ns, func(i, j int) bool { return len(ns[i]) > len(ns[j]) || (len(ns[i]) == len(ns[j]) && ns[i] > ns[j]) })
	return ns
}

// isModern reports whether a request's params declare protocol 2026-07-28
// or later in _meta (the stateless revision: no handshake, every request
// says who it is).
func isModern(params json.RawMessage) bool { return mcp.IsModernProtocol(metaVersion(params)) }

// metaVersion is the protocol version a request's params declare in
// _meta, "" when they declare none.
func metaVersion(params json.RawMessage) string {
	var p struct {
		Meta map[string]json.RawMessage `json:"_meta"`
	}
	if len(params) == 0 || json.Unmarshal(params, &p) != nil {
		return ""
	}
	var v string
	_ = json.Unmarshal(p.Meta[mcp.MetaKeyProtocolVersion], &v)
	return v
}

// modernResult stamps what 2026-07-28 wants on a result the facade answers
// itself: resultType, the server's identity in _meta, and, on list and
// read results, caching hints (ttlMs 0: the kernel's state is live, always
// ask again; private: one principal's view).
func modernResult(result any, cacheable bool) any {
	b, err := json.Marshal(result)
	if err != nil {
		return result
	}
	m := map[string]json.RawMessage{}
	if json.Unmarshal(b, &m) != nil {
		return result
	}
	m["resultType"] = json.RawMessage(`"complete"`)
	meta := map[string]any{}
	if raw, ok := m["_meta"]; ok {
		_ = json.Unmarshal(raw, &meta)
	}
	meta[mcp.MetaKeyServerInfo] = map[string]string{"name": "shoal", "version": Version}
	m["_meta"], _ = json.Marshal(meta)
	if cacheable {
		m["ttlMs"] = json.RawMessage("0")
		m["cacheScope"] = json.RawMessage(`"private"`)
	}
	return m
}

// noteRequest records what a stateless (2026-07-28) request says about
// logging: such a client has no logging/setLevel, it names the level it
// wants in each request's _meta (none: no messages).
func (s *session) noteRequest(params json.RawMessage) {
	if !isModern(params) {
		return
	}
	var p struct {
		Meta map[string]json.RawMessage `json:"_meta"`
	}
	_ = json.Unmarshal(params, &p)
	var level mcp.LoggingLevel
	_ = json.Unmarshal(p.Meta[mcp.MetaKeyLogLevel], &level)
	if levelRank(level) < 0 {
		level = ""
	}
	s.mu.Lock()
	s.modern, s.logLevel = true, level
	s.mu.Unlock()
}
