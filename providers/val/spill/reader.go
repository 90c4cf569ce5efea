package spill

import (
	"container/list"
	"errors"
	"io/fs"
	"math"
	"sync"

	"github.com/zeebo/blake3"

	"github.com/shoal-sh/shoal/core"
	"github.com/shoal-sh/shoal/core/rpc"
	"github.com/shoal-sh/shoal/core/value"
	"github.com/shoal-sh/shoal/providers/val/cas"
)

// Service is the *Reader the val provider offers to the others.
var Service = core.NewKey[*Reader]("value-parts")

// DefaultCache is the default bound of a Reader's decoded parts and
// indexes (config value_cache).
const DefaultCache = 64 << 20

// Reader answers part reads of indexed values from one content store,
// keeping recently decoded parts and indexes in an LRU bounded in bytes.
// A decoded part is counted as twice its encoded size, an index as its
// encoded size. Safe for concurrent use.
type Reader struct {
	store *cas.Store
	max   int64

	mu    sync.Mutex
	used  int64
	lru   *list.List // of *cached, most recent first
	items map[cacheKey]*list.Element
}

type cacheKey struct {
	hash string
	off  int64 // of the part or field in the blob; -1 for the index
}

type cached struct {
	key   cacheKey
	cost  int64
	index *Index      // part -1: nil when the value has no index
	v     value.Value // a part
}

// NewReader returns a reader of store's values with a cache bound of max
// bytes (DefaultCache when ≤ 0).
func NewReader(store *cas.Store, max int64) *Reader {
	if max <= 0 {
		max = DefaultCache
	}
	return &Reader{store: store, max: max, lru: list.New(), items: map[cacheKey]*list.Element{}}
}

// Store is the content store the reader reads.
func (r *Reader) Store() *cas.Store { return r.store }

// Put stores v's encoding in the content store, with its index when it
// has one, and returns its hash and encoded size.
func (r *Reader) Put(v value.Value) (hash string, size int64, err error) {
	e, err := Encode(v, PartSize)
	if err != nil {
		return "", 0, err
	}
	return r.PutEncoded(e)
}

// PutEncoded stores an encoding made by Encode.
func (r *Reader) PutEncoded(e *Encoded) (hash string, size int64, err error) {
	switch {
	case len(e.Pieces) == 1:
		hash, err = r.store.Put(e.Pieces[0])
	case e.Sum != "":
		hash = e.Sum
		_, err = r.store.PutPiecesSummed(e.Pieces, hash)
	default:
		hash, _, err = r.store.PutPieces(e.Pieces)
	}
	if err != nil {
		return "", 0, err
	}
	if e.Index != nil {
		b, err := e.Index.MarshalBinary()
		if err == nil {
			err = r.store.PutIndex(hash, b)
		}
		if err != nil {
			return "", 0, err
		}
	}
	return hash, e.Size, nil
}

func (r *Reader) get(k cacheKey) (*cached, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	el, ok := r.items[k]
	if !ok {
		return nil, false
	}
	r.lru.MoveToFront(el)
	return el.Value.(*cached), true
}

func (r *Reader) put(c *cached) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if _, ok := r.items[c.key]; ok || c.cost > r.max {
		return
	}
	r.items[c.key] = r.lru.PushFront(c)
	r.used += c.cost
	for r.used > r.max {
		old := r.lru.Back()
		oc := old.Value.(*cached)
		r.lru.Remove(old)
		delete(r.items, oc.key)
		r.used -= oc.cost
	}
}

// Drop empties the cache of parts, and of indexes too when indexes is
// set (as after a start): the benchmarks' cold reads.
func (r *Reader) Drop(indexes bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for el := r.lru.Front(); el != nil; {
		next := el.Next()
		if c := el.Value.(*cached); indexes || c.key.off >= 0 {
			r.lru.Remove(el)
			delete(r.items, c.key)
			r.used -= c.cost
		}
		el = next
	}
}

// Cached returns the bytes the cache holds and its bound.
func (r *Reader) Cached() (used, max int64) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.used, r.max
}

