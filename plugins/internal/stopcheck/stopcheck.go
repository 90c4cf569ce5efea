// Package stopcheck rewrites a WebAssembly module so that the host can
// stop it in any loop, cheaply. It adds two mutable i32 globals: a stop
// flag, exported as [Export], and a budget of loop turns. At the head of
// every loop the budget goes down by one; when it reaches zero it is
// refilled to [Turns], the guest calls into the host (memory.grow 0,
// which wazero's compiler runs in Go) and traps (unreachable) if the stop
// flag is set. The host sets the flag from another goroutine when a
// call's deadline passes; the guest traps within [Turns] loop turns, or
// returns first.
//
// This replaces wazero's WithCloseOnContextDone, which makes every loop
// head call out to the host: here compiled code pays a decrement and a
// branch per turn, and the call out once per [Turns]. The call out is not
// optional: the Go runtime cannot preempt compiled guest code, so a guest
// that never returned to Go would hold up every stop-the-world of the
// garbage collector, and with it the whole process (the timer that sets
// the flag included).
//
// Placing the checks needs the offset of every loop instruction, so the
// code section is decoded instruction by instruction. wazero's decoder is
// internal and no library the project uses rewrites instructions, hence
// the small decoder here. It knows the instruction set that wazero
// compiles (WebAssembly 2.0, with threads, tail calls, exception handling
// and the legacy try/catch); anything it does not know, or any shape it
// does not expect, makes [Instrument] fail, and the caller must then run
// the module as it is under wazero's own check.
package stopcheck

import (
	"errors"
	"fmt"
)

// Export is the name the stop global is exported under. A module that
// already exports it is not instrumented.
const Export = "shoal_stop"

// Turns is how many loop turns a guest takes between two calls into the
// host. Each costs what one turn cost under WithCloseOnContextDone (an
// exit from compiled code to Go and back, ~0.1 µs); the stop, and a
// garbage collection waiting for the guest, wait at most this many turns.
const Turns = 1024

// Section ids.
const (
	secCustom    = 0
	secType      = 1
	secImport    = 2
	secFunction  = 3
	secTable     = 4
	secMemory    = 5
	secGlobal    = 6
	secExport    = 7
	secStart     = 8
	secElement   = 9
	secCode      = 10
	secData      = 11
	secDataCount = 12
	secTag       = 13
)

// rank orders the known sections as the binary format requires (the tag
// section sits between memory and global); custom sections have none.
func rank(id byte) int {
	switch id {
	case secType, secImport, secFunction, secTable, secMemory:
		return int(id)
	case secTag:
		return 6
	case secGlobal, secExport, secStart, secElement:
		return int(id) + 1
	case secDataCount:
		return 11
	case secCode:
		return 12
	case secData:
		return 13
	}
	return -1
}

// Stats says what Instrument did.
type Stats struct {
	Functions int    // function bodies decoded
	Loops     int    // checks inserted, one per loop instruction
	Global    uint32 // index of the stop global; the budget's is the next
}

// Instrument returns a copy of bin with the two globals and a check at
// the head of each loop. It fails, and the module must not be run with
// the rewritten binary, when bin has a start section (it would run before
// the host could reach the flag), has no memory (the call into the host
// grows memory 0 by nothing), already exports [Export], refers to a
// global it does not have, or holds anything the decoder does not know.
func Instrument(bin []byte) ([]byte, Stats, error) {
	return rewrite(bin, true)
}

var errShort = errors.New("unexpected end")

// section is one section of the module, body excluding id and size.
type section struct {
	id   byte
	raw  []byte // the whole section as found: id, size, body
	body []byte
}

