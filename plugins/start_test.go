package plugins

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/shoal-sh/shoal/core"
	"github.com/shoal-sh/shoal/core/rpc"
	"github.com/shoal-sh/shoal/core/uri"
	"github.com/shoal-sh/shoal/core/value"
	"github.com/shoal-sh/shoal/plugins/internal/wasmbuild"
)

// holdLoads makes background loads wait until the returned release is
// called (or their set closes).
func holdLoads(t *testing.T) (release func()) {
	t.Helper()
	gate := make(chan struct{})
	loadGate = func(ctx context.Context, _ string) {
		select {
		case <-gate:
		case <-ctx.Done():
		}
	}
	released := false
	release = func() {
		if !released {
			released = true
			close(gate)
		}
	}
	t.Cleanup(func() { release(); loadGate = nil })
	return release
}

// badDescribeFolder is a provider "raw" whose module passes every check
// made at start and fails its description, in the background.
func badDescribeFolder(t testing.TB) string {
	wasm := modules.Module(t, wasmbuild.Spec{Pkg: "./plugins/testdata/baddescribe"})
	return wasmbuild.Folder(t, wasm, "m.wasm", sprintf(providerManifest, "raw", "raw"), nil)
}

// TestStartInBackground holds the loads to look at a set whose plugins
// are registered but not loaded: calls wait for the load (as long as their
// context allows), then succeed, or fail with the load's reason.
func TestStartInBackground(t *testing.T) {
	release := holdLoads(t)
	l := &logs{}
	dirs := []string{exampleFolder(t, "kv", kvWasm(t)), exampleFolder(t, "buildcheck", buildcheckWasm(t)), badDescribeFolder(t)}
	s, err := Start(dirs, patient("kv", "buildcheck", "raw"), cacheDir, slog.New(l))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })

	for _, st := range s.Status() {
		if st.Health != HealthLoading || st.Error != "" {
			t.Errorf("while held: %+v", st)
		}
	}
	if st := status(t, s, "kv"); len(st.Templates) != 1 {
		t.Errorf("a loading plugin shows its manifest's templates: %+v", st)
	}
	kv, raw := providerOf(t, s, "kv"), providerOf(t, s, "raw")
	if tm := kv.Templates(); len(tm) != 1 || tm[0].URITemplate != "shoal://kv/{key}{?path,slice,format}" {
		t.Errorf("templates while loading: %+v", tm)
	}
	if tm := raw.Templates(); len(tm) != 0 {
		t.Errorf("a manifest without templates gives none while loading: %+v", tm)
	}
	v, ok := s.Validator("buildcheck")
	if !ok {
		t.Fatal("a loading validator is not registered")
	}

	// A call whose context ends while the plugin loads gives up.
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	_, err = kv.Read(ctx, nil, mustURI(t, "shoal://kv/answer"))
	cancel()
	wantCode(t, err, rpc.Unavailable, "plugin kv is still loading")
	ctx, cancel = context.WithCancel(context.Background())
	cancel()
	if err := s.Wait(ctx); !errors.Is(err, context.Canceled) {
		t.Errorf("Wait with a cancelled context: %v", err)
	}

	// Calls without a deadline wait for the load.
	type result struct {
		what string
		err  error
		val  value.Value
	}
	results := make(chan result, 4)
	go func() {
		c, err := read(t, kv, "shoal://kv/answer")
		r := result{what: "read kv", err: err}
		if err == nil {
			r.val = c.Value
		}
		results <- r
	}()
	go func() {
		_, err := read(t, raw, "shoal://raw/x")
		results <- result{what: "read raw", err: err}
	}()
	go func() {
		results <- result{what: "validate", err: v("user.build.v1", json.RawMessage(`{"phase":"queued"}`))}
	}()
	go func() {
		res, err := kv.List(context.Background(), &core.Caller{})
		if err == nil && (len(res) == 0 || res[0].URI != "shoal://kv") {
			err = errors.New("list without the kv root")
		}
		results <- result{what: "list kv", err: err}
	}()
	select {
	case r := <-results:
		t.Fatalf("%s returned while the load is held: %v", r.what, r.err)
	case <-time.After(50 * time.Millisecond):
	}
	release()
	if err := s.Wait(context.Background()); err != nil {
		t.Fatal(err)
	}
	for range 4 {
		r := <-results
		switch r.what {
		case "read kv":
			if r.err != nil || !value.Equal(r.val, value.Int(42)) {
				t.Errorf("read kv after the load: %v %#v", r.err, r.val)
			}
		case "read raw":
			wantCode(t, r.err, rpc.PluginError, "plugin raw: failed to load", "shoal_describe: malformed answer")
		default:
			if r.err != nil {
				t.Errorf("%s: %v", r.what, r.err)
			}
		}
	}

	want := map[string]string{"kv": HealthOK, "buildcheck": HealthOK, "raw": HealthFailed}
	for _, st := range s.Status() {
		if st.Health != want[st.Name] {
			t.Errorf("after the load: %+v", st)
		}
	}
	if st := status(t, s, "raw"); !strings.Contains(st.Error, "shoal_describe: malformed answer") || st.ErrorAt == 0 || st.Instances != 0 {
		t.Errorf("failed plugin status %+v", st)
	}
	if st := status(t, s, "buildcheck"); !st.Schema || st.Instances != 1 {
		t.Errorf("loaded validator status %+v", st)
	}
	// A failed load is the plugin's health, not a failed call.
	if _, err := read(t, raw, "shoal://raw/y"); err == nil {
		t.Fatal("a plugin that failed to load answered")
	}
	if st := status(t, s, "raw"); st.Failures != 0 {
		t.Errorf("load failure counted as call failures: %+v", st)
	}
	if n := l.count("plugin not loaded"); n != 1 {
		t.Errorf("%d 'plugin not loaded' records, want 1", n)
	}
	if n := l.count("plugins loaded"); n != 1 {
		t.Errorf("%d 'plugins loaded' records, want 1", n)
	}
}

// TestCloseWhileLoading closes a set whose loads never started: waiting
// calls end with UNAVAILABLE and Close does not wait for the gate.
func TestCloseWhileLoading(t *testing.T) {
	holdLoads(t)
	s, err := Start([]string{exampleFolder(t, "kv", kvWasm(t))}, patient("kv"), cacheDir, nil)
	if err != nil {
		t.Fatal(err)
	}
	kv := providerOf(t, s, "kv")
	errc := make(chan error, 1)
	go func() {
		_, err := read(t, kv, "shoal://kv/answer")
		errc <- err
	}()
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	wantCode(t, <-errc, rpc.Unavailable, "closed")
	if err := s.Wait(context.Background()); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
}

func mustURI(t testing.TB, raw string) *uri.URI {
	t.Helper()
	u, err := uri.Parse(raw)
	if err != nil {
		t.Fatal(err)
	}
	return u
}

// BadDescribeFolder is a plugin folder for the provider "raw" (family
// raw), whose load fails in the background, for the external end-to-end
// tests in package plugins_test.
func BadDescribeFolder(t testing.TB) string { return badDescribeFolder(t) }
