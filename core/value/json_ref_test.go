package value

import (
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"strconv"
	"unicode/utf8"
)

// refMarshal, refAppendJSON and refAppendQuoted are the encoder as it was
// before Marshal sized its output up front and AppendQuoted skipped plain
// text eight bytes at a time: the reference for byte-identical output and
// the benchmark baseline.
func refMarshal(v Value) ([]byte, error) {
	if err := checkNil(v, 0); err != nil {
		return nil, err
	}
	return refAppendJSON(nil, v), nil
}

func refAppendJSON(dst []byte, v Value) []byte {
	switch x := v.(type) {
	case nil, Null:
		return append(dst, `{"$":"null"}`...)
	case Bool:
		if x {
			return append(dst, `{"$":"bool","v":true}`...)
		}
		return append(dst, `{"$":"bool","v":false}`...)
	case Int:
		dst = append(dst, `{"$":"int","v":`...)
		dst = strconv.AppendInt(dst, int64(x), 10)
		return append(dst, '}')
	case Float:
		dst = append(dst, `{"$":"float","v":`...)
		dst = AppendFloat(dst, float64(x))
		return append(dst, '}')
	case Str:
		if !utf8.ValidString(string(x)) {
			dst = append(dst, `{"$":"str","b64":"`...)
			dst = base64.StdEncoding.AppendEncode(dst, []byte(x))
			return append(dst, `"}`...)
		}
		dst = append(dst, `{"$":"str","v":`...)
		dst = refAppendQuoted(dst, string(x))
		return append(dst, '}')
	case Bytes:
		dst = append(dst, `{"$":"bytes","b64":"`...)
		dst = base64.StdEncoding.AppendEncode(dst, x)
		return append(dst, `"}`...)
	case List:
		dst = append(dst, `{"$":"list","v":[`...)
		for i, it := range x {
			if i > 0 {
				dst = append(dst, ',')
			}
			dst = refAppendJSON(dst, it)
		}
		return append(dst, "]}"...)
	case *Record:
		dst = append(dst, `{"$":"record","v":{`...)
		for i, f := range x.Fields {
			if i > 0 {
				dst = append(dst, ',')
			}
			dst = refAppendQuoted(dst, f.Name)
			dst = append(dst, ':')
			dst = refAppendJSON(dst, f.Value)
		}
		return append(dst, "}}"...)
	case *Table:
		dst = append(dst, `{"$":"table","cols":[`...)
		for i, c := range x.Cols {
			if i > 0 {
				dst = append(dst, ',')
			}
			dst = refAppendQuoted(dst, c)
		}
		dst = append(dst, `],"rows":[`...)
		for i, row := range x.Rows {
			if i > 0 {
				dst = append(dst, ',')
			}
			dst = append(dst, '[')
			for j := range x.Cols {
				if j > 0 {
					dst = append(dst, ',')
				}
				var c Value
				if j < len(row) {
					c = row[j]
				}
				dst = refAppendJSON(dst, c)
			}
			dst = append(dst, ']')
		}
		return append(dst, "]}"...)
	}
	panic(fmt.Sprintf("value: unknown Value type %T", v))
}

func refAppendQuoted(dst []byte, s string) []byte {
	dst = append(dst, '"')
	start := 0
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			if c >= 0x20 && c != '"' && c != '\\' {
				i++
				continue
			}
			dst = append(dst, s[start:i]...)
			switch c {
			case '"', '\\':
				dst = append(dst, '\\', c)
			case '\n':
				dst = append(dst, '\\', 'n')
			case '\r':
				dst = append(dst, '\\', 'r')
			case '\t':
				dst = append(dst, '\\', 't')
			default:
				dst = append(dst, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xf])
			}
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 {
			dst = append(dst, s[start:i]...)
			dst = append(dst, `\ufffd`...)
			i++
			start = i
			continue
		}
		// U+2028 and U+2029 are valid JSON but end lines in JavaScript
		// source; escaping them keeps the text safe to embed anywhere.
		if r == '\u2028' || r == '\u2029' {
			dst = append(dst, s[start:i]...)
			dst = append(dst, '\\', 'u', '2', '0', '2', hexDigits[r&0xf])
			i += size
			start = i
			continue
		}
		i += size
	}
	dst = append(dst, s[start:]...)
	return append(dst, '"')
}

