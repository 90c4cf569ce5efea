package render

import (
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/shoal-sh/shoal/core/value"
)

var update = flag.Bool("update", false, "rewrite testdata/*.golden from the current output")

// golden compares got with testdata/name.golden (or rewrites it with -update).
func golden(t *testing.T, name, got string) {
	t.Helper()
	path := filepath.Join("testdata", name+".golden")
	if *update {
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run go test -update to create it)", err)
	}
	if got != string(want) {
		t.Errorf("%s differs from %s (run go test -update if the change is intended):\n--- got ---\n%s\n--- want ---\n%s", name, path, got, want)
	}
}

func rows(n int, mk func(i int) []value.Value) [][]value.Value {
	out := make([][]value.Value, n)
	for i := range out {
		out[i] = mk(i)
	}
	return out
}

// renderCases are shown as human text; each becomes testdata/render_NAME.golden.
var renderCases = []struct {
	name  string
	v     value.Value
	limit int
	at    Origin
}{
	{name: "null", v: value.Null{}},
	{name: "int", v: value.Int(-42)},
	{name: "float", v: value.Float(1.5e-9)},
	{name: "str", v: value.Str("shoal")},
	{name: "str_multiline_ansi", v: value.Str("\x1b[1;31merror:\x1b[0m build failed\r\nline two\tTAB\n\x07bell \x1b]0;title\x07done\n")},
	{name: "str_cut", v: value.Str(strings.Repeat("0123456789", 300)), limit: 1200},
	{name: "str_cut_in_slice", v: value.Str(strings.Repeat("abc\n", 500)), limit: 1200,
		at: Origin{Path: value.MustParsePath(".log"), Offset: 4000}},
	{name: "bytes", v: value.Bytes("Shoal\x00\x01\x02 binary \xff\xfe data, forty-something bytes")},
	{name: "bytes_cut", v: value.Bytes(strings.Repeat("\x00\x10 abc", 300)), limit: 1200},
	{name: "list", v: value.List{value.Str("a.txt"), value.Str("b c.txt"), value.Int(3), value.Null{}, value.Str(""), value.List{}}},
	{name: "list_of_records", v: value.List{
		value.NewRecord(value.F("name", value.Str("a")), value.F("tags", value.List{value.Str("x"), value.Str("y")})),
		value.NewRecord(value.F("name", value.Str("b")), value.F("tags", value.List{})),
	}},
	{name: "list_cut", v: value.List(func() []value.Value {
		out := make([]value.Value, 500)
		for i := range out {
			out[i] = value.Int(i * i)
		}
		return out
	}()), limit: 1100},
	{name: "exec_record", v: value.NewRecord(
		value.F("exit", value.Int(1)),
		value.F("stdout", value.Str("total 8\n-rw-r--r-- 1 me me 12 a.txt\n-rw-r--r-- 1 me me  7 b.txt\n")),
		value.F("stderr", value.Str("ls: cannot access 'c': No such file")),
	)},
	{name: "record_nested", v: value.NewRecord(
		value.F("name", value.Str("shoal")),
		value.F("a field", value.Bool(true)),
		value.F("empty", value.NewRecord()),
		value.F("owner", value.NewRecord(value.F("id", value.Int(7)), value.F("roles", value.List{value.Str("admin")}))),
		value.F("files", &value.Table{Cols: []string{"name", "size"}, Rows: [][]value.Value{{value.Str("a"), value.Int(1)}}}),
		value.F("blob", value.Bytes{1, 2, 3}),
	)},
	{name: "table", v: &value.Table{Cols: []string{"name", "size", "mode", "note"}, Rows: [][]value.Value{
		{value.Str("README.md"), value.Int(2048), value.Str("-rw-r--r--"), value.Null{}},
		{value.Str("日本語.txt"), value.Int(12), value.Str("-rw-------"), value.Str("wide chars")},
		{value.Str("with space "), value.Float(0.5), value.List{value.Int(1), value.Int(2)}, value.NewRecord(value.F("k", value.Str("v")))},
		{value.Str(strings.Repeat("long-", 20)), value.Int(0), value.Str("\x1b[31mred\x1b[0m"), value.Bytes("ab")},
	}}},
	{name: "table_cut", v: &value.Table{Cols: []string{"id", "name"}, Rows: rows(10_000, func(i int) []value.Value {
		return []value.Value{value.Int(i), value.Str("file-" + strings.Repeat("x", i%7))}
	})}, limit: 1100},
	{name: "table_wide", v: &value.Table{Cols: func() []string {
		cs := make([]string, 30)
		for i := range cs {
			cs[i] = "column_" + string(rune('a'+i%26)) + strings.Repeat("z", i/26)
		}
		return cs
	}(), Rows: rows(2, func(i int) []value.Value {
		r := make([]value.Value, 30)
		for j := range r {
			r[j] = value.Int(i*100 + j)
		}
		return r
	})}},
	{name: "record_cut_in_field", v: value.NewRecord(
		value.F("exit", value.Int(0)),
		value.F("stdout", value.Str(strings.Repeat("a line of output\n", 200))),
		value.F("stderr", value.Str("")),
	), limit: 1200},
	{name: "deep", v: func() value.Value {
		var v value.Value = value.Str("bottom")
		for i := range 9 {
			v = value.NewRecord(value.F("level"+string(rune('0'+i)), v))
		}
		return v
	}()},
}

