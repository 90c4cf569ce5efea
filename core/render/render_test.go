package render

import (
	"bytes"
	"encoding/json"
	"math"
	"strings"
	"sync"
	"testing"

	"github.com/shoal-sh/shoal/core/rpc"
	"github.com/shoal-sh/shoal/core/value"
)

// checkJSONOutput holds the promises of JSON: both forms within the limit,
// valid, and the text is exactly the indented structured form.
func checkJSONOutput(t testing.TB, structured json.RawMessage, text string, limit int) {
	t.Helper()
	if len(structured) > limit || len(text) > limit {
		t.Fatalf("over the limit of %d: structured %d, text %d bytes", limit, len(structured), len(text))
	}
	if !json.Valid(structured) {
		t.Fatalf("structured is not valid JSON: %s", structured)
	}
	var want bytes.Buffer
	if err := json.Indent(&want, structured, "", "  "); err != nil {
		t.Fatal(err)
	}
	if want.String() != text {
		t.Fatalf("text is not the indented structured form:\n%s\n---\n%s", text, want.String())
	}
}

func sampleValue() value.Value {
	return value.NewRecord(
		value.F("null", value.Null{}),
		value.F("yes", value.Bool(true)),
		value.F("n", value.Int(-42)),
		value.F("pi", value.Float(3.25)),
		value.F("nan", value.Float(math.NaN())),
		value.F("name", value.Str("shoal <&> \"q\"\n\u2028é")),
		value.F("bad", value.Str("a\xffb")),
		value.F("raw", value.Bytes{0, 1, 2, 255}),
		value.F("items", value.List{value.Int(1), value.Str("two"), value.List{}}),
		value.F("a b", value.NewRecord()),
		value.F("rows", &value.Table{Cols: []string{"name", "size"}, Rows: [][]value.Value{
			{value.Str("a.txt"), value.Int(12)},
			{value.Str("b.txt"), nil},
		}}),
	)
}

// TestJSONUnelidedIsTheWireForm: a value within budget renders exactly as
// value.Marshal writes it.
func TestJSONUnelidedIsTheWireForm(t *testing.T) {
	for _, v := range []value.Value{value.Null{}, value.Int(1), value.Str(""), value.List{}, sampleValue()} {
		structured, text, elided, err := JSON(v, Budget{}, TextLimit)
		if err != nil {
			t.Fatal(err)
		}
		if elided {
			t.Fatalf("%s: elided", structured)
		}
		want := value.AppendJSON(nil, v)
		if !bytes.Equal(structured, want) {
			t.Fatalf("structured\n%s\nwant\n%s", structured, want)
		}
		checkJSONOutput(t, structured, text, TextLimit)
	}
}

// findMarker finds the "elided" member of the typed object at path in the
// structured output.
func findMarker(t *testing.T, structured []byte, path ...any) map[string]any {
	t.Helper()
	var cur any
	if err := json.Unmarshal(structured, &cur); err != nil {
		t.Fatal(err)
	}
	for _, p := range path {
		switch k := p.(type) {
		case string:
			cur = cur.(map[string]any)[k]
		case int:
			cur = cur.([]any)[k]
		}
	}
	m, _ := cur.(map[string]any)["elided"].(map[string]any)
	if m == nil {
		t.Fatalf("no elided member at %v in %s", path, structured)
	}
	return m
}

