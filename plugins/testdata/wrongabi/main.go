// Command wrongabi speaks a future ABI: the kernel must refuse it before
// running any of its code.
package main

//go:wasmexport shoal_abi_v2
func marker() {}

//go:wasmexport shoal_alloc
func alloc(n uint32) uint32 { return 0 }

//go:wasmexport shoal_free
func free(p uint32) {}

//go:wasmexport shoal_describe
func describe() uint64 { return 0 }

//go:wasmexport shoal_read
func read(p, n uint32) uint64 { return 0 }

func main() {}