func splitSections(bin []byte) ([]section, error) {
	if len(bin) < 8 || string(bin[:4]) != "\x00asm" {
		return nil, errors.New("not a WebAssembly binary")
	}
	if string(bin[4:8]) != "\x01\x00\x00\x00" {
		return nil, fmt.Errorf("binary version %x, want 1", bin[4:8])
	}
	var secs []section
	last := 0
	for off := 8; off < len(bin); {
		id := bin[off]
		size, n, err := uleb(bin[off+1:], 32)
		if err != nil {
			return nil, fmt.Errorf("section at %#x: size: %w", off, err)
		}
		start := off + 1 + n
		if uint64(len(bin)-start) < size {
			return nil, fmt.Errorf("section %d at %#x: %d bytes past the end", id, off, size-uint64(len(bin)-start))
		}
		end := start + int(size)
		if id != secCustom {
			r := rank(id)
			if r < 0 {
				return nil, fmt.Errorf("unknown section id %d at %#x", id, off)
			}
			if r <= last {
				return nil, fmt.Errorf("section %d at %#x out of order", id, off)
			}
			last = r
		}
		secs = append(secs, section{id: id, raw: bin[off:end], body: bin[start:end]})
		off = end
	}
	return secs, nil
}

// rewrite is Instrument; with insert false it decodes and checks the
// same, and rebuilds the code section with empty checks: the result must
// be bin's bytes (the tests hold it to that).
func rewrite(bin []byte, insert bool) ([]byte, Stats, error) {
	var st Stats
	secs, err := splitSections(bin)
	if err != nil {
		return nil, st, err
	}
	var importedGlobals, definedGlobals uint32
	hasGlobalSec, hasExportSec, hasMemory := false, false, false
	for _, s := range secs {
		switch s.id {
		case secStart:
			return nil, st, errors.New("the module has a start section: it would run before the host can stop it")
		case secImport:
			var memories uint32
			if importedGlobals, memories, err = countImports(s.body); err != nil {
				return nil, st, fmt.Errorf("import section: %w", err)
			}
			hasMemory = hasMemory || memories > 0
		case secMemory:
			n, _, err := uleb(s.body, 32)
			if err != nil {
				return nil, st, fmt.Errorf("memory section: %w", err)
			}
			hasMemory = hasMemory || n > 0
		case secGlobal:
			hasGlobalSec = true
			n, _, err := uleb(s.body, 32)
			if err != nil {
				return nil, st, fmt.Errorf("global section: %w", err)
			}
			definedGlobals = uint32(n)
		}
	}
	if !hasMemory {
		return nil, st, errors.New("the module has no memory")
	}
	globals := uint64(importedGlobals) + uint64(definedGlobals)
	if globals >= 1<<32-2 {
		return nil, st, errors.New("too many globals")
	}
	st.Global = uint32(globals)

	out := make([]byte, 0, len(bin)+len(bin)/16)
	out = append(out, bin[:8]...)
	var check []byte
	if insert {
		check = checkBytes(st.Global)
	}
	addGlobal := func() {
		if insert && !hasGlobalSec {
			out = appendSection(out, secGlobal, appendGlobals(appendUleb(nil, 2)))
			hasGlobalSec = true
		}
	}
	addExport := func() {
		if insert && !hasExportSec {
			out = appendSection(out, secExport, appendExport(appendUleb(nil, 1), st.Global))
			hasExportSec = true
		}
	}
	for _, s := range secs {
		// A missing global or export section is made where it belongs.
		if r := rank(s.id); r > rank(secGlobal) {
			addGlobal()
		}
		if r := rank(s.id); r > rank(secExport) {
			addExport()
		}
		switch s.id {
		case secGlobal:
			if !insert {
				out = append(out, s.raw...)
				continue
			}
			_, n, _ := uleb(s.body, 32)
			body := appendUleb(nil, uint64(definedGlobals)+2)
			body = append(body, s.body[n:]...)
			out = appendSection(out, secGlobal, appendGlobals(body))
		case secExport:
			hasExportSec = true
			count, entries, err := checkExports(s.body, globals)
			if err != nil {
				return nil, st, fmt.Errorf("export section: %w", err)
			}
			if !insert {
				out = append(out, s.raw...)
				continue
			}
			body := appendUleb(nil, uint64(count)+1)
			body = append(body, entries...)
			out = appendSection(out, secExport, appendExport(body, st.Global))
		case secCode:
			body, err := rewriteCode(s.body, globals, check, &st)
			if err != nil {
				return nil, st, fmt.Errorf("code section: %w", err)
			}
			if len(body) == len(s.body) { // the size's bytes as they were
				out = append(out, s.raw[:len(s.raw)-len(s.body)]...)
				out = append(out, body...)
				continue
			}
			out = appendSection(out, secCode, body)
		default:
			out = append(out, s.raw...)
		}
	}
	addGlobal()
	addExport()
	return out, st, nil
}