func TestRenderGolden(t *testing.T) {
	for _, tc := range renderCases {
		t.Run(tc.name, func(t *testing.T) {
			limit := tc.limit
			if limit == 0 {
				limit = TextLimit
			}
			got := RenderAt(tc.v, limit, tc.at)
			if len(got) > limit {
				t.Fatalf("%d bytes, over the limit of %d", len(got), limit)
			}
			if strings.ContainsRune(got, 0x1b) {
				t.Fatalf("output holds an escape character: %q", got)
			}
			golden(t, "render_"+tc.name, got)
		})
	}
}

// jsonCases are elided typed JSON; each becomes testdata/json_NAME.golden
// holding the pretty text.
var jsonCases = []struct {
	name   string
	v      value.Value
	budget string
	limit  int
	at     Origin
}{
	{name: "list_max_items", v: value.List{value.Int(0), value.Int(1), value.Int(2), value.Int(3), value.Int(4)}, budget: `{"max_items":2}`},
	{name: "str_max_string", v: value.Str("héllo wörld"), budget: `{"max_string":4}`},
	{name: "bytes_max_bytes", v: value.Bytes("0123456789"), budget: `{"max_bytes":3}`},
	{name: "record_max_fields", v: value.NewRecord(value.F("a", value.Int(1)), value.F("b", value.Int(2)), value.F("c", value.Int(3))), budget: `{"max_fields":2}`},
	{name: "table_max_rows", v: &value.Table{Cols: []string{"name", "size"}, Rows: rows(50, func(i int) []value.Value {
		return []value.Value{value.Str("f" + string(rune('a'+i%26))), value.Int(i)}
	})}, budget: `{"max_rows":2}`},
	{name: "table_max_fields", v: &value.Table{Cols: []string{"a", "b", "c"}, Rows: rows(1, func(int) []value.Value {
		return []value.Value{value.Int(1), value.Int(2), value.Int(3)}
	})}, budget: `{"max_fields":1}`},
	{name: "depth", v: value.NewRecord(value.F("a", value.List{value.List{value.Int(1)}, value.NewRecord(value.F("x", value.Null{})), &value.Table{Cols: []string{"c"}, Rows: rows(3, func(i int) []value.Value { return []value.Value{value.Int(i)} })}})), budget: `{"max_depth":2}`},
	{name: "nested_paths", v: value.NewRecord(value.F("rows", &value.Table{Cols: []string{"name", "body"}, Rows: rows(3, func(i int) []value.Value {
		return []value.Value{value.Str("n"), value.Str(strings.Repeat("z", 10))}
	})})), budget: `{"max_string":4,"max_rows":2}`},
	{name: "origin", v: value.List{value.Str("abcdef"), value.Int(1), value.Int(2)}, budget: `{"max_items":2,"max_string":2}`,
		at: Origin{Path: value.MustParsePath(`.out."the items"`), Offset: 10}},
	{name: "invalid_utf8", v: value.List{value.Str("ok\xff\xfe"), value.Str("a\xffbcdefgh")}, budget: `{"max_string":3}`},
	{name: "limit_long_string", v: value.Str(strings.Repeat("0123456789", 500)), limit: 2048},
	{name: "limit_many_strings", v: value.List(func() []value.Value {
		out := make([]value.Value, 40)
		for i := range out {
			out[i] = value.Str(strings.Repeat("s", 600))
		}
		return out
	}()), limit: 8192},
}

func TestJSONGolden(t *testing.T) {
	for _, tc := range jsonCases {
		t.Run(tc.name, func(t *testing.T) {
			b, err := ParseBudget([]byte(tc.budget))
			if err != nil {
				t.Fatal(err)
			}
			limit := tc.limit
			if limit == 0 {
				limit = TextLimit
			}
			structured, text, elided, err := JSONAt(tc.v, b, limit, tc.at)
			if err != nil {
				t.Fatal(err)
			}
			checkJSONOutput(t, structured, text, limit)
			if !elided {
				t.Fatal("elided is false, but every case here cuts something")
			}
			golden(t, "json_"+tc.name, text)
		})
	}
}
