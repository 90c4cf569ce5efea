package core

import (
	"context"
	"encoding/json"
	"errors"
	"net/url"
	"strings"
	"testing"

	"github.com/shoal-sh/shoal/core/rpc"
	"github.com/shoal-sh/shoal/core/uri"
	"github.com/shoal-sh/shoal/core/value"
)

// fixedProvider serves one family from a map of paths (u.Path()) to
// contents; it counts its reads and can read parts.
type fixedProvider struct {
	family    string
	contents  map[string]*Content
	resources []Resource
	templates []Template
	reads     int
	// part, when set, answers ReadPart.
	part      func(u *uri.URI, sel Selection) (*Content, int, bool, error)
	partCalls int
}

func (p *fixedProvider) Family() string        { return p.family }
func (p *fixedProvider) Templates() []Template { return p.templates }
func (p *fixedProvider) List(context.Context, *Caller) ([]Resource, error) {
	return p.resources, nil
}

func (p *fixedProvider) Read(_ context.Context, _ *Caller, u *uri.URI) (*Content, error) {
	p.reads++
	c, ok := p.contents[u.Path()]
	if !ok {
		return nil, rpc.Errorf(rpc.NotFound, "no %s", u.Path())
	}
	return c, nil
}

// partProvider is a fixedProvider that is also a PartReader.
type partProvider struct{ *fixedProvider }

func (p partProvider) ReadPart(_ context.Context, _ *Caller, u *uri.URI, sel Selection) (*Content, int, bool, error) {
	p.partCalls++
	return p.part(u, sel)
}

// subProvider is a fixedProvider whose URIs map to channels.
type subProvider struct{ *fixedProvider }

func (subProvider) Channel(u *uri.URI) (string, bool) {
	if len(u.Segments) != 1 {
		return "", false
	}
	return "user." + u.Segments[0], true
}

func lines(n int) value.Value {
	var b strings.Builder
	for i := range n {
		b.WriteString("line ")
		b.WriteString(string(rune('a' + i)))
		b.WriteByte('\n')
	}
	return value.Str(b.String())
}

func testRouter(t *testing.T) (*Router, *fixedProvider) {
	t.Helper()
	rec := value.NewRecord(
		value.F("name", value.Str("shoal")),
		value.F("items", value.List{value.Int(10), value.Int(20), value.Int(30), value.Int(40)}),
		value.F("log", lines(5)),
		value.F("blob", value.Bytes{0xff, 0x00, 0x01}),
	)
	p := &fixedProvider{family: "fix", contents: map[string]*Content{
		"shoal://fix/v":   {Value: rec, Ref: "fix:1", Marks: []string{"secret-source"}},
		"shoal://fix/rec": {Record: map[string]any{"tasks": []any{map[string]any{"id": 1}, map[string]any{"id": 2}, map[string]any{"id": 3}}}, Ref: "fix:2"},
		"shoal://fix/nil": nil,
		"shoal://fix/big": {Value: value.Str(strings.Repeat("x", 100))},
	}}
	r := NewRouter()
	r.RawCeiling = 64
	if err := r.Register(p); err != nil {
		t.Fatal(err)
	}
	return r, p
}

func mustParse(t *testing.T, s string) *uri.URI {
	t.Helper()
	u, err := uri.Parse(s)
	if err != nil {
		t.Fatal(err)
	}
	return u
}

func ptr[T any](v T) *T { return &v }

