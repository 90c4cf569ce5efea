package plugins

import (
	"context"
	"encoding/json"
	"maps"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tetratelabs/wazero"

	"github.com/shoal-sh/shoal/core"
	"github.com/shoal-sh/shoal/core/rpc"
	"github.com/shoal-sh/shoal/core/value"
	"github.com/shoal-sh/shoal/plugins/internal/wasmbuild"
	"github.com/shoal-sh/shoal/sdk"
)

const providerManifest = `
name = "%s"
version = "1.0.0"
kind = "provider"
abi = "shoal_abi_v1"
module = "m.wasm"
[provider]
family = "%s"
`

func TestManifestErrors(t *testing.T) {
	tests := []struct {
		name, manifest string
		want           []string // "" means valid
	}{
		{"valid provider", `name="a"
version="1"
kind="provider"
abi="shoal_abi_v1"
module="a.wasm"
[provider]
family="a"
templates=["shoal://a/{x}"]
[limits]
memory_mb=256
timeout_ms=1
instances=16
[capabilities]
env=["HOME"]
fs=["/tmp"]
clock=true`, nil},
		{"valid validator", `name="v"
version="1"
kind="validator"
abi="shoal_abi_v1"
module="v.wasm"
[validator]
channels=["user.a.b","user.c.*"]
schema="s.json"`, nil},
		{"unknown key", `name="a"
version="1"
kind="provider"
abi="shoal_abi_v1"
module="a.wasm"
[provider]
family="a"
[limits]
memory="1"`, []string{"unknown keys limits.memory"}},
		{"not toml", `name = `, []string{"manifest"}},
		{"everything wrong", `name="A b"
kind="thing"
abi="shoal_abi_v0"
module="../x.wasm"
[limits]
memory_mb=512
timeout_ms=-1
instances=99
[capabilities]
env=["A-B"]
fs=["rel/dir"]`, []string{`name "A b"`, "version is required", `abi "shoal_abi_v0" is not supported`, "must be a file name", `kind "thing"`,
			"memory_mb 512", "timeout_ms -1", "instances 99", `env "A-B"`, `fs "rel/dir"`}},
		{"no abi", `name="a"
version="1"
kind="provider"
module="a.wasm"
[provider]
family="a"`, []string{"abi is required", "shoal_abi_v1"}},
		{"provider without table", `name="a"
version="1"
kind="provider"
abi="shoal_abi_v1"
module="a.wasm"`, []string{"needs a [provider] table"}},
		{"bad family", `name="a"
version="1"
kind="provider"
abi="shoal_abi_v1"
module="a.wasm"
[provider]
family="Kv!"`, []string{`family "Kv!"`}},
		{"provider with validator table", `name="a"
version="1"
kind="provider"
abi="shoal_abi_v1"
module="a.wasm"
[provider]
family="a"
[validator]
channels=["user.a"]`, []string{"no [validator] table"}},
		{"validator channels", `name="v"
version="1"
kind="validator"
abi="shoal_abi_v1"
module="v.wasm"
[validator]
channels=["journal","user..x","user.*.x","user","user.*"]
schema="/etc/s.json"`, []string{`"journal": validators check user.*`, `"user..x"`, `"user.*.x"`, `"user":`, `schema "/etc/s.json"`}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			if err := os.WriteFile(filepath.Join(dir, ManifestFile), []byte(tc.manifest), 0o600); err != nil {
				t.Fatal(err)
			}
			_, err := ReadManifest(dir)
			if len(tc.want) == 0 {
				if err != nil {
					t.Fatalf("unexpected error: %v", err)
				}
				return
			}
			if err == nil {
				t.Fatal("no error")
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q lacks %q", err, w)
				}
			}
		})
	}
}

