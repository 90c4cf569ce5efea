package plugins

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/santhosh-tekuri/jsonschema/v6"
	"github.com/tetratelabs/wazero"
	"github.com/tetratelabs/wazero/api"
	"github.com/tetratelabs/wazero/experimental"
	"github.com/tetratelabs/wazero/imports/wasi_snapshot_preview1"

	"github.com/shoal-sh/shoal/core"
	"github.com/shoal-sh/shoal/core/rpc"
	"github.com/shoal-sh/shoal/internal/clip"
	"github.com/shoal-sh/shoal/plugins/internal/stopcheck"
)

// maxModule bounds the .wasm file read at load.
const maxModule = 128 << 20

// plugin is one plugin that passed the checks made at start. Its module
// compiles and starts in the background (see [Set]); until then, and for
// ever if that fails, calls wait on ready and then on loadErr.
type plugin struct {
	name string
	dir  string
	man  *Manifest
	log  *slog.Logger

	limits  Limits
	timeout time.Duration
	granted Capabilities
	denied  Capabilities

	// ready is closed when the load has finished, either way; loadErr,
	// loadTook and everything below it are written before that and only
	// read after it.
	ready      chan struct{}
	loadErr    *rpc.Error
	loadReason string
	loadTook   time.Duration
	loadedAt   time.Time

	desc      description
	schema    *jsonschema.Schema
	templates []core.Template
	roots     []core.Resource

	runtime  wazero.Runtime
	compiled wazero.CompiledModule
	modCfg   wazero.ModuleConfig
	// stoppable says the module was instrumented with a stop flag
	// (stopcheck) and runs without wazero's WithCloseOnContextDone:
	// every guest call goes through instance.run, and _initialize is
	// called by instantiate, not by wazero as a start function.
	stoppable bool
	initFn    bool // the module exports _initialize

	// idle holds instances ready for a call; slots counts the instances
	// alive. Both have capacity limits.Instances.
	idle  chan *instance
	slots chan struct{}

	// live holds the instances started and not yet retired, so that close
	// can stop the ones busy in a call.
	liveMu sync.Mutex
	live   map[*instance]struct{}

	closed   atomic.Bool
	calls    atomic.Uint64
	failures atomic.Uint64

	mu      sync.Mutex
	lastErr string
	lastAt  time.Time
}

// newPlugin makes the checks that need no compiling: grants, and the
// module file's size and export names (the ABI marker, reactor rather
// than command, the exports the kind needs). A plugin that fails them is
// refused at start; one that passes is registered at once and loads in
// the background.
func newPlugin(dir string, man *Manifest, grant core.PluginGrant, log *slog.Logger) (_ *plugin, err error) {
	p := &plugin{name: man.Name, dir: dir, man: man, log: log, ready: make(chan struct{}), live: map[*instance]struct{}{}}
	p.limits, p.timeout = effectiveLimits(man.Limits, grant, log, man.Name)
	p.granted, p.denied, err = grantCapabilities(man.Capabilities, grant)
	if err != nil {
		return nil, err
	}
	f, size, err := openModule(p.modulePath())
	if err != nil {
		return nil, err
	}
	exports, ok := exportNames(f, size)
	f.Close()
	if ok {
		if err := checkShape(exports, man.Kind); err != nil {
			return nil, fmt.Errorf("%s: %w", man.Module, err)
		}
	}
	return p, nil
}

func (p *plugin) modulePath() string { return filepath.Join(p.dir, p.man.Module) }

// load compiles the module (through the cache), checks what compiling
// reveals (signatures, imports, memory), starts one instance and asks the
// module to describe itself. It runs in the background; finish publishes
// the outcome.
func (p *plugin) load(ctx context.Context, cache wazero.CompilationCache) (err error) {
	bin, err := readModule(p.modulePath())
	if err != nil {
		return err
	}
	defer func() {
		if err != nil && p.runtime != nil {
			_ = p.runtime.Close(context.Background())
			p.runtime = nil
		}
	}()
	if err = p.compile(ctx, cache, bin); err != nil {
		return err
	}
	if err = checkModule(p.compiled, p.man.Kind); err != nil {
		return fmt.Errorf("%s: %w", p.man.Module, err)
	}
	p.modCfg = p.moduleConfig()

	p.idle = make(chan *instance, p.limits.Instances)
	p.slots = make(chan struct{}, p.limits.Instances)
	p.slots <- struct{}{}
	in, err := p.instantiate(ctx)
	if err != nil {
		return err
	}
	if err = p.describeWith(ctx, in); err != nil {
		p.forget(in)
		in.close(ctx)
		return err
	}
	p.idle <- in
	return nil
}