func TestJSONMarkers(t *testing.T) {
	big := make(value.List, 1000)
	for i := range big {
		big[i] = value.Int(i)
	}
	s, _, _, err := JSON(big, Budget{MaxItems: 10}, TextLimit)
	if err != nil {
		t.Fatal(err)
	}
	m := findMarker(t, s)
	if m["total"] != 1000.0 || m["shown"] != 10.0 || m["budget"] != "max_items" {
		t.Fatalf("list marker %v", m)
	}
	if next := m["next"].(map[string]any); next["slice"] != "10..20" || next["path"] != "." {
		t.Fatalf("list next %v", next)
	}

	// The last page clamps to the total.
	s, _, _, _ = JSON(big[:15], Budget{MaxItems: 10}, TextLimit)
	if next := findMarker(t, s)["next"].(map[string]any); next["slice"] != "10..15" {
		t.Fatalf("clamped next %v", next)
	}

	// A deep cut names its path.
	v := value.NewRecord(value.F("out", value.List{value.NewRecord(value.F("text", value.Str("0123456789")))}))
	s, _, _, _ = JSON(v, Budget{MaxString: 4}, TextLimit)
	m = findMarker(t, s, "v", "out", "v", 0, "v", "text")
	if m["total_chars"] != 10.0 || m["shown_chars"] != 4.0 || m["total_bytes"] != 10.0 {
		t.Fatalf("str marker %v", m)
	}
	if next := m["next"].(map[string]any); next["path"] != ".out[0].text" || next["slice"] != "4..10" {
		t.Fatalf("str next %v", next)
	}

	// The path and slice in a marker really show the next page.
	tbl := &value.Table{Cols: []string{"n"}, Rows: rows(30, func(i int) []value.Value { return []value.Value{value.Int(i)} })}
	s, _, _, _ = JSON(value.NewRecord(value.F("t", tbl)), Budget{MaxRows: 7}, TextLimit)
	next := findMarker(t, s, "v", "t")["next"].(map[string]any)
	page, err := value.Select(value.NewRecord(value.F("t", tbl)), next["path"].(string))
	if err != nil {
		t.Fatal(err)
	}
	sl, err := value.ParseSlice(next["slice"].(string))
	if err != nil {
		t.Fatal(err)
	}
	page, _ = value.ApplySlice(page, sl)
	if got := page.(*value.Table).Rows[0][0]; got != value.Int(7) {
		t.Fatalf("next page starts at %v", got)
	}
}

// TestJSONOrigin: markers of a value read through path and slice give a
// path and slice valid on the addressed value.
func TestJSONOrigin(t *testing.T) {
	whole := value.NewRecord(value.F("items", value.List{
		value.Str("a"), value.Str("b"), value.Str("0123456789"), value.Str("d"), value.Str("e"), value.Str("f"),
	}))
	part, _ := value.Select(whole, ".items")
	part, _ = value.ApplySlice(part, value.Slice{Start: 2, End: 6})
	s, _, _, err := JSONAt(part, Budget{MaxItems: 2, MaxString: 3}, TextLimit, Origin{Path: value.MustParsePath(".items"), Offset: 2})
	if err != nil {
		t.Fatal(err)
	}
	next := findMarker(t, s)["next"].(map[string]any)
	if next["path"] != ".items" || next["slice"] != "4..6" {
		t.Fatalf("list next %v", next)
	}
	next = findMarker(t, s, "v", 0)["next"].(map[string]any)
	if next["path"] != ".items[2]" || next["slice"] != "3..10" {
		t.Fatalf("str next %v", next)
	}
}

func TestJSONTightensToFit(t *testing.T) {
	// 200 rows of 2 KB each: the defaults are far past 64 KiB.
	tbl := &value.Table{Cols: []string{"id", "body"}, Rows: rows(200, func(i int) []value.Value {
		return []value.Value{value.Int(i), value.Str(strings.Repeat("b", 2000))}
	})}
	s, text, elided, err := JSON(tbl, Budget{}, TextLimit)
	if err != nil {
		t.Fatal(err)
	}
	checkJSONOutput(t, s, text, TextLimit)
	if !elided {
		t.Fatal("not elided")
	}
	m := findMarker(t, s)
	if m["total"] != 200.0 || m["shown"].(float64) < 20 {
		t.Fatalf("tightening lost too many rows: %v", m)
	}
	// A lone long string uses most of the limit.
	s, _, _, _ = JSON(value.Str(strings.Repeat("x", 1<<20)), Budget{}, TextLimit)
	if shown := findMarker(t, s)["shown_chars"].(float64); shown < TextLimit*3/4 {
		t.Fatalf("a lone string showed only %v characters", shown)
	}
}

