package sdk

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"math"
	"reflect"
	"slices"
	"strconv"
)

// Value is a typed Shoal value, held in its wire form (typed JSON with a
// "$" tag). A provider returns a Value from Read when its content should
// behave like any other Shoal value: the kernel then applies path, slice,
// format and elision with typed semantics (a table slices by row, a str by
// Unicode scalar value, bytes by octet).
//
// Build values with [Null], [Bool], [Int], [Float], [Str], [Bytes], [List],
// [Record], [Table] or convert plain Go data with [ValueOf]. The zero Value
// is null. Values are immutable and may be shared.
type Value struct {
	wire []byte
}

var nullWire = []byte(`{"$":"null"}`)

// MarshalJSON returns the typed wire form.
func (v Value) MarshalJSON() ([]byte, error) {
	if v.wire == nil {
		return nullWire, nil
	}
	return v.wire, nil
}

// appendTo appends the wire form to b.
func (v Value) appendTo(b []byte) []byte {
	if v.wire == nil {
		return append(b, nullWire...)
	}
	return append(b, v.wire...)
}

// Null is the null value.
func Null() Value { return Value{wire: nullWire} }

// Bool is a boolean value.
func Bool(x bool) Value {
	if x {
		return Value{wire: []byte(`{"$":"bool","v":true}`)}
	}
	return Value{wire: []byte(`{"$":"bool","v":false}`)}
}

// Int is a 64-bit signed integer value.
func Int(x int64) Value {
	b := append(make([]byte, 0, 32), `{"$":"int","v":`...)
	b = strconv.AppendInt(b, x, 10)
	return Value{wire: append(b, '}')}
}

// Float is a 64-bit float value. NaN and the infinities, which JSON cannot
// carry as numbers, travel as the strings "NaN", "+Inf" and "-Inf".
func Float(x float64) Value {
	b := append(make([]byte, 0, 40), `{"$":"float","v":`...)
	switch {
	case math.IsNaN(x):
		b = append(b, `"NaN"`...)
	case math.IsInf(x, 1):
		b = append(b, `"+Inf"`...)
	case math.IsInf(x, -1):
		b = append(b, `"-Inf"`...)
	default:
		b = strconv.AppendFloat(b, x, 'g', -1, 64)
	}
	return Value{wire: append(b, '}')}
}

// Str is a string value.
func Str(s string) Value {
	b := append(make([]byte, 0, len(s)+24), `{"$":"str","v":`...)
	b = appendJSONString(b, s)
	return Value{wire: append(b, '}')}
}

// Bytes is an octet-string value (base64 on the wire).
func Bytes(x []byte) Value {
	b := append(make([]byte, 0, base64.StdEncoding.EncodedLen(len(x))+24), `{"$":"bytes","b64":"`...)
	b = base64.StdEncoding.AppendEncode(b, x)
	return Value{wire: append(b, `"}`...)}
}

// List is an ordered list of values.
func List(items ...Value) Value {
	n := 24
	for _, it := range items {
		n += len(it.wire) + 1
	}
	b := append(make([]byte, 0, n), `{"$":"list","v":[`...)
	for i, it := range items {
		if i > 0 {
			b = append(b, ',')
		}
		b = it.appendTo(b)
	}
	return Value{wire: append(b, "]}"...)}
}

// Field is one named member of a record.
type Field struct {
	Name  string
	Value Value
}

// F is shorthand for a [Field].
func F(name string, v Value) Field { return Field{Name: name, Value: v} }

// Record is a record whose fields keep the order given. A name given twice
// keeps its first position and its last value.
func Record(fields ...Field) Value {
	fields = dedupeFields(fields)
	n := 28
	for _, f := range fields {
		n += len(f.Name) + len(f.Value.wire) + 4
	}
	b := append(make([]byte, 0, n), `{"$":"record","v":{`...)
	for i, f := range fields {
		if i > 0 {
			b = append(b, ',')
		}
		b = appendJSONString(b, f.Name)
		b = append(b, ':')
		b = f.Value.appendTo(b)
	}
	return Value{wire: append(b, "}}"...)}
}

func dedupeFields(fields []Field) []Field {
	seen := make(map[string]int, len(fields))
	dup := false
	for i, f := range fields {
		if _, ok := seen[f.Name]; ok {
			dup = true
			break
		}
		seen[f.Name] = i
	}
	if !dup {
		return fields
	}
	out := make([]Field, 0, len(fields))
	at := make(map[string]int, len(fields))
	for _, f := range fields {
		if i, ok := at[f.Name]; ok {
			out[i].Value = f.Value
			continue
		}
		at[f.Name] = len(out)
		out = append(out, f)
	}
	return out
}

