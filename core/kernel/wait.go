package kernel

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/shoal-sh/shoal/core"
	"github.com/shoal-sh/shoal/core/rpc"
	"github.com/shoal-sh/shoal/core/uri"
	"github.com/shoal-sh/shoal/core/wire"
)

// Wait bounds: a wait that names no timeout gets the default; none may
// hold a request longer than the maximum.
const (
	DefaultWait = 30 * time.Second
	MaxWait     = 10 * time.Minute
)

type waitParams struct {
	Target    string  `json:"target"`
	Until     *uint64 `json:"until"`
	Pattern   string  `json:"pattern"`
	TimeoutMS int64   `json:"timeout_ms"`
}

// wait blocks in the kernel until the target's condition holds: a task
// ends, a channel passes a seq, a PTY screen matches a pattern. Clients
// that ignore notifications use it instead of polling.
func (k *Kernel) wait(ctx context.Context, _ *conn, caller *core.Caller, raw json.RawMessage) (any, error) {
	var p waitParams
	if err := rpc.DecodeParams(raw, &p); err != nil {
		return nil, err
	}
	if p.Target == "" {
		return nil, rpc.Errorf(rpc.InvalidParams, "target is required: task:N, shoal://events/{channel} (with until), or pty:N (with pattern)")
	}
	u, err := uri.ParseTarget(p.Target)
	if err != nil {
		return nil, err
	}
	prov, ok := k.router.Provider(u.Family)
	if !ok {
		return nil, rpc.Errorf(rpc.NotFound, "no provider serves %s", u.Path())
	}
	w, ok := prov.(core.Waiter)
	if !ok {
		return nil, rpc.Errorf(rpc.InvalidParams, "%s cannot be waited on; wait on task:N, shoal://events/{channel}?… with until, or pty:N with pattern", u.Path())
	}
	d := DefaultWait
	if p.TimeoutMS > 0 {
		d = time.Duration(p.TimeoutMS) * time.Millisecond
	}
	if d > MaxWait {
		d = MaxWait
	}
	wctx, cancel := context.WithTimeout(ctx, d)
	defer cancel()
	state, err := w.Wait(wctx, caller, u, core.WaitCond{Until: p.Until, Pattern: p.Pattern})
	timedOut := errors.Is(err, context.DeadlineExceeded)
	if err != nil && !timedOut {
		return nil, err
	}
	st, err := json.Marshal(state)
	if err != nil {
		return nil, fmt.Errorf("wait: state: %w", err)
	}
	return wire.WaitResult{Target: p.Target, Satisfied: !timedOut, TimedOut: timedOut, State: st}, nil
}
