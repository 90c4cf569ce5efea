package plugins

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/shoal-sh/shoal/core"
	"github.com/shoal-sh/shoal/core/rpc"
	"github.com/shoal-sh/shoal/core/value"
	"github.com/shoal-sh/shoal/plugins/internal/wasmbuild"
)

const secretEnv = "SHOAL_PLUGIN_TEST_SECRET"

// hostileFolder is the hostile provider asking for every capability, so
// that the operator's grant alone decides what it gets.
func hostileFolder(t testing.TB, fsDir string, instances int) string {
	t.Helper()
	man := fmt.Sprintf(`
name = "hostile"
version = "1.0.0"
kind = "provider"
abi = "shoal_abi_v1"
module = "hostile.wasm"

[provider]
family = "hostile"

[limits]
memory_mb = 32
timeout_ms = 500
instances = %d

[capabilities]
env = [%q]
fs = [%q]
clock = true
`, instances, secretEnv, fsDir)
	return wasmbuild.Folder(t, hostileWasm(t), "hostile.wasm", man, nil)
}

// TestHostile checks that each misdeed fails its own call with a
// PLUGIN_ERROR that says what happened, and that the next call works.
func TestHostile(t *testing.T) {
	dir := hostileFolder(t, t.TempDir(), 2)
	// Only the endless loop meets the manifest's 500 ms deadline; the
	// other misdeeds must fail by themselves, however slow the machine.
	strict, strictLogs := loadLogged(t, []string{dir}, nil)
	lenient, lenientLogs := loadLogged(t, []string{dir}, patient("hostile"))
	tests := []struct {
		misdeed string
		strict  bool
		reason  []string
	}{
		{"loop", true, []string{"deadline exceeded", "500ms", "timeout_ms", "[plugins.hostile]"}},
		{"bomb", false, []string{"memory limit of 32 MiB", "memory_mb"}},
		{"panic", false, []string{"panic: hostile plugin panics on purpose"}},
		{"deadlock", false, []string{"trap", "all goroutines are asleep - deadlock"}},
		{"receive", false, []string{"trap", "deadlock"}},
		{"huge", false, []string{"passes the 8 MiB cap"}},
		{"exit", false, []string{"exited with code 7"}},
		{"badtable", false, []string{"panic: sdk.Table: row 0 has 1 cells, want 2"}},
		{"open/etc/hostname", false, []string{"FAILED", "open /etc/hostname"}},
		{"env/" + secretEnv, false, []string{"FAILED", "not visible"}},
	}
	t.Setenv(secretEnv, "s3cret")
	for _, tc := range tests {
		t.Run(strings.ReplaceAll(tc.misdeed, "/", "_"), func(t *testing.T) {
			s := lenient
			if tc.strict {
				s = strict
			}
			p := providerOf(t, s, "hostile")
			before := status(t, s, "hostile").Failures
			_, err := read(t, p, "shoal://hostile/"+tc.misdeed)
			wantCode(t, err, rpc.PluginError, append([]string{"plugin hostile"}, tc.reason...)...)
			st := status(t, s, "hostile")
			if st.Failures != before+1 || st.Health != HealthOK || !strings.Contains(st.Error, tc.reason[0]) {
				t.Errorf("status after %s: %+v", tc.misdeed, st)
			}
			c, err := read(t, p, "shoal://hostile/ok")
			if err != nil {
				t.Fatalf("the call after %s failed: %v", tc.misdeed, err)
			}
			if _, ok := c.Value.(*value.Record); !ok {
				t.Fatalf("after %s: %#v", tc.misdeed, c.Value)
			}
			if n := status(t, s, "hostile").Instances; n < 1 || n > 2 {
				t.Errorf("after %s: %d instances alive, want 1..2", tc.misdeed, n)
			}
		})
	}
	if n := strictLogs.count("plugin call failed") + lenientLogs.count("plugin call failed"); n != len(tests) {
		t.Errorf("%d failures logged, want %d", n, len(tests))
	}

	// A plain-JSON answer is a record, not a typed value.
	c, err := read(t, providerOf(t, lenient, "hostile"), "shoal://hostile/record")
	if err != nil {
		t.Fatal(err)
	}
	if c.Value != nil || string(c.Record.(json.RawMessage)) != `{"n":1,"plain":"json"}` {
		t.Fatalf("record: %#v", c)
	}
}

