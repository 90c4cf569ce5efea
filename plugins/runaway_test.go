package plugins

import (
	"bytes"
	"context"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/tetratelabs/wazero"

	"github.com/shoal-sh/shoal/core"
	"github.com/shoal-sh/shoal/core/rpc"
	"github.com/shoal-sh/shoal/core/uri"
	"github.com/shoal-sh/shoal/plugins/internal/stopcheck"
	"github.com/shoal-sh/shoal/plugins/internal/wasmbuild"
)

// loaded waits for s to finish loading and returns the named plugin.
func loaded(t *testing.T, s *Set, name string) *plugin {
	t.Helper()
	if err := s.Wait(context.Background()); err != nil {
		t.Fatal(err)
	}
	p := s.byName[name]
	if p == nil {
		t.Fatalf("no plugin %s", name)
	}
	return p
}

// TestRunaway checks that calls that never end by themselves are stopped
// at their deadline, or when their caller cancels, in the instrumented
// module (see plugins/internal/stopcheck) and in one the kernel could not
// instrument, which runs under wazero's own check. The reasons are the
// same either way. Nothing here is timed: a call that is not stopped
// hangs the test until its timeout.
func TestRunaway(t *testing.T) {
	plain := hostileFolder(t, t.TempDir(), 1)
	// A module that already exports the stop flag's name is run as it is.
	clashing := hostileFolder(t, t.TempDir(), 1)
	mod := filepath.Join(clashing, "hostile.wasm")
	if err := os.WriteFile(mod, withGlobalExport(t, []byte(readFile(t, mod)), stopcheck.Export), 0o600); err != nil {
		t.Fatal(err)
	}
	grant := core.DefaultConfig()
	grant.Plugins = map[string]core.PluginGrant{"hostile": {Clock: true}} // real sleeps; the manifest's 500 ms
	for _, tc := range []struct {
		name      string
		dir       string
		stoppable bool
	}{{"instrumented", plain, true}, {"as-is", clashing, false}} {
		t.Run(tc.name, func(t *testing.T) {
			s, logs := loadLogged(t, []string{tc.dir}, grant)
			if p := loaded(t, s, "hostile"); p.stoppable != tc.stoppable {
				t.Fatalf("stoppable %v, want %v (load: %v)", p.stoppable, tc.stoppable, p.loadErr)
			}
			if n := logs.count("plugin runs under wazero's slower deadline check"); n != map[bool]int{true: 0, false: 1}[tc.stoppable] {
				t.Errorf("%d notes of the slower check", n)
			}
			p := providerOf(t, s, "hostile")
			for _, misdeed := range []string{"loop", "nested", "sleep"} {
				_, err := read(t, p, "shoal://hostile/"+misdeed)
				wantCode(t, err, rpc.PluginError, "deadline exceeded", "500ms")
				if _, err := read(t, p, "shoal://hostile/ok"); err != nil {
					t.Fatalf("after %s: %v", misdeed, err)
				}
			}
			// The caller gives up: the call stops, and it is not counted
			// against the plugin.
			before := status(t, s, "hostile").Failures
			u, _ := uri.Parse("shoal://hostile/loop")
			ctx, cancel := context.WithCancel(context.Background())
			time.AfterFunc(20*time.Millisecond, cancel) // most likely mid-loop; before the call fails it the same way
			_, err := p.Read(ctx, &core.Caller{Session: "main"}, u)
			wantCode(t, err, rpc.PluginError, "cancelled by its caller")
			if st := status(t, s, "hostile"); st.Failures != before || st.Health != HealthOK {
				t.Errorf("status after the cancel: %+v", st)
			}
			if _, err := read(t, p, "shoal://hostile/ok"); err != nil {
				t.Fatalf("after the cancel: %v", err)
			}
		})
	}
}

