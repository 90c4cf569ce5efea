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
)

// Health of a plugin in [PluginStatus].
const (
	HealthOK       = "ok"       // loaded and serving
	HealthFailed   = "failed"   // not loaded: Error says why
	HealthDisabled = "disabled" // skipped: [plugins.NAME] disabled = true
)

// Set is the plugins a kernel loaded. Its methods are safe for concurrent
// use; it does not change after Load except for counters and health.
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
}

// sharedCache, when set (by tests), replaces the compilation cache Load
// would open, so that a test binary compiles each module once however
// many sets it loads.
var sharedCache wazero.CompilationCache

// Load loads every plugin found in dirs. Each dir is one plugin folder
// (it holds plugin.toml) or a folder of plugin folders. reserved are the
// families of the built-in providers, which no plugin may take.
//
// A plugin that fails to load is logged and reported by Status with
// health "failed"; it never stops the others. The error is for the set
// as a whole: an unusable compilation cache directory. cacheDir may be
// empty for no on-disk cache (compiling then costs about a second per
// plugin at every start).
func Load(dirs []string, cfg *core.Config, cacheDir string, log *slog.Logger, reserved ...string) (*Set, error) {
	if cfg == nil {
		cfg = core.DefaultConfig()
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	s := &Set{log: log, byName: map[string]*plugin{}, byFamily: map[string]*plugin{}}
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
	s.loadAll(context.Background(), s.pluginDirs(dirs), cfg, reserved)
	return s, nil
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

// candidate is a plugin folder whose manifest passed and whose name and
// family are not taken, waiting to be compiled and started.
type candidate struct {
	dir   string
	man   *Manifest
	grant core.PluginGrant
	st    PluginStatus
	p     *plugin
	err   error
	took  time.Duration
}

// loadAll reads every manifest and settles names and families in folder
// order, then compiles and starts the candidates in parallel (compiling,
// even from the cache, is most of a plugin's start-up), then registers
// them in folder order again.
func (s *Set) loadAll(ctx context.Context, dirs []string, cfg *core.Config, reserved []string) {
	names := map[string]string{}    // plugin name → folder
	families := map[string]string{} // family → plugin name
	var cands []*candidate
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
		cands = append(cands, c)
	}

	work := make(chan *candidate)
	var wg sync.WaitGroup
	for range min(len(cands), runtime.GOMAXPROCS(0)) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for c := range work {
				start := time.Now()
				c.p, c.err = s.loadPlugin(ctx, c.dir, c.man, c.grant)
				c.took = time.Since(start)
			}
		}()
	}
	for _, c := range cands {
		work <- c
	}
	close(work)
	wg.Wait()

	for _, c := range cands {
		if c.err != nil {
			s.fail(c, c.err)
			continue
		}
		p := c.p
		s.plugins = append(s.plugins, p)
		s.byName[p.name] = p
		if c.man.Kind == KindProvider {
			s.byFamily[c.man.Provider.Family] = p
		}
		if !p.denied.empty() {
			s.log.Info("plugin asked for capabilities that were not granted",
				"plugin", p.name, "env", p.denied.Env, "fs", p.denied.FS, "clock", p.denied.Clock,
				"grant_in", fmt.Sprintf("[plugins.%s] in config.toml", p.name))
		}
		s.log.Info("plugin loaded", "plugin", p.name, "version", c.man.Version, "kind", c.man.Kind,
			"dir", c.dir, "took", c.took.Round(time.Millisecond))
	}
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

// Providers returns the loaded provider plugins as core providers, in
// load order, for the kernel to register after the built-ins.
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
type PluginStatus struct {
	Name      string   `json:"name"`
	Version   string   `json:"version,omitempty"`
	Kind      string   `json:"kind,omitempty"`
	Dir       string   `json:"dir"`
	Family    string   `json:"family,omitempty"`
	Channels  []string `json:"channels,omitempty"`
	Templates []string `json:"templates,omitempty"`
	// Schema tells whether payloads are checked against a JSON Schema.
	Schema bool `json:"schema,omitempty"`
	// Limits are the effective limits (defaults, grant and maximums applied).
	Limits Limits `json:"limits"`
	// Granted are the capabilities the plugin has; Denied those its
	// manifest asks for and the operator did not grant.
	Granted Capabilities `json:"granted"`
	Denied  Capabilities `json:"denied"`
	// Health is ok, failed or disabled.
	Health string `json:"health"`
	// Error is why a plugin failed to load, or its last failed call.
	Error   string `json:"error,omitempty"`
	ErrorAt int64  `json:"error_at,omitempty"` // ns
	// Calls and Failures count guest calls and the ones that failed with
	// PLUGIN_ERROR since load; Instances is how many instances are alive.
	Calls     uint64 `json:"calls"`
	Failures  uint64 `json:"failures"`
	Instances int    `json:"instances"`
}

// Status describes every plugin found, loaded or not, sorted by name.
func (s *Set) Status() []PluginStatus {
	out := append(make([]PluginStatus, 0, len(s.skipped)+len(s.plugins)), s.skipped...)
	for _, p := range s.plugins {
		st := PluginStatus{
			Name: p.name, Version: p.man.Version, Kind: p.man.Kind, Dir: p.dir,
			Limits: p.limits, Granted: p.granted, Denied: p.denied, Health: HealthOK,
			Schema: p.schema != nil,
			Calls:  p.calls.Load(), Failures: p.failures.Load(), Instances: len(p.slots),
		}
		if p.man.Provider != nil {
			st.Family = p.man.Provider.Family
			for _, t := range p.templates {
				st.Templates = append(st.Templates, t.URITemplate)
			}
		}
		if p.man.Validator != nil {
			st.Channels = p.man.Validator.Channels
		}
		p.mu.Lock()
		st.Error = p.lastErr
		if !p.lastAt.IsZero() {
			st.ErrorAt = p.lastAt.UnixNano()
		}
		p.mu.Unlock()
		out = append(out, st)
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// Close stops every plugin and the compilation cache. Calls in flight
// fail; later calls answer UNAVAILABLE.
func (s *Set) Close() error {
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
	return errors.Join(errs...)
}
