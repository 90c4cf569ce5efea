// Command kv is an example Shoal provider plugin: a small read-only
// key-value store serving shoal://kv/{key}. Each key holds a typed value
// (a str, an int, a record, a table, …), so reads get path, slice, format
// and rendering from the kernel like any built-in family.
//
// Build it beside its manifest and load it:
//
//	GOOS=wasip1 GOARCH=wasm go build -buildmode=c-shared -o examples/kv/kv.wasm ./examples/kv
//	shoal kernel --plugin-dir examples/kv
//	shoal get 'shoal://kv/fleet?path=[0].name'
package main

import (
	"slices"

	"github.com/shoal-sh/shoal/sdk"
)

// store is the seeded data. A plugin instance is a fresh module: whatever
// it holds is per instance and lost when the kernel retires the instance,
// so a real store would live in a granted directory.
var store = map[string]sdk.Value{
	"greeting": sdk.Str("hello from a wasm plugin"),
	"answer":   sdk.Int(42),
	"pi":       sdk.Float(3.141592653589793),
	"logo":     sdk.Bytes([]byte{0x89, 'P', 'N', 'G'}),
	"tags":     sdk.List(sdk.Str("wasm"), sdk.Str("example"), sdk.Str("kv")),
	"config": sdk.Record(
		sdk.F("name", sdk.Str("kv")),
		sdk.F("replicas", sdk.Int(3)),
		sdk.F("debug", sdk.Bool(false)),
		sdk.F("owner", sdk.Null()),
	),
	"fleet": sdk.Table([]string{"name", "region", "cpus", "healthy"},
		[]sdk.Value{sdk.Str("reef-1"), sdk.Str("eu-west"), sdk.Int(8), sdk.Bool(true)},
		[]sdk.Value{sdk.Str("reef-2"), sdk.Str("eu-west"), sdk.Int(16), sdk.Bool(true)},
		[]sdk.Value{sdk.Str("lagoon"), sdk.Str("us-east"), sdk.Int(4), sdk.Bool(false)},
		[]sdk.Value{sdk.Str("atoll"), sdk.Str("ap-south"), sdk.Int(32), sdk.Bool(true)},
	),
}

func keys() []string {
	ks := make([]string, 0, len(store))
	for k := range store {
		ks = append(ks, k)
	}
	slices.Sort(ks)
	return ks
}

func init() {
	sdk.RegisterProvider(sdk.Provider{
		Family: "kv",
		Templates: []sdk.Template{{
			URITemplate: "shoal://kv/{key}{?path,slice,format}",
			Name:        "kv value",
			Description: "A value of the example key-value store; read shoal://kv for the keys.",
		}},
		Roots: []sdk.Resource{{
			URI:         "shoal://kv",
			Name:        "kv keys",
			Description: "The keys of the example key-value store, as a table.",
		}},
		Read: read,
		List: list,
	})
}

func read(req *sdk.ReadRequest) (any, error) {
	switch len(req.Segments) {
	case 0:
		rows := make([][]sdk.Value, 0, len(store))
		for _, k := range keys() {
			rows = append(rows, []sdk.Value{sdk.Str(k), sdk.Str("shoal://kv/" + k)})
		}
		return sdk.Table([]string{"key", "uri"}, rows...), nil
	case 1:
		v, ok := store[req.Segments[0]]
		if !ok {
			return nil, sdk.Errorf(sdk.NotFound, "no key %q in kv; read shoal://kv to see the keys", req.Segments[0])
		}
		return v, nil
	}
	return nil, sdk.Errorf(sdk.BadURI, "kv URIs have one segment, the key (shoal://kv/{key}); got %d", len(req.Segments))
}

// list names one entry per key after the root.
func list(*sdk.ListRequest) ([]sdk.Resource, error) {
	out := make([]sdk.Resource, 0, len(store))
	for _, k := range keys() {
		out = append(out, sdk.Resource{URI: "shoal://kv/" + k, Name: "kv " + k})
	}
	return out, nil
}

// main never runs: the kernel loads this module as a reactor and calls
// its exports.
func main() {}
