package core

import (
	"fmt"
	"log/slog"
	"sync"

	"github.com/shoal-sh/shoal/core/bus"
)

// Host is what the kernel hands each provider at Provision: the state
// directory, the event bus, the logger and a registry of named services
// that providers offer each other (the journal, the content store, …).
type Host struct {
	// StateDir is the kernel's state directory (socket, token, journal…).
	StateDir string
	// Bus is the kernel's event bus.
	Bus *bus.Bus
	// Log is the kernel log.
	Log *slog.Logger
	// Config is the decoded kernel configuration (config.toml); providers
	// read their own tables from it.
	Config *Config

	mu       sync.RWMutex
	services map[string]any
}

// Provide registers a named service. Registering a name twice panics: it
// is a wiring bug, found at start.
func (h *Host) Provide(name string, svc any) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.services == nil {
		h.services = map[string]any{}
	}
	if _, dup := h.services[name]; dup {
		panic(fmt.Sprintf("core: service %q provided twice", name))
	}
	h.services[name] = svc
}

// Lookup returns the service registered under name as a T.
func Lookup[T any](h *Host, name string) (T, error) {
	h.mu.RLock()
	svc, ok := h.services[name]
	h.mu.RUnlock()
	var zero T
	if !ok {
		return zero, fmt.Errorf("service %q is not provided (is its provider registered before this one?)", name)
	}
	t, ok := svc.(T)
	if !ok {
		return zero, fmt.Errorf("service %q has type %T, not %T", name, svc, zero)
	}
	return t, nil
}
