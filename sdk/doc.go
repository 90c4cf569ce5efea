// Package sdk is what a Shoal plugin imports. A plugin is a Go program
// compiled to a WebAssembly reactor module; the kernel runs it in a
// sandbox and calls it to read URIs of its own family (a provider) or to
// check payloads of user.* event channels (a validator).
//
// A complete provider serving shoal://hello/{name}:
//
//	package main
//
//	import "github.com/shoal-sh/shoal/sdk"
//
//	func init() {
//		sdk.RegisterProvider(sdk.Provider{
//			Family: "hello",
//			Templates: []sdk.Template{{
//				URITemplate: "shoal://hello/{name}{?path,slice,format}",
//				Name:        "greeting",
//			}},
//			Read: func(req *sdk.ReadRequest) (any, error) {
//				if len(req.Segments) != 1 {
//					return nil, sdk.Errorf(sdk.BadURI, "use shoal://hello/{name}")
//				}
//				return sdk.Record(
//					sdk.F("greeting", sdk.Str("hello, "+req.Segments[0])),
//					sdk.F("length", sdk.Int(int64(len(req.Segments[0])))),
//				), nil
//			},
//		})
//	}
//
//	func main() {} // never runs: the kernel calls the module's exports
//
// Build it into the plugin's folder, beside its plugin.toml, with the
// standard toolchain:
//
//	GOOS=wasip1 GOARCH=wasm go build -buildmode=c-shared -o hello.wasm .
//
// and start the kernel with --plugin-dir pointing at the folder. The
// manifest and the operator's grants are described in docs/plugins.md.
//
// # What the package does for you
//
// Importing sdk adds the exports of the shoal_abi_v1 contract to the
// module (the marker, shoal_alloc, shoal_free, shoal_describe,
// shoal_read, shoal_list, shoal_validate). They move JSON requests and
// answers across the module boundary, keep every buffer handed to the
// kernel alive until the kernel frees it, and recover panics so that a
// bug answers an error naming the panic instead of a bare trap. A plugin
// author writes plain Go functions and never sees the ABI.
//
// # Values and records
//
// Read may return a [Value] (built with [Str], [Int], [Record], [Table],
// … or converted with [ValueOf]): the kernel then treats the content like
// any built-in value, so readers can page it with ?path= and ?slice= and
// choose ?format=. Anything else Read returns is encoded with
// encoding/json and served as a plain JSON record, to which path and
// slice do not apply.
//
// # Errors
//
// An error built with [Errorf] and the codes [NotFound], [BadURI] or
// [InvalidParams] reaches the reader with the kernel code of the same
// name. Any other error from Read is a PLUGIN_ERROR. In a validator, any
// error from Validate rejects the payload with its message as the reason;
// Errorf([Failed], …) says instead that the validator could not decide.
//
// # The sandbox
//
// A plugin has no file system, network, environment or real clock unless
// its manifest asks for them and the operator grants them. Time without
// the clock grant starts at 2022-01-01 and advances only as it is read.
// Each instance has a memory ceiling, each call a deadline. State kept in
// package variables lives in one instance: the kernel runs several
// instances side by side and replaces an instance after any failure, so
// treat such state as a cache. A goroutine started in a call does not run
// after the call returns.
package sdk
