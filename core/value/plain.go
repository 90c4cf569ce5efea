package value

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"math/big"
	"reflect"
	"slices"
	"strconv"
	"strings"
)

// FromPlainJSON converts ordinary (untyped) JSON to a value:
//
//   - objects become records with fields in document order (a repeated key
//     keeps its first position and its last value, as most JSON readers do);
//   - a number written without fraction or exponent that fits in 64 bits
//     becomes an int; every other number a float (so 2.0 stays a float and
//     2 is an int);
//   - a non-empty array whose elements are all objects with the same keys
//     in the same order (at least one key) becomes a table with those
//     columns; every other array a list.
//
// Malformed JSON is an *rpc.Error with code INVALID_PARAMS naming where.
func FromPlainJSON(data []byte) (Value, error) {
	d := newDecoder(data)
	v, err := d.plain(nil, 0)
	if err != nil {
		return nil, err
	}
	if _, err := d.dec.Token(); err != io.EOF {
		return nil, d.errorf(nil, "unexpected data after the value")
	}
	return v, nil
}

func (d *decoder) plain(at *loc, depth int) (Value, error) {
	if depth > MaxDepth {
		return nil, d.errorf(at, "JSON nested deeper than %d levels", MaxDepth)
	}
	t, err := d.token(at)
	if err != nil {
		return nil, err
	}
	switch x := t.(type) {
	case nil:
		return Null{}, nil
	case bool:
		return Bool(x), nil
	case string:
		return Str(x), nil
	case json.Number:
		return numberValue(string(x)), nil
	case json.Delim:
		switch x {
		case '{':
			r := &Record{Fields: []Field{}}
			var pos map[string]int // for repeated keys; built only on demand
			for d.dec.More() {
				kt, err := d.token(at)
				if err != nil {
					return nil, err
				}
				name := kt.(string) // object keys are always strings
				fv, err := d.plain(&loc{parent: at, name: name, field: true}, depth+1)
				if err != nil {
					return nil, err
				}
				if len(r.Fields) < recordIndexThreshold {
					if i := slices.IndexFunc(r.Fields, func(f Field) bool { return f.Name == name }); i >= 0 {
						r.Fields[i].Value = fv
						continue
					}
				} else {
					if pos == nil {
						pos = make(map[string]int, 2*len(r.Fields))
						for i, f := range r.Fields {
							pos[f.Name] = i
						}
					}
					if i, ok := pos[name]; ok {
						r.Fields[i].Value = fv
						continue
					}
					pos[name] = len(r.Fields)
				}
				r.Fields = append(r.Fields, Field{Name: name, Value: fv})
			}
			if _, err := d.token(at); err != nil {
				return nil, err
			}
			return r, nil
		case '[':
			items := List{}
			for d.dec.More() {
				it, err := d.plain(&loc{parent: at, index: len(items)}, depth+1)
				if err != nil {
					return nil, err
				}
				items = append(items, it)
			}
			if _, err := d.token(at); err != nil {
				return nil, err
			}
			return tableOrList(items), nil
		}
	}
	return nil, d.errorf(at, "unexpected %s", describeToken(t))
}

// numberValue reads a JSON number literal: an int when it is written as an
// integer and fits, else a float.
func numberValue(s string) Value {
	if !strings.ContainsAny(s, ".eE") {
		if i, err := strconv.ParseInt(s, 10, 64); err == nil {
			return Int(i)
		}
	}
	f, _ := strconv.ParseFloat(s, 64) // out of range gives ±Inf, which is the honest answer
	return Float(f)
}

// tableOrList makes a table of records sharing the same field names in the
// same order, and leaves anything else a list.
func tableOrList(items List) Value {
	if len(items) == 0 {
		return items
	}
	first, ok := items[0].(*Record)
	if !ok || len(first.Fields) == 0 {
		return items
	}
	for _, it := range items[1:] {
		r, ok := it.(*Record)
		if !ok || len(r.Fields) != len(first.Fields) {
			return items
		}
		for j := range r.Fields {
			if r.Fields[j].Name != first.Fields[j].Name {
				return items
			}
		}
	}
	t := &Table{Cols: first.Names(), Rows: make([][]Value, len(items))}
	for i, it := range items {
		r := it.(*Record)
		row := make([]Value, len(r.Fields))
		for j, f := range r.Fields {
			row[j] = f.Value
		}
		t.Rows[i] = row
	}
	return t
}

