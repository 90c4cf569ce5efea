package stopcheck

import (
	"bytes"
	"context"
	"os"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/tetratelabs/wazero"
	"github.com/tetratelabs/wazero/api"
	"github.com/tetratelabs/wazero/experimental"
	"github.com/tetratelabs/wazero/imports/wasi_snapshot_preview1"

	"github.com/shoal-sh/shoal/plugins/internal/wasmbuild"
)

var modules *wasmbuild.Builder

func TestMain(m *testing.M) {
	modules = wasmbuild.New()
	code := m.Run()
	_ = modules.Close()
	os.Exit(code)
}

// goModules are the Go-built modules of the repository's plugins tests
// and examples.
var goModules = []wasmbuild.Spec{
	{Pkg: "./examples/kv"},
	{Pkg: "./examples/buildcheck"},
	{Pkg: "./plugins/testdata/hostile"},
	{Pkg: "./plugins/testdata/checker"},
	{Pkg: "./plugins/testdata/baddescribe"},
	{Pkg: "./plugins/testdata/wrongabi"},
	{Pkg: "./plugins/testdata/command", Command: true},
}

// workload is a WASI command that exercises the guest's loops: maps,
// sorting, goroutines and channels, strings, a closure called in a loop.
const workload = `package main

import (
	"fmt"
	"sort"
	"strings"
	"sync"
)

func main() {
	m := map[string]int{}
	for i := range 5000 {
		m[fmt.Sprintf("k%d", i%377)] += i
	}
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var wg sync.WaitGroup
	ch := make(chan int, 8)
	for w := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			s := 0
			for i := w; i < 100000; i += 4 {
				s += i * i % 7
			}
			ch <- s
		}()
	}
	wg.Wait()
	close(ch)
	t := 0
	for s := range ch {
		t += s
	}
	f := func(s string) string { return strings.ToUpper(s) + strings.Repeat("!", len(s)%3) }
	var b strings.Builder
	for _, k := range keys[:20] {
		b.WriteString(f(k))
	}
	fmt.Println(len(keys), m["k7"], t, b.String())
}
`

func build(t testing.TB, spec wasmbuild.Spec) []byte {
	t.Helper()
	bin, err := os.ReadFile(modules.Module(t, spec))
	if err != nil {
		t.Fatal(err)
	}
	return bin
}

// TestRoundTrip decodes every Go-built module: with no checks inserted
// the rewrite must give back the very bytes, and the instrumented module
// must compile in wazero (which validates every function).
func TestRoundTrip(t *testing.T) {
	ctx := context.Background()
	r := wazero.NewRuntime(ctx)
	defer r.Close(ctx)
	for _, spec := range goModules {
		t.Run(strings.ReplaceAll(strings.TrimPrefix(spec.Pkg, "./"), "/", "_"), func(t *testing.T) {
			bin := build(t, spec)
			same, st, err := rewrite(bin, false)
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(same, bin) {
				t.Fatalf("the rewrite without checks changed the module (%d bytes, was %d)", len(same), len(bin))
			}
			if st.Functions < 100 || st.Loops < 100 {
				t.Fatalf("decoded %+v: too few for a Go module", st)
			}
			inst, st2, err := Instrument(bin)
			if err != nil {
				t.Fatal(err)
			}
			if st2 != st {
				t.Errorf("stats %+v, without checks %+v", st2, st)
			}
			if want := len(bin) + st.Loops*len(checkBytes(st.Global)) + 5 + 6 + 2 + len(Export) + 2; len(inst) < want-32 || len(inst) > want+32 {
				t.Errorf("instrumented module of %d bytes, want about %d", len(inst), want)
			}
			cm, err := r.CompileModule(ctx, inst)
			if err != nil {
				t.Fatalf("wazero refuses the instrumented module: %v", err)
			}
			_ = cm.Close(ctx)
			// The instrumented module is instrumented no further.
			if _, _, err := Instrument(inst); err == nil || !strings.Contains(err.Error(), "already exports") {
				t.Errorf("instrumenting twice: %v", err)
			}
		})
	}
}

