// Command baddescribe has every export of shoal_abi_v1 but answers
// shoal_describe with text that is not an envelope.
package main

import "unsafe"

var keep = map[uint32][]byte{}

func pin(b []byte) uint32 {
	p := uint32(uintptr(unsafe.Pointer(unsafe.SliceData(b))))
	keep[p] = b
	return p
}

//go:wasmexport shoal_abi_v1
func marker() {}

//go:wasmexport shoal_alloc
func alloc(n uint32) uint32 { return pin(make([]byte, n+1)) }

//go:wasmexport shoal_free
func free(p uint32) { delete(keep, p) }

//go:wasmexport shoal_describe
func describe() uint64 {
	b := []byte("this is not json")
	return uint64(pin(b))<<32 | uint64(len(b))
}

//go:wasmexport shoal_read
func read(p, n uint32) uint64 { return describe() }

func main() {}