// FromAny converts a Go value to a value. It knows the shapes JSON decoders
// and gojq produce (nil, bool, all int and float types, *big.Int, string,
// []byte, []any, map[string]any, json.Number, json.RawMessage) and Values
// themselves; map keys are sorted, and a list of maps with the same keys
// becomes a table as in [FromPlainJSON]. Anything else (structs, typed
// slices and maps) goes through encoding/json, so struct fields keep their
// declared order and json tags; a value encoding/json refuses becomes its
// fmt %v text.
func FromAny(x any) Value {
	switch x := x.(type) {
	case nil:
		return Null{}
	case Value:
		return x
	case bool:
		return Bool(x)
	case int:
		return Int(x)
	case int8:
		return Int(x)
	case int16:
		return Int(x)
	case int32:
		return Int(x)
	case int64:
		return Int(x)
	case uint:
		return uintValue(uint64(x))
	case uint8:
		return Int(x)
	case uint16:
		return Int(x)
	case uint32:
		return Int(x)
	case uint64:
		return uintValue(x)
	case float32:
		return Float(x)
	case float64:
		return Float(x)
	case *big.Int:
		if x == nil {
			return Null{}
		}
		if x.IsInt64() {
			return Int(x.Int64())
		}
		f, _ := new(big.Float).SetInt(x).Float64()
		return Float(f)
	case string:
		return Str(x)
	case []byte:
		return Bytes(x)
	case json.Number:
		return numberValue(string(x))
	case json.RawMessage:
		if v, err := FromPlainJSON(x); err == nil {
			return v
		}
		return Str(x)
	case []any:
		items := make(List, len(x))
		for i, it := range x {
			items[i] = FromAny(it)
		}
		return tableOrList(items)
	case map[string]any:
		names := make([]string, 0, len(x))
		for k := range x {
			names = append(names, k)
		}
		slices.Sort(names)
		r := &Record{Fields: make([]Field, len(names))}
		for i, k := range names {
			r.Fields[i] = Field{Name: k, Value: FromAny(x[k])}
		}
		return r
	case error:
		return Str(x.Error())
	}
	rv := reflect.ValueOf(x)
	if (rv.Kind() == reflect.Pointer || rv.Kind() == reflect.Interface) && rv.IsNil() {
		return Null{}
	}
	data, err := json.Marshal(x)
	if err != nil {
		return Str(fmt.Sprint(x))
	}
	v, err := FromPlainJSON(data)
	if err != nil {
		return Str(data)
	}
	return v
}

func uintValue(u uint64) Value {
	if u <= math.MaxInt64 {
		return Int(u)
	}
	return Float(u)
}

// ToPlain converts v to the Go shapes encoding/json and gojq use: nil,
// bool, int, float64, string, []any and map[string]any. Records become
// maps (field order is lost), tables lists of maps, bytes standard base64
// strings. A nil Value or nil cell becomes nil.
func ToPlain(v Value) any {
	switch x := v.(type) {
	case nil, Null:
		return nil
	case Bool:
		return bool(x)
	case Int:
		return int(x)
	case Float:
		return float64(x)
	case Str:
		return string(x)
	case Bytes:
		return base64.StdEncoding.EncodeToString(x)
	case List:
		out := make([]any, len(x))
		for i, it := range x {
			out[i] = ToPlain(it)
		}
		return out
	case *Record:
		m := make(map[string]any, len(x.Fields))
		for _, f := range x.Fields {
			m[f.Name] = ToPlain(f.Value)
		}
		return m
	case *Table:
		out := make([]any, len(x.Rows))
		for i, row := range x.Rows {
			m := make(map[string]any, len(x.Cols))
			for j, c := range x.Cols {
				var cell Value
				if j < len(row) {
					cell = row[j]
				}
				m[c] = ToPlain(cell)
			}
			out[i] = m
		}
		return out
	}
	return nil
}