// TestRouterRead: the read pipeline applies path, slice, grep and format
// to what the provider returns, for typed values and plain records
// alike, with read options overriding the URI's query.
func TestRouterRead(t *testing.T) {
	for _, tc := range []struct {
		name       string
		uri        string
		opts       ReadOptions
		mime       string
		structured string // exact structuredContent
		text       string // a substring of the text content
	}{
		{"path to a string", "shoal://fix/v?path=.name", ReadOptions{}, "application/json", `{"$":"str","v":"shoal"}`, `"shoal"`},
		{"path then slice", "shoal://fix/v?path=.items&slice=1..3", ReadOptions{}, "application/json",
			`{"$":"list","v":[{"$":"int","v":20},{"$":"int","v":30}]}`, ""},
		{"negative slice", "shoal://fix/v?path=.items&slice=-1..", ReadOptions{}, "application/json", `{"$":"list","v":[{"$":"int","v":40}]}`, ""},
		{"index from the end", "shoal://fix/v?path=.items[-2]", ReadOptions{}, "application/json", `{"$":"int","v":30}`, "30"},
		{"options override the query", "shoal://fix/v?path=.name", ReadOptions{Path: ptr(".items[0]")}, "application/json", `{"$":"int","v":10}`, "10"},
		{"an empty option clears the query's", "shoal://fix/v?path=.name", ReadOptions{Path: ptr("")}, "application/json", "", `"blob"`},
		{"grep", "shoal://fix/v?path=.log&grep=line%20c", ReadOptions{}, "application/json", "", `"total"`},
		{"render", "shoal://fix/v?path=.name&format=render", ReadOptions{}, "text/plain", `{"ref":"fix:1","render":"shoal"}`, "shoal"},
		{"raw text", "shoal://fix/v?path=.name&format=raw", ReadOptions{}, "text/plain", `{"raw":"shoal","ref":"fix:1"}`, "shoal"},
		{"raw bytes", "shoal://fix/v?path=.blob&format=raw", ReadOptions{}, "text/plain", `{"raw_base64":"/wAB","ref":"fix:1"}`, "/wAB"},
		{"record whole", "shoal://fix/rec", ReadOptions{}, "application/json", `{"tasks":[{"id":1},{"id":2},{"id":3}]}`, `"tasks"`},
		{"record path and slice", "shoal://fix/rec?path=.tasks&slice=1..", ReadOptions{}, "application/json", `[{"id":2},{"id":3}]`, ""},
		{"record render", "shoal://fix/rec?path=.tasks[0].id&format=render", ReadOptions{}, "text/plain", `{"ref":"fix:2","render":"1"}`, "1"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r, _ := testRouter(t)
			res, err := r.Read(context.Background(), &Caller{Session: "s"}, mustParse(t, tc.uri), tc.opts)
			if err != nil {
				t.Fatal(err)
			}
			if len(res.Contents) != 1 || res.Contents[0].URI != tc.uri || res.Contents[0].MimeType != tc.mime {
				t.Fatalf("contents %+v, want one %s item for %s", res.Contents, tc.mime, tc.uri)
			}
			if tc.structured != "" && compact(t, res.StructuredContent) != tc.structured {
				t.Errorf("structuredContent %s, want %s", res.StructuredContent, tc.structured)
			}
			if !strings.Contains(res.Contents[0].Text, tc.text) {
				t.Errorf("text %q lacks %q", res.Contents[0].Text, tc.text)
			}
			if strings.HasPrefix(tc.uri, "shoal://fix/v") && (res.Ref != "fix:1" || len(res.Marks) != 1) {
				t.Errorf("ref %q marks %v not carried", res.Ref, res.Marks)
			}
		})
	}
}

// compact re-encodes JSON with sorted keys and no space.
func compact(t *testing.T, raw json.RawMessage) string {
	t.Helper()
	var v any
	if err := json.Unmarshal(raw, &v); err != nil {
		t.Fatalf("structuredContent %q: %v", raw, err)
	}
	b, _ := json.Marshal(v)
	return string(b)
}

