// Package spill stores large values in the content store so that reading
// a part of one decodes only that part.
//
// A spilled value's blob is its typed-JSON encoding, exactly what
// value.Marshal gives (so its val:blake3 ref does not depend on how it was
// stored). Beside a list, table or string whose encoding spans more than
// one part of [PartSize] bytes, the store keeps an index (cas
// [cas.Store.PutIndex]): for each part, the first item, row or character
// it holds, where it lies in the blob, its blake3 hash and (a string's)
// its decoded size; beside a record holding such a value, where each
// field lies (see encodeRecord). Reads (see [Reader.Select]) step through
// the index and load and check only the parts they reach, through an LRU
// of decoded parts bounded in bytes (config value_cache); a whole large
// value is handed to the renderer as a render.Sparse, read as far as its
// elided preview reaches. A grep goes part by part ([Reader.Grep]).
package spill

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/bits"
	"runtime"
	"slices"
	"sort"
	"sync"
	"sync/atomic"
	"unicode/utf8"

	"github.com/zeebo/blake3"

	"github.com/shoal-sh/shoal/core/value"
)

// PartSize is the encoded size a part aims at: small enough that a cold
// read of one row costs about 5× a warm one (decoding 16 KiB of typed
// JSON), large enough that the index stays a fraction of a percent of
// the value (56 bytes a part).
const PartSize = 16 << 10

// Kinds of indexed values.
const (
	KindList  = 'l'
	KindTable = 't'
	KindStr   = 's'
	// KindRecord is a record with at least one field indexed itself: its
	// fields say where each value lies, and the large ones carry their
	// own index.
	KindRecord = 'r'
)

// Index says where the parts of one value's encoding lie.
type Index struct {
	Kind   byte
	Count  int       // items, rows, or characters (Unicode scalar values)
	Cols   []string  // a table's columns
	Size   int64     // bytes of the whole encoding (the blob)
	Parts  []Part    // a list's, table's or string's, as Encode made them
	Fields []FieldAt // a record's
	// Raw says the parts give their decoded bytes (Part.Raw): indexes
	// written before those were kept (format 1) do not, and a whole
	// string read of one decodes the string.
	Raw bool

	// An index read from the store keeps its parts as the file has them,
	// rec bytes each, and decodes one when asked (part): loading the
	// index of a 10M-row table then checks 18,000 records in place
	// instead of building them.
	recs []byte
	rec  int
}

// nparts is how many parts the index has.
func (ix *Index) nparts() int {
	if ix.recs != nil {
		return len(ix.recs) / ix.rec
	}
	return len(ix.Parts)
}

// part returns part k.
func (ix *Index) part(k int) Part {
	if ix.recs == nil {
		return ix.Parts[k]
	}
	r := ix.recs[k*ix.rec : (k+1)*ix.rec]
	p := Part{
		First: int(binary.LittleEndian.Uint64(r)),
		Off:   int64(binary.LittleEndian.Uint64(r[8:])),
		Len:   int(binary.LittleEndian.Uint32(r[16:])),
	}
	copy(p.Sum[:], r[20:52])
	if ix.Raw {
		p.Raw = int(binary.LittleEndian.Uint32(r[52:]))
	}
	return p
}

// first is part k's first item, row or character.
func (ix *Index) first(k int) int {
	if ix.recs == nil {
		return ix.Parts[k].First
	}
	return int(binary.LittleEndian.Uint64(ix.recs[k*ix.rec:]))
}

// FieldAt is where one field of an indexed record lies in the blob: its
// value's encoding, checked by Sum, or (Sub not nil) by its own index.
type FieldAt struct {
	Name string
	Off  int64
	Len  int
	Sum  [32]byte // zero when Sub is set
	Sub  *Index
}

// Part is one part of an indexed value.
type Part struct {
	First int   // its first item, row or character
	Off   int64 // where its bytes start in the blob
	Len   int   // how many bytes
	Sum   [32]byte
	Raw   int // a string's part: the bytes of its characters, decoded
}