// TestSameBehaviour runs a Go program that works its loops, as it is
// under wazero's check and instrumented without it: the output must be
// the same.
func TestSameBehaviour(t *testing.T) {
	bin := build(t, wasmbuild.Spec{Pkg: "./plugins/internal/stopcheck/testdata/workload", Command: true, Files: map[string]string{"main.go": workload}})
	inst, _, err := Instrument(bin)
	if err != nil {
		t.Fatal(err)
	}
	run := func(bin []byte, closeOnDone bool) string {
		ctx := context.Background()
		r := wazero.NewRuntimeWithConfig(ctx, wazero.NewRuntimeConfig().WithCloseOnContextDone(closeOnDone))
		defer r.Close(ctx)
		wasi_snapshot_preview1.MustInstantiate(ctx, r)
		var out bytes.Buffer
		if _, err := r.InstantiateWithConfig(ctx, bin, wazero.NewModuleConfig().WithStdout(&out).WithStderr(&out)); err != nil {
			t.Fatalf("run: %v\n%s", err, out.String())
		}
		return out.String()
	}
	want, got := run(bin, true), run(inst, false)
	if got != want || !strings.HasPrefix(want, "377 ") {
		t.Fatalf("instrumented output %q, want %q", got, want)
	}
}

// A tiny assembler for hand-made modules.

func vec(items ...[]byte) []byte {
	b := appendUleb(nil, uint64(len(items)))
	for _, it := range items {
		b = append(b, it...)
	}
	return b
}

func sec(id byte, body []byte) []byte { return appendSection(nil, id, body) }

func str(s string) []byte { return append(appendUleb(nil, uint64(len(s))), s...) }

// fn is a function body without locals.
func fn(code ...byte) []byte { return fnLocals([]byte{0}, code...) }

func fnLocals(locals []byte, code ...byte) []byte {
	body := append(append([]byte(nil), locals...), code...)
	return append(appendUleb(nil, uint64(len(body))), body...)
}

const (
	i32 = 0x7f
)

var (
	typeVoid  = []byte{0x60, 0, 0}           // () -> ()
	typeI32   = []byte{0x60, 1, i32, 1, i32} // (i32) -> (i32)
	typeParam = []byte{0x60, 1, i32, 0}      // (i32) -> ()
)

// module makes a module of types, one function per body (of the given
// type indexes), each exported as names[i], and nGlobals mutable i32
// globals of its own.
func module(types [][]byte, funcTypes []byte, names []string, bodies [][]byte, nGlobals int) []byte {
	var funcs, exports, globals [][]byte
	for i := range bodies {
		funcs = append(funcs, []byte{funcTypes[i]})
		exports = append(exports, cat(str(names[i]), []byte{0x00, byte(i)}))
	}
	for range nGlobals {
		globals = append(globals, []byte{i32, 1, 0x41, 0, 0x0b})
	}
	m := cat([]byte("\x00asm\x01\x00\x00\x00"),
		sec(secType, vec(types...)),
		sec(secFunction, vec(funcs...)),
		sec(secMemory, vec([]byte{0x00, 1})))
	if nGlobals > 0 {
		m = append(m, sec(secGlobal, vec(globals...))...)
	}
	m = append(m, sec(secExport, vec(exports...))...)
	m = append(m, sec(secCustom, cat(str("note"), []byte("between")))...)
	return append(m, sec(secCode, vec(bodies...))...)
}