func TestJSONSmallLimit(t *testing.T) {
	if _, _, _, err := JSON(value.Int(1), Budget{}, MinLimit-1); err == nil {
		t.Fatal("a limit below MinLimit was accepted")
	}
	deep := value.Value(value.Int(0))
	for range 200 {
		deep = value.List{deep, deep}
	}
	s, text, elided, err := JSON(deep, Budget{}, MinLimit)
	if err != nil {
		t.Fatal(err)
	}
	checkJSONOutput(t, s, text, MinLimit)
	if !elided {
		t.Fatal("not elided")
	}
}

func TestRecord(t *testing.T) {
	type task struct {
		ID    int    `json:"id"`
		State string `json:"state"`
		Note  string `json:"note"`
	}
	s, text, err := Record(task{ID: 9, State: "running", Note: "<b> & co"}, TextLimit)
	if err != nil {
		t.Fatal(err)
	}
	if string(s) != `{"id":9,"state":"running","note":"<b> & co"}` {
		t.Fatalf("small record: %s", s)
	}
	checkJSONOutput(t, s, text, TextLimit)

	events := make([]map[string]any, 2000)
	for i := range events {
		events[i] = map[string]any{"seq": i, "payload": strings.Repeat("p", 100)}
	}
	s, text, err = Record(map[string]any{"events": events, "latest": 1999}, 8192)
	if err != nil {
		t.Fatal(err)
	}
	checkJSONOutput(t, s, text, 8192)
	var out struct {
		Events []map[string]any  `json:"events"`
		Latest int               `json:"latest"`
		Elided []json.RawMessage `json:"$elided"`
	}
	if err := json.Unmarshal(s, &out); err != nil {
		t.Fatal(err)
	}
	if out.Latest != 1999 || len(out.Events) == 0 || len(out.Events) >= 2000 || len(out.Elided) == 0 {
		t.Fatalf("elided record: %d events, latest %d, %d cuts", len(out.Events), out.Latest, len(out.Elided))
	}
	if !strings.Contains(string(s), `"kind":"array","total":2000`) || !strings.Contains(string(s), `"path":".events"`) {
		t.Fatalf("no list cut for .events: %s", s[len(s)-400:])
	}

	// A root that is not an object is wrapped.
	s, text, err = Record(events, 4096)
	if err != nil {
		t.Fatal(err)
	}
	checkJSONOutput(t, s, text, 4096)
	var wrapped struct {
		Value  []any `json:"value"`
		Elided []any `json:"$elided"`
	}
	if err := json.Unmarshal(s, &wrapped); err != nil || len(wrapped.Value) == 0 || len(wrapped.Elided) == 0 {
		t.Fatalf("wrapped record %v: %s", err, s)
	}

	if _, _, err := Record(make(chan int), TextLimit); rpc.CodeOf(err) != rpc.Internal {
		t.Fatalf("unmarshalable record: %v", err)
	}
}

func TestRaw(t *testing.T) {
	text, data, isText, err := Raw(value.Str("hello"), 10)
	if err != nil || text != "hello" || data != nil || !isText {
		t.Fatalf("str: %q %v %v %v", text, data, isText, err)
	}
	_, data, isText, err = Raw(value.Bytes{1, 2}, 10)
	if err != nil || !bytes.Equal(data, []byte{1, 2}) || isText {
		t.Fatalf("bytes: %v %v %v", data, isText, err)
	}
	_, data, isText, _ = Raw(value.Str("a\xff"), 10)
	if isText || string(data) != "a\xff" {
		t.Fatal("a str with invalid UTF-8 must come back as data")
	}
	v := sampleValue()
	text, _, isText, err = Raw(v, 1<<20)
	if err != nil || !isText || text != string(value.AppendJSON(nil, v)) {
		t.Fatalf("record: %v %s", err, text)
	}
	for _, tc := range []struct {
		v    value.Value
		want string
	}{
		{value.Str(strings.Repeat("x", 11)), "the str is 11 bytes, more than the raw ceiling of 10 bytes"},
		{value.Bytes(strings.Repeat("x", 11)), "the bytes is 11 bytes, more than the raw ceiling of 10 bytes"},
		{value.List{value.Str("0123456789")}, "the list's typed JSON is more than 10 bytes"},
	} {
		_, _, _, err := Raw(tc.v, 10)
		if rpc.CodeOf(err) != rpc.TooLarge || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), "slice") {
			t.Errorf("Raw(%v): %v", tc.v, err)
		}
	}
}