// Encoded is a value's encoding in pieces, to be written one after the
// other (Reader, Bytes), with its index when it has one.
type Encoded struct {
	Pieces [][]byte
	Size   int64
	Index  *Index // nil for a value read whole
	// Sum is the blob's hash (blake3, hex, as the content store names
	// it) when an Ahead computed it while the value's output arrived
	// (see NewAheadAfter); else "".
	Sum string
}

// Reader streams the encoding.
func (e *Encoded) Reader() io.Reader {
	rs := make([]io.Reader, len(e.Pieces))
	for i, p := range e.Pieces {
		rs[i] = bytes.NewReader(p)
	}
	return io.MultiReader(rs...)
}

// Bytes returns the encoding in one slice (without a copy when it is one
// piece).
func (e *Encoded) Bytes() []byte {
	if len(e.Pieces) == 1 {
		return e.Pieces[0]
	}
	return slices.Concat(e.Pieces...)
}

// Encode returns value.Marshal(v) in pieces, with an index when v is a
// list, table or valid UTF-8 string whose encoding spans more than one
// part of partSize bytes (PartSize when ≤ 0).
func Encode(v value.Value, partSize int) (*Encoded, error) {
	return EncodeAhead(v, partSize)
}

// EncodeAhead is Encode using the parts that aheads encoded of the
// strings in v (each Ahead is stopped first), and the hash of the whole
// encoding when one of them hashed it ahead (Encoded.Sum).
func EncodeAhead(v value.Value, partSize int, aheads ...*Ahead) (*Encoded, error) {
	e, err := encodeAhead(v, partSize, aheads)
	if err == nil {
		e.Sum = summedAhead(e, aheads)
	}
	return e, err
}

func encodeAhead(v value.Value, partSize int, aheads []*Ahead) (*Encoded, error) {
	if partSize <= 0 {
		partSize = PartSize
	}
	var e *Encoded
	var err error
	switch x := v.(type) {
	case value.List:
		e, err = encodeRows(KindList, nil, len(x), partSize, func(a, b int) value.Value { return x[a:b:b] })
	case *value.Table:
		e, err = encodeRows(KindTable, x.Cols, len(x.Rows), partSize, func(a, b int) value.Value {
			return &value.Table{Cols: x.Cols, Rows: x.Rows[a:b:b]}
		})
	case value.Str:
		if len(x) > partSize { // else it is one part: read whole
			e = encodeStr(string(x), partSize, aheads)
		}
	case *value.Record:
		return encodeRecord(x, partSize, aheads)
	}
	if err != nil {
		return nil, err
	}
	if e == nil || len(e.Index.Parts) < 2 {
		enc, err := value.Marshal(v)
		if err != nil {
			return nil, err
		}
		return &Encoded{Pieces: [][]byte{enc}, Size: int64(len(enc))}, nil
	}
	return e, nil
}

// encodeRows encodes a list or table in groups of items whose encoding is
// about partSize bytes: each group is encoded as a list or table of its
// own (value.Marshal, so the bytes are Marshal's), and its members, cut
// out of that, are one part.
func encodeRows(kind byte, cols []string, n, partSize int, group func(a, b int) value.Value) (*Encoded, error) {
	empty, err := value.Marshal(group(0, 0))
	if err != nil {
		return nil, err
	}
	head, tail := empty[:len(empty)-2], empty[len(empty)-2:] // ... [   and   ]}
	e := &Encoded{Pieces: [][]byte{head}, Size: int64(len(head)), Index: &Index{Kind: kind, Count: n, Cols: cols, Raw: true}}
	k := 64
	for a := 0; a < n; {
		b := min(n, a+k)
		enc, err := value.Marshal(group(a, b))
		if err != nil {
			return nil, err
		}
		part := enc[len(head) : len(enc)-len(tail)]
		if a > 0 {
			e.Pieces = append(e.Pieces, comma)
			e.Size++
		}
		e.Index.Parts = append(e.Index.Parts, Part{First: a, Off: e.Size, Len: len(part), Sum: blake3.Sum256(part)})
		e.Pieces = append(e.Pieces, part)
		e.Size += int64(len(part))
		// Aim the next group at partSize from what this one weighed.
		k = min(max(1, int(int64(b-a)*int64(partSize)/int64(max(len(part), 1)))), 1<<20)
		a = b
	}
	e.Pieces = append(e.Pieces, tail)
	e.Size += int64(len(tail))
	e.Index.Size = e.Size
	return e, nil
}