// compile compiles the module into a runtime of its own (p.runtime).
//
// The module is first instrumented (see plugins/internal/stopcheck): a
// stop flag the host sets at the deadline, tested at every loop head,
// and compiled in a runtime without wazero's WithCloseOnContextDone, whose
// check at every loop head exits to the host. When the module cannot be
// instrumented, or wazero refuses the result, the module as it is
// compiles in a runtime with WithCloseOnContextDone: a module never runs
// without one of the two checks. (wazero's compilation cache keys each
// module by its bytes and that option, so the two never mix.)
func (p *plugin) compile(ctx context.Context, cache wazero.CompilationCache, bin []byte) error {
	inst, _, ierr := stopcheck.Instrument(bin)
	refused := false
	if ierr == nil {
		if ierr = p.compileIn(ctx, cache, inst, false); ierr == nil {
			p.stoppable = true
			return nil
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
		refused = true
	}
	if err := p.compileIn(ctx, cache, bin, true); err != nil {
		return err
	}
	// Either way the plugin works, its calls cost more.
	level := slog.LevelInfo
	if refused { // the original compiled: the rewrite is at fault
		level = slog.LevelWarn
	}
	p.log.Log(ctx, level, "plugin runs under wazero's slower deadline check", "plugin", p.name, "reason", ierr.Error())
	return nil
}

// compileIn makes p.runtime, with WASI, and compiles bin in it; on
// failure p.runtime is closed and nil.
func (p *plugin) compileIn(ctx context.Context, cache wazero.CompilationCache, bin []byte, closeOnDone bool) (err error) {
	rcfg := wazero.NewRuntimeConfig().
		WithMemoryLimitPages(uint32(p.limits.MemoryMB) * 16). // 64 KiB pages
		WithCloseOnContextDone(closeOnDone)
	if cache != nil {
		rcfg = rcfg.WithCompilationCache(cache)
	}
	p.runtime = wazero.NewRuntimeWithConfig(ctx, rcfg)
	defer func() {
		if err != nil {
			_ = p.runtime.Close(context.Background())
			p.runtime = nil
		}
	}()
	if _, err = wasi_snapshot_preview1.Instantiate(ctx, p.runtime); err != nil {
		return fmt.Errorf("wasi: %w", err)
	}
	// On a cache miss the functions compile on every core (and a
	// cancelled ctx stops them); a hit only decodes and validates.
	cctx := experimental.WithCompilationWorkers(ctx, max(2, runtime.GOMAXPROCS(0)))
	if p.compiled, err = p.runtime.CompileModule(cctx, bin); err != nil {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		msg := firstLine(err)
		if strings.Contains(msg, "over limit") {
			msg += fmt.Sprintf(": the module needs more memory at start than its %d MiB limit (limits.memory_mb)", p.limits.MemoryMB)
		}
		return fmt.Errorf("compile %s: %s", p.man.Module, msg)
	}
	return nil
}

// finish publishes the outcome of load to every waiting call.
func (p *plugin) finish(err error, took time.Duration) {
	p.loadTook, p.loadedAt = took, time.Now()
	if err != nil {
		p.loadReason = err.Error()
		p.loadErr = pluginError(p.name, "failed to load: %s", p.loadReason)
	}
	close(p.ready)
}

// loaded reports whether the load has finished, and how.
func (p *plugin) loaded() (done bool, err *rpc.Error) {
	select {
	case <-p.ready:
		return true, p.loadErr
	default:
		return false, nil
	}
}

// wait waits for the load to finish, at most as long as ctx. A plugin
// whose load failed answers every call with the load's PLUGIN_ERROR.
func (p *plugin) wait(ctx context.Context) error {
	select {
	case <-p.ready:
	default:
		start := time.Now()
		select {
		case <-p.ready:
		case <-ctx.Done():
			return rpc.Errorf(rpc.Unavailable, "plugin %s is still loading (waited %s): %v", p.name, time.Since(start).Round(time.Millisecond), context.Cause(ctx))
		}
	}
	if p.closed.Load() {
		return rpc.Errorf(rpc.Unavailable, "plugin %s is closed: the kernel is stopping", p.name)
	}
	if p.loadErr != nil {
		e := *p.loadErr // each caller gets its own
		return &e
	}
	return nil
}

// openModule opens the module file and checks its size.
func openModule(path string) (*os.File, int64, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, 0, fmt.Errorf("module: %w (build it beside the manifest, e.g. with make examples)", err)
	}
	fi, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, 0, fmt.Errorf("module: %w", err)
	}
	if fi.Size() > maxModule {
		f.Close()
		return nil, 0, fmt.Errorf("module %s is %d MiB, above the %d MiB the kernel loads", path, fi.Size()>>20, maxModule>>20)
	}
	return f, fi.Size(), nil
}

