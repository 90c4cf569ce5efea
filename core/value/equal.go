package value

import (
	"bytes"
	"math"
)

// Equal reports whether a and b are the same value: same kind and same
// contents, record fields in the same order. NaN equals NaN (a value read
// back from its wire form must equal itself), and a nil Value or missing
// table cell equals Null.
func Equal(a, b Value) bool {
	if a == nil {
		a = Null{}
	}
	if b == nil {
		b = Null{}
	}
	if a.Kind() != b.Kind() {
		return false
	}
	switch x := a.(type) {
	case Null:
		return true
	case Bool:
		return x == b.(Bool)
	case Int:
		return x == b.(Int)
	case Float:
		y := b.(Float)
		return x == y || math.IsNaN(float64(x)) && math.IsNaN(float64(y))
	case Str:
		return x == b.(Str)
	case Bytes:
		return bytes.Equal(x, b.(Bytes))
	case List:
		y := b.(List)
		if len(x) != len(y) {
			return false
		}
		for i := range x {
			if !Equal(x[i], y[i]) {
				return false
			}
		}
		return true
	case *Record:
		y := b.(*Record)
		if len(x.Fields) != len(y.Fields) {
			return false
		}
		for i := range x.Fields {
			if x.Fields[i].Name != y.Fields[i].Name || !Equal(x.Fields[i].Value, y.Fields[i].Value) {
				return false
			}
		}
		return true
	case *Table:
		y := b.(*Table)
		if len(x.Cols) != len(y.Cols) || len(x.Rows) != len(y.Rows) {
			return false
		}
		for i := range x.Cols {
			if x.Cols[i] != y.Cols[i] {
				return false
			}
		}
		for i := range x.Rows {
			for j := range x.Cols {
				if !Equal(cell(x.Rows[i], j), cell(y.Rows[i], j)) {
					return false
				}
			}
		}
		return true
	}
	return false
}

// cell returns row[j], or nil when the row is short.
func cell(row []Value, j int) Value {
	if j < len(row) {
		return row[j]
	}
	return nil
}
