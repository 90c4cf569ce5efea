// Package all is the one list of Shoal's built-in resource families, in
// the order they are provisioned, and the order the MCP listings show
// them in (SPEC M2, M3).
package all

import (
	"github.com/shoal-sh/shoal/core"
	"github.com/shoal-sh/shoal/providers/cluster"
	"github.com/shoal-sh/shoal/providers/events"
	"github.com/shoal-sh/shoal/providers/jobs"
	"github.com/shoal-sh/shoal/providers/journal"
	"github.com/shoal-sh/shoal/providers/out"
	"github.com/shoal-sh/shoal/providers/plan"
	"github.com/shoal-sh/shoal/providers/pty"
	"github.com/shoal-sh/shoal/providers/session"
	"github.com/shoal-sh/shoal/providers/task"
	"github.com/shoal-sh/shoal/providers/val"
)

// Providers returns fresh built-in providers in provisioning order: a
// provider whose Provision uses a service comes after the one offering
// it (the kernel sets the others' needs after every Provision, and checks
// the whole wiring before the first).
func Providers() []core.Provider {
	sessions := session.New()
	terminals := pty.New()
	// PTYs start where the session is, with its environment.
	terminals.CwdOf = sessions.Cwd
	terminals.DomainOf = sessions.Domain
	terminals.EnvOf = sessions.Environ
	return []core.Provider{
		val.New(),
		journal.New(),
		out.New(),
		task.New(),
		jobs.New(),
		events.New(),
		sessions,
		plan.New(),
		terminals,
		// Last: it hooks into the bus, the journal and the content store.
		cluster.New(),
	}
}

// Order is how listings arrange the built-in families: the six roots of
// SPEC M2 (session cwd/env/reef, jobs, journal, pty), then live tasks,
// plans and PTYs; templates as SPEC M3 lists them.
func Order() core.Order {
	return core.Order{
		Roots:     []string{"session", "jobs", "journal", "pty"},
		Entries:   []string{"task", "plan", "pty"},
		Templates: []string{"out", "val", "task", "plan", "pty", "session", "journal", "events"},
	}
}