// TestRouterGrep: grep's matches, their count and the slice of matches
// shown.
func TestRouterGrep(t *testing.T) {
	r, _ := testRouter(t)
	res, err := r.Read(context.Background(), &Caller{}, mustParse(t, "shoal://fix/v?path=.log&grep=line&slice=-2.."), ReadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var g struct {
		Total int    `json:"total"`
		Shown string `json:"shown"`
	}
	v, err := value.Unmarshal(res.StructuredContent)
	if err != nil {
		t.Fatal(err)
	}
	plain, _ := json.Marshal(value.ToPlain(v))
	if err := json.Unmarshal(plain, &g); err != nil {
		t.Fatal(err)
	}
	if g.Total != 5 || g.Shown != "3..5" || !strings.Contains(string(plain), `[{"line":4,"text":"line d"},{"line":5,"text":"line e"}]`) || strings.Contains(string(plain), "line c") {
		t.Errorf("grep answer %s", plain)
	}
}

// TestRouterReadErrors: every refusal carries its code, and selectors
// are checked before the provider is asked.
func TestRouterReadErrors(t *testing.T) {
	for _, tc := range []struct {
		name   string
		uri    string
		opts   ReadOptions
		code   rpc.Code
		substr string
		reads  int // provider reads the request cost
	}{
		{"unknown family", "shoal://nope/1", ReadOptions{}, rpc.NotFound, "families: fix", 0},
		{"provider's own error", "shoal://fix/missing", ReadOptions{}, rpc.NotFound, "no shoal://fix/missing", 1},
		{"no content", "shoal://fix/nil", ReadOptions{}, rpc.Internal, "returned no content", 1},
		{"bad format", "shoal://fix/v?format=xml", ReadOptions{}, rpc.InvalidParams, "unknown format", 0},
		{"bad path", "shoal://fix/v?path=name", ReadOptions{}, rpc.BadPath, "", 0},
		{"bad slice", "shoal://fix/v?slice=3..1", ReadOptions{}, rpc.BadSlice, "", 0},
		{"bad slice option", "shoal://fix/v", ReadOptions{Slice: ptr("x")}, rpc.BadSlice, "", 0},
		{"bad elide", "shoal://fix/v", ReadOptions{Elide: json.RawMessage(`{"max_rows":"x"}`)}, rpc.InvalidParams, "", 0},
		{"bad grep", "shoal://fix/v?path=.log&grep=(", ReadOptions{}, rpc.InvalidParams, "", 0},
		{"context without grep", "shoal://fix/v?context=2", ReadOptions{}, rpc.InvalidParams, "give grep", 0},
		{"missing field", "shoal://fix/v?path=.nope", ReadOptions{}, rpc.BadPath, "", 1},
		{"grep of a record", "shoal://fix/v?grep=x", ReadOptions{}, rpc.InvalidParams, ".log", 1},
		{"raw of a record", "shoal://fix/rec?format=raw", ReadOptions{}, rpc.InvalidParams, "kernel record", 1},
		{"raw over the ceiling", "shoal://fix/big?format=raw", ReadOptions{}, rpc.TooLarge, "", 1},
		{"record path missing", "shoal://fix/rec?path=.nope", ReadOptions{}, rpc.BadPath, "", 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r, p := testRouter(t)
			_, err := r.Read(context.Background(), &Caller{}, mustParse(t, tc.uri), tc.opts)
			var re *rpc.Error
			if !errors.As(err, &re) || re.Code != tc.code {
				t.Fatalf("error %v, want code %d", err, tc.code)
			}
			if !strings.Contains(re.Message, tc.substr) {
				t.Errorf("message %q lacks %q", re.Message, tc.substr)
			}
			if p.reads != tc.reads {
				t.Errorf("provider read %d times, want %d", p.reads, tc.reads)
			}
		})
	}
}

// sparseList is a render.Sparse list in memory.
type sparseList value.List

func (sparseList) Kind() value.Kind                  { return value.KindList }
func (l sparseList) Len() int                        { return len(l) }
func (l sparseList) Item(i int) (value.Value, error) { return l[i], nil }