// checkBytes is the check put at a loop head, for the stop flag at
// global and the budget at global+1:
//
//	global.get $budget
//	i32.const 1
//	i32.sub
//	global.set $budget
//	global.get $budget
//	i32.eqz
//	if
//	  i32.const Turns
//	  global.set $budget
//	  i32.const 0
//	  memory.grow 0
//	  drop
//	  global.get $stop
//	  if
//	    unreachable
//	  end
//	end
//
// wazero's compiler loads a global from the module's context wherever
// its value is not known from the same straight-line code, which the
// head of a loop (with two ways in) never is, and the call into Go in
// between reloads it too: the flag the host sets is seen.
func checkBytes(global uint32) []byte {
	stop := appendUleb(nil, uint64(global))
	budget := appendUleb(nil, uint64(global)+1)
	b := cat([]byte{0x23}, budget, []byte{0x41, 0x01, 0x6b, 0x24}, budget, []byte{0x23}, budget, []byte{0x45, 0x04, 0x40, 0x41})
	b = appendSleb(b, Turns)
	b = cat(b, []byte{0x24}, budget, []byte{0x41, 0x00, 0x40, 0x00, 0x1a, 0x23}, stop)
	return append(b, 0x04, 0x40, 0x00, 0x0b, 0x0b)
}

func cat(parts ...[]byte) []byte {
	var b []byte
	for _, p := range parts {
		b = append(b, p...)
	}
	return b
}

// appendGlobals appends the two globals' definitions: the stop flag, a
// mutable i32 set to zero, and the budget, a mutable i32 set to Turns.
func appendGlobals(b []byte) []byte {
	b = append(b, 0x7f, 0x01, 0x41, 0x00, 0x0b)
	b = append(b, 0x7f, 0x01, 0x41)
	b = appendSleb(b, Turns)
	return append(b, 0x0b)
}

func appendExport(b []byte, global uint32) []byte {
	b = appendUleb(b, uint64(len(Export)))
	b = append(b, Export...)
	b = append(b, 0x03) // global
	return appendUleb(b, uint64(global))
}

func appendSection(out []byte, id byte, body []byte) []byte {
	out = append(out, id)
	out = appendUleb(out, uint64(len(body)))
	return append(out, body...)
}

// countImports reads the import section and counts the globals and
// memories.
func countImports(b []byte) (globals, memories uint32, err error) {
	r := reader{b: b}
	n := r.u32()
	for range n {
		r.name()
		r.name()
		switch kind := r.byte(); kind {
		case 0x00: // function
			r.u32()
		case 0x01: // table
			r.refType()
			r.limits()
		case 0x02: // memory
			r.limits()
			memories++
		case 0x03: // global
			r.valType()
			r.mutability()
			globals++
		case 0x04: // tag
			if r.byte() != 0 {
				r.fail("tag attribute")
			}
			r.u32()
		default:
			r.fail(fmt.Sprintf("import kind %#x", kind))
		}
		if r.err != nil {
			return 0, 0, r.err
		}
	}
	if r.err == nil && r.off != len(b) {
		r.fail("trailing bytes")
	}
	return globals, memories, r.err
}

