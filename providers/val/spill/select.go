package spill

import (
	"github.com/shoal-sh/shoal/core/render"
	"github.com/shoal-sh/shoal/core/rpc"
	"github.com/shoal-sh/shoal/core/value"
	"slices"
)

// Selected is what a read selects in an indexed value: a value in memory
// (Value), or, when that would be a whole large list, table, string or
// record, the same as a render.Sparse read part by part (Sparse). Offset
// is what value.ApplySliceAt reports for the slice.
type Selected struct {
	Value  value.Value
	Sparse render.Sparse
	Offset int
}

// Select answers a read of the value stored under hash that selects with
// path, then with sl (each optional), stepping through the index and
// loading only the parts it steps into. ok is false when the value has
// no index (or an index of format 1 where a whole string would be
// needed): the read then takes the whole value. What the selection
// reaches is decoded when it lies in one part, in a small field, or in
// parts spanning at most 16 MiB of encoding (a slice); anything larger is
// given Sparse, for the renderer to read as far as its output reaches. A
// path or slice that fails gives the error path.Eval or
// value.ApplySliceAt gives on the whole value.
func (r *Reader) Select(hash string, path value.Path, hasPath bool, sl value.Slice, hasSlice bool) (sel Selected, ok bool, err error) {
	// A slice the whole value would refuse is refused the same way, once
	// the value is known to have an index.
	var slErr error
	if hasSlice {
		_, _, slErr = value.ApplySliceAt(value.List{}, sl)
	}
	if hasPath && slErr == nil {
		if err := r.headError(hash, path); err != nil {
			return Selected{}, false, err
		}
	}
	ix, err := r.index(hash)
	if err != nil || ix == nil {
		return Selected{}, false, err
	}
	if slErr != nil {
		return Selected{}, false, slErr
	}
	if !hasPath {
		path = value.Path{}
	}
	w := walk{r: r, hash: hash, path: path, sl: sl, hasSlice: hasSlice}
	return w.run(ix)
}

// walk is one Select: it takes the path's steps on the index, n of them
// so far, until it reaches a value in memory or the end of the path.
type walk struct {
	r        *Reader
	hash     string
	path     value.Path
	n        int
	sl       value.Slice
	hasSlice bool
}

func (w *walk) run(ix *Index) (Selected, bool, error) {
	rest := w.path
	for w.n < w.path.Len() {
		switch ix.Kind {
		case KindRecord:
			name, isField := rest.FirstField()
			f, found := FieldAt{}, false
			if isField {
				f, found = ix.field(name)
			}
			if !found {
				return Selected{}, false, w.path.StepError(w.n, value.Shape{Kind: value.KindRecord, Names: ix.names()})
			}
			w.n++
			rest = rest.Rest()
			if f.Sub != nil {
				ix = f.Sub
				continue
			}
			v, err := w.r.field(w.hash, f)
			if err != nil {
				return Selected{}, false, err
			}
			return w.piece(v)
		case KindList:
			i, isIndex := rest.FirstIndex()
			if !isIndex || !inRange(&i, ix.Count) {
				return Selected{}, false, w.path.StepError(w.n, value.Shape{Kind: value.KindList, Len: ix.Count})
			}
			w.n++
			p := w.r.parts(w.hash, ix)
			item, err := p.item(i)
			if err != nil {
				return Selected{}, false, err
			}
			return w.piece(item)
		case KindTable:
			shape := value.Shape{Kind: value.KindTable, Len: ix.Count, Names: ix.Cols}
			if err := w.path.StepError(w.n, shape); err != nil {
				return Selected{}, false, err
			}
			w.n++
			p := w.r.parts(w.hash, ix)
			if col, isField := rest.FirstField(); isField {
				// .col is a list of the column's cells.
				j := slices.Index(ix.Cols, col)
				rest = rest.Rest()
				if w.n == w.path.Len() {
					return w.column(ix, j)
				}
				i, isIndex := rest.FirstIndex()
				if !isIndex || !inRange(&i, ix.Count) {
					return Selected{}, false, w.path.StepError(w.n, value.Shape{Kind: value.KindList, Len: ix.Count})
				}
				w.n++
				row, err := p.row(i)
				if err != nil {
					return Selected{}, false, err
				}
				return w.piece(cellOf(row, j))
			}
			i, _ := rest.FirstIndex()
			inRange(&i, ix.Count)
			t, k, err := p.at(i)
			if err != nil {
				return Selected{}, false, err
			}
			// A row read alone is the record Eval makes of it.
			return w.piece(t.(*value.Table).Row(k))
		default: // KindStr
			return Selected{}, false, w.path.StepError(w.n, value.Shape{Kind: value.KindStr})
		}
	}
	return w.whole(ix)
}

// piece applies the rest of the path, then the slice, to a value in
// memory.
func (w *walk) piece(v value.Value) (Selected, bool, error) {
	v, err := w.path.EvalFrom(v, w.n)
	if err != nil {
		return Selected{}, false, err
	}
	sel := Selected{Value: v}
	if w.hasSlice {
		if sel.Value, sel.Offset, err = value.ApplySliceAt(v, w.sl); err != nil {
			return Selected{}, false, err
		}
	}
	return sel, true, nil
}

