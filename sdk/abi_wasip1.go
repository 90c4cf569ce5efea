//go:build wasip1

package sdk

import "unsafe"

// pinned keeps every buffer handed to the host reachable until the host
// frees it: the host holds only its address, which the garbage collector
// does not see. Exports run one at a time per instance, so no lock.
var pinned = map[uint32][]byte{}

func pin(b []byte) uint32 {
	if len(b) == 0 {
		b = make([]byte, 1)
	}
	p := uint32(uintptr(unsafe.Pointer(unsafe.SliceData(b))))
	pinned[p] = b
	return p
}

// pack returns a pinned response as ptr<<32 | len: a wasm export returns
// one value, and Go cannot return a string or two results through
// go:wasmexport.
func pack(b []byte) uint64 {
	return uint64(pin(b))<<32 | uint64(uint32(len(b)))
}

// request returns the host's request buffer. Only buffers this module
// allocated are accepted, so a host bug cannot make the guest read
// arbitrary memory.
func request(ptr, size uint32) ([]byte, bool) {
	b, ok := pinned[ptr]
	if !ok || uint32(len(b)) < size {
		return nil, false
	}
	return b[:size], true
}

var badRequest = []byte(`{"ok":false,"error":{"code":"FAILED","message":"request buffer was not allocated with shoal_alloc"}}`)

//go:wasmexport shoal_abi_v1
func shoalABIV1() {}

//go:wasmexport shoal_alloc
func shoalAlloc(size uint32) uint32 {
	return pin(make([]byte, size))
}

//go:wasmexport shoal_free
func shoalFree(ptr uint32) {
	delete(pinned, ptr)
}

//go:wasmexport shoal_describe
func shoalDescribe() uint64 {
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