func TestParseFormat(t *testing.T) {
	for in, want := range map[string]Format{"": FormatJSON, "json": FormatJSON, "render": FormatRender, "raw": FormatRaw} {
		got, err := ParseFormat(in)
		if err != nil || got != want {
			t.Errorf("ParseFormat(%q) = %v, %v", in, got, err)
		}
	}
	if _, err := ParseFormat("yaml"); rpc.CodeOf(err) != rpc.InvalidParams || !strings.Contains(err.Error(), "json (the default), render or raw") {
		t.Fatalf("yaml: %v", err)
	}
	if FormatJSON.MimeType() != "application/json" || FormatRender.MimeType() != "text/plain" || FormatRaw.String() != "raw" {
		t.Fatal("format names")
	}
}

func TestParseBudget(t *testing.T) {
	b, err := ParseBudget([]byte(`{"max_rows":20}`))
	if err != nil {
		t.Fatal(err)
	}
	want := DefaultBudget()
	want.MaxRows = 20
	if b != want {
		t.Fatalf("got %+v", b)
	}
	for _, in := range []string{"", "null", " {} "} {
		if b, err := ParseBudget([]byte(in)); err != nil || b != DefaultBudget() {
			t.Fatalf("ParseBudget(%q) = %+v, %v", in, b, err)
		}
	}
	for in, msg := range map[string]string{
		`{"max_rowz":1}`:         `unknown key "max_rowz"`,
		`{"max_rows":-1}`:        "key max_rows is negative",
		`{"max_rows":"x"}`:       "key max_rows must be a non-negative integer",
		`{"max_rows":1.5}`:       "key max_rows must be a non-negative integer",
		`[1]`:                    "bad elide budget",
		`{"max_rows":1} {}`:      "unexpected data after",
		`{"max_rows":1`:          "bad elide budget",
		`{"max_depth":1e999999}`: "bad elide budget",
	} {
		_, err := ParseBudget([]byte(in))
		if rpc.CodeOf(err) != rpc.InvalidParams || !strings.Contains(err.Error(), msg) {
			t.Errorf("ParseBudget(%s): want %q, got %v", in, msg, err)
		}
	}
}

func TestRenderNeverPassesLimit(t *testing.T) {
	vals := []value.Value{sampleValue(), value.Str(strings.Repeat("é\n", 5000))}
	for _, rc := range renderCases {
		vals = append(vals, rc.v)
	}
	for _, v := range vals {
		for _, limit := range []int{0, 1, 10, 100, 333, 1000, 5000} {
			if got := Render(v, limit); len(got) > limit {
				t.Fatalf("Render(limit %d) gave %d bytes:\n%s", limit, len(got), got)
			}
		}
	}
}

// FuzzJSON: no value, budget and limit makes JSON pass the limit, return
// invalid JSON or fail for a limit it accepts; Render stays within the
// limit and never emits an escape character.
func FuzzJSON(f *testing.F) {
	for _, tc := range jsonCases {
		f.Add([]byte(value.AppendJSON(nil, tc.v)), tc.budget, uint16(tc.limit))
	}
	f.Add([]byte(`[{"a":"x"},{"a":"y"}]`), `{"max_rows":1}`, uint16(1024))
	f.Add([]byte("plain \x1b[31mtext\x1b[0m"), ``, uint16(2000))
	f.Fuzz(func(t *testing.T, data []byte, budget string, limit16 uint16) {
		v, err := value.Unmarshal(data)
		if err != nil {
			if v, err = value.FromPlainJSON(data); err != nil {
				v = value.Str(data)
			}
		}
		b, err := ParseBudget([]byte(budget))
		if err != nil {
			b = DefaultBudget()
		}
		limit := MinLimit + int(limit16)
		structured, text, _, err := JSON(v, b, limit)
		if err != nil {
			t.Fatalf("JSON: %v", err)
		}
		checkJSONOutput(t, structured, text, limit)
		r := Render(v, limit)
		if len(r) > limit || strings.ContainsRune(r, 0x1b) {
			t.Fatalf("Render: %d bytes, escape: %v", len(r), strings.ContainsRune(r, 0x1b))
		}
	})
}

