// Package value holds Shoal's typed values: the nine kinds an execution can
// produce, their typed-JSON wire form, the side-effect-free path selector and
// slices.
//
// A [Value] is an immutable tree. Values are shared freely between the
// transcript, the renderer and providers, so no function in this package
// mutates a value it was given.
package value

import "sync/atomic"

// Kind names one of the nine value kinds. Its String form is the `$` tag of
// the wire form.
type Kind uint8

const (
	KindNull Kind = iota
	KindBool
	KindInt
	KindFloat
	KindStr
	KindBytes
	KindList
	KindRecord
	KindTable
)

var kindNames = [...]string{"null", "bool", "int", "float", "str", "bytes", "list", "record", "table"}

// Article returns the kind with its indefinite article ("an int", "a
// list"), for messages.
func (k Kind) Article() string {
	if k == KindInt {
		return "an int"
	}
	return "a " + k.String()
}

func (k Kind) String() string {
	if int(k) < len(kindNames) {
		return kindNames[k]
	}
	return "invalid"
}

// Value is one typed value. The concrete types are [Null], [Bool], [Int],
// [Float], [Str], [Bytes], [List], [*Record] and [*Table]; no other type
// implements it.
type Value interface {
	Kind() Kind
	isValue()
}

// Null is the null value.
type Null struct{}

// Bool is a boolean.
type Bool bool

// Int is a signed 64-bit integer.
type Int int64

// Float is a 64-bit float. NaN and infinities have no JSON form and are
// encoded as strings "NaN", "+Inf", "-Inf" in the v member.
type Float float64

// Str is a UTF-8 string (invalid bytes are kept as they are; slicing counts
// Unicode scalar values, an invalid byte counting as one).
type Str string

// Bytes is an octet string.
type Bytes []byte

// List is an ordered sequence of values.
type List []Value

// Field is one named member of a [Record].
type Field struct {
	Name  string
	Value Value
}

// Record is an ordered set of named fields. Field names are unique; lookups
// are linear for small records and indexed for large ones.
type Record struct {
	Fields []Field
	index  atomic.Pointer[map[string]int] // built lazily by Get for records with many fields
}

// Table is a list of rows sharing one set of columns. Each row has exactly
// len(Cols) cells.
type Table struct {
	Cols []string
	Rows [][]Value
}

func (Null) Kind() Kind    { return KindNull }
func (Bool) Kind() Kind    { return KindBool }
func (Int) Kind() Kind     { return KindInt }
func (Float) Kind() Kind   { return KindFloat }
func (Str) Kind() Kind     { return KindStr }
func (Bytes) Kind() Kind   { return KindBytes }
func (List) Kind() Kind    { return KindList }
func (*Record) Kind() Kind { return KindRecord }
func (*Table) Kind() Kind  { return KindTable }

func (Null) isValue()    {}
func (Bool) isValue()    {}
func (Int) isValue()     {}
func (Float) isValue()   {}
func (Str) isValue()     {}
func (Bytes) isValue()   {}
func (List) isValue()    {}
func (*Record) isValue() {}
func (*Table) isValue()  {}

// NewRecord builds a record from alternating name, value pairs; it is a
// convenience for code and tests. A later duplicate name replaces the earlier
// field's value in place.
func NewRecord(fields ...Field) *Record {
	r := &Record{Fields: make([]Field, 0, len(fields))}
	for _, f := range fields {
		r.Set(f.Name, f.Value)
	}
	return r
}

// F is shorthand for a [Field].
func F(name string, v Value) Field { return Field{Name: name, Value: v} }

const recordIndexThreshold = 16

// Get returns the field's value and whether the record has it.
func (r *Record) Get(name string) (Value, bool) {
	if len(r.Fields) < recordIndexThreshold {
		for i := range r.Fields {
			if r.Fields[i].Name == name {
				return r.Fields[i].Value, true
			}
		}
		return nil, false
	}
	idx := r.index.Load()
	if idx == nil {
		// Records are immutable once shared; the index is derived data and
		// two readers building it at once build the same map.
		m := make(map[string]int, len(r.Fields))
		for i, f := range r.Fields {
			m[f.Name] = i
		}
		r.index.Store(&m)
		idx = &m
	}
	i, ok := (*idx)[name]
	if !ok {
		return nil, false
	}
	return r.Fields[i].Value, true
}

// Set adds or replaces a field while the record is being built. Do not call
// it on a record that other code already holds.
func (r *Record) Set(name string, v Value) {
	for i := range r.Fields {
		if r.Fields[i].Name == name {
			r.Fields[i].Value = v
			return
		}
	}
	r.Fields = append(r.Fields, Field{Name: name, Value: v})
	r.index.Store(nil)
}

// Names returns the field names in order.
func (r *Record) Names() []string {
	out := make([]string, len(r.Fields))
	for i, f := range r.Fields {
		out[i] = f.Name
	}
	return out
}

// Col returns the index of a column, or -1.
func (t *Table) Col(name string) int {
	for i, c := range t.Cols {
		if c == name {
			return i
		}
	}
	return -1
}

// Row returns row i as a record (fields in column order).
func (t *Table) Row(i int) *Record {
	row := t.Rows[i]
	fs := make([]Field, len(t.Cols))
	for j, c := range t.Cols {
		var v Value = Null{}
		if j < len(row) && row[j] != nil {
			v = row[j]
		}
		fs[j] = Field{Name: c, Value: v}
	}
	return &Record{Fields: fs}
}
