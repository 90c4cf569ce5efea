package plugins

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"sync"
	"testing"

	"github.com/tetratelabs/wazero"

	"github.com/shoal-sh/shoal/core"
	"github.com/shoal-sh/shoal/core/rpc"
	"github.com/shoal-sh/shoal/core/uri"
	"github.com/shoal-sh/shoal/plugins/internal/wasmbuild"
)

// modules builds each guest once per test binary; cacheDir is one
// compilation cache for the whole run, so each module compiles once too.
var (
	modules  *wasmbuild.Builder
	cacheDir string
)

func TestMain(m *testing.M) {
	modules = wasmbuild.New()
	dir, err := os.MkdirTemp("", "shoal-wasm-cache-*")
	if err != nil {
		panic(err)
	}
	cacheDir = dir
	sharedCache, err = wazero.NewCompilationCacheWithDir(dir)
	if err != nil {
		panic(err)
	}
	code := m.Run()
	_ = sharedCache.Close(context.Background())
	_ = modules.Close()
	_ = os.RemoveAll(dir)
	os.Exit(code)
}

func kvWasm(t testing.TB) string { return modules.Module(t, wasmbuild.Spec{Pkg: "./examples/kv"}) }
func buildcheckWasm(t testing.TB) string {
	return modules.Module(t, wasmbuild.Spec{Pkg: "./examples/buildcheck"})
}
func hostileWasm(t testing.TB) string {
	return modules.Module(t, wasmbuild.Spec{Pkg: "./plugins/testdata/hostile"})
}
func checkerWasm(t testing.TB) string {
	return modules.Module(t, wasmbuild.Spec{Pkg: "./plugins/testdata/checker"})
}

// logs collects log records so tests can look at what the kernel logged.
type logs struct {
	mu   sync.Mutex
	recs []slog.Record
}

func (l *logs) Enabled(context.Context, slog.Level) bool { return true }
func (l *logs) Handle(_ context.Context, r slog.Record) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.recs = append(l.recs, r.Clone())
	return nil
}
func (l *logs) WithAttrs([]slog.Attr) slog.Handler { return l }
func (l *logs) WithGroup(string) slog.Handler      { return l }

func (l *logs) count(msg string) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	n := 0
	for _, r := range l.recs {
		if r.Message == msg {
			n++
		}
	}
	return n
}

// load loads dirs and closes the set when the test ends.
func load(t testing.TB, dirs []string, cfg *core.Config, reserved ...string) *Set {
	t.Helper()
	s, _ := loadLogged(t, dirs, cfg, reserved...)
	return s
}

func loadLogged(t testing.TB, dirs []string, cfg *core.Config, reserved ...string) (*Set, *logs) {
	t.Helper()
	l := &logs{}
	s, err := Load(dirs, cfg, cacheDir, slog.New(l), reserved...)
	if err != nil {
		t.Fatalf("Load: %v", err)
	}
	t.Cleanup(func() {
		if err := s.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	return s, l
}

func status(t testing.TB, s *Set, name string) PluginStatus {
	t.Helper()
	for _, st := range s.Status() {
		if st.Name == name {
			return st
		}
	}
	t.Fatalf("no status for plugin %q in %+v", name, s.Status())
	return PluginStatus{}
}

func providerOf(t testing.TB, s *Set, family string) core.Provider {
	t.Helper()
	for _, p := range s.Providers() {
		if p.Family() == family {
			return p
		}
	}
	t.Fatalf("no provider for family %q; status %+v", family, s.Status())
	return nil
}

func read(t testing.TB, p core.Provider, raw string) (*core.Content, error) {
	t.Helper()
	u, err := uri.Parse(raw)
	if err != nil {
		t.Fatalf("parse %s: %v", raw, err)
	}
	return p.Read(context.Background(), &core.Caller{Session: "main", Principal: "agent:test"}, u)
}

// wantCode checks that err is an *rpc.Error with code and a message
// containing each of parts.
func wantCode(t testing.TB, err error, code rpc.Code, parts ...string) {
	t.Helper()
	var re *rpc.Error
	if !errors.As(err, &re) {
		t.Fatalf("error %v (%T) is not an *rpc.Error, want %s", err, err, code.Name())
	}
	if re.Code != code {
		t.Fatalf("code %s, want %s: %s", re.Code.Name(), code.Name(), re.Message)
	}
	for _, p := range parts {
		if !strings.Contains(re.Message, p) {
			t.Errorf("message %q lacks %q", re.Message, p)
		}
	}
}

func readFile(t testing.TB, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// patientTimeout replaces the manifests' deadlines in tests that are not
// about deadlines: a loaded machine (or -race) must not fail them.
const patientTimeout = 60_000

// patient is a config granting each named plugin the patient deadline.
func patient(names ...string) *core.Config {
	cfg := core.DefaultConfig()
	cfg.Plugins = map[string]core.PluginGrant{}
	for _, n := range names {
		cfg.Plugins[n] = core.PluginGrant{TimeoutMS: patientTimeout}
	}
	return cfg
}

func sprintf(format string, args ...any) string { return fmt.Sprintf(format, args...) }