// index returns the value's index, or nil when it has none (or a damaged
// one, which is ignored: the whole-value path still reads the value).
func (r *Reader) index(hash string) (*Index, error) {
	k := cacheKey{hash, -1}
	if c, ok := r.get(k); ok {
		return c.index, nil
	}
	b, err := r.store.Index(hash)
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return nil, err
	}
	var ix *Index
	if err == nil {
		ix = new(Index)
		if ix.UnmarshalBinary(b) != nil {
			ix = nil
		} else if size, err := r.store.Size(hash); err != nil || size != ix.Size {
			ix = nil
		}
	}
	r.put(&cached{key: k, cost: int64(len(b)) + 64, index: ix})
	return ix, nil
}

// headRead is how much of an index headError reads: the head of a
// table's index holds its column names.
const headRead = 4 << 10

// headError is the error of a path whose first step the head of the
// value's index refuses already (a row past the end of a list or table,
// a column the table lacks, a field of a list), when the index is not
// loaded: it reads the index's first bytes, not the whole index (1 MB
// for 10M rows), so a failing read after a start costs about what one
// costs later. It returns nil when the head does not refuse the step, or
// cannot tell (no index, a record's, a head that does not fit its file
// or its blob); the read then goes on as before.
func (r *Reader) headError(hash string, path value.Path) error {
	if path.Len() == 0 {
		return nil
	}
	if _, ok := r.get(cacheKey{hash, -1}); ok {
		return nil
	}
	b, size, err := r.store.IndexHead(hash, headRead)
	if err != nil || size > math.MaxInt {
		return nil
	}
	var ix Index
	if _, _, _, err := ix.unmarshalHead(b, int(size)); err != nil {
		return nil
	}
	if blob, err := r.store.Size(hash); err != nil || blob != ix.Size {
		return nil
	}
	switch ix.Kind {
	case KindList:
		return path.StepError(0, value.Shape{Kind: value.KindList, Len: ix.Count})
	case KindTable:
		return path.StepError(0, value.Shape{Kind: value.KindTable, Len: ix.Count, Names: ix.Cols})
	}
	return nil
}

// part returns part k of an indexed value, decoded, and keeps it in the
// cache.
func (r *Reader) part(hash string, ix *Index, k int) (value.Value, error) {
	return r.loadPart(hash, ix, k, true)
}

// loadPart is part that caches the part only when keep is set (a grep
// passing over every part would only push out what others read).
func (r *Reader) loadPart(hash string, ix *Index, k int, keep bool) (value.Value, error) {
	p := ix.part(k)
	key := cacheKey{hash, p.Off}
	if c, ok := r.get(key); ok {
		return c.v, nil
	}
	b, err := r.store.ReadRange(hash, p.Off, p.Len)
	if err != nil {
		return nil, err
	}
	if blake3.Sum256(b) != p.Sum {
		return nil, rpc.Errorf(rpc.Corrupt, "value %s: part %d (bytes %d+%d) fails its blake3 check; it will not be served", hash, k, p.Off, p.Len)
	}
	v, err := ix.decodePart(b)
	if err != nil {
		return nil, rpc.Errorf(rpc.Corrupt, "value %s: part %d does not decode: %v", hash, k, err)
	}
	if keep {
		r.put(&cached{key: key, cost: 2 * int64(p.Len), v: v})
	}
	return v, nil
}

// maxSpan bounds the encoded bytes one slice read assembles from parts;
// a wider slice is given as a render.Sparse (its answer is elided to a
// budget anyway). A variable for the tests.
var maxSpan = 16 << 20

// field returns a record's field that has no index of its own, decoded.
func (r *Reader) field(hash string, f FieldAt) (value.Value, error) {
	key := cacheKey{hash, f.Off}
	if c, ok := r.get(key); ok {
		return c.v, nil
	}
	b, err := r.store.ReadRange(hash, f.Off, f.Len)
	if err != nil {
		return nil, err
	}
	if blake3.Sum256(b) != f.Sum {
		return nil, rpc.Errorf(rpc.Corrupt, "value %s: field %q (bytes %d+%d) fails its blake3 check; it will not be served", hash, f.Name, f.Off, f.Len)
	}
	v, err := value.Unmarshal(b)
	if err != nil {
		return nil, rpc.Errorf(rpc.Corrupt, "value %s: field %q does not decode: %v", hash, f.Name, err)
	}
	r.put(&cached{key: key, cost: 2 * int64(f.Len), v: v})
	return v, nil
}