// checkExports checks that no export has the reserved name or names a
// global past globals, and returns the count and the entries' bytes.
func checkExports(b []byte, globals uint64) (uint32, []byte, error) {
	r := reader{b: b}
	n := r.u32()
	start := r.off
	for range n {
		name := r.name()
		kind := r.byte()
		idx := r.u32()
		if r.err != nil {
			return 0, nil, r.err
		}
		if string(name) == Export {
			return 0, nil, fmt.Errorf("the module already exports %s", Export)
		}
		if kind > 0x04 {
			return 0, nil, fmt.Errorf("export kind %#x", kind)
		}
		if kind == 0x03 && uint64(idx) >= globals {
			return 0, nil, fmt.Errorf("export of global %d, of %d", idx, globals)
		}
	}
	if r.err == nil && r.off != len(b) {
		r.fail("trailing bytes")
	}
	return n, b[start:], r.err
}

// rewriteCode decodes every function body and returns the section's
// body with check at the head of each loop. A function body that does
// not change keeps the bytes of its size as they were, so that with an
// empty check the result equals b.
func rewriteCode(b []byte, globals uint64, check []byte, st *Stats) ([]byte, error) {
	r := reader{b: b}
	n := r.u32()
	if r.err != nil {
		return nil, r.err
	}
	out := make([]byte, 0, len(b)+len(b)/8)
	out = append(out, b[:r.off]...)
	var loops []int
	for i := range n {
		sizeAt := r.off
		size := r.u32()
		if r.err != nil {
			return nil, fmt.Errorf("function %d: %w", i, r.err)
		}
		if uint64(len(b)-r.off) < uint64(size) {
			return nil, fmt.Errorf("function %d: body past the end of the section", i)
		}
		body := b[r.off : r.off+int(size)]
		var err error
		loops, err = decodeBody(body, globals, loops[:0])
		if err != nil {
			return nil, fmt.Errorf("function %d at %#x: %w", i, r.off, err)
		}
		st.Functions++
		st.Loops += len(loops)
		if grown := len(loops) * len(check); grown == 0 {
			out = append(out, b[sizeAt:r.off]...)
		} else {
			out = appendUleb(out, uint64(len(body)+grown))
		}
		prev := 0
		for _, at := range loops {
			out = append(out, body[prev:at]...)
			out = append(out, check...)
			prev = at
		}
		out = append(out, body[prev:]...)
		r.off += int(size)
	}
	if r.off != len(b) {
		return nil, errors.New("trailing bytes after the last function")
	}
	return out, nil
}

// decodeBody decodes one function body (locals and expression) and
// appends to loops the offset just past each loop's block type, where
// the check goes. It fails on anything it does not know, on a reference
// to a global at or past globals (the added globals, which the module's
// own code must not touch: it could clear the flag or starve the
// budget), and unless the expression's final end is the body's last
// byte.
func decodeBody(body []byte, globals uint64, loops []int) ([]int, error) {
	r := reader{b: body}
	groups := r.u32()
	for range groups {
		r.u32()
		r.valType()
		if r.err != nil {
			return nil, r.err
		}
	}
	depth := 1 // the function's own block
	for r.err == nil {
		if r.off >= len(body) {
			return nil, errors.New("body ends inside its expression")
		}
		op := body[r.off]
		r.off++
		switch opClass[op] {
		case cNone:
		case cIndex:
			r.u32()
		case cIndex2:
			r.u32()
			r.u32()
		case cBlock: // block, if, try (legacy)
			r.blockType()
			depth++
		case cLoop:
			r.blockType()
			depth++
			loops = append(loops, r.off)
		case cEnd:
			depth--
			if depth == 0 {
				if r.off != len(body) {
					return nil, fmt.Errorf("the function's end at %#x is not its last byte", r.off-1)
				}
				return loops, nil
			}
		case cDelegate: // delegate (legacy): ends the try
			r.u32()
			depth--
		case cBrTable:
			n := r.u32()
			for i := uint32(0); i <= n && r.err == nil; i++ {
				r.u32()
			}
		case cSelectT:
			n := r.u32()
			for i := uint32(0); i < n && r.err == nil; i++ {
				r.valType()
			}
		case cTryTable:
			r.blockType()
			n := r.u32()
			for i := uint32(0); i < n && r.err == nil; i++ {
				switch kind := r.byte(); kind {
				case 0x00, 0x01: // catch, catch_ref: tag, label
					r.u32()
					r.u32()
				case 0x02, 0x03: // catch_all, catch_all_ref: label
					r.u32()
				default:
					r.fail(fmt.Sprintf("catch clause kind %#x", kind))
				}
			}
			depth++
		case cGlobal:
			if idx := r.u32(); r.err == nil && uint64(idx) >= globals {
				return nil, fmt.Errorf("global %d at %#x, of %d", idx, r.off, globals)
			}
		case cMemArg:
			r.memArg()
		case cI32:
			r.sleb(32)
		case cI64:
			r.sleb(64)
		case cF32:
			r.skip(4)
		case cF64:
			r.skip(8)
		case cRefNull:
			r.heapType()
		case cFC:
			r.prefixFC()
		case cFD:
			r.prefixFD()
		case cFE:
			r.prefixFE()
		default:
			return nil, fmt.Errorf("unknown opcode %#x at %#x", op, r.off-1)
		}
	}
	return nil, r.err
}

