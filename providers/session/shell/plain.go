package shell

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"

	"github.com/shoal-sh/shoal/core/value"
)

// appendPlain appends v as plain JSON, the form builtins write into pipes:
// records and table rows keep their field order (value.ToPlain would sort
// them), a table is an array of row objects, bytes are a base64 string.
func appendPlain(dst []byte, v value.Value) []byte {
	switch x := v.(type) {
	case nil, value.Null:
		return append(dst, "null"...)
	case value.Bool:
		return strconv.AppendBool(dst, bool(x))
	case value.Int:
		return strconv.AppendInt(dst, int64(x), 10)
	case value.Float:
		return value.AppendFloat(dst, float64(x))
	case value.Str:
		return value.AppendQuoted(dst, string(x))
	case value.Bytes:
		dst = append(dst, '"')
		dst = base64.StdEncoding.AppendEncode(dst, x)
		return append(dst, '"')
	case value.List:
		dst = append(dst, '[')
		for i, it := range x {
			if i > 0 {
				dst = append(dst, ',')
			}
			dst = appendPlain(dst, it)
		}
		return append(dst, ']')
	case *value.Record:
		dst = append(dst, '{')
		for i, f := range x.Fields {
			if i > 0 {
				dst = append(dst, ',')
			}
			dst = value.AppendQuoted(dst, f.Name)
			dst = append(dst, ':')
			dst = appendPlain(dst, f.Value)
		}
		return append(dst, '}')
	case *value.Table:
		dst = append(dst, '[')
		for i, row := range x.Rows {
			if i > 0 {
				dst = append(dst, ',')
			}
			dst = append(dst, '{')
			for j, c := range x.Cols {
				if j > 0 {
					dst = append(dst, ',')
				}
				dst = value.AppendQuoted(dst, c)
				dst = append(dst, ':')
				var cell value.Value
				if j < len(row) {
					cell = row[j]
				}
				dst = appendPlain(dst, cell)
			}
			dst = append(dst, '}')
		}
		return append(dst, ']')
	}
	panic(fmt.Sprintf("shell: unknown value type %T", v))
}

// valueText is what a Shoal-only builtin writes for its value: a str or
// bytes as they are, anything else as one line of plain JSON.
func valueText(v value.Value) []byte {
	switch x := v.(type) {
	case value.Str:
		return []byte(x)
	case value.Bytes:
		return []byte(x)
	}
	return plainLine(v)
}

// plainLine is v as one line of plain JSON.
func plainLine(v value.Value) []byte {
	return append(appendPlain(nil, v), '\n')
}

// jsonDocuments splits a stream of JSON texts (one document, NDJSON, or
// documents simply concatenated) into its documents.
func jsonDocuments(data []byte) ([]json.RawMessage, error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	var docs []json.RawMessage
	for {
		var raw json.RawMessage
		err := dec.Decode(&raw)
		if errors.Is(err, io.EOF) {
			return docs, nil
		}
		if err != nil {
			return nil, fmt.Errorf("document %d: %w", len(docs)+1, err)
		}
		docs = append(docs, raw)
	}
}

// valuesOf converts JSON documents to values keeping field order.
func valuesOf(docs []json.RawMessage) ([]value.Value, error) {
	out := make([]value.Value, len(docs))
	for i, d := range docs {
		v, err := value.FromPlainJSON(d)
		if err != nil {
			return nil, err
		}
		out[i] = v
	}
	return out, nil
}

// listOf combines several values into one: a table when they are all
// records with the same fields in the same order (the rule
// value.FromPlainJSON applies to arrays), else a list.
func listOf(vs []value.Value) value.Value {
	if len(vs) == 0 {
		return value.List{}
	}
	first, ok := vs[0].(*value.Record)
	if !ok || len(first.Fields) == 0 {
		return value.List(vs)
	}
	cols := first.Names()
	rows := make([][]value.Value, len(vs))
	for i, v := range vs {
		r, ok := v.(*value.Record)
		if !ok || len(r.Fields) != len(cols) {
			return value.List(vs)
		}
		row := make([]value.Value, len(cols))
		for j, f := range r.Fields {
			if f.Name != cols[j] {
				return value.List(vs)
			}
			row[j] = f.Value
		}
		rows[i] = row
	}
	return &value.Table{Cols: cols, Rows: rows}
}