// TestRouterPartReader: a read without grep asks the provider for the
// part first; ok false falls back to the whole read; a grep never asks.
// A Sparse answer is rendered in every format without the whole value.
func TestRouterPartReader(t *testing.T) {
	whole := value.List{value.Int(1), value.Int(2), value.Int(3), value.Int(4)}
	fp := &fixedProvider{family: "part", contents: map[string]*Content{"shoal://part/x": {Value: whole}, "shoal://part/y": {Value: whole}, "shoal://part/z": {Value: whole}}}
	fp.part = func(u *uri.URI, sel Selection) (*Content, int, bool, error) {
		if u.Path() == "shoal://part/z" {
			return &Content{Sparse: sparseList(whole)}, 0, true, nil
		}
		if u.Path() != "shoal://part/x" || (sel.HasPath && sel.HasSlice) || (!sel.HasPath && !sel.HasSlice) {
			return nil, 0, false, nil
		}
		if sel.HasSlice {
			// The provider answers the slice itself: 2..4 is [3 4].
			return &Content{Value: value.List{value.Int(3), value.Int(4)}}, sel.Slice.Start, true, nil
		}
		return &Content{Value: value.Int(99)}, 0, true, nil
	}
	r := NewRouter()
	if err := r.Register(partProvider{fp}); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		uri          string
		parts, reads int
		structured   string
	}{
		{"shoal://part/x?slice=2..4", 1, 0, `{"$":"list","v":[{"$":"int","v":3},{"$":"int","v":4}]}`},
		{"shoal://part/x?path=[1]", 1, 0, `{"$":"int","v":99}`}, // the part is the value at the path already
		{"shoal://part/y?slice=2..4", 1, 1, `{"$":"list","v":[{"$":"int","v":3},{"$":"int","v":4}]}`},
		{"shoal://part/x?path=[0]&slice=0..1", 1, 1, ""},
		{"shoal://part/x", 1, 1, ""},
		{"shoal://part/x?grep=1", 0, 1, ""},
		{"shoal://part/z?elide=" + url.QueryEscape(`{"max_items":1}`), 1, 0, `{"$":"list","v":[{"$":"int","v":1}],"elided":{"total":4,"shown":1,"budget":"max_items","next":{"path":".","slice":"1..2"}}}`},
		{"shoal://part/z?format=render", 1, 0, `{"ref":"","render":"1\n2\n3\n4"}`},
		{"shoal://part/z?format=raw", 1, 0, `{"ref":"","raw":"{\"$\":\"list\",\"v\":[{\"$\":\"int\",\"v\":1},{\"$\":\"int\",\"v\":2},{\"$\":\"int\",\"v\":3},{\"$\":\"int\",\"v\":4}]}"}`},
	} {
		fp.partCalls, fp.reads = 0, 0
		res, err := r.Read(context.Background(), &Caller{}, mustParse(t, tc.uri), ReadOptions{})
		if tc.uri == "shoal://part/x?path=[0]&slice=0..1" {
			// A slice of an int is refused: the point is that the whole
			// value was read to find out.
			if err == nil {
				t.Errorf("%s: no error", tc.uri)
			}
		} else if err != nil {
			t.Fatalf("%s: %v", tc.uri, err)
		}
		if fp.partCalls != tc.parts || fp.reads != tc.reads {
			t.Errorf("%s: %d part reads and %d reads, want %d and %d", tc.uri, fp.partCalls, fp.reads, tc.parts, tc.reads)
		}
		if tc.structured != "" && compact(t, res.StructuredContent) != compact(t, json.RawMessage(tc.structured)) {
			t.Errorf("%s: structuredContent %s, want %s", tc.uri, res.StructuredContent, tc.structured)
		}
	}
}