// The opcodes by the shape of their immediates.
const (
	cUnknown = iota
	cNone
	cIndex  // one index or depth
	cIndex2 // two indexes
	cBlock
	cLoop
	cEnd
	cDelegate
	cBrTable
	cSelectT
	cTryTable
	cGlobal
	cMemArg
	cI32
	cI64
	cF32
	cF64
	cRefNull
	cFC
	cFD
	cFE
)

var opClass = func() (t [256]byte) {
	set := func(c byte, ops ...byte) {
		for _, op := range ops {
			t[op] = c
		}
	}
	span := func(c byte, from, to byte) {
		for op := int(from); op <= int(to); op++ {
			t[op] = c
		}
	}
	// unreachable nop else throw_ref return catch_all drop select
	// ref.is_null; the numeric and sign-extension instructions
	set(cNone, 0x00, 0x01, 0x05, 0x0a, 0x0f, 0x19, 0x1a, 0x1b, 0xd1)
	span(cNone, 0x45, 0xc4)
	// catch throw rethrow br br_if call return_call local.* table.get
	// table.set memory.size memory.grow ref.func
	set(cIndex, 0x07, 0x08, 0x09, 0x0c, 0x0d, 0x10, 0x12, 0x20, 0x21, 0x22, 0x25, 0x26, 0x3f, 0x40, 0xd2)
	set(cIndex2, 0x11, 0x13) // call_indirect, return_call_indirect
	set(cBlock, 0x02, 0x04, 0x06)
	set(cLoop, 0x03)
	set(cEnd, 0x0b)
	set(cDelegate, 0x18)
	set(cBrTable, 0x0e)
	set(cSelectT, 0x1c)
	set(cTryTable, 0x1f)
	set(cGlobal, 0x23, 0x24)
	span(cMemArg, 0x28, 0x3e)
	set(cI32, 0x41)
	set(cI64, 0x42)
	set(cF32, 0x43)
	set(cF64, 0x44)
	set(cRefNull, 0xd0)
	set(cFC, 0xfc)
	set(cFD, 0xfd)
	set(cFE, 0xfe)
	return t
}()

// reader decodes from b; the first error sticks and later reads return
// zero values.
type reader struct {
	b   []byte
	off int
	err error
}

func (r *reader) fail(what string) {
	if r.err == nil {
		r.err = fmt.Errorf("%s at %#x", what, r.off)
	}
}

func (r *reader) byte() byte {
	if r.err != nil {
		return 0
	}
	if r.off >= len(r.b) {
		r.err = errShort
		return 0
	}
	c := r.b[r.off]
	r.off++
	return c
}