// whole answers a path that ends at an indexed value: its slice, or the
// whole of it as a Sparse value.
func (w *walk) whole(ix *Index) (Selected, bool, error) {
	if !w.hasSlice {
		s := w.r.sparse(w.hash, ix, 0, ix.Count)
		return Selected{Sparse: s}, s != nil, nil
	}
	if ix.Kind == KindRecord {
		_, _, err := value.ApplySliceAt(&value.Record{}, w.sl)
		return Selected{}, false, err
	}
	v, off, ok, err := w.r.slice(w.hash, ix, w.sl)
	if err != nil || ok {
		return Selected{Value: v, Offset: off}, ok, err
	}
	a, b, off := sliceBounds(ix, w.sl)
	s := w.r.sparse(w.hash, ix, a, b)
	return Selected{Sparse: s, Offset: off}, s != nil, nil
}

// column answers a path that ends at a table's column j (.col): its
// slice, or the whole column as a Sparse list.
func (w *walk) column(ix *Index, j int) (Selected, bool, error) {
	a, b, off := 0, ix.Count, 0
	if w.hasSlice {
		t, toff, ok, err := w.r.slice(w.hash, ix, w.sl)
		if err != nil {
			return Selected{}, false, err
		}
		if ok {
			col, err := value.Path{}.Field(ix.Cols[j]).Eval(t)
			return Selected{Value: col, Offset: toff}, err == nil, err
		}
		a, b, off = sliceBounds(ix, w.sl)
	}
	return Selected{Sparse: &colNode{rowsNode{w.r.parts(w.hash, ix), a, b}, j}, Offset: off}, true, nil
}

func inRange(i *int, n int) bool {
	if *i < 0 {
		*i += n
	}
	return *i >= 0 && *i < n
}

// cellOf is what the .col step gives for a row's cell: null when missing.
func cellOf(row []value.Value, j int) value.Value {
	if j < len(row) && row[j] != nil {
		return row[j]
	}
	return value.Null{}
}

// names lists a record index's fields.
func (ix *Index) names() []string {
	out := make([]string, len(ix.Fields))
	for i, f := range ix.Fields {
		out[i] = f.Name
	}
	return out
}

// sliceBounds is where slice sl of an indexed list, table or string
// starts and ends (items, rows, characters), and the offset
// value.ApplySliceAt reports for it.
func sliceBounds(ix *Index, sl value.Slice) (a, b, offset int) {
	a, b = sl.Bounds(ix.Count)
	offset = a
	if ix.Kind == KindStr && !sl.FromEnd() {
		offset = sl.Start
	}
	return a, b, offset
}

// sparse returns items [a, b) of an indexed value as a render.Sparse,
// or nil when its index (of format 1) cannot give a string's bytes.
func (r *Reader) sparse(hash string, ix *Index, a, b int) render.Sparse {
	switch ix.Kind {
	case KindList:
		return &listNode{rowsNode{r.parts(hash, ix), a, b}}
	case KindTable:
		return &tableNode{rowsNode{r.parts(hash, ix), a, b}}
	case KindStr:
		if !ix.Raw {
			return nil
		}
		return &strNode{parts: r.parts(hash, ix), a: a, b: b, size: -1}
	case KindRecord:
		for _, f := range ix.Fields {
			if f.Sub != nil && !f.Sub.rawAll() {
				return nil
			}
		}
		return &recordNode{r: r, hash: hash, ix: ix}
	}
	return nil
}

// rawAll reports whether every string index in ix gives its bytes.
func (ix *Index) rawAll() bool {
	if ix.Kind == KindStr {
		return ix.Raw
	}
	for _, f := range ix.Fields {
		if f.Sub != nil && !f.Sub.rawAll() {
			return false
		}
	}
	return true
}

// partCursor reads the parts of one indexed list, table or string,
// keeping the last one it decoded.
type partCursor struct {
	r    *Reader
	hash string
	ix   *Index
	k    int // the part held, or -1
	v    value.Value
}

func (r *Reader) parts(hash string, ix *Index) *partCursor {
	return &partCursor{r: r, hash: hash, ix: ix, k: -1}
}

// at returns the decoded part holding item i, and i's place in it.
func (p *partCursor) at(i int) (value.Value, int, error) {
	if p.k < 0 || i < p.ix.first(p.k) || i >= p.ix.end(p.k) {
		k := p.ix.partOf(i)
		v, err := p.r.part(p.hash, p.ix, k)
		if err != nil {
			return nil, 0, err
		}
		p.k, p.v = k, v
	}
	return p.v, i - p.ix.first(p.k), nil
}

func (p *partCursor) item(i int) (value.Value, error) {
	v, j, err := p.at(i)
	if err != nil {
		return nil, err
	}
	l, ok := v.(value.List)
	if !ok || j >= len(l) {
		return nil, p.corrupt()
	}
	if l[j] == nil {
		return value.Null{}, nil
	}
	return l[j], nil
}

