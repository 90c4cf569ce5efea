package render

import (
	"encoding/json"
	"fmt"
	"unicode/utf8"

	"github.com/shoal-sh/shoal/core/value"
)

// Sparse is a large list, table, string or record that is not in memory
// as a whole (a spilled value, kept in parts in the content store). [JSON]
// of one ([JSONSparse]) asks it only for what its output reaches: the
// first rows or items, a prefix of the string, the shown fields, and
// their counts. It is one of [SparseList], [SparseTable], [SparseStr] and
// [SparseRecord], by its Kind. A method that fails (a damaged part) fails
// the render with its error.
type Sparse interface {
	Kind() value.Kind
	// Len is a list's items, a table's rows, a record's fields, or a
	// string's bytes.
	Len() int
}

// SparseList is a Sparse list.
type SparseList interface {
	Sparse
	Item(i int) (value.Value, error)
}

// SparseTable is a Sparse table.
type SparseTable interface {
	Sparse
	Cols() []string
	Row(i int) ([]value.Value, error)
}

// SparseStr is a Sparse string (valid UTF-8).
type SparseStr interface {
	Sparse
	// Chars counts its characters.
	Chars() int
	// Prefix returns its first n bytes or more, cut after a character
	// (the whole string when it is shorter).
	Prefix(n int) (string, error)
}

// SparseRecord is a Sparse record: field i is named Name(i), and its
// value is in memory (v) or Sparse itself (s).
type SparseRecord interface {
	Sparse
	Name(i int) string
	Field(i int) (v value.Value, s Sparse, err error)
}

// JSONSparse is [JSONAt] of a Sparse value: the same bytes JSONAt gives
// for the whole value in memory, read only as far as they reach.
func JSONSparse(s Sparse, b Budget, limit int, o Origin) (structured json.RawMessage, text string, elided bool, err error) {
	compact, pretty, elided, err := fitRoot(func(e *emitter) { e.sparse(s, 0) }, false, b, limit, o, false)
	if err != nil {
		return nil, "", false, err
	}
	return compact, string(pretty), elided, nil
}

// sparseSlack is how far past the room a string prefix reaches, so that
// fitString stops inside it exactly where it stops in the whole string.
const sparseSlack = 16

func (e *emitter) sparse(s Sparse, depth int) {
	if e.over {
		return
	}
	switch x := s.(type) {
	case SparseList:
		e.listOf(x.Len(), func(i int) {
			v, err := x.Item(i)
			if err != nil {
				e.fail(err)
				return
			}
			e.value(v, depth+1)
		}, depth)
	case SparseTable:
		e.tableOf(x.Cols(), x.Len(), func(i int) []value.Value {
			row, err := x.Row(i)
			if err != nil {
				e.fail(err)
			}
			return row
		}, depth)
	case SparseStr:
		total := x.Len()
		n := max(e.room(), 0) + sparseSlack
		if total <= maxCountedString {
			n = total // the marker counts its characters: read it all
		}
		p, err := x.Prefix(n)
		if err != nil {
			e.fail(err)
			return
		}
		e.strOf(p, total, x.Chars)
	case SparseRecord:
		e.recordOf(x.Len(), x.Name, func(i int) {
			v, sp, err := x.Field(i)
			switch {
			case err != nil:
				e.fail(err)
			case sp != nil:
				e.sparse(sp, depth+1)
			default:
				e.value(v, depth+1)
			}
		}, depth)
	default:
		panic(fmt.Sprintf("render: unknown Sparse type %T", s))
	}
}

// RawSparse is [Raw] of a Sparse value: the same text or error, reading
// no more of it than the ceiling allows (a string larger than the ceiling
// is refused from its size alone).
func RawSparse(s Sparse, ceiling int64) (text string, data []byte, isText bool, err error) {
	if x, ok := s.(SparseStr); ok {
		n := x.Len()
		if int64(n) > ceiling {
			return "", nil, false, rawTooLarge("str", int64(n), ceiling, ceiling/utf8.UTFMax)
		}
		// A Sparse string is valid UTF-8.
		text, err := x.Prefix(n)
		return text, nil, true, err
	}
	e := &emitter{limit: int(min(ceiling, int64(maxInt))), exact: true}
	e.runRoot(func(e *emitter) { e.sparse(s, 0) })
	if e.err != nil {
		return "", nil, false, e.err
	}
	if e.over {
		return "", nil, false, rawJSONTooLarge(s.Kind().String(), ceiling)
	}
	return string(e.buf), nil, true, nil
}
