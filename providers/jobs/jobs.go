// Package jobs serves shoal://jobs: the session's open and recent tasks,
// newest first — the same list task.list answers.
package jobs

import (
	"context"

	"github.com/shoal-sh/shoal/core"
	"github.com/shoal-sh/shoal/core/rpc"
	"github.com/shoal-sh/shoal/core/uri"
	"github.com/shoal-sh/shoal/providers/task"
)

// Provider serves the jobs root.
type Provider struct {
	tasks *task.Registry
}

var (
	_ core.Provider = (*Provider)(nil)
	_ core.Needer   = (*Provider)(nil)
)

// New returns the jobs provider.
func New() *Provider { return &Provider{} }

// Family implements core.Provider.
func (*Provider) Family() string { return "jobs" }

// Needs implements core.Needer: jobs lists the task registry's tasks.
func (p *Provider) Needs() []core.Dependency {
	return []core.Dependency{core.Need(task.ServiceTasks, &p.tasks)}
}

// Templates implements core.Provider: jobs is a root, not a template.
func (*Provider) Templates() []core.Template { return nil }

// List implements core.Provider.
func (*Provider) List(context.Context, *core.Caller) ([]core.Resource, error) {
	return []core.Resource{{URI: "shoal://jobs", Name: "jobs", Root: true, MimeType: "application/json",
		Description: "This session's open and recent tasks, newest first (id, state, description, times)."}}, nil
}

// Read implements core.Provider.
func (p *Provider) Read(_ context.Context, c *core.Caller, u *uri.URI) (*core.Content, error) {
	if len(u.Segments) != 0 {
		return nil, rpc.Errorf(rpc.BadURI, "shoal://jobs has no sub-resources; read shoal://task/{id} for one task")
	}
	return &core.Content{Record: map[string]any{"tasks": p.tasks.List(c.Session)}}, nil
}