func (p *partCursor) row(i int) ([]value.Value, error) {
	v, j, err := p.at(i)
	if err != nil {
		return nil, err
	}
	t, ok := v.(*value.Table)
	if !ok || j >= len(t.Rows) {
		return nil, p.corrupt()
	}
	return t.Rows[j], nil
}

func (p *partCursor) corrupt() error {
	return rpc.Errorf(rpc.Corrupt, "value %s: part %d does not hold what its index says", p.hash, p.k)
}

// rowsNode is items or rows [a, b) of an indexed list or table.
type rowsNode struct {
	p    *partCursor
	a, b int
}

func (n *rowsNode) Len() int { return n.b - n.a }

type listNode struct{ rowsNode }

func (*listNode) Kind() value.Kind                  { return value.KindList }
func (n *listNode) Item(i int) (value.Value, error) { return n.p.item(n.a + i) }

type tableNode struct{ rowsNode }

func (*tableNode) Kind() value.Kind                   { return value.KindTable }
func (n *tableNode) Cols() []string                   { return n.p.ix.Cols }
func (n *tableNode) Row(i int) ([]value.Value, error) { return n.p.row(n.a + i) }

// colNode is column j of rows [a, b) of an indexed table, as a list.
type colNode struct {
	rowsNode
	j int
}

func (*colNode) Kind() value.Kind { return value.KindList }

func (n *colNode) Item(i int) (value.Value, error) {
	row, err := n.p.row(n.a + i)
	if err != nil {
		return nil, err
	}
	return cellOf(row, n.j), nil
}

// strNode is characters [a, b) of an indexed string.
type strNode struct {
	parts *partCursor
	a, b  int
	size  int // its bytes, -1 until counted
	err   error
	// The longest prefix given so far, and whether it is the whole: the
	// renderer asks again at every attempt, for no more.
	prefix string
	whole  bool
}

func (*strNode) Kind() value.Kind { return value.KindStr }
func (n *strNode) Chars() int     { return n.b - n.a }

// Len counts the bytes from the parts' sizes, decoding only the first
// and last part when the range starts or ends inside one. A failure
// counts nothing and is reported by Prefix, which the renderer asks
// first.
func (n *strNode) Len() int {
	if n.size >= 0 {
		return n.size
	}
	ix := n.parts.ix
	size := 0
	if n.a < n.b {
		for k := ix.partOf(n.a); k < ix.nparts() && ix.first(k) < n.b; k++ {
			first, end := ix.first(k), ix.end(k)
			lo, hi := max(n.a, first), min(n.b, end)
			if lo == first && hi == end {
				size += ix.part(k).Raw
				continue
			}
			s, err := n.chars(lo, hi)
			if err != nil {
				n.err = err
				return 0
			}
			size += len(s)
		}
	}
	n.size = size
	return size
}

// chars returns characters [lo, hi) of the string, within one part.
func (n *strNode) chars(lo, hi int) (string, error) {
	v, j, err := n.parts.at(lo)
	if err != nil {
		return "", err
	}
	s, ok := v.(value.Str)
	if !ok {
		return "", n.parts.corrupt()
	}
	i0, i1 := value.StrRange(string(s), value.Slice{Start: j, End: j + hi - lo})
	return string(s[i0:i1]), nil
}

func (n *strNode) Prefix(size int) (string, error) {
	if n.err != nil {
		return "", n.err
	}
	if n.whole || (n.prefix != "" && len(n.prefix) >= size) {
		return n.prefix, nil
	}
	s, err := n.read(size)
	if err != nil {
		return "", err
	}
	n.prefix = s
	n.whole = len(s) < size || n.b-n.a == 0
	return s, nil
}

// read puts the first size bytes or more of the range together, in whole
// characters (the whole range when it is shorter).
func (n *strNode) read(size int) (string, error) {
	ix := n.parts.ix
	var out []byte
	for c := n.a; c < n.b && len(out) < size; {
		k := ix.partOf(c)
		hi := min(n.b, ix.end(k))
		s, err := n.chars(c, hi)
		if err != nil {
			return "", err
		}
		if out == nil && (hi == n.b || len(s) >= size) {
			return s, nil // within one part: no copy
		}
		out = append(out, s...)
		c = hi
	}
	return string(out), nil
}

// recordNode is an indexed record.
type recordNode struct {
	r    *Reader
	hash string
	ix   *Index
}

func (*recordNode) Kind() value.Kind    { return value.KindRecord }
func (n *recordNode) Len() int          { return len(n.ix.Fields) }
func (n *recordNode) Name(i int) string { return n.ix.Fields[i].Name }

func (n *recordNode) Field(i int) (value.Value, render.Sparse, error) {
	f := n.ix.Fields[i]
	if f.Sub != nil {
		return nil, n.r.sparse(n.hash, f.Sub, 0, f.Sub.Count), nil
	}
	v, err := n.r.field(n.hash, f)
	return v, nil, err
}
