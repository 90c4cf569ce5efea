package shell

import (
	"bytes"
	"encoding/csv"
	"fmt"
	"strconv"
	"strings"

	"mvdan.cc/sh/v3/syntax"

	"github.com/shoal-sh/shoal/core/value"
)

// parseDelimited reads CSV (comma ',') or TSV (comma '\t') with a header
// row into a table. Ragged rows are tolerated: short rows are padded with
// null, long rows add columns named _N. A column whose every non-empty
// cell is an integer written canonically (no leading zeros, so zip codes
// stay text) becomes int, likewise float, bool; empty cells of such
// columns are null. Everything else stays str.
func parseDelimited(data []byte, comma rune) (*value.Table, error) {
	data = bytes.TrimPrefix(data, []byte("\xef\xbb\xbf"))
	r := csv.NewReader(bytes.NewReader(data))
	r.Comma = comma
	r.FieldsPerRecord = -1
	r.LazyQuotes = comma == '\t'
	records, err := r.ReadAll()
	if err != nil {
		return nil, err
	}
	if len(records) == 0 {
		return &value.Table{Cols: []string{}, Rows: [][]value.Value{}}, nil
	}
	cols := uniqueNames(records[0])
	body := records[1:]
	for _, rec := range body {
		for len(cols) < len(rec) {
			cols = append(cols, fmt.Sprintf("_%d", len(cols)+1))
		}
	}
	kinds := make([]value.Kind, len(cols))
	for j := range cols {
		kinds[j] = columnKind(body, j)
	}
	rows := make([][]value.Value, len(body))
	for i, rec := range body {
		row := make([]value.Value, len(cols))
		for j := range cols {
			if j >= len(rec) {
				row[j] = value.Null{}
				continue
			}
			row[j] = typedCell(rec[j], kinds[j])
		}
		rows[i] = row
	}
	return &value.Table{Cols: cols, Rows: rows}, nil
}

// uniqueNames makes header names usable as column names: empty ones get
// a positional name, repeated ones a suffix.
func uniqueNames(header []string) []string {
	cols := make([]string, len(header))
	seen := make(map[string]int, len(header))
	for j, h := range header {
		h = strings.TrimSpace(h)
		if h == "" {
			h = fmt.Sprintf("_%d", j+1)
		}
		if n := seen[h]; n > 0 {
			seen[h] = n + 1
			h = fmt.Sprintf("%s_%d", h, n+1)
		} else {
			seen[h] = 1
		}
		cols[j] = h
	}
	return cols
}

func columnKind(body [][]string, j int) value.Kind {
	kind := value.KindNull // nothing seen yet
	for _, rec := range body {
		if j >= len(rec) || rec[j] == "" {
			continue
		}
		k := cellKind(rec[j])
		switch {
		case kind == value.KindNull:
			kind = k
		case kind == k:
		case kind == value.KindInt && k == value.KindFloat, kind == value.KindFloat && k == value.KindInt:
			kind = value.KindFloat
		default:
			return value.KindStr
		}
		if kind == value.KindStr {
			return kind
		}
	}
	if kind == value.KindNull {
		return value.KindStr
	}
	return kind
}

func cellKind(s string) value.Kind {
	if i, err := strconv.ParseInt(s, 10, 64); err == nil && strconv.FormatInt(i, 10) == s {
		return value.KindInt
	}
	// Decimal notation only: ParseFloat also takes hex, inf and nan,
	// which in a CSV are far more likely to be text.
	if _, err := strconv.ParseFloat(s, 64); err == nil && strings.ContainsAny(s, ".eE") &&
		strings.Trim(s, "0123456789.eE+-") == "" && s[0] != '.' && !strings.HasPrefix(s, "-.") {
		return value.KindFloat
	}
	if s == "true" || s == "false" {
		return value.KindBool
	}
	return value.KindStr
}

func typedCell(s string, k value.Kind) value.Value {
	if s == "" && k != value.KindStr {
		return value.Null{}
	}
	switch k {
	case value.KindInt:
		i, _ := strconv.ParseInt(s, 10, 64)
		return value.Int(i)
	case value.KindFloat:
		f, _ := strconv.ParseFloat(s, 64)
		return value.Float(f)
	case value.KindBool:
		return value.Bool(s == "true")
	}
	return value.Str(s)
}

// parseDotEnv reads a dotenv file (KEY=value lines, optional export
// prefix, # comments, single quotes literal, double quotes with \n \t \"
// \\ escapes) into a record. ok is false when a line is not of that shape,
// and the caller falls back to the file's text.
func parseDotEnv(data []byte) (*value.Record, bool) {
	rec := &value.Record{Fields: []value.Field{}}
	for line := range strings.SplitSeq(string(data), "\n") {
		line = strings.TrimSpace(strings.TrimSuffix(line, "\r"))
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		line = strings.TrimPrefix(line, "export ")
		name, raw, found := strings.Cut(line, "=")
		name = strings.TrimSpace(name)
		if !found || !syntax.ValidName(name) {
			return nil, false
		}
		raw = strings.TrimSpace(raw)
		var val string
		switch {
		case strings.HasPrefix(raw, "'"):
			end := strings.IndexByte(raw[1:], '\'')
			if end < 0 {
				return nil, false
			}
			val = raw[1 : 1+end]
		case strings.HasPrefix(raw, `"`):
			var sb strings.Builder
			closed := false
			for i := 1; i < len(raw); i++ {
				c := raw[i]
				if c == '"' {
					closed = true
					break
				}
				if c == '\\' && i+1 < len(raw) {
					i++
					switch raw[i] {
					case 'n':
						sb.WriteByte('\n')
					case 't':
						sb.WriteByte('\t')
					case 'r':
						sb.WriteByte('\r')
					default:
						sb.WriteByte(raw[i])
					}
					continue
				}
				sb.WriteByte(c)
			}
			if !closed {
				return nil, false
			}
			val = sb.String()
		default:
			if i := strings.Index(raw, " #"); i >= 0 {
				raw = raw[:i]
			}
			val = strings.TrimSpace(raw)
		}
		rec.Set(name, value.Str(val))
	}
	return rec, true
}