// refUnmarshal is the encoding/json token-stream decoder Unmarshal was
// before the scanner in json.go, kept as the reference the differential
// fuzz test and the benchmarks compare against. It is strict:
// unknown `$` tags, unknown or missing members, ints that do not fit in 64
// bits, rows whose width differs from the columns, duplicate record fields
// and trailing data are all refused with an *rpc.Error (INVALID_PARAMS)
// whose message names the problem and where it is (a path into the value
// and a byte offset). Members of a typed object may come in any order.
func refUnmarshal(data []byte) (Value, error) {
	d := newDecoder(data)
	v, err := d.refValue(nil, 0)
	if err != nil {
		return nil, err
	}
	if _, err := d.dec.Token(); err != io.EOF {
		return nil, d.errorf(nil, "unexpected data after the value")
	}
	return v, nil
}

// value decodes one typed object.
func (d *decoder) refValue(at *loc, depth int) (Value, error) {
	if depth > MaxDepth {
		return nil, d.errorf(at, "value nested deeper than %d levels", MaxDepth)
	}
	if err := d.expectDelim(at, '{', `a typed value {"$":…}`); err != nil {
		return nil, err
	}
	var (
		kind    Kind
		haveTag bool
		seen    uint8 // bits of memberBit, to refuse duplicates
		// Members met before the tag cannot be decoded yet; they wait here.
		pending []refPending
		out     Value
		tbl     *refTableParts
	)
	for d.dec.More() {
		t, err := d.token(at)
		if err != nil {
			return nil, err
		}
		name, _ := t.(string) // object keys are always strings
		if bit := memberBit(name); bit != 0 {
			if seen&bit != 0 {
				return nil, d.errorf(at, "duplicate member %q", name)
			}
			seen |= bit
		}
		if name == "$" {
			t, err := d.token(at)
			if err != nil {
				return nil, err
			}
			tag, ok := t.(string)
			if !ok {
				return nil, d.errorf(at, `"$" must be a kind name string, found %s`, describeToken(t))
			}
			kind, ok = kindByName(tag)
			if !ok {
				return nil, d.errorf(at, `unknown kind %q; kinds are null, bool, int, float, str, bytes, list, record, table`, tag)
			}
			haveTag = true
			for _, pm := range pending {
				sub := newDecoder(pm.raw)
				if err := sub.refMember(kind, pm.name, at, depth, &out, &tbl); err != nil {
					return nil, err
				}
			}
			pending = nil
			continue
		}
		if !haveTag {
			var raw json.RawMessage
			if err := d.dec.Decode(&raw); err != nil {
				return nil, d.wrap(at, err)
			}
			pending = append(pending, refPending{name, raw})
			continue
		}
		if err := d.refMember(kind, name, at, depth, &out, &tbl); err != nil {
			return nil, err
		}
	}
	if _, err := d.token(at); err != nil { // the closing '}'
		return nil, err
	}
	if !haveTag {
		return nil, d.errorf(at, `missing "$" kind tag`)
	}
	return refFinish(d, at, kind, out, tbl)
}

type refPending struct {
	name string
	raw  json.RawMessage
}

type refTableParts struct {
	cols     []string
	rows     [][]Value
	haveCols bool
	haveRows bool
}

