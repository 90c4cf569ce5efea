package shell

import (
	"bytes"
	"encoding/csv"
	"fmt"
	"slices"

	"github.com/shoal-sh/shoal/core/value"
)

// builtinTo writes the typed value on its standard input as text in a
// format, the inverse of from:
//
//	ls | to csv > files.csv
//	open data.json | to tsv
//	from csv < a.csv | jq 'map(select(.n > 1))' | to csv
//
// json writes each input document as one line of plain JSON; lines writes
// a list one item a line (a string as it is, anything else as plain
// JSON), a table or a list of records one row a line as JSON; csv and tsv
// write a table (or a list of records, or one record, or a list of
// scalars as a column named value) with a header row, cells as text
// (null empty, a string as it is, anything else as plain JSON). The text
// goes to standard output wherever it is; ending an execution, it is
// also the value (a str).
func builtinTo(c *call) error {
	if len(c.args) != 2 {
		return c.failf(2, "usage: to json|csv|tsv|lines (writes the value on standard input as text, e.g. ls | to csv)")
	}
	format := c.args[1]
	if !slices.Contains([]string{"json", "csv", "tsv", "lines"}, format) {
		return c.failf(2, "unknown format %q; use json, csv, tsv or lines", format)
	}
	vs, ok, err := c.stdinValues()
	if err := c.inputError(ok, err); err != nil {
		return err
	}
	var text []byte
	switch format {
	case "json":
		for _, v := range vs {
			text = append(appendPlain(text, v), '\n')
		}
	case "lines":
		for _, v := range vs {
			text = appendLines(text, v)
		}
	default:
		comma := ','
		if format == "tsv" {
			comma = '\t'
		}
		in := listOf(vs)
		if len(vs) == 1 {
			in = vs[0]
		}
		if text, err = delimited(in, comma); err != nil {
			return c.failf(1, "%v", err)
		}
	}
	// Its output is text wherever it goes, as a program's would be; ending
	// an execution, that text is also its value.
	return c.deliverText(value.Str(text), text, false)
}

// appendLines appends v one item (or row) a line.
func appendLines(b []byte, v value.Value) []byte {
	switch x := v.(type) {
	case value.Str:
		b = append(b, x...)
		if len(x) > 0 && x[len(x)-1] != '\n' {
			b = append(b, '\n')
		}
		return b
	case value.List:
		for _, it := range x {
			b = appendLine(b, it)
		}
		return b
	case *value.Table:
		for i := range x.Rows {
			b = appendLine(b, x.Row(i))
		}
		return b
	}
	return appendLine(b, v)
}

// appendLine appends one line: a string as it is, anything else as plain
// JSON.
func appendLine(b []byte, v value.Value) []byte {
	if s, ok := v.(value.Str); ok {
		return append(append(b, s...), '\n')
	}
	return append(appendPlain(b, v), '\n')
}

// delimited writes v as CSV (or TSV) with a header row.
func delimited(v value.Value, comma rune) ([]byte, error) {
	cols, rows, err := tableOf(v)
	if err != nil {
		return nil, err
	}
	if len(cols) == 0 {
		return nil, nil
	}
	var buf bytes.Buffer
	w := csv.NewWriter(&buf)
	w.Comma = comma
	_ = w.Write(cols)
	cells := make([]string, len(cols))
	for _, row := range rows {
		for i := range cells {
			cells[i] = ""
			if i < len(row) {
				cells[i] = cellText(row[i])
			}
		}
		_ = w.Write(cells)
	}
	w.Flush()
	return buf.Bytes(), w.Error()
}

// tableOf is the columns and rows v is written as: a table as it is,
// records with their fields as columns (in the order first seen), a list
// of other values as one column named value.
func tableOf(v value.Value) ([]string, [][]value.Value, error) {
	switch x := v.(type) {
	case *value.Table:
		return x.Cols, x.Rows, nil
	case *value.Record:
		return tableOf(value.List{x})
	case value.List:
		if len(x) == 0 {
			return nil, nil, nil // nothing to write, not even a header
		}
		var cols []string
		index := map[string]int{}
		records := 0
		for _, it := range x {
			r, ok := it.(*value.Record)
			if !ok {
				continue
			}
			records++
			for _, f := range r.Fields {
				if _, seen := index[f.Name]; !seen {
					index[f.Name] = len(cols)
					cols = append(cols, f.Name)
				}
			}
		}
		if records == 0 {
			rows := make([][]value.Value, len(x))
			for i, it := range x {
				rows[i] = []value.Value{it}
			}
			return []string{"value"}, rows, nil
		}
		if records != len(x) {
			return nil, nil, fmt.Errorf("the list mixes records and other values; a table needs one or the other")
		}
		rows := make([][]value.Value, len(x))
		for i, it := range x {
			row := make([]value.Value, len(cols))
			for _, f := range it.(*value.Record).Fields {
				row[index[f.Name]] = f.Value
			}
			rows[i] = row
		}
		return cols, rows, nil
	}
	return nil, nil, fmt.Errorf("%s is not a table; csv and tsv write a table, a list or a record (to json or to lines write anything)", v.Kind().Article())
}

// cellText is a cell as CSV text: null (or missing) empty, a string as it
// is, anything else as plain JSON.
func cellText(v value.Value) string {
	switch x := v.(type) {
	case nil, value.Null:
		return ""
	case value.Str:
		return string(x)
	}
	return string(appendPlain(nil, v))
}