// runaway is a module of endless loops in the shapes the checks must
// catch, and one function that ends.
func runaway(nGlobals int) []byte {
	return module(
		[][]byte{typeVoid, typeI32, typeParam},
		[]byte{0, 0, 2, 0, 1, 0},
		[]string{"spin", "outer", "blockif", "params", "sum", "inner"},
		[][]byte{
			// spin: loop br 0 end
			fn(0x03, 0x40, 0x0c, 0x00, 0x0b, 0x0b),
			// outer: loop call inner br 0 end (inner never returns)
			fn(0x03, 0x40, 0x10, 0x05, 0x0c, 0x00, 0x0b, 0x0b),
			// blockif(x): block local.get 0 if loop br 0 end end end
			fn(0x02, 0x40, 0x20, 0x00, 0x04, 0x40, 0x03, 0x40, 0x0c, 0x00, 0x0b, 0x0b, 0x0b, 0x0b),
			// params: i32.const 0 loop (type 1: i32 -> i32) i32.const 1 i32.add br 0 end drop
			fn(0x41, 0x00, 0x03, 0x01, 0x41, 0x01, 0x6a, 0x0c, 0x00, 0x0b, 0x1a, 0x0b),
			// sum(n): the sum 1..n, in a loop that ends
			fnLocals([]byte{1, 1, i32}, // one i32 local: acc
				0x02, 0x40, 0x03, 0x40, // block loop
				0x20, 0x00, 0x45, 0x0d, 0x01, // local.get n; i32.eqz; br_if 1 (out of the block)
				0x20, 0x01, 0x20, 0x00, 0x6a, 0x21, 0x01, // acc += n
				0x20, 0x00, 0x41, 0x01, 0x6b, 0x21, 0x00, // n--
				0x0c, 0x00, 0x0b, 0x0b, // br 0; end end
				0x20, 0x01, 0x0b), // acc
			// inner: loop br 0 end
			fn(0x03, 0x40, 0x0c, 0x00, 0x0b, 0x0b),
		}, nGlobals)
}

// instantiate instruments bin and instantiates it in a runtime without
// wazero's termination check.
func instantiate(t *testing.T, bin []byte) (api.Module, api.MutableGlobal, Stats) {
	t.Helper()
	inst, st, err := Instrument(bin)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	r := wazero.NewRuntimeWithConfig(ctx, wazero.NewRuntimeConfig().WithCloseOnContextDone(false))
	t.Cleanup(func() { r.Close(ctx) })
	mod, err := r.InstantiateWithConfig(ctx, inst, wazero.NewModuleConfig().WithName(""))
	if err != nil {
		t.Fatal(err)
	}
	g, ok := mod.ExportedGlobal(Export).(api.MutableGlobal)
	if !ok {
		t.Fatalf("no mutable global %s", Export)
	}
	return mod, g, st
}

// TestStops runs each endless loop and sets the flag from another
// goroutine, as the plugins host does at a deadline: each call must trap.
// No time is asserted: a loop the flag cannot stop hangs the test until
// its timeout.
func TestStops(t *testing.T) {
	for _, nGlobals := range []int{0, 3} {
		mod, stop, st := instantiate(t, runaway(nGlobals))
		if st.Loops != 6 || st.Global != uint32(nGlobals) {
			t.Errorf("%d globals: stats %+v", nGlobals, st)
		}
		sum := mod.ExportedFunction("sum")
		if res, err := sum.Call(context.Background(), 100); err != nil || res[0] != 5050 {
			t.Fatalf("sum: %v %v", res, err)
		}
		for _, name := range []string{"spin", "outer", "blockif", "params"} {
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
			done := make(chan struct{})
			stopAfter := context.AfterFunc(ctx, func() { stop.Set(1); close(done) })
			var args []uint64
			if name == "blockif" {
				args = []uint64{1}
			}
			_, err := mod.ExportedFunction(name).Call(ctx, args...)
			stopAfter()
			cancel()
			<-done
			if err == nil || !strings.Contains(err.Error(), "unreachable") {
				t.Errorf("%s: %v, want the unreachable trap", name, err)
			}
			stop.Set(0)
		}
		// Cleared, the flag lets the module run again.
		if res, err := sum.Call(context.Background(), 10); err != nil || res[0] != 55 {
			t.Fatalf("sum after the stops: %v %v", res, err)
		}
		// Set before a call, it stops the loop within Turns turns.
		stop.Set(1)
		if _, err := sum.Call(context.Background(), 2*Turns); err == nil {
			t.Error("sum ran with the flag set")
		}
		stop.Set(0)
	}
}