// Table is a table: named columns and rows of cells. Every row must have
// exactly one cell per column; a row of another length panics, which the
// SDK reports to the kernel as a plugin failure naming the row.
func Table(cols []string, rows ...[]Value) Value {
	n := 32
	for _, c := range cols {
		n += len(c) + 3
	}
	for _, r := range rows {
		for _, c := range r {
			n += len(c.wire) + 1
		}
		n += 2
	}
	b := append(make([]byte, 0, n), `{"$":"table","cols":[`...)
	for i, c := range cols {
		if i > 0 {
			b = append(b, ',')
		}
		b = appendJSONString(b, c)
	}
	b = append(b, `],"rows":[`...)
	for i, r := range rows {
		if len(r) != len(cols) {
			panic(fmt.Sprintf("sdk.Table: row %d has %d cells, want %d (one per column)", i, len(r), len(cols)))
		}
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, '[')
		for j, c := range r {
			if j > 0 {
				b = append(b, ',')
			}
			b = c.appendTo(b)
		}
		b = append(b, ']')
	}
	return Value{wire: append(b, "]}"...)}
}

// ValueOf converts plain Go data to a typed value: nil, bool, signed and
// unsigned integers (an unsigned one past int64 is an error), floats,
// string, []byte, json.Number, slices and arrays (lists), maps with string
// keys (records, fields sorted by name since Go maps have no order) and
// Values themselves. Structs are not converted: build a [Record] to keep
// field order explicit.
func ValueOf(x any) (Value, error) {
	switch t := x.(type) {
	case nil:
		return Null(), nil
	case Value:
		return t, nil
	case bool:
		return Bool(t), nil
	case string:
		return Str(t), nil
	case []byte:
		return Bytes(t), nil
	case json.Number:
		if i, err := t.Int64(); err == nil {
			return Int(i), nil
		}
		f, err := t.Float64()
		if err != nil {
			return Value{}, fmt.Errorf("sdk.ValueOf: number %q: %w", t, err)
		}
		return Float(f), nil
	}
	rv := reflect.ValueOf(x)
	switch rv.Kind() {
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		return Int(rv.Int()), nil
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr:
		u := rv.Uint()
		if u > math.MaxInt64 {
			return Value{}, fmt.Errorf("sdk.ValueOf: %d does not fit a 64-bit signed int", u)
		}
		return Int(int64(u)), nil
	case reflect.Float32, reflect.Float64:
		return Float(rv.Float()), nil
	case reflect.String:
		return Str(rv.String()), nil
	case reflect.Pointer, reflect.Interface:
		if rv.IsNil() {
			return Null(), nil
		}
		return ValueOf(rv.Elem().Interface())
	case reflect.Slice, reflect.Array:
		if rv.Kind() == reflect.Slice && rv.IsNil() {
			return List(), nil
		}
		items := make([]Value, rv.Len())
		for i := range items {
			v, err := ValueOf(rv.Index(i).Interface())
			if err != nil {
				return Value{}, err
			}
			items[i] = v
		}
		return List(items...), nil
	case reflect.Map:
		if rv.Type().Key().Kind() != reflect.String {
			return Value{}, fmt.Errorf("sdk.ValueOf: map key type %s is not a string", rv.Type().Key())
		}
		keys := make([]string, 0, rv.Len())
		for _, k := range rv.MapKeys() {
			keys = append(keys, k.String())
		}
		slices.Sort(keys)
		fields := make([]Field, len(keys))
		for i, k := range keys {
			v, err := ValueOf(rv.MapIndex(reflect.ValueOf(k).Convert(rv.Type().Key())).Interface())
			if err != nil {
				return Value{}, fmt.Errorf("field %q: %w", k, err)
			}
			fields[i] = Field{Name: k, Value: v}
		}
		return Record(fields...), nil
	}
	return Value{}, fmt.Errorf("sdk.ValueOf: cannot convert %T to a typed value (build a sdk.Record for structs)", x)
}

// appendJSONString appends s as a JSON string. Printable ASCII without
// quotes or backslashes, the common case, is copied as it is; anything
// else goes through encoding/json's escaping (whose HTML escaping is
// harmless here), which is slow on large strings in a wasm guest.
func appendJSONString(b []byte, s string) []byte {
	plain := true
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c >= 0x7f || c == '"' || c == '\\' {
			plain = false
			break
		}
	}
	if plain {
		b = append(b, '"')
		b = append(b, s...)
		return append(b, '"')
	}
	q, _ := json.Marshal(s) // a string always marshals
	return append(b, q...)
}
