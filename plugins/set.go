package plugins

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"sort"
	"sync"
	"time"

	"github.com/tetratelabs/wazero"

	"github.com/shoal-sh/shoal/core"
	"github.com/shoal-sh/shoal/core/wire"
)

// Health of a plugin in [PluginStatus].
const (
	HealthLoading  = "loading"  // registered; its module is compiling or starting
	HealthOK       = "ok"       // loaded and serving
	HealthFailed   = "failed"   // not serving: Error says why
	HealthDisabled = "disabled" // skipped: [plugins.NAME] disabled = true
)

// Set is the plugins a kernel loads. Its methods are safe for concurrent
// use. Which plugins it holds is settled when [Start] returns; each one's
// module then loads in the background, and its calls wait for that.
type Set struct {
	log      *slog.Logger
	cache    wazero.CompilationCache
	plugins  []*plugin
	byName   map[string]*plugin
	byFamily map[string]*plugin
	skipped  []PluginStatus
	// sharedCache is set when the cache is sharedCache, which Close
	// leaves open.
	sharedCache bool

	started  time.Time
	stop     context.CancelFunc // cancels the background loads
	done     chan struct{}      // closed when every load has finished
	closing  sync.Once
	closeErr error
}

// sharedCache, when set (by tests), replaces the compilation cache Load
// would open, so that a test binary compiles each module once however
// many sets it loads.
var sharedCache wazero.CompilationCache