func (r *reader) skip(n int) {
	if r.err != nil {
		return
	}
	if len(r.b)-r.off < n {
		r.err = errShort
		return
	}
	r.off += n
}

func (r *reader) u32() uint32 { return uint32(r.uleb(32)) }

func (r *reader) u64() uint64 { return r.uleb(64) }

func (r *reader) uleb(bits uint) uint64 {
	if r.err != nil {
		return 0
	}
	if r.off < len(r.b) && r.b[r.off] < 0x80 { // the common case: one byte
		r.off++
		return uint64(r.b[r.off-1])
	}
	v, n, err := uleb(r.b[r.off:], bits)
	if err != nil {
		r.err = fmt.Errorf("at %#x: %w", r.off, err)
		return 0
	}
	r.off += n
	return v
}

func (r *reader) sleb(bits uint) int64 {
	if r.err != nil {
		return 0
	}
	if r.off < len(r.b) {
		if c := r.b[r.off]; c < 0x80 { // one byte: -64..63
			r.off++
			return int64(int8(c<<1) >> 1) // bit 6 is the sign
		}
	}
	v, n, err := sleb(r.b[r.off:], bits)
	if err != nil {
		r.err = fmt.Errorf("at %#x: %w", r.off, err)
		return 0
	}
	r.off += n
	return v
}

func (r *reader) name() []byte {
	n := r.u32()
	if r.err != nil {
		return nil
	}
	start := r.off
	r.skip(int(n))
	if r.err != nil {
		return nil
	}
	return r.b[start:r.off]
}

// isValType reports whether c is a one-byte value type: i32, i64, f32,
// f64, v128, funcref, externref, exnref.
func isValType(c byte) bool {
	switch c {
	case 0x7f, 0x7e, 0x7d, 0x7c, 0x7b, 0x70, 0x6f, 0x69:
		return true
	}
	return false
}

func (r *reader) valType() {
	if c := r.byte(); r.err == nil && !isValType(c) {
		r.off--
		r.fail(fmt.Sprintf("value type %#x", c))
	}
}

func (r *reader) refType() {
	if c := r.byte(); r.err == nil && c != 0x70 && c != 0x6f && c != 0x69 {
		r.off--
		r.fail(fmt.Sprintf("reference type %#x", c))
	}
}

func (r *reader) heapType() { r.refType() }

func (r *reader) mutability() {
	if c := r.byte(); r.err == nil && c > 1 {
		r.off--
		r.fail(fmt.Sprintf("mutability %#x", c))
	}
}

// limits reads a table's or memory's limits: a flag (bit 0: a maximum
// follows, bit 1: shared, bit 2: 64-bit), the minimum, the maximum.
func (r *reader) limits() {
	flag := r.byte()
	if r.err == nil && flag > 0x07 {
		r.off--
		r.fail(fmt.Sprintf("limits flag %#x", flag))
		return
	}
	r.u64()
	if flag&1 != 0 {
		r.u64()
	}
}

// blockType reads an empty type (0x40), a value type, or a type index as
// a positive signed 33-bit number.
func (r *reader) blockType() {
	if r.err != nil {
		return
	}
	if r.off < len(r.b) {
		if c := r.b[r.off]; c == 0x40 || isValType(c) {
			r.off++
			return
		}
	}
	at := r.off
	if v := r.sleb(33); r.err == nil && v < 0 {
		r.off = at
		r.fail(fmt.Sprintf("block type %d", v))
	}
}

// memArg reads an alignment (bit 6 says a memory index follows) and an
// offset.
func (r *reader) memArg() {
	align := r.u32()
	if align&0x40 != 0 {
		r.u32()
	}
	r.u64()
}