// TestStopsUnderFeatures instruments instructions of the proposals
// wazero compiles when they are enabled, and checks that the result
// validates and stops.
func TestStopsUnderFeatures(t *testing.T) {
	ctx := context.Background()
	features := api.CoreFeaturesV2 | experimental.CoreFeaturesThreads | experimental.CoreFeaturesTailCall | experimental.CoreFeaturesExceptionHandling
	r := wazero.NewRuntimeWithConfig(ctx, wazero.NewRuntimeConfig().WithCloseOnContextDone(false).WithCoreFeatures(features))
	defer r.Close(ctx)
	for _, tc := range []struct {
		name   string
		code   []byte
		loops  int
		decode bool // wazero compiles it not: only decoded
	}{
		{"simd", []byte{
			0xfd, 0x0c, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, // v128.const
			0xfd, 0x0c, 0x03, 0x03, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 0x03, // a v128.const of loop bytes
			0xfd, 0x0d, 0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 0x03, // i8x16.shuffle
			0xfd, 0x15, 0x03, // i8x16.extract_lane_s 3
			0x1a,
			0x41, 0x00, 0x41, 0x00, 0xfd, 0x00, 0x04, 0x00, // i32.const 0 i32.const 0 v128.load
			0xfd, 0x54, 0x00, 0x03, 0x03, // v128.load8_lane offset 3 lane 3
			0x1a,
			0x41, 0x00, 0xfd, 0x5c, 0x02, 0x00, 0x1a, // v128.load32_zero
			0x03, 0x40, 0x0c, 0x00, 0x0b, // loop br 0 end
		}, 1, false},
		{"atomics", []byte{
			0x41, 0x00, 0xfe, 0x10, 0x02, 0x04, 0x1a, // i32.atomic.load offset 4
			0xfe, 0x03, 0x00, // atomic.fence
			0x03, 0x40, 0x0c, 0x00, 0x0b,
		}, 1, false},
		{"bulk", []byte{
			0x41, 0x00, 0x41, 0x00, 0x41, 0x00, 0xfc, 0x0b, 0x00, // memory.fill
			0x41, 0x00, 0x41, 0x00, 0x41, 0x00, 0xfc, 0x0a, 0x00, 0x00, // memory.copy
			0x43, 0x00, 0x00, 0x80, 0x3f, 0xfc, 0x00, 0x1a, // f32.const 1 i32.trunc_sat_f32_s drop
			0x44, 0x03, 0x03, 0x03, 0x03, 0x03, 0x03, 0x03, 0x03, 0x1a, // f64.const of loop bytes
			0x42, 0x83, 0x86, 0x8c, 0x98, 0x30, 0x1a, // i64.const, a long LEB
			0x41, 0x01, 0x41, 0x02, 0x41, 0x00, 0x1c, 0x01, i32, 0x1a, // typed select
			0x03, 0x40, 0x03, 0x40, 0x0c, 0x01, 0x0b, 0x0b, // nested loops
		}, 2, false},
		{"exceptions", []byte{
			0x1f, 0x40, 0x01, 0x02, 0x00, // try_table (catch_all 0)
			0x03, 0x40, 0x0c, 0x00, 0x0b,
			0x0b,
		}, 1, false},
		{"legacytry", []byte{
			0x06, 0x40, // try
			0x03, 0x40, 0x0c, 0x00, 0x0b,
			0x19, // catch_all
			0x0b,
		}, 1, true},
		{"tailcall", []byte{
			0x03, 0x40, 0x41, 0x00, 0x0d, 0x00, 0x0b, // loop (never taken) br_if 0 end
			0x12, 0x00, // return_call 0 (itself)
		}, 1, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			bin := cat([]byte("\x00asm\x01\x00\x00\x00"),
				sec(secType, vec(typeVoid)),
				sec(secFunction, vec([]byte{0})),
				sec(secMemory, vec([]byte{0x03, 1, 1})), // shared, 1..1 pages
				sec(secExport, vec(cat(str("run"), []byte{0x00, 0x00}))),
				sec(secCode, vec(fn(append(tc.code, 0x0b)...))))
			inst, st, err := Instrument(bin)
			if err != nil {
				t.Fatal(err)
			}
			if st.Loops != tc.loops {
				t.Fatalf("%d loops found, want %d", st.Loops, tc.loops)
			}
			if same, _, _ := rewrite(bin, false); !bytes.Equal(same, bin) {
				t.Fatal("round trip changed the module")
			}
			if tc.decode {
				return
			}
			if _, err := r.CompileModule(ctx, bin); err != nil {
				t.Fatalf("the hand-made module is invalid: %v", err)
			}
			mod, err := r.InstantiateWithConfig(ctx, inst, wazero.NewModuleConfig().WithName(tc.name))
			if err != nil {
				t.Fatalf("the instrumented module: %v", err)
			}
			defer mod.Close(ctx)
			stop := mod.ExportedGlobal(Export).(api.MutableGlobal)
			cctx, cancel := context.WithCancel(ctx)
			defer cancel()
			unset := context.AfterFunc(cctx, func() { stop.Set(1) })
			defer unset()
			go cancel()
			if _, err := mod.ExportedFunction("run").Call(cctx); err == nil || !strings.Contains(err.Error(), "unreachable") {
				t.Fatalf("run: %v", err)
			}
		})
	}
}