func TestMatchChannel(t *testing.T) {
	tests := []struct {
		pattern, channel string
		want             bool
	}{
		{"user.build.v1", "user.build.v1", true},
		{"user.build.v1", "user.build.v2", false},
		{"user.ci.*", "user.ci.x", true},
		{"user.ci.*", "user.ci.x.y", true},
		{"user.ci.*", "user.ci.", false},
		{"user.ci.*", "user.ci", false},
		{"user.ci.*", "user.cix", false},
	}
	for _, tc := range tests {
		if got := matchChannel(tc.pattern, tc.channel); got != tc.want {
			t.Errorf("matchChannel(%q, %q) = %v", tc.pattern, tc.channel, got)
		}
	}
}

// TestSDKValuesDecode checks that every value the SDK encodes is the
// kernel's wire form: value.Unmarshal reads it back to the same value.
func TestSDKValuesDecode(t *testing.T) {
	tests := []struct {
		in   sdk.Value
		want value.Value
	}{
		{sdk.Null(), value.Null{}},
		{sdk.Value{}, value.Null{}},
		{sdk.Bool(true), value.Bool(true)},
		{sdk.Int(-7), value.Int(-7)},
		{sdk.Float(2), value.Float(2)},
		{sdk.Float(0.1), value.Float(0.1)},
		{sdk.Str("tab\there \"q\" é <&>"), value.Str("tab\there \"q\" é <&>")},
		{sdk.Bytes([]byte{0, 255}), value.Bytes{0, 255}},
		{sdk.List(sdk.Int(1), sdk.List()), value.List{value.Int(1), value.List{}}},
		{sdk.Record(sdk.F("z", sdk.Int(1)), sdk.F("a", sdk.Null())), value.NewRecord(value.F("z", value.Int(1)), value.F("a", value.Null{}))},
		{sdk.Table([]string{"a", "b"}, []sdk.Value{sdk.Int(1), sdk.Str("x")}),
			&value.Table{Cols: []string{"a", "b"}, Rows: [][]value.Value{{value.Int(1), value.Str("x")}}}},
	}
	for _, tc := range tests {
		wire, _ := json.Marshal(tc.in)
		got, err := value.Unmarshal(wire)
		if err != nil {
			t.Errorf("%s: %v", wire, err)
			continue
		}
		if !value.Equal(got, tc.want) {
			t.Errorf("%s decodes to %#v, want %#v", wire, got, tc.want)
		}
	}
	nan, _ := json.Marshal(sdk.Float(nanValue()))
	if got, err := value.Unmarshal(nan); err != nil || got.Kind() != value.KindFloat {
		t.Errorf("NaN: %v %v", got, err)
	}
}

func nanValue() float64 { var z float64; return z / z }

