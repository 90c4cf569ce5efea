package main

import (
	"encoding/json"
	"fmt"
	"maps"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

var wantRoots = []string{"shoal://session/cwd", "shoal://session/env", "shoal://session/reef",
	"shoal://jobs", "shoal://journal", "shoal://pty"}

var wantTemplates = []string{
	"shoal://out/{n}{?path,slice,grep,context,format}",
	"shoal://val/{hash}{?path,slice,grep,context,format}",
	"shoal://task/{id}",
	"shoal://task/{id}/out{?path,slice,grep,context,format}",
	"shoal://plan/{ref}",
	"shoal://pty/{id}",
	"shoal://session/{view}",
	"shoal://journal{?principal,ok,head,since,until,effects,limit}",
	"shoal://events/{channel}{?since,limit}",
}

type listedResource struct {
	URI      string `json:"uri"`
	Name     string `json:"name"`
	MimeType string `json:"mimeType"`
}

func listResources(t *testing.T, p *mcpPeer) []listedResource {
	t.Helper()
	res, rerr := p.raw("resources/list", map[string]any{})
	if rerr != nil {
		t.Fatal(rerr.Message)
	}
	var l struct {
		Resources []listedResource `json:"resources"`
	}
	if err := json.Unmarshal(res, &l); err != nil {
		t.Fatal(err)
	}
	return l.Resources
}

func TestResourceListAndTemplates(t *testing.T) {
	sd := newStateDir(t)
	p := startStdio(t, sd, "agent:test")

	res, rerr := p.raw("resources/templates/list", map[string]any{})
	if rerr != nil {
		t.Fatal(rerr.Message)
	}
	var tl struct {
		ResourceTemplates []struct {
			URITemplate string `json:"uriTemplate"`
			Name        string `json:"name"`
			MimeType    string `json:"mimeType"`
		} `json:"resourceTemplates"`
	}
	if err := json.Unmarshal(res, &tl); err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, tt := range tl.ResourceTemplates {
		got = append(got, tt.URITemplate)
	}
	if len(got) < len(wantTemplates) || !slices.Equal(got[:len(wantTemplates)], wantTemplates) {
		t.Errorf("templates:\n got %q\nwant %q first", got, wantTemplates)
	}

	// Live entries follow the six roots: a task, a plan and a PTY.
	gate := filepath.Join(sd.dir, "gate")
	t.Cleanup(func() { os.WriteFile(gate, nil, 0o600) })
	task, _ := p.callOK("shoal_exec", map[string]any{"source": fmt.Sprintf("while [ ! -e %s ]; do sleep 0.02; done", gate), "background": true})
	plan, _ := p.callOK("shoal_plan", map[string]any{"source": "touch x"})
	pty, _ := p.callOK("shoal_pty_open", map[string]any{"command": "cat"})

	list := listResources(t, p)
	var uris []string
	for _, r := range list {
		uris = append(uris, r.URI)
		if r.MimeType != "application/json" {
			t.Errorf("%s: mimeType %q, want application/json", r.URI, r.MimeType)
		}
	}
	if len(uris) < len(wantRoots) || !slices.Equal(uris[:len(wantRoots)], wantRoots) {
		t.Fatalf("resources begin %q, want %q", uris, wantRoots)
	}
	for _, want := range []any{task["task_uri"], plan["uri"], pty["uri"]} {
		if !slices.Contains(uris, fmt.Sprint(want)) {
			t.Errorf("resources/list lacks %v: %q", want, uris)
		}
	}
}

func TestResourceReads(t *testing.T) {
	sd := newStateDir(t)
	p := startStdio(t, sd, "agent:test")

	ex, _ := p.callOK("shoal_exec", map[string]any{"source": `printf '{"name":"shoal","tags":["a","b","c"]}' | from json`})
	outURI := ex["uri"].(string)
	task, _ := p.callOK("shoal_exec", map[string]any{"source": "echo from-task", "background": true})
	p.callOK("shoal_wait", map[string]any{"target": task["task"], "timeout_ms": 60000})
	plan, _ := p.callOK("shoal_plan", map[string]any{"source": "echo hi"})
	pty, _ := p.callOK("shoal_pty_open", map[string]any{"command": "cat"})
	// A value past the transcript threshold lives in the content store.
	big, _ := p.callOK("shoal_exec", map[string]any{"source": "seq 1 400000"})
	valRef, _ := big["val_ref"].(string)
	if !strings.HasPrefix(valRef, "val:blake3:") {
		t.Fatalf("a 2.6 MB value has no val_ref: %v", big)
	}
	hash := strings.TrimPrefix(valRef, "val:blake3:")
	taskURI := task["task_uri"].(string)

	for _, tc := range []struct {
		uri  string
		want string // a fragment of structuredContent
	}{
		{outURI, `"shoal"`},
		{outURI + "?path=.name", `{"$":"str","v":"shoal"}`},
		{outURI + "?path=.tags&slice=1..3", `"c"`},
		{outURI + "?path=" + url.QueryEscape(`["name"]`), `"shoal"`},
		{"shoal://val/" + hash + "?path=.exit", `{"$":"int","v":0}`},
		{"shoal://val/blake3:" + hash + "?path=.exit", `{"$":"int","v":0}`},
		{taskURI, `"completed"`},
		{taskURI + "/out?path=.stdout", `from-task`},
		{plan["uri"].(string), plan["ref"].(string)},
		{pty["uri"].(string), pty["pty"].(string)},
		{"shoal://session/cwd", `/`},
		{"shoal://session/env", `PATH`},
		{"shoal://session/reef", `{`},
		{"shoal://jobs", task["task"].(string)},
		{"shoal://pty", pty["pty"].(string)},
		{"shoal://journal?principal=agent:test&limit=2", `agent:test`},
		{"shoal://journal?head=seq", `seq 1 400000`},
		{"shoal://events/journal?limit=1", `"seq"`},
		{"shoal://events/user.none", `[]`},
	} {
		env := p.read(tc.uri)
		c := env.Contents[0]
		if c.MimeType != "application/json" || c.URI == "" || c.Text == "" {
			t.Errorf("%s: content %+v", tc.uri, c)
		}
		if !strings.Contains(string(env.StructuredContent), tc.want) {
			t.Errorf("%s: structuredContent %s lacks %s", tc.uri, trunc(env.StructuredContent), tc.want)
		}
	}

	// The envelope is contents plus structuredContent, nothing else.
	res, _ := p.raw("resources/read", map[string]any{"uri": outURI + "?path=.name"})
	var top map[string]json.RawMessage
	json.Unmarshal(res, &top)
	keys := slices.Sorted(maps.Keys(top))
	if !slices.Equal(keys, []string{"contents", "structuredContent"}) {
		t.Errorf("envelope keys %v: %s", keys, res)
	}
	var contents []map[string]any
	json.Unmarshal(top["contents"], &contents)
	if len(contents) != 1 || contents[0]["text"] != "{\n  \"$\": \"str\",\n  \"v\": \"shoal\"\n}" {
		t.Errorf("contents %s", top["contents"])
	}

	// Render and raw are text/plain with {ref, render} / {ref, raw}.
	for _, tc := range []struct{ format, key string }{{"render", "render"}, {"raw", "raw"}} {
		env := p.read(outURI + "?path=.name&format=" + tc.format)
		if env.Contents[0].MimeType != "text/plain" {
			t.Errorf("format=%s: mimeType %q", tc.format, env.Contents[0].MimeType)
		}
		var sc map[string]any
		json.Unmarshal(env.StructuredContent, &sc)
		if sc["ref"] != ex["ref"] || sc[tc.key] == nil {
			t.Errorf("format=%s: structuredContent %s", tc.format, env.StructuredContent)
		}
	}
}

func trunc(b []byte) string {
	if len(b) > 300 {
		return string(b[:300]) + "…"
	}
	return string(b)
}

func TestResourceReadErrors(t *testing.T) {
	sd := newStateDir(t)
	p := startStdio(t, sd, "agent:test")
	ex, _ := p.callOK("shoal_exec", map[string]any{"source": "echo hi"})
	uri := ex["uri"].(string)

	for _, tc := range []struct {
		uri, prefix, name string
		code              int
	}{
		{uri + "?path=.nope", "kernel error: BAD_PATH (-32005)", "BAD_PATH", -32005},
		{uri + "?path=" + url.QueryEscape("[["), "kernel error: BAD_PATH (-32005)", "BAD_PATH", -32005},
		{uri + "?slice=3..1", "kernel error: BAD_SLICE", "BAD_SLICE", -32007},
		{"shoal://out/999", "kernel error: ", "", 0},
		{"shoal://session/nope", "kernel error: ", "", 0},
		{"shoal://nosuchfamily/1", "kernel error: ", "", 0},
	} {
		_, rerr := p.raw("resources/read", map[string]any{"uri": tc.uri})
		if rerr == nil {
			t.Errorf("%s: no error", tc.uri)
			continue
		}
		if !strings.HasPrefix(rerr.Message, tc.prefix) {
			t.Errorf("%s: message %q, want prefix %q", tc.uri, rerr.Message, tc.prefix)
		}
		data, _ := rerr.Data.(map[string]any)
		if data["name"] == nil || data["code"] == nil {
			t.Errorf("%s: error data %v lacks the kernel's code and name", tc.uri, rerr.Data)
		}
		if tc.name != "" && (data["name"] != tc.name || data["code"] != float64(tc.code)) {
			t.Errorf("%s: error data %v, want %s %d", tc.uri, data, tc.name, tc.code)
		}
	}
}