// TestRefuses lists what Instrument must not touch.
func TestRefuses(t *testing.T) {
	head := []byte("\x00asm\x01\x00\x00\x00")
	code := func(body ...byte) []byte {
		return cat(head, sec(secType, vec(typeVoid)), sec(secFunction, vec([]byte{0})), sec(secMemory, vec([]byte{0x00, 1})), sec(secCode, vec(fn(body...))))
	}
	tests := []struct {
		name string
		bin  []byte
		want string
	}{
		{"not wasm", []byte("\x7fELF\x02\x01\x01\x00"), "not a WebAssembly"},
		{"version 2", []byte("\x00asm\x02\x00\x00\x00"), "version"},
		{"section past the end", cat(head, []byte{secType, 9, 1}), "past the end"},
		{"unknown section", cat(head, sec(14, nil)), "unknown section"},
		{"out of order", cat(head, sec(secFunction, vec()), sec(secType, vec())), "out of order"},
		{"no memory", cat(head, sec(secType, vec(typeVoid)), sec(secFunction, vec([]byte{0})), sec(secCode, vec(fn(0x03, 0x40, 0x0b, 0x0b)))), "no memory"},
		{"start section", cat(head, sec(secType, vec(typeVoid)), sec(secFunction, vec([]byte{0})), sec(secStart, []byte{0}), sec(secCode, vec(fn(0x0b)))), "start section"},
		{"reserved export", cat(head, sec(secMemory, vec([]byte{0x00, 1})), sec(secGlobal, vec([]byte{i32, 0, 0x41, 0, 0x0b})), sec(secExport, vec(cat(str(Export), []byte{0x03, 0})))), "already exports"},
		{"export of a missing global", cat(head, sec(secMemory, vec([]byte{0x00, 1})), sec(secExport, vec(cat(str("g"), []byte{0x03, 0})))), "export of global 0"},
		{"code writes the stop global", code(0x41, 0x00, 0x24, 0x00, 0x0b), "global 0"},
		{"code reads a global past the end", code(0x23, 0x05, 0x1a, 0x0b), "global 5"},
		{"unknown opcode", code(0xd5, 0x00, 0x0b), "unknown opcode 0xd5"},
		{"unknown 0xfc", code(0xfc, 0x12, 0x0b), "0xfc 18"},
		{"unknown 0xfe", code(0xfe, 0x04, 0x0b), "0xfe"},
		{"typed reference block type", code(0x02, 0x63, 0x70, 0x0b, 0x0b), "block type"},
		{"bad local type", append(cat(head, sec(secType, vec(typeVoid)), sec(secFunction, vec([]byte{0})), sec(secMemory, vec([]byte{0x00, 1}))), sec(secCode, vec([]byte{4, 1, 1, 0x55, 0x0b}))...), "value type"},
		{"end before the body's end", code(0x0b, 0x01), "not its last byte"},
		{"body without its end", code(0x01), "inside its expression"},
		{"truncated immediate", code(0x41, 0x80), "unexpected end"},
		{"LEB too long", code(0x41, 0x80, 0x80, 0x80, 0x80, 0x80, 0x00, 0x0b), "too large"},
		{"bad import", cat(head, sec(secImport, vec(cat(str("m"), str("f"), []byte{0x07})))), "import kind"},
		{"trailing code bytes", cat(head, sec(secType, vec(typeVoid)), sec(secFunction, vec([]byte{0})), sec(secMemory, vec([]byte{0x00, 1})), sec(secCode, append(vec(fn(0x0b)), 0))), "trailing"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, _, err := Instrument(tc.bin)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Instrument: %v, want an error with %q", err, tc.want)
			}
		})
	}
}

