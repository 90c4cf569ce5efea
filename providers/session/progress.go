package session

import (
	"context"
	"encoding/json"
	"time"

	"github.com/shoal-sh/shoal/core"
	"github.com/shoal-sh/shoal/core/rpc"
	"github.com/shoal-sh/shoal/core/wire"
	"github.com/shoal-sh/shoal/providers/session/shell"
)

// progressKey names a followed execution: the caller's session and the
// key it chose (exec's progress_key).
type progressKey struct{ session, key string }

// followed is an execution a caller follows while it runs.
type followed struct {
	live    *shell.Live
	started time.Time
	ref     string
}

// Progress is what exec.progress answers.
type Progress = wire.Progress

// execProgress serves exec.progress {key}: how far the caller's
// execution started with that progress_key has got. An execution that
// ended (or never existed) answers running: false.
func (p *Provider) execProgress(_ context.Context, c *core.Caller, raw json.RawMessage) (any, error) {
	var a struct {
		Key string `json:"key"`
	}
	if err := rpc.DecodeParams(raw, &a); err != nil {
		return nil, err
	}
	if a.Key == "" {
		return nil, rpc.Errorf(rpc.InvalidParams, `exec.progress needs {"key": …}, the progress_key given to exec`)
	}
	v, ok := p.running.Load(progressKey{c.Session, a.Key})
	if !ok {
		return Progress{}, nil
	}
	f := v.(*followed)
	out, errs := f.live.Progress()
	pr := Progress{Running: true, Ref: f.ref, ElapsedMS: time.Since(f.started).Milliseconds(),
		StdoutBytes: out.Bytes, StdoutLines: out.Lines, StderrBytes: errs.Bytes, StderrLines: errs.Lines, LastLine: out.Last}
	if pr.LastLine == "" {
		pr.LastLine = errs.Last
	}
	// The last line goes out as a preview does: environment values scrubbed.
	p.mu.Lock()
	s := p.sessions[c.Session]
	p.mu.Unlock()
	if s != nil && pr.LastLine != "" {
		if secrets := secretValues(s.ev.Env()); len(secrets) > 0 {
			pr.LastLine = scrub(pr.LastLine, secrets)
		}
	}
	return pr, nil
}