func readModule(path string) ([]byte, error) {
	f, size, err := openModule(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	bin := make([]byte, size)
	if _, err := f.ReadAt(bin, 0); err != nil {
		return nil, fmt.Errorf("module: %w", err)
	}
	return bin, nil
}

// effectiveLimits applies defaults, the operator's grant and the hard
// maximums, in that order.
func effectiveLimits(asked Limits, grant core.PluginGrant, log *slog.Logger, name string) (Limits, time.Duration) {
	l := asked
	if l.MemoryMB == 0 {
		l.MemoryMB = DefaultMemoryMB
	}
	if l.TimeoutMS == 0 {
		l.TimeoutMS = DefaultTimeoutMS
	}
	if l.Instances == 0 {
		l.Instances = DefaultInstances
	}
	if grant.MemoryMB > 0 {
		l.MemoryMB = grant.MemoryMB
	}
	if grant.TimeoutMS > 0 {
		l.TimeoutMS = grant.TimeoutMS
	}
	if l.MemoryMB > MaxMemoryMB {
		log.Warn("plugin memory limit clamped", "plugin", name, "asked_mb", l.MemoryMB, "max_mb", MaxMemoryMB)
		l.MemoryMB = MaxMemoryMB
	}
	if l.TimeoutMS > MaxTimeoutMS {
		log.Warn("plugin timeout clamped", "plugin", name, "asked_ms", l.TimeoutMS, "max_ms", MaxTimeoutMS)
		l.TimeoutMS = MaxTimeoutMS
	}
	return l, time.Duration(l.TimeoutMS) * time.Millisecond
}

// grantCapabilities intersects what the manifest asks with what the
// operator grants. A directory is granted when it is, or lies under, a
// granted directory.
func grantCapabilities(asked Capabilities, grant core.PluginGrant) (granted, denied Capabilities, err error) {
	for _, name := range asked.Env {
		if slices.Contains(grant.Env, name) {
			granted.Env = append(granted.Env, name)
		} else {
			denied.Env = append(denied.Env, name)
		}
	}
	for _, dir := range asked.FS {
		dir = filepath.Clean(dir)
		ok := false
		for _, g := range grant.FS {
			if rel, err := filepath.Rel(filepath.Clean(g), dir); err == nil && filepath.IsLocal(rel) {
				ok = true
				break
			}
		}
		if !ok {
			denied.FS = append(denied.FS, dir)
			continue
		}
		fi, err := os.Stat(dir)
		if err != nil || !fi.IsDir() {
			return granted, denied, fmt.Errorf("capabilities.fs %s is granted but is not a readable directory", dir)
		}
		granted.FS = append(granted.FS, dir)
	}
	if asked.Clock {
		if grant.Clock {
			granted.Clock = true
		} else {
			denied.Clock = true
		}
	}
	return granted, denied, nil
}

// moduleConfig is the sandbox: no arguments, no file system, network,
// environment or real clock unless granted, and a deterministic random
// source (the Go runtime seeds its maps from it).
func (p *plugin) moduleConfig() wazero.ModuleConfig {
	cfg := wazero.NewModuleConfig().WithName("").WithStartFunctions()
	if _, p.initFn = p.compiled.ExportedFunctions()[exportInit]; p.initFn && !p.stoppable {
		cfg = cfg.WithStartFunctions(exportInit)
	}
	for _, name := range p.granted.Env {
		if v, ok := os.LookupEnv(name); ok {
			cfg = cfg.WithEnv(name, v)
		}
	}
	if len(p.granted.FS) > 0 {
		fs := wazero.NewFSConfig()
		for _, dir := range p.granted.FS {
			fs = fs.WithReadOnlyDirMount(dir, dir)
		}
		cfg = cfg.WithFSConfig(fs)
	}
	if p.granted.Clock {
		cfg = cfg.WithSysWalltime().WithSysNanotime().WithSysNanosleep()
	}
	return cfg
}

// describeWith asks the module what it serves and checks that against
// the manifest, so that what an operator read is what runs.
func (p *plugin) describeWith(ctx context.Context, in *instance) error {
	ctx, cancel := context.WithTimeout(ctx, p.initTimeout())
	defer cancel()
	answer, err := in.call0(ctx, in.describe)
	if err != nil {
		return fmt.Errorf("shoal_describe: %s", p.explain(in, err))
	}
	env, err := decodeEnvelope(answer)
	if err != nil {
		return fmt.Errorf("shoal_describe: %w", err)
	}
	if !env.OK {
		return fmt.Errorf("shoal_describe failed: %s: %s", env.Error.Code, env.Error.Message)
	}
	var d description
	if err := json.Unmarshal(env.Record, &d); err != nil || len(env.Record) == 0 {
		return fmt.Errorf("shoal_describe: malformed description: %v", err)
	}
	if d.ABI != ABI {
		return fmt.Errorf("shoal_describe: module describes abi %q, want %q", d.ABI, ABI)
	}
	if d.Kind != p.man.Kind {
		return fmt.Errorf("module describes a %s, the manifest says %s", d.Kind, p.man.Kind)
	}
	switch d.Kind {
	case KindProvider:
		err = p.adoptProvider(d)
	case KindValidator:
		err = p.adoptValidator(d)
	}
	if err != nil {
		return err
	}
	p.desc = d
	return nil
}

func (p *plugin) adoptProvider(d description) error {
	fam := p.man.Provider.Family
	if d.Family != fam {
		return fmt.Errorf("module describes family %q, the manifest says %q", d.Family, fam)
	}
	prefix := "shoal://" + fam
	under := func(u string) bool {
		rest, ok := bytes.CutPrefix([]byte(u), []byte(prefix))
		return ok && (len(rest) == 0 || rest[0] == '/' || rest[0] == '?' || rest[0] == '{')
	}
	var tmpls, roots []string
	for _, t := range d.Templates {
		if !under(t.URITemplate) || t.Name == "" {
			return fmt.Errorf("template %q must start with %s and have a name", t.URITemplate, prefix)
		}
		p.templates = append(p.templates, core.Template{URITemplate: t.URITemplate, Name: t.Name, Description: t.Description, MimeType: mimeOr(t.MimeType)})
		tmpls = append(tmpls, t.URITemplate)
	}
	for _, r := range d.Roots {
		if !under(r.URI) || r.Name == "" {
			return fmt.Errorf("root %q must start with %s and have a name", r.URI, prefix)
		}
		p.roots = append(p.roots, core.Resource{URI: r.URI, Name: r.Name, Description: r.Description, MimeType: mimeOr(r.MimeType), Root: true})
		roots = append(roots, r.URI)
	}
	if m := p.man.Provider.Templates; m != nil && !slices.Equal(m, tmpls) {
		return fmt.Errorf("manifest lists templates %q, the module describes %q: make them agree", m, tmpls)
	}
	if m := p.man.Provider.Roots; m != nil && !slices.Equal(m, roots) {
		return fmt.Errorf("manifest lists roots %q, the module describes %q: make them agree", m, roots)
	}
	if d.List && p.compiled.ExportedFunctions()[exportList] == nil {
		return fmt.Errorf("module describes live entries but does not export %s", exportList)
	}
	return nil
}

func (p *plugin) adoptValidator(d description) error {
	if want := p.man.Validator.Channels; !slices.Equal(d.Channels, want) {
		return fmt.Errorf("module describes channels %q, the manifest says %q", d.Channels, want)
	}
	schema := []byte(d.Schema)
	source := "the module's description"
	if f := p.man.Validator.Schema; f != "" {
		if len(schema) > 0 {
			return fmt.Errorf("the schema is declared twice (validator.schema %s and the module's description): keep one", f)
		}
		var err error
		if schema, err = os.ReadFile(filepath.Join(p.dir, f)); err != nil {
			return fmt.Errorf("validator.schema: %w", err)
		}
		source = f
	}
	if len(schema) == 0 || bytes.Equal(bytes.TrimSpace(schema), []byte("null")) {
		return nil
	}
	sch, err := compileSchema(p.name, schema)
	if err != nil {
		return fmt.Errorf("schema from %s: %w", source, err)
	}
	p.schema = sch
	return nil
}

func mimeOr(m string) string {
	if m == "" {
		return "application/json"
	}
	return m
}

// invoke runs one guest call under the plugin's deadline and decodes the
// envelope. On any failure the instance is retired and the error is a
// PLUGIN_ERROR; a guest error envelope comes back as env.Error.
func (p *plugin) invoke(ctx context.Context, pick func(*instance) api.Function, req []byte) (*envelope, error) {
	p.calls.Add(1)
	if err := p.wait(ctx); err != nil {
		return nil, err
	}
	// Waiting for a busy instance is bounded by the deadline too, but the
	// call gets its whole deadline once it has an instance: starting a
	// fresh one is the kernel's cost, not the plugin's.
	in, err := p.acquire(ctx)
	if err != nil {
		return nil, p.failed(ctx, err)
	}
	callCtx, cancel := context.WithTimeout(ctx, p.timeout)
	defer cancel()
	answer, err := in.call(callCtx, pick(in), req)
	if err != nil {
		e := pluginError(p.name, "%s", p.explain(in, err))
		p.retire(in)
		return nil, p.failed(ctx, e)
	}
	if bytes.Equal(answer, okAnswer) {
		p.release(in)
		return &envelope{OK: true}, nil
	}
	env, err := decodeEnvelope(answer)
	if err != nil {
		p.retire(in)
		return nil, p.failed(ctx, pluginError(p.name, "%v", err))
	}
	if env.Error != nil && env.Error.Code == guestPanic {
		p.retire(in)
		return nil, p.failed(ctx, pluginError(p.name, "panic: %s", clip.String(env.Error.Message, 1000)))
	}
	p.release(in)
	return env, nil
}

// failed records a failure for Status and returns it. A call its caller
// cancelled is not the plugin's fault and is not recorded.
func (p *plugin) failed(ctx context.Context, err error) error {
	if errors.Is(ctx.Err(), context.Canceled) {
		return err
	}
	p.failures.Add(1)
	p.mu.Lock()
	p.lastErr, p.lastAt = rpc.AsError(err).Message, time.Now()
	p.mu.Unlock()
	p.log.Warn("plugin call failed", "plugin", p.name, "err", rpc.AsError(err).Message)
	return err
}

// close stops the plugin once its load has finished (Set.Close cancels
// and waits for it): idle instances close now, busy ones when they come
// back, and the runtime closes everything still open. A call in progress
// in an instrumented module is stopped at its next check; under wazero's
// check, closing the runtime stops it.
func (p *plugin) close(ctx context.Context) error {
	p.closed.Store(true)
	if p.runtime == nil { // the load failed and closed it
		return nil
	}
	p.liveMu.Lock()
	for in := range p.live {
		in.kill()
	}
	p.liveMu.Unlock()
	for {
		select {
		case in := <-p.idle:
			p.retire(in)
			continue
		default:
		}
		break
	}
	return p.runtime.Close(ctx)
}