// TestImportedGlobals checks that the stop global's index counts the
// imported globals, and that a module without global and export sections
// gets both, in order.
func TestImportedGlobals(t *testing.T) {
	head := []byte("\x00asm\x01\x00\x00\x00")
	bin := cat(head,
		sec(secType, vec(typeVoid)),
		sec(secImport, vec(
			cat(str("env"), str("f"), []byte{0x00, 0x00}),
			cat(str("env"), str("t"), []byte{0x01, 0x70, 0x01, 1, 2}),
			cat(str("env"), str("m"), []byte{0x02, 0x00, 1}),
			cat(str("env"), str("g1"), []byte{0x03, i32, 0x00}),
			cat(str("env"), str("g2"), []byte{0x03, 0x7e, 0x01}),
		)),
		sec(secFunction, vec([]byte{0})),
		sec(secCode, vec(fn(0x23, 0x01, 0x1a, 0x03, 0x40, 0x0b, 0x0b))))
	inst, st, err := Instrument(bin)
	if err != nil {
		t.Fatal(err)
	}
	if st.Global != 2 || st.Loops != 1 {
		t.Fatalf("stats %+v", st)
	}
	secs, err := splitSections(inst)
	if err != nil {
		t.Fatal(err)
	}
	var ids []byte
	for _, s := range secs {
		ids = append(ids, s.id)
	}
	if want := []byte{secType, secImport, secFunction, secGlobal, secExport, secCode}; !bytes.Equal(ids, want) {
		t.Fatalf("sections %v, want %v", ids, want)
	}
	if !bytes.Contains(inst, cat([]byte{0x03, 0x40}, checkBytes(2), []byte{0x0b})) {
		t.Fatal("no check after the loop")
	}
}

func TestLEB(t *testing.T) {
	for _, v := range []uint64{0, 1, 127, 128, 300, 1<<32 - 1, 1 << 40, 1<<64 - 1} {
		b := appendUleb(nil, v)
		bits := uint(64)
		if v < 1<<32 {
			bits = 32
		}
		got, n, err := uleb(b, bits)
		if err != nil || got != v || n != len(b) {
			t.Errorf("uleb(%x) = %d %d %v, want %d", b, got, n, err, v)
		}
	}
	if _, _, err := uleb([]byte{0xff, 0xff, 0xff, 0xff, 0x1f}, 32); err == nil {
		t.Error("a 35-bit number passed as 32")
	}
	for _, tc := range []struct {
		b []byte
		v int64
	}{{[]byte{0x7f}, -1}, {[]byte{0x3f}, 63}, {[]byte{0xc0, 0x00}, 64}, {[]byte{0x80, 0x7f}, -128}, {[]byte{0x80, 0x80, 0x80, 0x80, 0x78}, -1 << 31}} {
		if v, n, err := sleb(tc.b, 32); err != nil || v != tc.v || n != len(tc.b) {
			t.Errorf("sleb(%x) = %d %d %v, want %d", tc.b, v, n, err, tc.v)
		}
	}
}

