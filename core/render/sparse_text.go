package render

import (
	"fmt"

	"github.com/shoal-sh/shoal/core/value"
)

// RenderSparse is [RenderAt] of a Sparse value: the same text RenderAt
// gives for the whole value in memory, read only as far as it reaches.
//
// It renders a prefix of the value: the first items, rows and fields of
// each container (every one of them takes at least a byte of text, so a
// container with more than limit of them is never shown to its end) and
// the first bytes of each string, with their real lengths for the notes
// about cuts. Only a string whose text runs to the end of the bytes read
// (escape sequences and control characters take input and give little
// text) needs more: the prefix is then doubled and the value rendered
// again.
func RenderSparse(s Sparse, limit int, o Origin) (string, error) {
	for n := max(limit, 0) + 1; ; n *= 2 {
		p := prefixer{n: max(n, recordPadFields), str: max(n, TextLimit), lens: map[string]int{}}
		v, err := p.of(s, nil)
		if err != nil {
			return "", err
		}
		text, short := renderText(v, limit, o, p.lens)
		if !short || len(p.lens) == 0 {
			return text, nil
		}
	}
}

// recordPadFields is how many of a record's first fields line its names
// up (see textWriter.record): a prefix holds at least those.
const recordPadFields = 200

// prefixer builds the prefix of a Sparse value that RenderSparse renders:
// at most n items, rows or fields of each container and str bytes of each
// string, noting the real length of each one cut, by path.
type prefixer struct {
	n, str int
	lens   map[string]int
}

func (p *prefixer) of(s Sparse, path []seg) (value.Value, error) {
	total := s.Len()
	k := min(total, p.n)
	switch x := s.(type) {
	case SparseList:
		l := make(value.List, k)
		for i := range k {
			v, err := x.Item(i)
			if err != nil {
				return nil, err
			}
			l[i] = v
		}
		p.cut(path, k, total)
		return l, nil
	case SparseTable:
		t := &value.Table{Cols: x.Cols(), Rows: make([][]value.Value, k)}
		for i := range k {
			row, err := x.Row(i)
			if err != nil {
				return nil, err
			}
			t.Rows[i] = row
		}
		p.cut(path, k, total)
		return t, nil
	case SparseStr:
		str, err := x.Prefix(p.str)
		if err != nil {
			return nil, err
		}
		p.cut(path, len(str), total)
		return value.Str(str), nil
	case SparseRecord:
		r := &value.Record{Fields: make([]value.Field, k)}
		for i := range k {
			name := x.Name(i)
			v, sub, err := x.Field(i)
			if err == nil && sub != nil {
				v, err = p.of(sub, append(path[:len(path):len(path)], seg{name: name, field: true}))
			}
			if err != nil {
				return nil, err
			}
			r.Fields[i] = value.Field{Name: name, Value: v}
		}
		p.cut(path, k, total)
		return r, nil
	default:
		panic(fmt.Sprintf("render: unknown Sparse type %T", s))
	}
}

// cut notes the real length of the container or string at path when only
// read of it was taken.
func (p *prefixer) cut(path []seg, read, total int) {
	if read < total {
		p.lens[segKey(path)] = total
	}
}