var comma = []byte{','}

// encodeRecord encodes a record field by field, as value.Marshal does,
// and indexes it when one of its fields has an index of its own (a large
// stdout, a large table inside).
func encodeRecord(r *value.Record, partSize int, aheads []*Ahead) (*Encoded, error) {
	type field struct {
		name []byte
		e    *Encoded
	}
	fields := make([]field, len(r.Fields))
	indexed := false
	for i, f := range r.Fields {
		if f.Value == nil {
			return nil, fmt.Errorf("record field %q has no value", f.Name)
		}
		fe, err := encodeAhead(f.Value, partSize, aheads)
		if err != nil {
			return nil, err
		}
		fields[i] = field{value.AppendQuoted(nil, f.Name), fe}
		indexed = indexed || fe.Index != nil
	}
	head := []byte(recordHead)
	e := &Encoded{Pieces: [][]byte{head}, Size: int64(len(head)), Index: &Index{Kind: KindRecord, Count: len(fields)}}
	for i, f := range fields {
		if i > 0 {
			e.Pieces = append(e.Pieces, comma)
			e.Size++
		}
		e.Pieces = append(e.Pieces, f.name, colon)
		e.Size += int64(len(f.name)) + 1
		at := FieldAt{Name: r.Fields[i].Name, Off: e.Size, Len: int(f.e.Size), Sub: f.e.Index}
		if at.Sub == nil {
			at.Sum = blake3.Sum256(f.e.Bytes())
		} else {
			at.Sub.shift(e.Size)
		}
		e.Index.Fields = append(e.Index.Fields, at)
		e.Pieces = append(e.Pieces, f.e.Pieces...)
		e.Size += f.e.Size
	}
	e.Pieces = append(e.Pieces, closeRecord)
	e.Size += int64(len(closeRecord))
	e.Index.setSize(e.Size)
	if !indexed {
		e.Index = nil
	}
	return e, nil
}

var colon, closeRecord = []byte{':'}, []byte("}}")

// How a record's and a string's encodings begin.
const recordHead, strHead = `{"$":"record","v":{`, `{"$":"str","v":"`

// StrFieldAfter returns the bytes that start the encoding of a record
// made of r's fields and then a field name holding a string, up to that
// string's first character: what an Ahead of that string hashes first
// (NewAheadAfter).
func StrFieldAfter(r *value.Record, name string) ([]byte, error) {
	b := []byte(recordHead)
	for _, f := range r.Fields {
		enc, err := value.Marshal(f.Value)
		if err != nil {
			return nil, err
		}
		b = append(value.AppendQuoted(b, f.Name), ':')
		b = append(append(b, enc...), ',')
	}
	b = append(value.AppendQuoted(b, name), ':')
	return append(b, strHead...), nil
}

// shift moves every offset of ix (a field's index, made for the field's
// encoding alone) by d bytes, to where the field lies in its record.
func (ix *Index) shift(d int64) {
	for i := range ix.Parts {
		ix.Parts[i].Off += d
	}
	for i := range ix.Fields {
		ix.Fields[i].Off += d
		if ix.Fields[i].Sub != nil {
			ix.Fields[i].Sub.shift(d)
		}
	}
}