// TestRouterRegister: a family is registered once; the error names both
// owners; lookups and Families follow registration order.
func TestRouterRegister(t *testing.T) {
	r := NewRouter()
	a, b := &fixedProvider{family: "a"}, &fixedProvider{family: "b"}
	for _, p := range []Provider{a, b} {
		if err := r.Register(p); err != nil {
			t.Fatal(err)
		}
	}
	err := r.Register(subProvider{&fixedProvider{family: "a"}})
	if err == nil || !strings.Contains(err.Error(), `family "a" is served by *core.fixedProvider already; core.subProvider cannot take it`) {
		t.Errorf("duplicate: %v", err)
	}
	if err := r.Register(&fixedProvider{}); err == nil || !strings.Contains(err.Error(), "empty family") {
		t.Errorf("empty family: %v", err)
	}
	if got := strings.Join(r.Families(), ","); got != "a,b" {
		t.Errorf("families %s", got)
	}
	if p, ok := r.Provider("b"); !ok || p != b {
		t.Errorf("Provider(b) = %v, %v", p, ok)
	}
	if _, ok := r.Provider("c"); ok {
		t.Error("Provider(c) found")
	}
	if ps := r.Providers(); len(ps) != 2 || ps[0] != a {
		t.Errorf("providers %v", ps)
	}
}

// TestRouterListOrder: roots come before entries; each group follows
// the Order, then registration; a MIME type defaults to JSON.
func TestRouterListOrder(t *testing.T) {
	r := NewRouter()
	for _, p := range []*fixedProvider{
		{family: "plug", resources: []Resource{{URI: "shoal://plug"}, {URI: "shoal://plug/1"}},
			templates: []Template{{URITemplate: "shoal://plug/{id}"}}},
		{family: "jobs", resources: []Resource{{URI: "shoal://jobs", MimeType: "text/plain"}},
			templates: []Template{{URITemplate: "shoal://jobs/{x}"}}},
		{family: "out", resources: []Resource{{URI: "shoal://out/2"}, {URI: "shoal://out/1"}, {URI: "shoal://out/latest", Root: true}},
			templates: []Template{{URITemplate: "shoal://out/{n}", MimeType: "text/plain"}}},
	} {
		if err := r.Register(p); err != nil {
			t.Fatal(err)
		}
	}
	r.SetOrder(Order{Roots: []string{"out", "jobs"}, Entries: []string{"out"}, Templates: []string{"jobs"}})
	res, err := r.List(context.Background(), &Caller{})
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, x := range res {
		got = append(got, x.URI+" "+x.MimeType)
	}
	want := "shoal://out/latest application/json|shoal://jobs text/plain|shoal://plug application/json|" +
		"shoal://out/2 application/json|shoal://out/1 application/json|shoal://plug/1 application/json"
	if strings.Join(got, "|") != want {
		t.Errorf("listing\n%s\nwant\n%s", strings.Join(got, "|"), want)
	}
	var tpl []string
	for _, x := range r.Templates() {
		tpl = append(tpl, x.URITemplate+" "+x.MimeType)
	}
	if strings.Join(tpl, "|") != "shoal://jobs/{x} application/json|shoal://plug/{id} application/json|shoal://out/{n} text/plain" {
		t.Errorf("templates %v", tpl)
	}
}

// TestRouterChannel: a URI maps to a channel only through a
// Subscribable provider of its family.
func TestRouterChannel(t *testing.T) {
	r := NewRouter()
	for _, p := range []Provider{subProvider{&fixedProvider{family: "ev"}}, &fixedProvider{family: "plain"}} {
		if err := r.Register(p); err != nil {
			t.Fatal(err)
		}
	}
	for _, tc := range []struct {
		uri, channel string
		ok           bool
	}{
		{"shoal://ev/build", "user.build", true},
		{"shoal://ev/a/b", "", false},
		{"shoal://plain/x", "", false},
		{"shoal://none/x", "", false},
	} {
		ch, ok := r.Channel(mustParse(t, tc.uri))
		if ch != tc.channel || ok != tc.ok {
			t.Errorf("Channel(%s) = %q, %v; want %q, %v", tc.uri, ch, ok, tc.channel, tc.ok)
		}
	}
}