// Start finds the plugins in dirs, makes every check that needs no
// compiling, and returns with the plugins that passed them registered and
// their modules loading in the background. Each dir is one plugin folder
// (it holds plugin.toml) or a folder of plugin folders. reserved are the
// families of the built-in providers, which no plugin may take.
//
// At start a plugin is refused (logged, and reported by Status with
// health "failed") for its manifest, its name or family (taken by a
// built-in or another plugin), an fs grant that is not a directory, a
// missing or oversized module, or a module whose export names show it is
// not a reactor of this ABI. It never stops the others.
//
// The background load compiles the module (through the cache), checks its
// signatures, imports and memory, starts one instance and compares its
// description with the manifest. Until it ends, a plugin's health is
// "loading" and its calls wait (as long as their context allows); if it
// fails, the health is "failed" and every call answers PLUGIN_ERROR with
// the reason. [Set.Wait] waits for every load.
//
// The error is for the set as a whole: an unusable compilation cache
// directory. cacheDir may be empty for no on-disk cache (compiling then
// costs seconds per plugin at every start).
func Start(dirs []string, cfg *core.Config, cacheDir string, log *slog.Logger, reserved ...string) (*Set, error) {
	if cfg == nil {
		cfg = core.DefaultConfig()
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	s := &Set{log: log, byName: map[string]*plugin{}, byFamily: map[string]*plugin{}, started: time.Now(), done: make(chan struct{})}
	if sharedCache != nil {
		s.cache, s.sharedCache = sharedCache, true
	} else if cacheDir != "" {
		if err := os.MkdirAll(cacheDir, 0o700); err != nil {
			return nil, fmt.Errorf("plugin compilation cache: %w", err)
		}
		cache, err := wazero.NewCompilationCacheWithDir(cacheDir)
		if err != nil {
			return nil, fmt.Errorf("plugin compilation cache: %w", err)
		}
		s.cache = cache
	} else {
		s.cache = wazero.NewCompilationCache()
	}
	s.register(s.pluginDirs(dirs), cfg, reserved)
	ctx, stop := context.WithCancel(context.Background())
	s.stop = stop
	go s.loadAll(ctx)
	return s, nil
}

// Load is [Start] followed by [Set.Wait]: it returns once every plugin
// has loaded or failed.
func Load(dirs []string, cfg *core.Config, cacheDir string, log *slog.Logger, reserved ...string) (*Set, error) {
	s, err := Start(dirs, cfg, cacheDir, log, reserved...)
	if err != nil {
		return nil, err
	}
	_ = s.Wait(context.Background())
	return s, nil
}

// Wait returns when every plugin has finished loading, ready or failed,
// or with ctx's error when ctx ends first.
func (s *Set) Wait(ctx context.Context) error {
	select {
	case <-s.done:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// pluginDirs expands dirs into plugin folders, once each, in order. A
// folder that cannot be read is reported as a failed entry.
func (s *Set) pluginDirs(dirs []string) []string {
	var out []string
	seen := map[string]bool{}
	add := func(d string) {
		if abs, err := filepath.Abs(d); err == nil {
			d = abs
		}
		if !seen[d] {
			seen[d] = true
			out = append(out, d)
		}
	}
	for _, dir := range dirs {
		if _, err := os.Stat(filepath.Join(dir, ManifestFile)); err == nil {
			add(dir)
			continue
		}
		entries, err := os.ReadDir(dir)
		if err != nil {
			s.skip(PluginStatus{Name: filepath.Base(dir), Dir: dir, Health: HealthFailed,
				Error: fmt.Sprintf("plugin folder: %v (check --plugin-dir and plugin_dirs in config.toml)", err)})
			continue
		}
		found := false
		for _, e := range entries {
			sub := filepath.Join(dir, e.Name())
			if fi, err := os.Stat(filepath.Join(sub, ManifestFile)); err == nil && !fi.IsDir() {
				add(sub)
				found = true
			}
		}
		if !found {
			s.log.Warn("plugin folder holds no plugin", "dir", dir, "want", "a "+ManifestFile+" in it or in its subfolders")
		}
	}
	return out
}

// candidate is a plugin folder whose manifest passed, on its way to
// being registered or refused.
type candidate struct {
	dir   string
	man   *Manifest
	grant core.PluginGrant
	st    PluginStatus
}

// register reads every manifest and settles names and families in folder
// order, then makes each remaining plugin's checks that need no compiling
// and registers the plugins that pass.
func (s *Set) register(dirs []string, cfg *core.Config, reserved []string) {
	names := map[string]string{}    // plugin name → folder
	families := map[string]string{} // family → plugin name
	for _, dir := range dirs {
		man, err := ReadManifest(dir)
		if err != nil {
			s.skip(PluginStatus{Name: filepath.Base(dir), Dir: dir, Health: HealthFailed, Error: err.Error()})
			continue
		}
		c := &candidate{dir: dir, man: man, grant: cfg.Plugins[man.Name],
			st: PluginStatus{Name: man.Name, Version: man.Version, Kind: man.Kind, Dir: dir}}
		if man.Provider != nil {
			c.st.Family = man.Provider.Family
		}
		if man.Validator != nil {
			c.st.Channels = man.Validator.Channels
		}
		if c.grant.Disabled {
			c.st.Health = HealthDisabled
			s.skip(c.st)
			continue
		}
		if other, dup := names[man.Name]; dup {
			s.fail(c, fmt.Errorf("a plugin named %q is already loaded from %s: plugin names must be unique", man.Name, other))
			continue
		}
		if man.Kind == KindProvider {
			fam := man.Provider.Family
			if slices.Contains(reserved, fam) {
				s.fail(c, fmt.Errorf("family %q belongs to a built-in provider: choose another family in %s", fam, ManifestFile))
				continue
			}
			if other, dup := families[fam]; dup {
				s.fail(c, fmt.Errorf("family %q is already claimed by plugin %q (%s): one family, one plugin", fam, other, names[other]))
				continue
			}
			families[fam] = man.Name
		}
		names[man.Name] = dir

		p, err := newPlugin(dir, man, c.grant, s.log)
		if err != nil {
			s.fail(c, err)
			continue
		}
		s.plugins = append(s.plugins, p)
		s.byName[p.name] = p
		if man.Kind == KindProvider {
			s.byFamily[man.Provider.Family] = p
		}
		if !p.denied.empty() {
			s.log.Info("plugin asked for capabilities that were not granted",
				"plugin", p.name, "env", p.denied.Env, "fs", p.denied.FS, "clock", p.denied.Clock,
				"grant_in", fmt.Sprintf("[plugins.%s] in config.toml", p.name))
		}
	}
}

// loadAll loads the registered plugins in the background, up to
// loadWorkers at once: on a warm cache each load is mostly wazero decoding
// and validating the module (tens of milliseconds of CPU for a Go module).
func (s *Set) loadAll(ctx context.Context) {
	defer close(s.done)
	work := make(chan *plugin)
	var wg sync.WaitGroup
	for range min(len(s.plugins), loadWorkers) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for p := range work {
				s.loadOne(ctx, p)
			}
		}()
	}
	for _, p := range s.plugins {
		work <- p
	}
	close(work)
	wg.Wait()
	if len(s.plugins) > 0 {
		failed := 0
		for _, p := range s.plugins {
			if p.loadErr != nil {
				failed++
			}
		}
		s.log.Info("plugins loaded", "ready", len(s.plugins)-failed, "failed", failed,
			"took", time.Since(s.started).Round(time.Millisecond))
	}
}

// loadWorkers bounds the loads running at once: twice the cores, so that
// a few plugins of similar size share the cores and finish together (three
// on two cores: one and a half loads' time, not two), while many plugins
// do not all hold a decoded module in memory at once.
var loadWorkers = 2 * runtime.GOMAXPROCS(0)

// loadGate, when set (by tests), runs before each background load, so a
// test can hold plugins in the loading state.
var loadGate func(ctx context.Context, name string)

func (s *Set) loadOne(ctx context.Context, p *plugin) {
	start := time.Now()
	if loadGate != nil {
		loadGate(ctx, p.name)
	}
	var err error
	if ctx.Err() == nil {
		err = p.load(ctx, s.cache)
	}
	if ctx.Err() != nil {
		err = errors.New("the kernel stopped before the plugin finished loading")
	}
	p.finish(err, time.Since(start))
	if err != nil {
		if ctx.Err() == nil {
			s.log.Error("plugin not loaded", "plugin", p.name, "dir", p.dir, "err", err.Error())
		}
		return
	}
	s.log.Info("plugin loaded", "plugin", p.name, "version", p.man.Version, "kind", p.man.Kind,
		"dir", p.dir, "took", p.loadTook.Round(time.Millisecond))
}

func (s *Set) fail(c *candidate, err error) {
	c.st.Health, c.st.Error = HealthFailed, err.Error()
	s.skip(c.st)
}

func (s *Set) skip(st PluginStatus) {
	if st.Health == HealthFailed {
		s.log.Error("plugin not loaded", "plugin", st.Name, "dir", st.Dir, "err", st.Error)
	} else {
		s.log.Info("plugin disabled by config", "plugin", st.Name, "dir", st.Dir)
	}
	s.skipped = append(s.skipped, st)
}

// Providers returns the provider plugins registered at start, loaded or
// still loading, as core providers in folder order, for the kernel to
// register after the built-ins. One whose load fails stays registered and
// answers its calls with the reason, so what a kernel serves does not
// depend on how fast its plugins load.
func (s *Set) Providers() []core.Provider {
	var out []core.Provider
	for _, p := range s.plugins {
		if p.man.Kind == KindProvider {
			out = append(out, provider{p})
		}
	}
	return out
}

// PluginStatus is one plugin as `shoal plugin list` shows it.
type PluginStatus = wire.PluginStatus

// Status describes every plugin found, loaded or not, sorted by name.
func (s *Set) Status() []PluginStatus {
	out := append(make([]PluginStatus, 0, len(s.skipped)+len(s.plugins)), s.skipped...)
	for _, p := range s.plugins {
		st := PluginStatus{
			Name: p.name, Version: p.man.Version, Kind: p.man.Kind, Dir: p.dir,
			Limits: wire.PluginLimits(p.limits), Granted: wire.PluginCapabilities(p.granted), Denied: wire.PluginCapabilities(p.denied), Health: HealthLoading,
			Calls: p.calls.Load(), Failures: p.failures.Load(),
		}
		if p.man.Provider != nil {
			st.Family = p.man.Provider.Family
			st.Templates = p.man.Provider.Templates
		}
		if p.man.Validator != nil {
			st.Channels = p.man.Validator.Channels
		}
		done, loadErr := p.loaded()
		switch {
		case done && loadErr != nil:
			st.Health, st.Error, st.ErrorAt = HealthFailed, p.loadReason, p.loadedAt.UnixNano()
			st.LoadMS = p.loadTook.Milliseconds()
		case done:
			st.Health, st.LoadMS = HealthOK, p.loadTook.Milliseconds()
			st.Schema, st.Instances = p.schema != nil, len(p.slots)
			st.Templates = nil
			for _, t := range p.templates {
				st.Templates = append(st.Templates, t.URITemplate)
			}
			p.mu.Lock()
			st.Error = p.lastErr
			if !p.lastAt.IsZero() {
				st.ErrorAt = p.lastAt.UnixNano()
			}
			p.mu.Unlock()
		}
		out = append(out, st)
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// Close stops every plugin and the compilation cache: loads still running
// are cancelled (and waited for), calls in flight fail, later calls answer
// UNAVAILABLE. Calling it again returns the first result.
func (s *Set) Close() error {
	s.closing.Do(func() {
		for _, p := range s.plugins {
			p.closed.Store(true)
		}
		s.stop()
		<-s.done
		ctx := context.Background()
		var errs []error
		for _, p := range s.plugins {
			if err := p.close(ctx); err != nil {
				errs = append(errs, fmt.Errorf("close plugin %s: %w", p.name, err))
			}
		}
		if s.cache != nil && !s.sharedCache {
			if err := s.cache.Close(ctx); err != nil {
				errs = append(errs, fmt.Errorf("close compilation cache: %w", err))
			}
		}
		s.closeErr = errors.Join(errs...)
	})
	return s.closeErr
}