// setSize records size, the blob's, in ix and every index inside it.
func (ix *Index) setSize(size int64) {
	ix.Size = size
	for _, f := range ix.Fields {
		if f.Sub != nil {
			f.Sub.setSize(size)
		}
	}
}

// encodeStr encodes a valid UTF-8 string in parts of about partSize
// bytes cut on character boundaries; escaping is per character, so the
// quoted parts joined are the quoted whole. The cuts depend only on s, so
// the parts are checked, quoted, counted and hashed independently: ahead
// of time (see Ahead) or by up to GOMAXPROCS goroutines (at most
// maxEncoders) when there are enough of them: for a long output this is
// most of the work of spilling it. It returns nil when s is not valid
// UTF-8 (some part is not: the parts start where characters do).
func encodeStr(s string, partSize int, aheads []*Ahead) *Encoded {
	head, tail := []byte(strHead), []byte(`"}`)
	var cuts []int // where each part ends
	for i := 0; i < len(s); {
		j := min(len(s), i+partSize)
		for j < len(s) && !utf8.RuneStart(s[j]) {
			j++
		}
		cuts = append(cuts, j)
		i = j
	}
	parts := make([]Part, len(cuts))
	pieces := make([][]byte, len(cuts)+2)
	var todo []int // the parts not encoded ahead
	var invalid atomic.Bool
	if len(aheads) > 0 {
		done := use(s, cuts, aheads)
		for k := range cuts {
			if p, ok := done[k]; ok {
				parts[k], pieces[k+1] = p.part, p.piece
				if !p.valid {
					return nil
				}
			} else {
				todo = append(todo, k)
			}
		}
	} else {
		todo = make([]int, len(cuts))
		for k := range todo {
			todo[k] = k
		}
	}
	encode := func(k int) {
		start := 0
		if k > 0 {
			start = cuts[k-1]
		}
		var valid bool
		pieces[k+1], parts[k], valid = encodePart(s[start:cuts[k]])
		if !valid {
			invalid.Store(true)
		}
	}
	workers := min(runtime.GOMAXPROCS(0), maxEncoders, len(todo)/minPartsPerEncoder)
	if workers <= 1 {
		for _, k := range todo {
			encode(k)
		}
	} else {
		var next atomic.Int64
		var wg sync.WaitGroup
		for range workers {
			wg.Go(func() {
				for i := int(next.Add(1) - 1); i < len(todo); i = int(next.Add(1) - 1) {
					encode(todo[i])
				}
			})
		}
		wg.Wait()
	}
	if invalid.Load() {
		return nil
	}
	e := &Encoded{Pieces: pieces, Size: int64(len(head)), Index: &Index{Kind: KindStr, Parts: parts, Raw: true}}
	pieces[0], pieces[len(pieces)-1] = head, tail
	chars := 0
	for k := range parts {
		n := parts[k].First
		parts[k].First, parts[k].Off = chars, e.Size
		chars += n
		e.Size += int64(parts[k].Len)
	}
	e.Index.Count = chars
	e.Size += int64(len(tail))
	e.Index.Size = e.Size
	return e
}

// encodePart quotes one part of a string (without the quotes) and
// describes it, First holding its own character count, when it is valid
// UTF-8.
func encodePart(raw string) (piece []byte, p Part, valid bool) {
	chars := len(raw) // when it is ASCII, which one quick pass tells
	if !isASCII(raw) {
		if !utf8.ValidString(raw) {
			return nil, Part{}, false
		}
		chars = runeCount(raw)
	}
	q := value.AppendQuoted(make([]byte, 0, len(raw)+len(raw)/8+2), raw)
	piece = q[1 : len(q)-1]
	return piece, Part{First: chars, Len: len(piece), Sum: blake3.Sum256(piece), Raw: len(raw)}, true
}