// TestRunawayInit checks that an _initialize that never returns fails the
// load when the start-up deadline passes.
func TestRunawayInit(t *testing.T) {
	src := `package main

import "github.com/shoal-sh/shoal/sdk"

var n int

func init() {
	for n >= 0 {
		n++
		n &= 1<<20 - 1
	}
	sdk.RegisterProvider(sdk.Provider{Family: "stuck", Read: func(*sdk.ReadRequest) (any, error) { return sdk.Int(1), nil }})
}

func main() {}
`
	wasm := modules.Module(t, wasmbuild.Spec{Pkg: "./plugins/testdata/stuck", Files: map[string]string{"main.go": src}})
	man := "name = \"stuck\"\nversion = \"1\"\nkind = \"provider\"\nabi = \"shoal_abi_v1\"\nmodule = \"stuck.wasm\"\n[provider]\nfamily = \"stuck\"\n[limits]\ntimeout_ms = 100\n"
	s := load(t, []string{wasmbuild.Folder(t, wasm, "stuck.wasm", man, nil)}, nil)
	if p := loaded(t, s, "stuck"); !p.stoppable {
		t.Errorf("the module was not instrumented")
	}
	st := status(t, s, "stuck")
	if st.Health != HealthFailed || !bytes.Contains([]byte(st.Error), []byte("start-up (_initialize) ran past 5s")) {
		t.Fatalf("status %+v", st)
	}
}

// withGlobalExport returns bin with one more export: global 0 under name.
func withGlobalExport(t *testing.T, bin []byte, name string) []byte {
	t.Helper()
	out := append([]byte(nil), bin[:8]...)
	for off := 8; off < len(bin); {
		size, n, ok := uleb32(bin[off+1:])
		if !ok {
			t.Fatal("bad section header")
		}
		body := bin[off+1+n : off+1+n+int(size)]
		next := off + 1 + n + int(size)
		if bin[off] != 7 {
			out = append(out, bin[off:next]...)
			off = next
			continue
		}
		count, m, _ := uleb32(body)
		sec := appendU32(nil, count+1)
		sec = append(sec, body[m:]...)
		sec = appendU32(sec, uint32(len(name)))
		sec = append(append(sec, name...), 0x03, 0x00)
		out = append(out, 7)
		out = append(appendU32(out, uint32(len(sec))), sec...)
		off = next
	}
	return out
}

func appendU32(b []byte, v uint32) []byte {
	for v >= 0x80 {
		b = append(b, byte(v)|0x80)
		v >>= 7
	}
	return append(b, byte(v))
}

// TestInstrumentedCached checks that the instrumented module goes through
// the on-disk compilation cache: a second kernel start compiles nothing.
func TestInstrumentedCached(t *testing.T) {
	defer func(c wazero.CompilationCache) { sharedCache = c }(sharedCache)
	sharedCache = nil
	cache := t.TempDir()
	dir := exampleFolder(t, "kv", kvWasm(t))
	files := func() (names []string) {
		err := filepath.WalkDir(cache, func(path string, d fs.DirEntry, err error) error {
			if err != nil || d.IsDir() {
				return err
			}
			fi, err := d.Info()
			if err == nil {
				names = append(names, fmt.Sprint(path, fi.Size(), fi.ModTime().UnixNano()))
			}
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
		return names
	}
	var first []string
	for i := range 2 {
		s, err := Load([]string{dir}, patient("kv"), cache, nil)
		if err != nil {
			t.Fatal(err)
		}
		p := loaded(t, s, "kv")
		if !p.stoppable || p.loadErr != nil {
			t.Fatalf("start %d: stoppable %v, load %v", i, p.stoppable, p.loadErr)
		}
		if _, err := read(t, providerOf(t, s, "kv"), "shoal://kv/answer"); err != nil {
			t.Fatal(err)
		}
		if err := s.Close(); err != nil {
			t.Fatal(err)
		}
		if i == 0 {
			if first = files(); len(first) == 0 {
				t.Fatal("nothing cached")
			}
		} else if again := files(); !slices.Equal(again, first) {
			t.Fatalf("the second start changed the cache: %v, then %v", first, again)
		}
	}
}

// TestCloseStopsBusyCall checks that closing the set stops a call busy
// in an endless loop, long before its deadline (a minute here): the call
// fails saying why.
func TestCloseStopsBusyCall(t *testing.T) {
	s := load(t, []string{hostileFolder(t, t.TempDir(), 1)}, patient("hostile"))
	p := loaded(t, s, "hostile")
	done := make(chan error, 1)
	go func() {
		_, err := read(t, providerOf(t, s, "hostile"), "shoal://hostile/loop")
		done <- err
	}()
	for p.calls.Load() == 0 || len(p.idle) > 0 { // until the call has the instance
		time.Sleep(time.Millisecond)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	wantCode(t, <-done, rpc.PluginError, "the kernel is stopping")
}
