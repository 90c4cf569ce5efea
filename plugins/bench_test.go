package plugins

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/tetratelabs/wazero"

	"github.com/shoal-sh/shoal/core"
	"github.com/shoal-sh/shoal/core/bus"
	"github.com/shoal-sh/shoal/core/kernel"
	"github.com/shoal-sh/shoal/core/rpc"
	"github.com/shoal-sh/shoal/core/uri"
	"github.com/shoal-sh/shoal/core/value"
	"github.com/shoal-sh/shoal/core/wire"
	"github.com/shoal-sh/shoal/providers/all"
)

// builtinKV is the in-process twin of examples/kv for the baselines: the
// same family, keys and values, served from a Go map.
type builtinKV struct{ store map[string]value.Value }

func newBuiltinKV() *builtinKV {
	return &builtinKV{store: map[string]value.Value{
		"answer":   value.Int(42),
		"greeting": value.Str("hello from a wasm plugin"),
		"fleet": &value.Table{Cols: []string{"name", "region", "cpus", "healthy"}, Rows: [][]value.Value{
			{value.Str("reef-1"), value.Str("eu-west"), value.Int(8), value.Bool(true)},
			{value.Str("reef-2"), value.Str("eu-west"), value.Int(16), value.Bool(true)},
			{value.Str("lagoon"), value.Str("us-east"), value.Int(4), value.Bool(false)},
			{value.Str("atoll"), value.Str("ap-south"), value.Int(32), value.Bool(true)},
		}},
	}}
}

func (k *builtinKV) Family() string { return "kv" }
func (k *builtinKV) Templates() []core.Template {
	return []core.Template{{URITemplate: "shoal://kv/{key}{?path,slice,format}", Name: "kv value", MimeType: "application/json"}}
}
func (k *builtinKV) List(context.Context, *core.Caller) ([]core.Resource, error) { return nil, nil }
func (k *builtinKV) Read(_ context.Context, _ *core.Caller, u *uri.URI) (*core.Content, error) {
	if len(u.Segments) != 1 {
		return nil, rpc.Errorf(rpc.BadURI, "one segment")
	}
	v, ok := k.store[u.Segments[0]]
	if !ok {
		return nil, rpc.Errorf(rpc.NotFound, "no key %q", u.Segments[0])
	}
	return &core.Content{Value: v}, nil
}

// benchSet loads kv from a warm on-disk cache, as a kernel restart would.
func benchSet(b *testing.B, dirs ...string) *Set {
	b.Helper()
	s, err := Load(dirs, patient("kv", "buildcheck", "hostile"), cacheDir, nil)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = s.Close() })
	return s
}

var benchCaller = &core.Caller{Session: "main", Principal: "agent:bench"}

func readLoop(b *testing.B, p core.Provider, raw string) {
	u, err := uri.Parse(raw)
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		if _, err := p.Read(ctx, benchCaller, u); err != nil {
			b.Fatal(err)
		}
	}
}