// member decodes one non-tag member of a typed object of the given kind.
func (d *decoder) refMember(kind Kind, name string, at *loc, depth int, out *Value, tbl **refTableParts) error {
	bad := func() error {
		return d.errorf(at, "unknown member %q in %s value; %s has %s", name, kind.Article(), kind.Article(), kindMembers[kind])
	}
	switch kind {
	case KindNull:
		return bad()
	case KindBool:
		if name != "v" {
			return bad()
		}
		t, err := d.token(at)
		if err != nil {
			return err
		}
		b, ok := t.(bool)
		if !ok {
			return d.errorf(at, "bool v must be true or false, found %s", describeToken(t))
		}
		*out = Bool(b)
	case KindInt:
		if name != "v" {
			return bad()
		}
		t, err := d.token(at)
		if err != nil {
			return err
		}
		n, ok := t.(json.Number)
		if !ok {
			return d.errorf(at, "int v must be a number, found %s", describeToken(t))
		}
		i, err := strconv.ParseInt(string(n), 10, 64)
		if err != nil {
			return d.errorf(at, "int v %s is not an integer in the 64-bit range; use a float for it", n)
		}
		*out = Int(i)
	case KindFloat:
		if name != "v" {
			return bad()
		}
		t, err := d.token(at)
		if err != nil {
			return err
		}
		switch x := t.(type) {
		case json.Number:
			f, err := strconv.ParseFloat(string(x), 64)
			if err != nil {
				return d.errorf(at, "float v %s is out of the 64-bit float range", x)
			}
			*out = Float(f)
		case string:
			switch x {
			case "NaN":
				*out = Float(math.NaN())
			case "+Inf":
				*out = Float(math.Inf(1))
			case "-Inf":
				*out = Float(math.Inf(-1))
			default:
				return d.errorf(at, `float v must be a number or one of "NaN", "+Inf", "-Inf", found %s`, describeToken(t))
			}
		default:
			return d.errorf(at, "float v must be a number, found %s", describeToken(t))
		}
	case KindStr:
		if name != "v" && name != "b64" {
			return bad()
		}
		if *out != nil {
			return d.errorf(at, `a str has either "v" or "b64", not both`)
		}
		t, err := d.token(at)
		if err != nil {
			return err
		}
		s, ok := t.(string)
		if !ok {
			return d.errorf(at, "str %s must be a string, found %s", name, describeToken(t))
		}
		if name == "b64" {
			b, err := base64.StdEncoding.DecodeString(s)
			if err != nil {
				return d.errorf(at, "str b64 is not standard padded base64: %v", err)
			}
			s = string(b)
		}
		*out = Str(s)
	case KindBytes:
		if name != "b64" {
			return bad()
		}
		t, err := d.token(at)
		if err != nil {
			return err
		}
		s, ok := t.(string)
		if !ok {
			return d.errorf(at, "bytes b64 must be a string, found %s", describeToken(t))
		}
		b, err := base64.StdEncoding.DecodeString(s)
		if err != nil {
			return d.errorf(at, "bytes b64 is not standard padded base64: %v", err)
		}
		*out = Bytes(b)
	case KindList:
		if name != "v" {
			return bad()
		}
		if err := d.expectDelim(at, '[', "list v to be an array"); err != nil {
			return err
		}
		items := List{}
		for d.dec.More() {
			it, err := d.refValue(&loc{parent: at, index: len(items)}, depth+1)
			if err != nil {
				return err
			}
			items = append(items, it)
		}
		if _, err := d.token(at); err != nil {
			return err
		}
		*out = items
	case KindRecord:
		if name != "v" {
			return bad()
		}
		if err := d.expectDelim(at, '{', "record v to be an object"); err != nil {
			return err
		}
		r := &Record{Fields: []Field{}}
		var seen map[string]struct{}
		for d.dec.More() {
			t, err := d.token(at)
			if err != nil {
				return err
			}
			fname := t.(string) // object keys are always strings
			if seen == nil {
				seen = map[string]struct{}{}
			}
			if _, dup := seen[fname]; dup {
				return d.errorf(at, "duplicate record field %q", fname)
			}
			seen[fname] = struct{}{}
			fv, err := d.refValue(&loc{parent: at, name: fname, field: true}, depth+1)
			if err != nil {
				return err
			}
			r.Fields = append(r.Fields, Field{Name: fname, Value: fv})
		}
		if _, err := d.token(at); err != nil {
			return err
		}
		*out = r
	case KindTable:
		if *tbl == nil {
			*tbl = &refTableParts{}
		}
		tp := *tbl
		switch name {
		case "cols":
			if err := d.expectDelim(at, '[', "table cols to be an array of strings"); err != nil {
				return err
			}
			cols := []string{}
			seen := map[string]struct{}{}
			for d.dec.More() {
				t, err := d.token(at)
				if err != nil {
					return err
				}
				c, ok := t.(string)
				if !ok {
					return d.errorf(at, "table column %d must be a string, found %s", len(cols), describeToken(t))
				}
				if _, dup := seen[c]; dup {
					return d.errorf(at, "duplicate table column %q", c)
				}
				seen[c] = struct{}{}
				cols = append(cols, c)
			}
			if _, err := d.token(at); err != nil {
				return err
			}
			tp.cols, tp.haveCols = cols, true
		case "rows":
			if err := d.expectDelim(at, '[', "table rows to be an array of arrays"); err != nil {
				return err
			}
			rows := [][]Value{}
			for d.dec.More() {
				rowAt := &loc{parent: at, index: len(rows)}
				if err := d.expectDelim(rowAt, '[', "a table row to be an array"); err != nil {
					return err
				}
				row := []Value{}
				for d.dec.More() {
					cellAt := &loc{parent: rowAt, index: len(row)}
					if len(row) < len(tp.cols) {
						cellAt = &loc{parent: rowAt, name: tp.cols[len(row)], field: true}
					}
					c, err := d.refValue(cellAt, depth+1)
					if err != nil {
						return err
					}
					row = append(row, c)
				}
				if _, err := d.token(rowAt); err != nil {
					return err
				}
				rows = append(rows, row)
			}
			if _, err := d.token(at); err != nil {
				return err
			}
			tp.rows, tp.haveRows = rows, true
		default:
			return bad()
		}
	}
	return nil
}