// isASCII reports whether s is ASCII, eight bytes a step.
func isASCII(s string) bool {
	const highs = 0x8080808080808080
	var acc uint64
	i := 0
	for ; i+8 <= len(s); i += 8 {
		b := s[i : i+8]
		acc |= uint64(b[0]) | uint64(b[1])<<8 | uint64(b[2])<<16 | uint64(b[3])<<24 |
			uint64(b[4])<<32 | uint64(b[5])<<40 | uint64(b[6])<<48 | uint64(b[7])<<56
	}
	for ; i < len(s); i++ {
		acc |= uint64(s[i])
	}
	return acc&highs == 0
}

// The parallel string encoder: at most maxEncoders goroutines, each given
// at least minPartsPerEncoder parts, so a short string (the common case)
// is encoded on the caller's goroutine alone.
const (
	maxEncoders        = 4
	minPartsPerEncoder = 8
)

// runeCount is utf8.RuneCountInString for valid UTF-8, eight bytes at a
// time: the characters are the bytes that are not continuation bytes
// (10xxxxxx). Counting them one by one was the largest single cost of
// spilling a long output (about 1 ns a byte).
func runeCount(s string) int {
	const highs = 0x8080808080808080
	n, i := len(s), 0
	for ; i+8 <= len(s); i += 8 {
		b := s[i : i+8]
		w := uint64(b[0]) | uint64(b[1])<<8 | uint64(b[2])<<16 | uint64(b[3])<<24 |
			uint64(b[4])<<32 | uint64(b[5])<<40 | uint64(b[6])<<48 | uint64(b[7])<<56
		// A continuation byte has bit 7 set and bit 6 clear; w<<1 moves
		// each byte's bit 6 to its bit 7.
		n -= bits.OnesCount64(w &^ (w << 1) & highs)
	}
	for ; i < len(s); i++ {
		if s[i]&0xc0 == 0x80 {
			n--
		}
	}
	return n
}

// decodePart turns a part's bytes into the list, table or string they
// hold.
func (ix *Index) decodePart(b []byte) (value.Value, error) {
	var doc []byte
	switch ix.Kind {
	case KindList:
		doc = slices.Concat([]byte(`{"$":"list","v":[`), b, []byte("]}"))
	case KindTable:
		cols, _ := json.Marshal(ix.Cols)
		doc = slices.Concat([]byte(`{"$":"table","cols":`), cols, []byte(`,"rows":[`), b, []byte("]}"))
	case KindStr:
		doc = slices.Concat([]byte(`{"$":"str","v":"`), b, []byte(`"}`))
	default:
		return nil, fmt.Errorf("index of unknown kind %q", ix.Kind)
	}
	return value.Unmarshal(doc)
}

// The index file: magic, kind, count, size, columns as JSON, then one
// fixed-size record per part (first, offset, length, blake3, and from
// format 2 on the decoded bytes of a string's part).
var (
	magic1 = []byte("shoal-index-1\n")
	magic  = []byte("shoal-index-2\n")
)

const (
	partRecord1 = 8 + 8 + 4 + 32
	partRecord  = partRecord1 + 4
)

// A record's index file: its own magic, size, field count, then per field
// its name, offset, length, blake3 and its own index (length-prefixed,
// empty when it has none).
var magicRecord = []byte("shoal-index-r1\n")

// maxIndexDepth bounds the nesting of record indexes a file may hold.
const maxIndexDepth = 64

// MarshalBinary encodes the index for the content store.
func (ix *Index) MarshalBinary() ([]byte, error) { return ix.marshal(false) }