func routerLoop(b *testing.B, p core.Provider, raw string) {
	r := core.NewRouter()
	if err := r.Register(p); err != nil {
		b.Fatal(err)
	}
	u, err := uri.Parse(raw)
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		if _, err := r.Read(ctx, benchCaller, u, core.ReadOptions{}); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkRead compares a warm read through the kv plugin with the same
// read from the in-process twin: at the provider boundary, and through
// the router (rendering included), which is what a client waits for.
// The plugin sub-benchmarks report their ratio to the twin as x-builtin.
func BenchmarkRead(b *testing.B) {
	s := benchSet(b, exampleFolder(b, "kv", kvWasm(b)))
	plugin, builtin := providerOf(b, s, "kv"), newBuiltinKV()
	for _, key := range []string{"answer", "fleet"} {
		raw := "shoal://kv/" + key
		for _, layer := range []struct {
			name string
			loop func(*testing.B, core.Provider, string)
		}{{"provider", readLoop}, {"router", routerLoop}} {
			var base float64
			b.Run(fmt.Sprintf("%s/%s/builtin", layer.name, key), func(b *testing.B) {
				layer.loop(b, builtin, raw)
				base = nsPerOp(b) // the last run, the one reported, wins
			})
			b.Run(fmt.Sprintf("%s/%s/plugin", layer.name, key), func(b *testing.B) {
				layer.loop(b, plugin, raw)
				if base > 0 {
					b.ReportMetric(nsPerOp(b)/base, "x-builtin")
				}
			})
		}
	}
}

// kernelHost is boot's adapter (internal/boot imports this package, so
// its tests cannot import boot): the set as the kernel sees it.
type kernelHost struct{ s *Set }

func (h kernelHost) Providers() []core.Provider { return h.s.Providers() }
func (h kernelHost) Bind(name, channel string) (bus.Validator, error) {
	return h.s.Bind(name, channel)
}
func (h kernelHost) Status() []wire.PluginStatus { return h.s.Status() }
func (h kernelHost) Close() error                { return h.s.Close() }

// startKernel starts a full kernel (every built-in family, plugins loading
// in the background as boot starts them) on stateDir, whose
// cache/wasm is the on-disk compilation cache. It returns when New did
// (the kernel can serve: Serve only listens) and when every plugin had
// loaded, then stops the kernel.
func startKernel(b *testing.B, stateDir string, dirs []string) (ready, allReady time.Duration) {
	b.Helper()
	var set *Set
	t0 := time.Now()
	k, err := kernel.New(kernel.Options{
		StateDir:   stateDir,
		PluginDirs: dirs,
		Order:      all.Order(),
		LoadPlugins: func(cfg *core.Config, dirs, reserved []string, cacheDir string, log *slog.Logger) (kernel.PluginHost, error) {
			s, err := Start(dirs, cfg, cacheDir, log, reserved...)
			set = s
			return kernelHost{s}, err
		},
	}, all.Providers()...)
	if err != nil {
		b.Fatal(err)
	}
	ready = time.Since(t0)
	if err := set.Wait(context.Background()); err != nil {
		b.Fatal(err)
	}
	allReady = time.Since(t0)
	for _, st := range set.Status() {
		if st.Health != HealthOK {
			b.Fatalf("%s: %s %s", st.Name, st.Health, st.Error)
		}
	}
	k.Stop()
	return ready, allReady
}

func median(ds []time.Duration) time.Duration {
	ds = slices.Clone(ds)
	slices.Sort(ds)
	return ds[len(ds)/2]
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// BenchmarkKernelStart starts kernels with no plugin and with three (kv,
// buildcheck, hostile: Go modules of about 3 MB each) on a warm on-disk
// compilation cache, alternately in one run, and reports medians:
// none-ms, the start without plugins; ready-extra-ms, what the plugins
// add before the kernel can serve (manifests, module files and export
// names); all-ready-extra-ms, what they add until every plugin has loaded
// in the background (decoding and validating each module, reading its
// machine code from the cache, starting an instance, describing).
func BenchmarkKernelStart(b *testing.B) {
	dirs := []string{
		exampleFolder(b, "kv", kvWasm(b)),
		exampleFolder(b, "buildcheck", buildcheckWasm(b)),
		hostileFolder(b, b.TempDir(), 1),
	}
	defer func(c wazero.CompilationCache) { sharedCache = c }(sharedCache)
	sharedCache = nil // this benchmark is about the on-disk cache
	none, three := shortStateDir(b), shortStateDir(b)
	startKernel(b, three, dirs) // fill the cache
	startKernel(b, none, nil)
	// Each iteration starts both kernels, back to back: the extras are
	// medians of the per-iteration differences, which a machine getting
	// busier or quieter during the run shifts much less.
	var base, ready, allReady []time.Duration
	for b.Loop() {
		n, _ := startKernel(b, none, nil)
		r, a := startKernel(b, three, dirs)
		base, ready, allReady = append(base, n), append(ready, r-n), append(allReady, a-n)
	}
	b.ReportMetric(ms(median(base)), "none-ms")
	b.ReportMetric(ms(median(ready)), "ready-extra-ms")
	b.ReportMetric(ms(median(allReady)), "all-ready-extra-ms")
}

func shortStateDir(b *testing.B) string {
	d, err := os.MkdirTemp("", "shX")
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { os.RemoveAll(d) })
	return d
}

// BenchmarkCompileCold loads one plugin with an empty compilation cache,
// the price of the first start after installing or upgrading it, and
// again with the cache that load filled. cold-ms and warm-ms are medians
// per module (compile or cache read, first instance, description).
func BenchmarkCompileCold(b *testing.B) {
	modules := []struct {
		name string
		dir  func(testing.TB) string
	}{
		{"kv", func(t testing.TB) string { return exampleFolder(t, "kv", kvWasm(t)) }},
		{"buildcheck", func(t testing.TB) string { return exampleFolder(t, "buildcheck", buildcheckWasm(t)) }},
		{"hostile", func(t testing.TB) string { return hostileFolder(t, t.TempDir(), 1) }},
	}
	defer func(c wazero.CompilationCache) { sharedCache = c }(sharedCache)
	sharedCache = nil
	for _, m := range modules {
		b.Run(m.name, func(b *testing.B) {
			dir := m.dir(b)
			load := func(cache string) time.Duration {
				t0 := time.Now()
				s, err := Load([]string{dir}, patient(m.name), cache, nil)
				took := time.Since(t0)
				if err != nil {
					b.Fatal(err)
				}
				if st := status(b, s, m.name); st.Health != HealthOK {
					b.Fatal(st.Error)
				}
				_ = s.Close()
				return took
			}
			var cold, warm []time.Duration
			for b.Loop() {
				cache := filepath.Join(b.TempDir(), "cache")
				cold = append(cold, load(cache))
				warm = append(warm, load(cache))
				_ = os.RemoveAll(cache)
			}
			b.ReportMetric(ms(median(cold)), "cold-ms")
			b.ReportMetric(ms(median(warm)), "warm-ms")
		})
	}
}

// BenchmarkValidate publishes-checks a valid build report through the
// buildcheck validator: native schema check, then the guest.
func BenchmarkValidate(b *testing.B) {
	s := benchSet(b, exampleFolder(b, "buildcheck", buildcheckWasm(b)))
	v, _ := s.Validator("buildcheck")
	payload := json.RawMessage(`{"phase":"running","passed":120,"failed":3,"total":400,"commit":"0a1b2c3d"}`)
	b.Run("serial", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if err := v("user.build.v1", payload); err != nil {
				b.Fatal(err)
			}
		}
		b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "events/s")
	})
	b.Run("parallel", func(b *testing.B) {
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				if err := v("user.build.v1", payload); err != nil {
					b.Error(err)
					return
				}
			}
		})
		b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "events/s")
	})
}

// nsPerOp is the time per iteration of the run that just ended. Baselines
// are taken from a sibling sub-benchmark this way because testing.Benchmark
// cannot run inside a running benchmark.
func nsPerOp(b *testing.B) float64 {
	return float64(b.Elapsed().Nanoseconds()) / float64(b.N)
}
