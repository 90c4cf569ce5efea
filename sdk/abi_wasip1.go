//go:build wasip1

package sdk

import (
	"unsafe"

	"github.com/shoal-sh/shoal/sdk/abi"
)

// allocated keeps every buffer shoal_alloc handed to the host reachable
// until shoal_free: the host holds only its address, which the garbage
// collector does not see. Exports run one at a time per instance, so no
// lock.
var allocated = map[uint32][]byte{}

// answer is the last answer handed to the host, kept reachable until the
// next call into the module: the host copies it out before calling again,
// so answers need no shoal_free call (every guest call costs the host a
// goroutine switch).
var answer []byte

func addr(b []byte) uint32 { return uint32(uintptr(unsafe.Pointer(unsafe.SliceData(b)))) }

// pack returns an answer as ptr<<32 | len: a wasm export returns one
// value, and a Go export can return neither a string nor two results.
func pack(b []byte) uint64 {
	answer = b
	return uint64(addr(b))<<32 | uint64(uint32(len(b)))
}

// request returns the host's request buffer. Only buffers this module
// allocated are accepted, so a host bug cannot make the guest read
// arbitrary memory.
func request(ptr, size uint32) ([]byte, bool) {
	answer = nil
	b, ok := allocated[ptr]
	if !ok || uint32(len(b)) < size {
		return nil, false
	}
	return b[:size], true
}

var badRequest = errorEnvelope(Failed, "request buffer was not allocated with "+abi.ExportAlloc)

//go:wasmexport shoal_abi_v1
func shoalABIV1() {}

//go:wasmexport shoal_alloc
func shoalAlloc(size uint32) uint32 {
	answer = nil
	b := make([]byte, max(size, 1))
	p := addr(b)
	allocated[p] = b
	return p
}

//go:wasmexport shoal_free
func shoalFree(ptr uint32) {
	answer = nil
	delete(allocated, ptr)
}

//go:wasmexport shoal_describe
func shoalDescribe() uint64 {
	answer = nil
	return pack(handleDescribe())
}

//go:wasmexport shoal_read
func shoalRead(ptr, size uint32) uint64 {
	req, ok := request(ptr, size)
	if !ok {
		return pack(badRequest)
	}
	return pack(handleRead(req))
}

//go:wasmexport shoal_list
func shoalList(ptr, size uint32) uint64 {
	req, ok := request(ptr, size)
	if !ok {
		return pack(badRequest)
	}
	return pack(handleList(req))
}

//go:wasmexport shoal_validate
func shoalValidate(ptr, size uint32) uint64 {
	req, ok := request(ptr, size)
	if !ok {
		return pack(badRequest)
	}
	return pack(handleValidate(req))
}