// marshal encodes the index in format 2, or in format 1 (without the
// decoded sizes: the tests' old indexes).
func (ix *Index) marshal(format1 bool) ([]byte, error) {
	if ix.Kind == KindRecord {
		b := append([]byte(nil), magicRecord...)
		b = binary.LittleEndian.AppendUint64(b, uint64(ix.Size))
		b = binary.LittleEndian.AppendUint32(b, uint32(len(ix.Fields)))
		for _, f := range ix.Fields {
			b = binary.LittleEndian.AppendUint32(b, uint32(len(f.Name)))
			b = append(b, f.Name...)
			b = binary.LittleEndian.AppendUint64(b, uint64(f.Off))
			b = binary.LittleEndian.AppendUint32(b, uint32(f.Len))
			b = append(b, f.Sum[:]...)
			var sub []byte
			if f.Sub != nil {
				var err error
				if sub, err = f.Sub.marshal(format1); err != nil {
					return nil, err
				}
			}
			b = binary.LittleEndian.AppendUint32(b, uint32(len(sub)))
			b = append(b, sub...)
		}
		return b, nil
	}
	cols, err := json.Marshal(ix.Cols)
	if err != nil {
		return nil, err
	}
	np := ix.nparts()
	b := make([]byte, 0, len(magic)+1+8+8+4+len(cols)+4+np*partRecord)
	if format1 {
		b = append(b, magic1...)
	} else {
		b = append(b, magic...)
	}
	b = append(b, ix.Kind)
	b = binary.LittleEndian.AppendUint64(b, uint64(ix.Count))
	b = binary.LittleEndian.AppendUint64(b, uint64(ix.Size))
	b = binary.LittleEndian.AppendUint32(b, uint32(len(cols)))
	b = append(b, cols...)
	b = binary.LittleEndian.AppendUint32(b, uint32(np))
	for k := range np {
		p := ix.part(k)
		b = binary.LittleEndian.AppendUint64(b, uint64(p.First))
		b = binary.LittleEndian.AppendUint64(b, uint64(p.Off))
		b = binary.LittleEndian.AppendUint32(b, uint32(p.Len))
		b = append(b, p.Sum[:]...)
		if !format1 {
			b = binary.LittleEndian.AppendUint32(b, uint32(p.Raw))
		}
	}
	return b, nil
}

var errBadIndex = errors.New("malformed value index")

// UnmarshalBinary decodes an index and checks that it describes a blob
// of size bytes: parts in order, inside it, not overlapping.
func (ix *Index) UnmarshalBinary(b []byte) error { return ix.unmarshal(b, 0) }

func (ix *Index) unmarshal(b []byte, depth int) error {
	if bytes.HasPrefix(b, magicRecord) {
		return ix.unmarshalRecord(b[len(magicRecord):], depth)
	}
	b, rec, np, err := ix.unmarshalHead(b, len(b))
	if err != nil {
		return err
	}
	// Checked in place, a record at a time; part decodes them on demand.
	var end int64
	prev := -1
	for i := range np {
		r := b[i*rec:]
		first := int(binary.LittleEndian.Uint64(r))
		off := int64(binary.LittleEndian.Uint64(r[8:]))
		n := int64(binary.LittleEndian.Uint32(r[16:]))
		if off < end || off+n > ix.Size || first < 0 || first > ix.Count || first <= prev {
			return errBadIndex
		}
		end, prev = off+n, first
	}
	ix.recs, ix.rec, ix.Parts = b, rec, nil
	return nil
}

