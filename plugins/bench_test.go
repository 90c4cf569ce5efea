package plugins

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/tetratelabs/wazero"

	"github.com/shoal-sh/shoal/core"
	"github.com/shoal-sh/shoal/core/rpc"
	"github.com/shoal-sh/shoal/core/uri"
	"github.com/shoal-sh/shoal/core/value"
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

// BenchmarkLoad compares a start with three plugins and a warm on-disk
// compilation cache against a start with none; extra-ms is the cost the
// plugins add.
func BenchmarkLoad(b *testing.B) {
	dirs := []string{
		exampleFolder(b, "kv", kvWasm(b)),
		exampleFolder(b, "buildcheck", buildcheckWasm(b)),
		hostileFolder(b, b.TempDir(), 1),
	}
	defer func(c wazero.CompilationCache) { sharedCache = c }(sharedCache)
	sharedCache = nil // this benchmark is about the on-disk cache
	warm := b.TempDir()
	load := func(b *testing.B, dirs []string) {
		s, err := Load(dirs, patient("kv", "buildcheck", "hostile"), warm, nil)
		if err != nil {
			b.Fatal(err)
		}
		for _, st := range s.Status() {
			if st.Health != HealthOK {
				b.Fatalf("%s: %s", st.Name, st.Error)
			}
		}
		_ = s.Close()
	}
	load(b, dirs) // fill the cache
	var base float64
	b.Run("none", func(b *testing.B) {
		for b.Loop() {
			load(b, nil)
		}
		base = nsPerOp(b)
	})
	b.Run("three-warm", func(b *testing.B) {
		for b.Loop() {
			load(b, dirs)
		}
		b.ReportMetric((nsPerOp(b)-base)/float64(time.Millisecond), "extra-ms")
	})
}

// BenchmarkCompileCold is a start with one plugin and an empty cache: the
// price of the first start after installing or upgrading a plugin.
func BenchmarkCompileCold(b *testing.B) {
	dir := exampleFolder(b, "kv", kvWasm(b))
	defer func(c wazero.CompilationCache) { sharedCache = c }(sharedCache)
	sharedCache = nil
	for b.Loop() {
		b.StopTimer()
		cold := filepath.Join(b.TempDir(), "cache")
		b.StartTimer()
		s, err := Load([]string{dir}, patient("kv"), cold, nil)
		if err != nil {
			b.Fatal(err)
		}
		if st := status(b, s, "kv"); st.Health != HealthOK {
			b.Fatal(st.Error)
		}
		b.StopTimer()
		_ = s.Close()
		_ = os.RemoveAll(cold)
		b.StartTimer()
	}
	b.ReportMetric(float64(b.Elapsed().Milliseconds())/float64(b.N), "ms/start")
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
