package plugins

import (
	"context"
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"

	"github.com/shoal-sh/shoal/core"
	"github.com/shoal-sh/shoal/core/rpc"
	"github.com/shoal-sh/shoal/core/value"
	"github.com/shoal-sh/shoal/plugins/internal/wasmbuild"
)

// exampleFolder puts a freshly built example module beside a copy of its
// real manifest, the layout make examples produces.
func exampleFolder(t testing.TB, name, wasm string) string {
	t.Helper()
	man, err := ReadManifest(filepath.Join("..", "examples", name))
	if err != nil {
		t.Fatal(err)
	}
	raw := readFile(t, filepath.Join("..", "examples", name, ManifestFile))
	return wasmbuild.Folder(t, wasm, man.Module, raw, nil)
}

func TestExampleKV(t *testing.T) {
	s := load(t, []string{exampleFolder(t, "kv", kvWasm(t))}, patient("kv"), "out", "val")
	st := status(t, s, "kv")
	if st.Health != HealthOK || st.Family != "kv" || st.Limits.MemoryMB != 32 || st.Limits.TimeoutMS != patientTimeout {
		t.Fatalf("status %+v", st)
	}
	p := providerOf(t, s, "kv")

	tmpls := p.Templates()
	if len(tmpls) != 1 || tmpls[0].URITemplate != "shoal://kv/{key}{?path,slice,format}" || tmpls[0].MimeType != "application/json" {
		t.Fatalf("templates %+v", tmpls)
	}
	res, err := p.List(context.Background(), &core.Caller{Session: "main"})
	if err != nil {
		t.Fatal(err)
	}
	if len(res) < 2 || res[0].URI != "shoal://kv" || !res[0].Root || res[1].Root || !strings.HasPrefix(res[1].URI, "shoal://kv/") {
		t.Fatalf("list %+v", res)
	}

	tests := []struct {
		uri  string
		want value.Value
	}{
		{"shoal://kv/greeting", value.Str("hello from a wasm plugin")},
		{"shoal://kv/answer?path=.x", value.Int(42)}, // path is the router's: the plugin returns the whole value
		{"shoal://kv/pi", value.Float(3.141592653589793)},
		{"shoal://kv/logo", value.Bytes{0x89, 'P', 'N', 'G'}},
		{"shoal://kv/tags", value.List{value.Str("wasm"), value.Str("example"), value.Str("kv")}},
		{"shoal://kv/config", value.NewRecord(
			value.F("name", value.Str("kv")), value.F("replicas", value.Int(3)),
			value.F("debug", value.Bool(false)), value.F("owner", value.Null{}))},
	}
	for _, tc := range tests {
		c, err := read(t, p, tc.uri)
		if err != nil {
			t.Fatalf("%s: %v", tc.uri, err)
		}
		if c.Record != nil || !value.Equal(c.Value, tc.want) {
			t.Errorf("%s: got %#v, want %#v", tc.uri, c.Value, tc.want)
		}
	}

	c, err := read(t, p, "shoal://kv/fleet")
	if err != nil {
		t.Fatal(err)
	}
	tbl, ok := c.Value.(*value.Table)
	if !ok || len(tbl.Rows) != 4 || strings.Join(tbl.Cols, ",") != "name,region,cpus,healthy" {
		t.Fatalf("fleet: %#v", c.Value)
	}
	if name := tbl.Row(0).Fields[0].Value; !value.Equal(name, value.Str("reef-1")) {
		t.Errorf("fleet row 0 name %#v", name)
	}
	c, err = read(t, p, "shoal://kv")
	if err != nil {
		t.Fatal(err)
	}
	if keys, ok := c.Value.(*value.Table); !ok || len(keys.Rows) != 7 {
		t.Fatalf("root: %#v", c.Value)
	}

	_, err = read(t, p, "shoal://kv/nope")
	wantCode(t, err, rpc.NotFound, `no key "nope"`, "shoal://kv")
	_, err = read(t, p, "shoal://kv/a/b")
	wantCode(t, err, rpc.BadURI, "one segment")
	_, err = read(t, p, "shoal://kv/a%2Fb") // decoded segments reach the guest
	wantCode(t, err, rpc.NotFound, `"a/b"`)

	if st := status(t, s, "kv"); st.Failures != 0 || st.Calls < 10 {
		t.Errorf("after reads: calls %d failures %d", st.Calls, st.Failures)
	}
}