// unmarshalHead decodes the head of a list's, table's or string's index
// (all but its part records) from b, the first bytes of an index of size
// bytes in all, and returns what b holds of the part records, their size
// and their number.
func (ix *Index) unmarshalHead(b []byte, size int) (recs []byte, rec, np int, err error) {
	rec = partRecord
	switch {
	case bytes.HasPrefix(b, magic):
		ix.Raw = true
	case bytes.HasPrefix(b, magic1):
		rec = partRecord1
	default:
		return nil, 0, 0, errBadIndex
	}
	all := len(b)
	b = b[len(magic):]
	if len(b) < 1+8+8+4 {
		return nil, 0, 0, errBadIndex
	}
	ix.Kind = b[0]
	ix.Count = int(binary.LittleEndian.Uint64(b[1:]))
	ix.Size = int64(binary.LittleEndian.Uint64(b[9:]))
	nc := int(binary.LittleEndian.Uint32(b[17:]))
	b = b[21:]
	if nc > len(b) || json.Unmarshal(b[:nc], &ix.Cols) != nil {
		return nil, 0, 0, errBadIndex
	}
	b = b[nc:]
	if len(b) < 4 {
		return nil, 0, 0, errBadIndex
	}
	np = int(binary.LittleEndian.Uint32(b))
	b = b[4:]
	if size-(all-len(b)) != np*rec || np == 0 || ix.Count < 0 || ix.Size < 0 {
		return nil, 0, 0, errBadIndex
	}
	switch ix.Kind {
	case KindList, KindTable, KindStr:
	default:
		return nil, 0, 0, errBadIndex
	}
	return b, rec, np, nil
}

// unmarshalRecord decodes a record's index (after its magic): fields in
// order, inside the blob, not overlapping, each sub-index of the same
// blob and inside its field.
func (ix *Index) unmarshalRecord(b []byte, depth int) error {
	if depth >= maxIndexDepth || len(b) < 12 {
		return errBadIndex
	}
	ix.Kind = KindRecord
	ix.Size = int64(binary.LittleEndian.Uint64(b))
	n := int(binary.LittleEndian.Uint32(b[8:]))
	b = b[12:]
	if n == 0 || n > len(b) || ix.Size < 0 {
		return errBadIndex
	}
	ix.Count = n
	ix.Fields = make([]FieldAt, 0, n)
	var end int64
	for range n {
		if len(b) < 4 {
			return errBadIndex
		}
		nl := int(binary.LittleEndian.Uint32(b))
		b = b[4:]
		if nl > len(b) || len(b)-nl < 8+4+32+4 {
			return errBadIndex
		}
		f := FieldAt{Name: string(b[:nl])}
		b = b[nl:]
		f.Off = int64(binary.LittleEndian.Uint64(b))
		f.Len = int(binary.LittleEndian.Uint32(b[8:]))
		copy(f.Sum[:], b[12:44])
		sl := int(binary.LittleEndian.Uint32(b[44:]))
		b = b[48:]
		if sl > len(b) || f.Off < end || f.Len < 0 || f.Off+int64(f.Len) > ix.Size {
			return errBadIndex
		}
		if sl > 0 {
			f.Sub = new(Index)
			if err := f.Sub.unmarshal(b[:sl], depth+1); err != nil || f.Sub.Size != ix.Size || !f.Sub.within(f.Off, f.Off+int64(f.Len)) {
				return errBadIndex
			}
		}
		b = b[sl:]
		end = f.Off + int64(f.Len)
		ix.Fields = append(ix.Fields, f)
	}
	if len(b) != 0 {
		return errBadIndex
	}
	return nil
}

// within reports whether every part and field of ix lies in [lo, hi).
func (ix *Index) within(lo, hi int64) bool {
	for k := range ix.nparts() {
		if p := ix.part(k); p.Off < lo || p.Off+int64(p.Len) > hi {
			return false
		}
	}
	for _, f := range ix.Fields {
		if f.Off < lo || f.Off+int64(f.Len) > hi {
			return false
		}
	}
	return true
}

// field returns the field of a record index by name.
func (ix *Index) field(name string) (FieldAt, bool) {
	for _, f := range ix.Fields {
		if f.Name == name {
			return f, true
		}
	}
	return FieldAt{}, false
}

// partOf returns the part holding item (row, character) i.
func (ix *Index) partOf(i int) int {
	n := ix.nparts()
	k := sort.Search(n, func(k int) bool { return ix.first(k) > i }) - 1
	return max(k, 0)
}

// end returns the item after part k's last.
func (ix *Index) end(k int) int {
	if k+1 < ix.nparts() {
		return ix.first(k + 1)
	}
	return ix.Count
}