// Part answers a read of the value stored under hash that selects with
// path, then with sl, when what they select is a value in memory (see
// Select); ok is false when it is not (the value has no index, or the
// selection is a whole large list, table, string or record), and the
// read then takes the whole value. A path or slice that fails gives the
// error the whole value would. offset is what value.ApplySliceAt
// reports for the slice.
func (r *Reader) Part(hash string, path value.Path, hasPath bool, sl value.Slice, hasSlice bool) (v value.Value, offset int, ok bool, err error) {
	if !hasPath && !hasSlice {
		return nil, 0, false, nil
	}
	sel, ok, err := r.Select(hash, path, hasPath, sl, hasSlice)
	if err != nil || !ok || sel.Sparse != nil {
		return nil, 0, false, err
	}
	return sel.Value, sel.Offset, true, nil
}

// Grep answers grep g, its matches paged by sl (nil: the first page), of
// what path reaches in the value stored under hash. A path through
// indexed records that ends at an indexed list, table or string is
// searched one part at a time, the value never put together (parts read
// for it are not cached); a path that ends inside one part or at a small
// field searches that. ok is false when the value has no index or the
// path is not one parts answer (see Part).
func (r *Reader) Grep(hash string, path value.Path, g value.Grep, sl *value.Slice) (v value.Value, ok bool, err error) {
	ix, err := r.index(hash)
	if err != nil || ix == nil {
		return nil, false, err
	}
	rest := path
	for ix.Kind == KindRecord {
		name, isField := rest.FirstField()
		if !isField {
			return nil, false, nil
		}
		f, found := ix.field(name)
		if !found {
			return nil, false, nil
		}
		if f.Sub == nil {
			return r.grepSelected(hash, path, g, sl)
		}
		ix, rest = f.Sub, rest.Rest()
	}
	if !rest.IsIdentity() {
		return r.grepSelected(hash, path, g, sl)
	}
	var like value.Value
	switch ix.Kind {
	case KindList:
		like = value.List{}
	case KindTable:
		like = &value.Table{Cols: ix.Cols}
	case KindStr:
		like = value.Str("")
	default:
		return nil, false, nil
	}
	v, err = g.ApplyPieces(like, func(yield func(value.Value) bool) error {
		for k := range ix.nparts() {
			pv, err := r.loadPart(hash, ix, k, false)
			if err != nil {
				return err
			}
			if !yield(pv) {
				return nil
			}
		}
		return nil
	}, sl)
	if err != nil {
		return nil, false, err
	}
	return v, true, nil
}

// grepSelected greps what path reaches when parts answer the path itself
// (it ends inside one part, or at a small field).
func (r *Reader) grepSelected(hash string, path value.Path, g value.Grep, sl *value.Slice) (value.Value, bool, error) {
	v, _, ok, err := r.Part(hash, path, true, value.Slice{}, false)
	if !ok || err != nil {
		return nil, false, err
	}
	if v, err = g.Apply(v, sl); err != nil {
		return nil, false, err
	}
	return v, true, nil
}

// slice reads slice sl of an indexed list, table or string from the parts
// it covers.
func (r *Reader) slice(hash string, ix *Index, sl value.Slice) (v value.Value, offset int, ok bool, err error) {
	a, b := sl.Bounds(ix.Count)
	offset = a
	if ix.Kind == KindStr && !sl.FromEnd() {
		offset = sl.Start
	}
	first, last := ix.partOf(a), ix.partOf(max(a, b-1))
	span := 0
	for k := first; k <= last; k++ {
		span += ix.part(k).Len
	}
	if span > maxSpan {
		return nil, 0, false, nil
	}
	var items value.List
	var rows [][]value.Value
	var str []byte
	for k := first; k <= last && a < b; k++ {
		pv, err := r.part(hash, ix, k)
		if err != nil {
			return nil, 0, false, err
		}
		first := ix.first(k)
		lo, hi := max(a, first)-first, min(b, ix.end(k))-first
		switch x := pv.(type) {
		case value.List:
			items = append(items, x[lo:hi]...)
		case *value.Table:
			rows = append(rows, x.Rows[lo:hi]...)
		case value.Str:
			i, j := value.StrRange(string(x), value.Slice{Start: lo, End: hi})
			str = append(str, x[i:j]...)
		}
	}
	switch ix.Kind {
	case KindList:
		if items == nil {
			items = value.List{}
		}
		return items, offset, true, nil
	case KindTable:
		if rows == nil {
			rows = [][]value.Value{}
		}
		return &value.Table{Cols: ix.Cols, Rows: rows}, offset, true, nil
	default:
		return value.Str(str), offset, true, nil
	}
}