func TestExampleBuildcheck(t *testing.T) {
	s := load(t, []string{exampleFolder(t, "buildcheck", buildcheckWasm(t))}, patient("buildcheck"))
	if st := status(t, s, "buildcheck"); st.Health != HealthOK || !st.Schema || st.Kind != KindValidator {
		t.Fatalf("status %+v", st)
	}
	if _, ok := s.Validator("nope"); ok {
		t.Fatal("Validator(nope) found a validator")
	}
	v, ok := s.Validator("buildcheck")
	if !ok {
		t.Fatal("no buildcheck validator")
	}
	tests := []struct {
		payload string
		reason  string // "" accepts
	}{
		{`{"phase":"queued"}`, ""},
		{`{"phase":"running","passed":3}`, ""},
		{`{"phase":"running","passed":3,"failed":1,"total":10}`, ""},
		{`{"phase":"done","passed":9,"failed":1,"total":10,"commit":"abc1234"}`, ""},
		{`{"phase":"done","passed":0,"failed":0}`, ""},
		// the schema, checked natively
		{`{"phase":"compiling"}`, "/phase"},
		{`{"phase":"running","passed":-1}`, "/passed"},
		{`{"phase":"running","passed":1.5}`, "/passed"},
		{`{"passed":1}`, "phase"},
		{`{"phase":"done","passed":1,"failed":0,"extra":true}`, "extra"},
		{`[1,2]`, "schema"},
		{`{"phase":`, "not valid JSON"},
		// the plugin's own rules
		{`{"phase":"done"}`, `phase "done" needs both passed and failed`},
		{`{"phase":"done","passed":1}`, `needs both`},
		{`{"phase":"queued","passed":0}`, "queued build has run nothing"},
		{`{"phase":"running","passed":5,"failed":6,"total":10}`, "more than total"},
		{`{"phase":"done","passed":5,"failed":1,"total":10}`, "ran every test"},
	}
	for _, tc := range tests {
		err := v("user.build.v1", json.RawMessage(tc.payload))
		if tc.reason == "" {
			if err != nil {
				t.Errorf("%s: refused: %v", tc.payload, err)
			}
			continue
		}
		if err == nil {
			t.Errorf("%s: accepted, want a rejection about %q", tc.payload, tc.reason)
			continue
		}
		wantCode(t, err, rpc.Rejected, tc.reason)
	}
	// Bound to a channel it does not declare: a configuration error, not a verdict.
	wantCode(t, v("user.deploy.v1", json.RawMessage(`{}`)), rpc.PluginError, "declares channels user.build.v1", "config.toml")

	// Binding refuses that at start for a channel; a pattern is checked
	// per channel at publish.
	if _, err := s.Bind("buildcheck", "user.deploy.v1"); err == nil || !strings.Contains(err.Error(), "declares channels user.build.v1, not user.deploy.v1") {
		t.Errorf("Bind to an undeclared channel: %v", err)
	}
	if _, err := s.Bind("nope", "user.build.v1"); err == nil || !strings.Contains(err.Error(), "loaded: buildcheck") {
		t.Errorf("Bind to an unknown validator: %v", err)
	}
	for _, ch := range []string{"user.build.v1", "user.build.*"} {
		if bv, err := s.Bind("buildcheck", ch); err != nil || bv("user.build.v1", json.RawMessage(`{"phase":"queued"}`)) != nil {
			t.Errorf("Bind(%s): %v", ch, err)
		}
	}
}

// KVFolder is a ready kv plugin folder (module built once per test
// binary), for the external end-to-end tests in package plugins_test.
func KVFolder(t testing.TB) string { return exampleFolder(t, "kv", kvWasm(t)) }

// BuildcheckFolder is a ready buildcheck validator folder, for package
// plugins_test.
func BuildcheckFolder(t testing.TB) string { return exampleFolder(t, "buildcheck", buildcheckWasm(t)) }