// TestOutputBounded checks that a plugin printing a lot reaches the log
// with a bounded number of lines per call.
func TestOutputBounded(t *testing.T) {
	s, logs := loadLogged(t, []string{hostileFolder(t, t.TempDir(), 1)}, patient("hostile"))
	p := providerOf(t, s, "hostile")
	if _, err := read(t, p, "shoal://hostile/chatty"); err != nil {
		t.Fatal(err)
	}
	if n := logs.count(outputStreamed); n != outputPerCall {
		t.Errorf("%d output lines logged, want %d", n, outputPerCall)
	}
	if n := logs.count("plugin output suppressed"); n != 1 {
		t.Errorf("%d suppression notes, want 1", n)
	}
}

// TestGrants checks that env, fs and clock reach the plugin only when the
// manifest asks and the operator grants.
func TestGrants(t *testing.T) {
	t.Setenv(secretEnv, "s3cret")
	shared := t.TempDir()
	if err := os.WriteFile(filepath.Join(shared, "note.txt"), []byte("granted file"), 0o600); err != nil {
		t.Fatal(err)
	}
	dir := hostileFolder(t, shared, 1)

	t.Run("denied", func(t *testing.T) {
		s := load(t, []string{dir}, patient("hostile"))
		st := status(t, s, "hostile")
		if len(st.Granted.Env)+len(st.Granted.FS) != 0 || st.Granted.Clock ||
			len(st.Denied.Env) != 1 || len(st.Denied.FS) != 1 || !st.Denied.Clock {
			t.Fatalf("status %+v", st)
		}
		p := providerOf(t, s, "hostile")
		_, err := read(t, p, "shoal://hostile/env/"+secretEnv)
		wantCode(t, err, rpc.PluginError, "not visible")
		_, err = read(t, p, "shoal://hostile/open/"+strings.TrimPrefix(filepath.Join(shared, "note.txt"), "/"))
		wantCode(t, err, rpc.PluginError, "note.txt")
		// Without the clock the plugin sees 2022-01-01, whatever the date.
		c, err := read(t, p, "shoal://hostile/clock")
		if err != nil {
			t.Fatal(err)
		}
		if y := c.Value.(value.Int); y != 2022 {
			t.Errorf("deterministic clock year %d, want 2022", y)
		}
	})

	t.Run("granted", func(t *testing.T) {
		cfg := core.DefaultConfig()
		cfg.Plugins = map[string]core.PluginGrant{"hostile": {
			Env: []string{secretEnv, "HOME"}, FS: []string{filepath.Dir(shared)}, Clock: true, MemoryMB: 48, TimeoutMS: patientTimeout,
		}}
		s := load(t, []string{dir}, cfg)
		st := status(t, s, "hostile")
		if len(st.Granted.Env) != 1 || len(st.Granted.FS) != 1 || !st.Granted.Clock || st.Limits.MemoryMB != 48 || st.Limits.TimeoutMS != patientTimeout {
			t.Fatalf("status %+v", st)
		}
		p := providerOf(t, s, "hostile")
		c, err := read(t, p, "shoal://hostile/env/"+secretEnv)
		if err != nil || !value.Equal(c.Value, value.Str("s3cret")) {
			t.Fatalf("env: %v %#v", err, c)
		}
		// HOME is granted by the operator but not asked for by the manifest.
		_, err = read(t, p, "shoal://hostile/env/HOME")
		wantCode(t, err, rpc.PluginError, "not visible")
		c, err = read(t, p, "shoal://hostile/open/"+strings.TrimPrefix(filepath.Join(shared, "note.txt"), "/"))
		if err != nil || !value.Equal(c.Value, value.Str("granted file")) {
			t.Fatalf("fs: %v %#v", err, c)
		}
		c, err = read(t, p, "shoal://hostile/clock")
		if err != nil {
			t.Fatal(err)
		}
		if y := c.Value.(value.Int); int(y) != time.Now().Year() {
			t.Errorf("real clock year %d, want %d", y, time.Now().Year())
		}
	})
}

