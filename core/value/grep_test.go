package value

import (
	"strings"
	"testing"

	"github.com/shoal-sh/shoal/core/rpc"
)

func grepRows(t *testing.T, v Value, pattern string, context int, slice string) (*Record, [][]Value) {
	t.Helper()
	g, err := ParseGrep(pattern, context)
	if err != nil {
		t.Fatal(err)
	}
	var sl *Slice
	if slice != "" {
		s, err := ParseSlice(slice)
		if err != nil {
			t.Fatal(err)
		}
		sl = &s
	}
	out, err := g.Apply(v, sl)
	if err != nil {
		t.Fatalf("grep %q: %v", pattern, err)
	}
	r := out.(*Record)
	m, _ := r.Get("matches")
	return r, m.(*Table).Rows
}

func field(r *Record, name string) Value {
	v, _ := r.Get(name)
	return v
}

func TestGrepLines(t *testing.T) {
	var b strings.Builder
	for i := 1; i <= 1000; i++ {
		if i == 777 {
			b.WriteString("FAIL: needle\n")
			continue
		}
		b.WriteString("ok line\n")
	}
	text := Str(b.String())
	r, rows := grepRows(t, text, "FAIL", 0, "")
	if field(r, "total") != Int(1) || field(r, "searched") != Int(1000) || len(rows) != 1 {
		t.Fatalf("grep FAIL: %v rows %v", r, rows)
	}
	if rows[0][0] != Int(777) || rows[0][1] != Str("FAIL: needle") {
		t.Fatalf("match row %v", rows[0])
	}
	if _, ok := r.Get("next"); ok {
		t.Fatal("next with every match shown")
	}

	// Context shows the lines around the match, marked.
	_, rows = grepRows(t, text, "FAIL", 2, "")
	if len(rows) != 5 || rows[0][0] != Int(775) || rows[2][2] != Bool(true) || rows[1][2] != Bool(false) {
		t.Fatalf("context rows %v", rows)
	}

	// ^ matches every line: a tail slice is the last lines.
	r, rows = grepRows(t, text, "^", 0, "-3..")
	if len(rows) != 3 || rows[2][0] != Int(1000) || field(r, "total") != Int(1000) || field(r, "shown") != Str("997..1000") {
		t.Fatalf("last three lines: %v %v", r, rows)
	}

	// Without a slice the first DefaultGrepMatches, and next names the page after.
	r, rows = grepRows(t, text, "ok", 0, "")
	if len(rows) != DefaultGrepMatches || field(r, "next") != Str("slice=50..100") {
		t.Fatalf("default page: %d rows, next %v", len(rows), field(r, "next"))
	}
}

func TestGrepOverlappingContext(t *testing.T) {
	_, rows := grepRows(t, Str("a\nx\nx\nb\nx"), "x", 1, "")
	// Lines 1..5, each once: matches 2, 3 and 5 with their neighbours merged.
	if len(rows) != 5 {
		t.Fatalf("rows %v", rows)
	}
	for i, r := range rows {
		if r[0] != Int(i+1) {
			t.Fatalf("line order %v", rows)
		}
	}
	if rows[1][2] != Bool(true) || rows[2][2] != Bool(true) || rows[3][2] != Bool(false) || rows[4][2] != Bool(true) {
		t.Fatalf("match column %v", rows)
	}
}

func TestGrepListTable(t *testing.T) {
	_, rows := grepRows(t, List{Str("alpha"), Int(42), NewRecord(F("k", Str("beta")))}, "42|beta", 0, "")
	if len(rows) != 2 || rows[0][0] != Int(1) || rows[1][0] != Int(2) {
		t.Fatalf("list rows %v", rows)
	}
	tbl := &Table{Cols: []string{"name", "size"}, Rows: [][]Value{{Str("a.go"), Int(10)}, {Str("b.txt"), Int(20)}}}
	r, rows := grepRows(t, tbl, `\.go\b`, 0, "")
	m := field(r, "matches").(*Table)
	if len(rows) != 1 || rows[0][0] != Int(0) || rows[0][1] != Str("a.go") || strings.Join(m.Cols, ",") != "row,name,size" {
		t.Fatalf("table rows %v cols %v", rows, m.Cols)
	}
}

func TestGrepErrors(t *testing.T) {
	if _, err := ParseGrep("(", 0); rpc.CodeOf(err) != rpc.InvalidParams {
		t.Fatalf("bad regexp: %v", err)
	}
	if _, err := ParseGrep("x", MaxGrepContext+1); rpc.CodeOf(err) != rpc.InvalidParams {
		t.Fatalf("big context: %v", err)
	}
	g, _ := ParseGrep("x", 0)
	_, err := g.Apply(NewRecord(F("exit", Int(0)), F("stdout", Str("x"))), nil)
	if rpc.CodeOf(err) != rpc.InvalidParams || !strings.Contains(err.Error(), ".stdout") {
		t.Fatalf("record: %v", err)
	}
	if _, err := g.Apply(Int(1), nil); rpc.CodeOf(err) != rpc.InvalidParams {
		t.Fatalf("int: %v", err)
	}
}

func TestGrepLongLine(t *testing.T) {
	_, rows := grepRows(t, Str(strings.Repeat("x", 5000)), "x", 0, "")
	s := string(rows[0][1].(Str))
	if !strings.HasSuffix(s, "… (+4000 chars)") {
		t.Fatalf("long line %q…", s[len(s)-30:])
	}
}
