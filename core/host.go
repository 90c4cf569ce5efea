package core

import (
	"fmt"
	"log/slog"
	"sync"

	"github.com/shoal-sh/shoal/core/bus"
)

// Host is what the kernel hands each provider at Provision: the state
// directory, the event bus, the logger and the services providers offer
// each other (the journal, the content store, …), each under its typed
// [Key].
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
	offered  []AnyKey // in offer order
}

// Offer makes impl the service k names on h. A provider calls it in
// Provision for each key its Offers lists; the kernel offers its own
// services the same way. Offering a service twice panics: it is a wiring
// bug, and [CheckWiring] reports it at start-up before anything runs.
func Offer[T any](h *Host, k Key[T], impl T) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.services == nil {
		h.services = map[string]any{}
	}
	if _, dup := h.services[k.name]; dup {
		panic(fmt.Sprintf("core: service %s offered twice", k))
	}
	h.services[k.name] = impl
	h.offered = append(h.offered, k)
}

// Get returns the service k names and whether it is offered. Providers do
// not call it: they list what they need in Needs and the kernel sets it at
// start-up. It is for code holding a kernel (tests, benchmarks, tools).
func Get[T any](h *Host, k Key[T]) (T, bool) {
	h.mu.RLock()
	svc, ok := h.services[k.name]
	h.mu.RUnlock()
	t, _ := svc.(T)
	return t, ok
}

// get is the service named name, untyped.
func (h *Host) get(name string) (any, bool) {
	h.mu.RLock()
	defer h.mu.RUnlock()
	svc, ok := h.services[name]
	return svc, ok
}

// offers is how many services are offered, and the keys from the n-th on.
func (h *Host) offersSince(n int) (int, []AnyKey) {
	h.mu.RLock()
	defer h.mu.RUnlock()
	return len(h.offered), append([]AnyKey(nil), h.offered[min(n, len(h.offered)):]...)
}