// FuzzInstrument checks that no input makes the decoder panic or loop,
// that a module it accepts round-trips, and that an instrumented one
// still decodes, with as many loops.
func FuzzInstrument(f *testing.F) {
	f.Add(runaway(0))
	f.Add(runaway(2))
	f.Add([]byte("\x00asm\x01\x00\x00\x00"))
	f.Add([]byte("\x00asm\x01\x00\x00\x00\x0a\x80\x80\x80\x80\x10"))
	f.Fuzz(func(t *testing.T, bin []byte) {
		same, st, err := rewrite(bin, false)
		if err != nil {
			return
		}
		if !bytes.Equal(same, bin) {
			t.Fatal("round trip changed the module")
		}
		inst, st2, err := Instrument(bin)
		if err != nil {
			t.Fatalf("rewrite accepted what Instrument refuses: %v", err)
		}
		if st2 != st {
			t.Fatalf("stats %+v and %+v", st, st2)
		}
		// The checks decode as instructions that read the new global.
		secs, err := splitSections(inst)
		if err != nil {
			t.Fatalf("the instrumented module: %v", err)
		}
		for _, s := range secs {
			if s.id != secCode {
				continue
			}
			var st3 Stats
			if _, err := rewriteCode(s.body, uint64(st.Global)+2, nil, &st3); err != nil {
				t.Fatalf("the instrumented code does not decode: %v", err)
			}
			if st3.Loops != st.Loops {
				t.Fatalf("%d loops after instrumenting, %d before", st3.Loops, st.Loops)
			}
		}
	})
}

// TestCollectsWhileSpinning runs an endless loop while the collector
// runs. The Go runtime cannot preempt compiled guest code, and a
// collection stops the world: were the guest never to call into Go, the
// collection, and with it the whole process, would wait for it for ever.
// The instrumented loop calls into Go every so many turns.
func TestCollectsWhileSpinning(t *testing.T) {
	mod, stop, _ := instantiate(t, runaway(0))
	done := make(chan error)
	go func() {
		_, err := mod.ExportedFunction("spin").Call(context.Background())
		done <- err
	}()
	for range 3 {
		runtime.GC()
		time.Sleep(time.Millisecond) // let the guest spin on
	}
	stop.Set(1)
	if err := <-done; err == nil || !strings.Contains(err.Error(), "unreachable") {
		t.Fatalf("spin: %v, want the unreachable trap", err)
	}
}

// BenchmarkInstrument instruments the kv example (a Go module of about
// 3 MB), the work the kernel adds to each plugin's load.
func BenchmarkInstrument(b *testing.B) {
	bin, err := os.ReadFile(modules.Module(b, wasmbuild.Spec{Pkg: "./examples/kv"}))
	if err != nil {
		b.Fatal(err)
	}
	b.SetBytes(int64(len(bin)))
	for b.Loop() {
		if _, _, err := Instrument(bin); err != nil {
			b.Fatal(err)
		}
	}
}

func TestReaderSleb(t *testing.T) {
	for _, b := range [][]byte{{0x00}, {0x3f}, {0x40}, {0x7f}, {0xc0, 0x00}, {0xff, 0x7e}} {
		want, _, _ := sleb(b, 32)
		r := reader{b: b}
		if got := r.sleb(32); got != want || r.off != len(b) {
			t.Errorf("reader.sleb(%x) = %d, want %d", b, got, want)
		}
	}
}