// TestConcurrentReads hammers one plugin from 8 goroutines; the pool
// (4 instances) serialises calls per instance.
func TestConcurrentReads(t *testing.T) {
	s := load(t, []string{exampleFolder(t, "kv", kvWasm(t))}, patient("kv"))
	p := providerOf(t, s, "kv")
	const workers, reads = 8, 50
	keys := []string{"greeting", "answer", "fleet", "config"}
	var wg sync.WaitGroup
	errs := make(chan error, workers)
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range reads {
				key := keys[(w+i)%len(keys)]
				c, err := read(t, p, "shoal://kv/"+key)
				if err != nil {
					errs <- fmt.Errorf("worker %d read %s: %w", w, key, err)
					return
				}
				if key == "answer" && !value.Equal(c.Value, value.Int(42)) {
					errs <- fmt.Errorf("worker %d: answer %#v", w, c.Value)
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	st := status(t, s, "kv")
	if st.Calls != workers*reads || st.Failures != 0 || st.Instances < 1 || st.Instances > DefaultInstances {
		t.Errorf("status %+v", st)
	}
}

// TestFreshPlugin builds a provider for a family no code in the
// repository names, drops it in a folder and serves it: a new family
// needs no change to any core package.
func TestFreshPlugin(t *testing.T) {
	family := "fresh" + strconv.FormatInt(time.Now().UnixNano()%1e6, 36)
	src := fmt.Sprintf(`package main

import "github.com/shoal-sh/shoal/sdk"

func init() {
	sdk.RegisterProvider(sdk.Provider{
		Family:    %[1]q,
		Templates: []sdk.Template{{URITemplate: "shoal://%[1]s/{name}", Name: "greeting"}},
		Roots:     []sdk.Resource{{URI: "shoal://%[1]s", Name: "%[1]s"}},
		Read: func(r *sdk.ReadRequest) (any, error) {
			name := "world"
			if len(r.Segments) > 0 {
				name = r.Segments[0]
			}
			return sdk.Record(sdk.F("hello", sdk.Str(name)), sdk.F("session", sdk.Str(r.Caller.Session))), nil
		},
	})
}

func main() {}
`, family)
	wasm := modules.Module(t, wasmbuild.Spec{Pkg: "./plugins/testdata/fresh", Files: map[string]string{"main.go": src}})
	man := fmt.Sprintf("name = %[1]q\nversion = \"0.0.1\"\nkind = \"provider\"\nabi = \"shoal_abi_v1\"\nmodule = \"%[1]s.wasm\"\n[provider]\nfamily = %[1]q\n", family)
	parent := t.TempDir()
	dir := wasmbuild.Folder(t, wasm, family+".wasm", man, nil)
	if err := os.Rename(dir, filepath.Join(parent, family)); err != nil {
		t.Fatal(err)
	}
	s := load(t, []string{parent}, patient(family)) // a folder of plugin folders
	p := providerOf(t, s, family)
	c, err := read(t, p, "shoal://"+family+"/sea")
	if err != nil {
		t.Fatal(err)
	}
	want := value.NewRecord(value.F("hello", value.Str("sea")), value.F("session", value.Str("main")))
	if !value.Equal(c.Value, want) {
		t.Fatalf("got %#v", c.Value)
	}
	res, err := p.List(context.Background(), &core.Caller{})
	if err != nil || len(res) != 1 || res[0].URI != "shoal://"+family {
		t.Fatalf("list %v %+v", err, res)
	}
}

// TestClosed checks that calls after Close answer UNAVAILABLE.
func TestClosed(t *testing.T) {
	s, err := Load([]string{exampleFolder(t, "kv", kvWasm(t))}, patient("kv"), cacheDir, nil)
	if err != nil {
		t.Fatal(err)
	}
	p := providerOf(t, s, "kv")
	if _, err := read(t, p, "shoal://kv/answer"); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	_, err = read(t, p, "shoal://kv/answer")
	wantCode(t, err, rpc.Unavailable, "closed")
}