// TestLoadRefusals loads one good plugin beside many bad ones: each bad
// one is reported with a reason, and the good one serves.
func TestLoadRefusals(t *testing.T) {
	kv := kvWasm(t)
	root := t.TempDir()
	mk := func(name, wasm, module, manifest string, extra map[string]string) {
		t.Helper()
		dir := wasmbuild.Folder(t, wasm, module, manifest, extra)
		if err := os.Rename(dir, filepath.Join(root, name)); err != nil {
			t.Fatal(err)
		}
	}
	good := readFile(t, filepath.Join("..", "examples", "kv", ManifestFile))
	mk("a-good", kv, "kv.wasm", good, nil)
	mk("clash", kv, "kv.wasm", strings.Replace(good, `name = "kv"`, `name = "kv2"`, 1), nil)
	mk("dupname", kv, "kv.wasm", strings.Replace(good, `family = "kv"`, `family = "kv3"`, 1), nil)
	mk("reserved", kv, "m.wasm", sprintf(providerManifest, "outer", "out"), nil)
	mk("nomodule", kv, "other.wasm", sprintf(providerManifest, "nomodule", "nomodule"), nil)
	mk("family", kv, "m.wasm", sprintf(providerManifest, "family", "notkv"), nil)
	mk("kind", kv, "m.wasm", "name=\"kind\"\nversion=\"1\"\nkind=\"validator\"\nabi=\"shoal_abi_v1\"\nmodule=\"m.wasm\"\n[validator]\nchannels=[\"user.kv\"]\n", nil)
	mk("garbage", kv, "m.wasm", sprintf(providerManifest, "garbage", "garbage"), nil)
	if err := os.WriteFile(filepath.Join(root, "garbage", "m.wasm"), []byte("\x00asm garbage"), 0o600); err != nil {
		t.Fatal(err)
	}
	mk("badmanifest", kv, "m.wasm", "name = 1", nil)
	mk("memory", kv, "m.wasm", sprintf(providerManifest, "tiny", "tiny")+"[limits]\nmemory_mb = 1\n", nil)
	mk("disabled", kv, "m.wasm", sprintf(providerManifest, "off", "off"), nil)
	if err := os.Mkdir(filepath.Join(root, "not-a-plugin"), 0o700); err != nil {
		t.Fatal(err)
	}
	cfg := patient("kv")
	cfg.Plugins["off"] = core.PluginGrant{Disabled: true}

	s := load(t, []string{root, filepath.Join(root, "a-good"), filepath.Join(t.TempDir(), "missing")}, cfg, "out", "val")
	// late refusals need the module compiled or running: those plugins
	// are registered at start and answer every call with the reason.
	want := map[string]struct {
		health, reason string
		late           bool
	}{
		"kv":          {HealthOK, "", false},
		"kv2":         {HealthFailed, `family "kv" is already claimed by plugin "kv"`, false},
		"outer":       {HealthFailed, `family "out" belongs to a built-in provider`, false},
		"nomodule":    {HealthFailed, "m.wasm: no such file", false},
		"family":      {HealthFailed, `module describes family "kv", the manifest says "notkv"`, true},
		"kind":        {HealthFailed, "module describes a provider, the manifest says validator", true},
		"garbage":     {HealthFailed, "compile m.wasm", true},
		"badmanifest": {HealthFailed, "manifest", false},
		"tiny":        {HealthFailed, "over limit of 16 pages", true},
		"off":         {HealthDisabled, "", false},
		"missing":     {HealthFailed, "plugin folder", false},
	}
	got := map[string]PluginStatus{}
	for _, st := range s.Status() {
		got[st.Name] = st
	}
	for name, w := range want {
		st, ok := got[name]
		if !ok {
			t.Errorf("no status for %s; have %v", name, got)
			continue
		}
		if st.Health != w.health || !strings.Contains(st.Error, w.reason) {
			t.Errorf("%s: health %s error %q, want %s with %q", name, st.Health, st.Error, w.health, w.reason)
		}
	}
	// "dupname" is the kv manifest again under another family: its name clashes.
	dups := 0
	for _, st := range s.Status() {
		if st.Name == "kv" && st.Health == HealthFailed && strings.Contains(st.Error, "already loaded") {
			dups++
		}
	}
	if dups != 1 {
		t.Errorf("%d duplicate-name refusals, want 1: %+v", dups, s.Status())
	}
	served := map[string]core.Provider{}
	for _, p := range s.Providers() {
		served[p.Family()] = p
	}
	for name, w := range want {
		if !w.late || got[name].Kind != KindProvider {
			continue
		}
		p := served[got[name].Family]
		if p == nil {
			t.Errorf("%s failed late but is not registered", name)
			continue
		}
		delete(served, got[name].Family)
		_, err := read(t, p, "shoal://"+p.Family()+"/answer")
		wantCode(t, err, rpc.PluginError, "plugin "+name+": failed to load", w.reason)
		if tm := p.Templates(); len(tm) != 0 {
			t.Errorf("%s: a plugin that failed to load has templates %v", name, tm)
		}
		if _, err := p.List(context.Background(), &core.Caller{}); err == nil {
			t.Errorf("%s: List of a plugin that failed to load succeeded", name)
		}
	}
	if len(served) != 1 || served["kv"] == nil {
		t.Fatalf("registered providers beyond the late failures: %v", served)
	}
	if _, err := read(t, served["kv"], "shoal://kv/answer"); err != nil {
		t.Fatal(err)
	}
	if v, ok := s.Validator("kind"); !ok {
		t.Error("the validator that failed late is not registered")
	} else {
		wantCode(t, v("user.kv", json.RawMessage(`{}`)), rpc.PluginError, "plugin kind: failed to load", "module describes a provider")
	}

	// Templates listed in the manifest must be the module's.
	dir := wasmbuild.Folder(t, kv, "kv.wasm", strings.Replace(good, "{?path,slice,format}", "", 1), nil)
	s = load(t, []string{dir}, patient("kv"))
	if st := status(t, s, "kv"); st.Health != HealthFailed || !strings.Contains(st.Error, "make them agree") {
		t.Errorf("templates mismatch: %+v", st)
	}
}