func refFinish(d *decoder, at *loc, kind Kind, out Value, tp *refTableParts) (Value, error) {
	switch kind {
	case KindNull:
		return Null{}, nil
	case KindTable:
		if tp == nil || !tp.haveCols || !tp.haveRows {
			return nil, d.errorf(at, `a table needs both "cols" and "rows"`)
		}
		for i, row := range tp.rows {
			if len(row) != len(tp.cols) {
				return nil, d.errorf(at, "table row %d has %d cells but there are %d columns", i, len(row), len(tp.cols))
			}
		}
		return &Table{Cols: tp.cols, Rows: tp.rows}, nil
	}
	if out == nil {
		want := `"v"`
		if kind == KindBytes {
			want = `"b64"`
		}
		return nil, d.errorf(at, "%s needs %s", kind.Article(), want)
	}
	return out, nil
}

// memberBit names the members a typed object may have; unknown names are
// refused as soon as the kind is known, so they need no bit.
func memberBit(name string) uint8 {
	switch name {
	case "$":
		return 1
	case "v":
		return 2
	case "b64":
		return 4
	case "cols":
		return 8
	case "rows":
		return 16
	}
	return 0
}

func kindByName(s string) (Kind, bool) {
	for i, n := range kindNames {
		if n == s {
			return Kind(i), true
		}
	}
	return 0, false
}

func checkNil(v Value, depth int) error {
	if v == nil {
		return errors.New("marshal value: nil Value")
	}
	if depth > MaxDepth {
		return fmt.Errorf("marshal value: nested deeper than %d levels", MaxDepth)
	}
	switch x := v.(type) {
	case List:
		for _, it := range x {
			if err := checkNil(it, depth+1); err != nil {
				return err
			}
		}
	case *Record:
		for _, f := range x.Fields {
			if err := checkNil(f.Value, depth+1); err != nil {
				return err
			}
		}
	case *Table:
		// nil cells are written as null: tables built by hand may be sparse.
		for _, row := range x.Rows {
			for _, c := range row {
				if c != nil {
					if err := checkNil(c, depth+1); err != nil {
						return err
					}
				}
			}
		}
	}
	return nil
}
