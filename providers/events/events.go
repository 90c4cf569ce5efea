// Package events serves the events family: shoal://events/{channel} reads
// a channel's retained events after a cursor, and the same URI is the
// subscribable form of that channel.
package events

import (
	"context"

	"github.com/shoal-sh/shoal/core"
	"github.com/shoal-sh/shoal/core/bus"
	"github.com/shoal-sh/shoal/core/rpc"
	"github.com/shoal-sh/shoal/core/uri"
)

// Provider serves shoal://events/{channel}{?since,limit}.
type Provider struct {
	bus *bus.Bus
}

var (
	_ core.Provider     = (*Provider)(nil)
	_ core.Provisioner  = (*Provider)(nil)
	_ core.Subscribable = (*Provider)(nil)
)

// New returns the events provider.
func New() *Provider { return &Provider{} }

// Family implements core.Provider.
func (*Provider) Family() string { return "events" }

// Provision implements core.Provisioner.
func (p *Provider) Provision(h *core.Host) error {
	p.bus = h.Bus
	return nil
}

// Templates implements core.Provider.
func (*Provider) Templates() []core.Template {
	return []core.Template{{
		URITemplate: "shoal://events/{channel}{?since,limit}",
		Name:        "events",
		Description: "Events of one channel (journal, approval, render, session.transcript, task.{id}, user.*) after the exclusive cursor since; limit keeps the newest tail. The answer carries oldest_seq, latest_seq, next_seq and epoch so gaps are visible. Subscribable.",
		MimeType:    "application/json",
	}}
}

// List implements core.Provider: channels are discovered, not listed.
func (*Provider) List(context.Context, *core.Caller) ([]core.Resource, error) { return nil, nil }

func channelOf(u *uri.URI) (string, error) {
	if len(u.Segments) != 1 {
		return "", rpc.Errorf(rpc.BadURI, "use shoal://events/{channel}, e.g. shoal://events/journal?since=81")
	}
	return u.Segments[0], nil
}

// Read implements core.Provider. Typed parameters that do not parse are
// dropped: a bad since reads from the oldest retained event, a bad limit
// uses the default.
func (p *Provider) Read(_ context.Context, c *core.Caller, u *uri.URI) (*core.Content, error) {
	ch, err := channelOf(u)
	if err != nil {
		return nil, err
	}
	var since *uint64
	if s, ok := u.Uint("since"); ok {
		since = &s
	}
	limit := 0
	if l, ok := u.Int("limit"); ok && l > 0 {
		limit = int(l)
	}
	res, err := p.bus.Read(ch, since, limit)
	if err != nil {
		return nil, err
	}
	return &core.Content{Record: res.ForSession(c.Session)}, nil
}

// Channel implements core.Subscribable.
func (*Provider) Channel(u *uri.URI) (string, bool) {
	ch, err := channelOf(u)
	if err != nil || bus.ValidateName(ch) != nil {
		return "", false
	}
	return ch, true
}

// Wait implements core.Waiter: it returns once the channel has an event
// with seq ≥ until (until defaults to the next seq, i.e. the next event).
func (p *Provider) Wait(ctx context.Context, _ *core.Caller, u *uri.URI, w core.WaitCond) (any, error) {
	ch, err := channelOf(u)
	if err != nil {
		return nil, err
	}
	wake := make(chan struct{}, 1)
	sub, err := p.bus.Subscribe(ch, func(bus.Event) error {
		select {
		case wake <- struct{}{}:
		default:
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	defer sub.Close()
	first, err := p.bus.Read(ch, nil, 1)
	if err != nil {
		return nil, err
	}
	until := first.NextSeq
	if w.Until != nil {
		until = *w.Until
	}
	for {
		r, err := p.bus.Read(ch, nil, 1)
		if err != nil {
			return nil, err
		}
		if r.LatestSeq != nil && *r.LatestSeq >= until {
			return map[string]any{"channel": ch, "latest_seq": *r.LatestSeq, "next_seq": r.NextSeq, "epoch": r.Epoch}, nil
		}
		select {
		case <-wake:
		case <-ctx.Done():
			return map[string]any{"channel": ch, "latest_seq": r.LatestSeq, "next_seq": r.NextSeq, "epoch": r.Epoch}, ctx.Err()
		}
	}
}