// TestLoadRawModules covers modules that were not built with the sdk or
// not as reactors.
func TestLoadRawModules(t *testing.T) {
	tests := []struct {
		pkg     string
		command bool
		reason  string
	}{
		{"./plugins/testdata/wrongabi", false, "module speaks shoal_abi_v2, this kernel speaks shoal_abi_v1"},
		{"./plugins/testdata/baddescribe", false, "shoal_describe: malformed answer"},
		{"./plugins/testdata/command", true, "WASI command (it exports _start, not _initialize)"},
		{"./examples/kv", true, "WASI command"},
	}
	for _, tc := range tests {
		t.Run(tc.pkg, func(t *testing.T) {
			wasm := modules.Module(t, wasmbuild.Spec{Pkg: tc.pkg, Command: tc.command})
			dir := wasmbuild.Folder(t, wasm, "m.wasm", sprintf(providerManifest, "raw", "raw"), nil)
			s := load(t, []string{dir}, patient("raw"))
			st := status(t, s, "raw")
			if st.Health != HealthFailed || !strings.Contains(st.Error, tc.reason) {
				t.Fatalf("status %+v, want failed with %q", st, tc.reason)
			}
			// Refused at start (from the export names) or late: either
			// way no call reaches the module.
			for _, p := range s.Providers() {
				_, err := read(t, p, "shoal://raw/x")
				wantCode(t, err, rpc.PluginError, "failed to load", tc.reason)
			}
		})
	}
}