// bigTable is a 10,000,000-row table. Rows repeat a thousand distinct
// ones so the table costs 240 MB of row headers, not gigabytes of cells.
var bigTable = sync.OnceValue(func() *value.Table {
	distinct := rows(1000, func(i int) []value.Value {
		return []value.Value{value.Int(i), value.Str("file-" + strings.Repeat("x", i%13)), value.Float(float64(i) / 3)}
	})
	t := &value.Table{Cols: []string{"id", "name", "ratio"}, Rows: make([][]value.Value, 10_000_000)}
	for i := range t.Rows {
		t.Rows[i] = distinct[i%1000]
	}
	return t
})

// BenchmarkElideTable: eliding 10M rows into 64 KiB must cost about what
// 100 rows cost (target ratio <= 2).
func BenchmarkElideTable(b *testing.B) {
	huge := bigTable()
	small := &value.Table{Cols: huge.Cols, Rows: huge.Rows[:100]}
	run := func(b *testing.B, t *value.Table) float64 {
		for b.Loop() {
			if _, _, _, err := JSON(t, Budget{}, TextLimit); err != nil {
				b.Fatal(err)
			}
		}
		return float64(b.Elapsed().Nanoseconds()) / float64(b.N)
	}
	var small100 float64
	b.Run("rows=100", func(b *testing.B) { small100 = run(b, small) })
	b.Run("rows=10M", func(b *testing.B) {
		if t := run(b, huge); small100 > 0 {
			b.ReportMetric(t/small100, "x-rows=100")
		}
	})
}

var gibString = sync.OnceValue(func() value.Str { return value.Str(strings.Repeat("x", 1<<30)) })

// BenchmarkRenderString: Render reads only what it shows, so a 1 GiB
// string costs what the 64 KiB it shows cost (at most 64 times a 1 KiB
// string, which is shown whole), not 2^20 times as much.
func BenchmarkRenderString(b *testing.B) {
	big := gibString()
	small := big[:1<<10]
	run := func(b *testing.B, s value.Str) float64 {
		for b.Loop() {
			_ = Render(s, TextLimit)
		}
		return float64(b.Elapsed().Nanoseconds()) / float64(b.N)
	}
	var k float64
	b.Run("1KiB", func(b *testing.B) { k = run(b, small) })
	b.Run("1GiB", func(b *testing.B) {
		if g := run(b, big); k > 0 {
			b.ReportMetric(g/k, "x-1KiB")
		}
	})
}

// TestPrettyLengthIsExact: the emitter's running count of the indented
// length matches json.Indent, so attempts stop exactly at the limit.
func TestPrettyLengthIsExact(t *testing.T) {
	vals := []value.Value{sampleValue(), value.List{}, value.NewRecord(), &value.Table{Cols: []string{}, Rows: [][]value.Value{{}}}}
	for _, jc := range jsonCases {
		vals = append(vals, jc.v)
	}
	for _, plain := range []bool{false, true} {
		for _, v := range vals {
			e := &emitter{limit: 1 << 30, b: Budget{MaxItems: 3, MaxRows: 2, MaxString: 5}.WithDefaults(), plain: plain}
			e.run(v)
			var out bytes.Buffer
			if err := json.Indent(&out, e.buf, "", "  "); err != nil {
				t.Fatal(err)
			}
			if out.Len() != e.pretty {
				t.Errorf("plain=%v: counted %d, indented %d for %s", plain, e.pretty, out.Len(), e.buf)
			}
		}
	}
}