// prefixFC reads the saturating truncations, bulk memory and table
// instructions.
func (r *reader) prefixFC() {
	switch sub := r.u32(); {
	case r.err != nil:
	case sub <= 7: // i32.trunc_sat_f32_s ... i64.trunc_sat_f64_u
	case sub == 8: // memory.init data memory
		r.u32()
		r.u32()
	case sub == 9: // data.drop
		r.u32()
	case sub == 10: // memory.copy memory memory
		r.u32()
		r.u32()
	case sub == 11: // memory.fill memory
		r.u32()
	case sub == 12 || sub == 14: // table.init elem table, table.copy table table
		r.u32()
		r.u32()
	case sub == 13: // elem.drop
		r.u32()
	case sub >= 15 && sub <= 17: // table.grow, table.size, table.fill
		r.u32()
	default:
		r.fail(fmt.Sprintf("unknown opcode 0xfc %d", sub))
	}
}

// prefixFD reads the SIMD instructions. Most have no immediate; those
// that do are the memory accesses (a memarg, and for the lane forms a
// lane), v128.const and i8x16.shuffle (16 bytes) and the lane
// extractions and replacements (a lane).
func (r *reader) prefixFD() {
	switch sub := r.u32(); {
	case r.err != nil:
	case sub <= 11: // v128.load ... v128.store
		r.memArg()
	case sub == 12 || sub == 13: // v128.const, i8x16.shuffle
		r.skip(16)
	case sub >= 21 && sub <= 34: // extract_lane, replace_lane
		r.skip(1)
	case sub >= 84 && sub <= 91: // v128.load8_lane ... v128.store64_lane
		r.memArg()
		r.skip(1)
	case sub == 92 || sub == 93: // v128.load32_zero, v128.load64_zero
		r.memArg()
	case sub <= 0xff: // the rest of SIMD: no immediate
	default:
		r.fail(fmt.Sprintf("unknown opcode 0xfd %d", sub))
	}
}

// prefixFE reads the atomic memory instructions of the threads proposal.
func (r *reader) prefixFE() {
	switch sub := r.u32(); {
	case r.err != nil:
	case sub <= 0x02: // memory.atomic.notify, wait32, wait64
		r.memArg()
	case sub == 0x03: // atomic.fence
		if c := r.byte(); r.err == nil && c != 0 {
			r.fail("atomic.fence flags")
		}
	case sub >= 0x10 && sub <= 0x4e: // loads, stores, read-modify-writes
		r.memArg()
	default:
		r.fail(fmt.Sprintf("unknown opcode 0xfe %#x", sub))
	}
}

// uleb decodes an unsigned LEB128 number of at most bits bits.
func uleb(b []byte, bits uint) (v uint64, n int, err error) {
	for shift := uint(0); ; shift += 7 {
		if n >= len(b) {
			return 0, 0, errShort
		}
		c := b[n]
		n++
		if shift >= bits || (bits-shift < 7 && uint64(c&0x7f)>>(bits-shift) != 0) {
			return 0, 0, errors.New("LEB128 number too large")
		}
		v |= uint64(c&0x7f) << shift
		if c < 0x80 {
			return v, n, nil
		}
	}
}

// sleb decodes a signed LEB128 number of at most bits bits.
func sleb(b []byte, bits uint) (v int64, n int, err error) {
	var shift uint
	for {
		if n >= len(b) {
			return 0, 0, errShort
		}
		if shift >= bits {
			return 0, 0, errors.New("LEB128 number too large")
		}
		c := b[n]
		n++
		v |= int64(c&0x7f) << shift
		shift += 7
		if c < 0x80 {
			if shift < 64 && c&0x40 != 0 {
				v |= -1 << shift
			}
			return v, n, nil
		}
	}
}

func appendSleb(b []byte, v int64) []byte {
	for {
		c := byte(v & 0x7f)
		v >>= 7
		if (v == 0 && c&0x40 == 0) || (v == -1 && c&0x40 != 0) {
			return append(b, c)
		}
		b = append(b, c|0x80)
	}
}

func appendUleb(b []byte, v uint64) []byte {
	for {
		c := byte(v & 0x7f)
		v >>= 7
		if v != 0 {
			b = append(b, c|0x80)
			continue
		}
		return append(b, c)
	}
}