// TestValidatorFailures uses the checker validator: a schema from the
// manifest, rejections, and failures that are not verdicts.
func TestValidatorFailures(t *testing.T) {
	man := `
name = "checker"
version = "1"
kind = "validator"
abi = "shoal_abi_v1"
module = "checker.wasm"
[validator]
channels = ["user.check.*"]
schema = "schema.json"
[limits]
timeout_ms = 300
`
	schema := `{"type":"object","properties":{"mode":{"type":"string"}},"required":["mode"]}`
	dir := wasmbuild.Folder(t, checkerWasm(t), "checker.wasm", man, map[string]string{"schema.json": schema})
	strict := load(t, []string{dir}, nil)
	lenient := load(t, []string{dir}, patient("checker"))
	if st := status(t, lenient, "checker"); !st.Schema || st.Health != HealthOK {
		t.Fatalf("status %+v", st)
	}
	tests := []struct {
		payload string
		strict  bool
		code    rpc.Code // 0 accepts
		reason  string
	}{
		{`{"mode":"ok"}`, false, 0, ""},
		{`{"mode":1}`, false, rpc.Rejected, "/mode"},
		{`{}`, false, rpc.Rejected, "mode"},
		{`{"mode":"reject"}`, false, rpc.Rejected, "mode reject on user.check.a"},
		{`{"mode":"fail"}`, false, rpc.PluginError, "validator failed: FAILED: checker cannot decide"},
		{`{"mode":"panic"}`, false, rpc.PluginError, "panic: checker panics"},
		{`{"mode":"loop"}`, true, rpc.PluginError, "deadline exceeded"},
	}
	for _, tc := range tests {
		s := lenient
		if tc.strict {
			s = strict
		}
		v, _ := s.Validator("checker")
		err := v("user.check.a", json.RawMessage(tc.payload))
		if tc.code == 0 {
			if err != nil {
				t.Errorf("%s: %v", tc.payload, err)
			}
		} else {
			wantCode(t, err, tc.code, tc.reason)
		}
		if err := v("user.check.a", json.RawMessage(`{"mode":"ok"}`)); err != nil {
			t.Errorf("after %s: %v", tc.payload, err)
		}
	}

	// A schema in both the module and the manifest is ambiguous.
	dir2 := wasmbuild.Folder(t, buildcheckWasm(t), "b.wasm",
		"name=\"b\"\nversion=\"1\"\nkind=\"validator\"\nabi=\"shoal_abi_v1\"\nmodule=\"b.wasm\"\n[validator]\nchannels=[\"user.build.v1\"]\nschema=\"s.json\"\n",
		map[string]string{"s.json": `{}`})
	s := load(t, []string{dir2}, patient("b"))
	if st := status(t, s, "b"); st.Health != HealthFailed || !strings.Contains(st.Error, "declared twice") {
		t.Fatalf("status %+v", st)
	}
	// A schema that is not one.
	dir3 := wasmbuild.Folder(t, checkerWasm(t), "checker.wasm", man, map[string]string{"schema.json": `{"type":"nonsense"}`})
	s = load(t, []string{dir3}, patient("checker"))
	if st := status(t, s, "checker"); st.Health != HealthFailed || !strings.Contains(st.Error, "schema from schema.json") {
		t.Fatalf("status %+v", st)
	}
	// A schema that reaches out of itself.
	dir4 := wasmbuild.Folder(t, checkerWasm(t), "checker.wasm", man, map[string]string{"schema.json": `{"$ref":"file:///etc/passwd"}`})
	s = load(t, []string{dir4}, patient("checker"))
	if st := status(t, s, "checker"); st.Health != HealthFailed || !strings.Contains(st.Error, "self-contained") {
		t.Fatalf("status %+v", st)
	}
}

// TestFunctionExports checks the export-section reader against wazero's
// decoder on a real module.
func TestFunctionExports(t *testing.T) {
	bin, err := os.ReadFile(kvWasm(t))
	if err != nil {
		t.Fatal(err)
	}
	names, ok := functionExports(bin)
	if !ok {
		t.Fatal("cannot read the kv module's exports")
	}
	ctx := context.Background()
	r := wazero.NewRuntimeWithConfig(ctx, wazero.NewRuntimeConfig().WithCompilationCache(sharedCache))
	defer r.Close(ctx)
	cm, err := r.CompileModule(ctx, bin)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]bool{}
	for name := range cm.ExportedFunctions() {
		want[name] = true
	}
	if !maps.Equal(names, want) {
		t.Fatalf("got %v, want %v", names, want)
	}
	for _, bad := range [][]byte{nil, []byte("\x00asm"), []byte("\x7fELF\x02\x01\x01\x00"), append([]byte("\x00asm\x01\x00\x00\x00\x07\x05\x01"), 0xff)} {
		if _, ok := functionExports(bad); ok {
			t.Errorf("functionExports(%q) claims to have read it", bad)
		}
	}
}

// tinyModule is a module whose export section exports one function name.
func tinyModule(name string) []byte {
	b := []byte("\x00asm\x01\x00\x00\x00")
	sec := append([]byte{1, byte(len(name))}, name...)
	sec = append(sec, 0, 0) // function 0
	b = append(b, 7, byte(len(sec)))
	return append(b, sec...)
}

func FuzzFunctionExports(f *testing.F) {
	f.Add(tinyModule("shoal_abi_v1"))
	f.Add(tinyModule("_start"))
	f.Add([]byte("\x00asm\x01\x00\x00\x00\x00\x80\x80\x80\x80\x10"))
	f.Fuzz(func(t *testing.T, bin []byte) {
		functionExports(bin) // must not panic or loop
	})
}
