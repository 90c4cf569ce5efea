// Package boot assembles a kernel from the built-in providers and the
// WebAssembly plugin host. Both kernel binaries (shoal-kernel, which
// `shoal kernel` hands over to, and shoal-mcp) start kernels through it,
// so a background kernel started by the facade is the same kernel `shoal
// kernel` runs.
package boot

import (
	"log/slog"

	"github.com/shoal-sh/shoal/core"
	"github.com/shoal-sh/shoal/core/bus"
	"github.com/shoal-sh/shoal/core/kernel"
	"github.com/shoal-sh/shoal/core/wire"
	"github.com/shoal-sh/shoal/plugins"
	"github.com/shoal-sh/shoal/providers/all"
)

// NewKernel builds a kernel with every built-in family and the plugins of
// the configured folders.
func NewKernel(opts kernel.Options) (*kernel.Kernel, error) {
	opts.LoadPlugins = loadPlugins
	opts.Order = all.Order()
	return kernel.New(opts, all.Providers()...)
}

type pluginHost struct{ s *plugins.Set }

func (h pluginHost) Providers() []core.Provider { return h.s.Providers() }
func (h pluginHost) Bind(name, channel string) (bus.Validator, error) {
	return h.s.Bind(name, channel)
}
func (h pluginHost) Status() []wire.PluginStatus { return h.s.Status() }
func (h pluginHost) Close() error                { return h.s.Close() }

// loadPlugins registers the plugins at once and lets their modules load in
// the background (plugins.Start): the kernel serves without waiting for
// them, and a call to a plugin still loading waits for it.
func loadPlugins(cfg *core.Config, dirs, reserved []string, cacheDir string, log *slog.Logger) (kernel.PluginHost, error) {
	s, err := plugins.Start(dirs, cfg, cacheDir, log, reserved...)
	if err != nil {
		return nil, err
	}
	return pluginHost{s}, nil
}
