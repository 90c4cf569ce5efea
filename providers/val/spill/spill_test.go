package spill

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/shoal-sh/shoal/core/rpc"
	"github.com/shoal-sh/shoal/core/value"
	"github.com/shoal-sh/shoal/providers/val/cas"
)

func testStore(t testing.TB) *cas.Store {
	t.Helper()
	s, err := cas.OpenWith(t.TempDir(), cas.Options{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

func testValues() map[string]value.Value {
	rows := make([][]value.Value, 3000)
	items := make(value.List, 2500)
	for i := range rows {
		rows[i] = []value.Value{value.Int(i), value.Str(fmt.Sprintf("name \"%d\"\n", i)), value.Float(float64(i) / 3)}
	}
	rows[7] = rows[7][:1] // a short row encodes its missing cells as null
	for i := range items {
		items[i] = value.NewRecord(value.F("i", value.Int(i)), value.F("tag", value.Str("é✓")))
	}
	var sb strings.Builder
	for i := range 4000 {
		fmt.Fprintf(&sb, "line %d: ünïcødé \"quoted\" \\ tab\t✓ 𝄞\n", i)
	}
	return map[string]value.Value{
		"table": &value.Table{Cols: []string{"id", "name", "score"}, Rows: rows},
		"list":  items,
		"str":   value.Str(sb.String()),
	}
}

// TestEncodeIsMarshal: the pieces are Marshal's bytes, and each part's
// bytes sit where its index says.
func TestEncodeIsMarshal(t *testing.T) {
	for name, v := range testValues() {
		e, err := Encode(v, 4096)
		if err != nil {
			t.Fatal(err)
		}
		want, _ := value.Marshal(v)
		got := e.Bytes()
		if !bytes.Equal(got, want) || e.Size != int64(len(want)) {
			t.Fatalf("%s: encoding differs from Marshal (%d vs %d bytes)", name, len(got), len(want))
		}
		if e.Index == nil || len(e.Index.Parts) < 10 {
			t.Fatalf("%s: no useful index", name)
		}
		b, _ := e.Index.MarshalBinary()
		var ix Index
		if err := ix.UnmarshalBinary(b); err != nil {
			t.Fatal(err)
		}
		for k := range ix.nparts() {
			p := ix.part(k)
			pv, err := ix.decodePart(got[p.Off : p.Off+int64(p.Len)])
			if err != nil {
				t.Fatalf("%s part %d: %v", name, k, err)
			}
			want, _, _ := value.ApplySliceAt(v, value.Slice{Start: p.First, End: ix.end(k)})
			if !value.Equal(pv, want) {
				t.Fatalf("%s part %d differs", name, k)
			}
		}
	}
	small, _ := Encode(value.List{value.Int(1)}, 0)
	if small.Index != nil || len(small.Pieces) != 1 {
		t.Fatal("a small value got an index")
	}
}

// TestPartReads: path and slice reads from parts equal the same reads of
// the whole value; the cache stays within its bound.
func TestPartReads(t *testing.T) {
	s := testStore(t)
	r := NewReader(s, 64<<10)
	rnd := rand.New(rand.NewPCG(1, 2))
	for name, v := range testValues() {
		e, err := Encode(v, 4096)
		if err != nil {
			t.Fatal(err)
		}
		hash, _, err := r.PutEncoded(e)
		if err != nil {
			t.Fatal(err)
		}
		n := e.Index.Count
		for range 300 {
			a, b := rnd.IntN(n+20)-10, rnd.IntN(n+20)-10
			sl := value.Slice{Start: a, End: b}
			if rnd.IntN(4) == 0 {
				sl.End = value.OpenEnd
			}
			want, wantOff, wantErr := value.ApplySliceAt(v, sl)
			got, off, ok, err := r.Part(hash, value.Path{}, false, sl, true)
			if wantErr != nil {
				if err == nil || rpc.AsError(err).Message != rpc.AsError(wantErr).Message {
					t.Fatalf("%s slice %v: error %v, want %v", name, sl, err, wantErr)
				}
				continue
			}
			if err != nil || !ok || off != wantOff || !value.Equal(got, want) {
				t.Fatalf("%s slice %v: ok %v off %d (want %d) err %v equal %v", name, sl, ok, off, wantOff, err, value.Equal(got, want))
			}
			if name == "str" {
				continue
			}
			i := rnd.IntN(2*n) - n
			src := fmt.Sprintf("[%d]", i)
			if name == "table" && rnd.IntN(2) == 0 {
				src += ".name"
			}
			if name == "list" {
				src += ".tag"
			}
			p, err := value.ParsePath(src)
			if err != nil {
				t.Fatal(err)
			}
			wantV, err := p.Eval(v)
			if err != nil {
				t.Fatal(err)
			}
			gotV, _, ok, err := r.Part(hash, p, true, value.Slice{}, false)
			if err != nil || !ok || !value.Equal(gotV, wantV) {
				t.Fatalf("%s path %s: ok %v err %v", name, src, ok, err)
			}
		}
		// An out of range path fails as on the whole value; a whole
		// column is left to the whole value.
		for _, src := range []string{fmt.Sprintf("[%d]", n), ".name"} {
			p, _ := value.ParsePath(src)
			_, wantErr := p.Eval(v)
			_, _, ok, err := r.Part(hash, p, true, value.Slice{}, false)
			if ok || (wantErr == nil) != (err == nil) || (err != nil && rpc.AsError(err).Message != rpc.AsError(wantErr).Message) {
				t.Fatalf("%s path %s: ok %v err %v, want error %v", name, src, ok, err, wantErr)
			}
		}
		if used, max := r.Cached(); used > max {
			t.Fatalf("cache holds %d bytes, bound %d", used, max)
		}
	}
}

// TestPartCorrupt: a damaged part is CORRUPT, never served; a damaged
// index is ignored (the whole-value path reads the value).
func TestPartCorrupt(t *testing.T) {
	s := testStore(t)
	v := testValues()["table"]
	e, _ := Encode(v, 4096)
	hash, _, err := NewReader(s, 0).PutEncoded(e)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Flush(); err != nil {
		t.Fatal(err)
	}
	p := e.Index.Parts[3]
	blob := filepath.Join(s.Dir(), hash[:2], hash[2:4], hash)
	f, err := os.OpenFile(blob, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	b := make([]byte, 1)
	f.ReadAt(b, p.Off+int64(p.Len/2))
	b[0] ^= 1
	f.WriteAt(b, p.Off+int64(p.Len/2))
	f.Close()
	path, _ := value.ParsePath(fmt.Sprintf("[%d]", p.First))
	if _, _, _, err := NewReader(s, 0).Part(hash, path, true, value.Slice{}, false); err == nil || rpc.AsError(err).Code != rpc.Corrupt {
		t.Fatalf("damaged part: %v", err)
	}
	if err := s.PutIndex(hash, []byte("shoal-index-1\nnonsense")); err != nil {
		t.Fatal(err)
	}
	if _, _, ok, err := NewReader(s, 0).Part(hash, path, true, value.Slice{}, false); ok || err != nil {
		t.Fatalf("damaged index used: ok %v err %v", ok, err)
	}
}

// TestRecordPartReads: a record holding large values (an execution's
// stdout, a table, a list, one nested record) is indexed field by field;
// paths through its fields, column-first paths and path+slice reads from
// parts equal the same reads of the whole value, and what parts cannot
// answer is left to it.
func TestRecordPartReads(t *testing.T) {
	tv := testValues()
	v := value.NewRecord(
		value.F("exit", value.Int(0)),
		value.F("stdout", tv["str"]),
		value.F("rows", tv["table"]),
		value.F("items", tv["list"]),
		value.F("inner", value.NewRecord(value.F("log", tv["str"]), value.F("n", value.Int(3)))),
		value.F("note", value.Str("small")),
	)
	e, err := Encode(v, 4096)
	if err != nil {
		t.Fatal(err)
	}
	want, _ := value.Marshal(v)
	if !bytes.Equal(e.Bytes(), want) || e.Index == nil || e.Index.Kind != KindRecord {
		t.Fatalf("record encoding differs from Marshal or has no index")
	}
	s := testStore(t)
	r := NewReader(s, 64<<10)
	hash, _, err := r.PutEncoded(e)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := e.Index.MarshalBinary()
	var back Index
	if err := back.UnmarshalBinary(b); err != nil || len(back.Fields) != 6 || back.Fields[1].Sub == nil || back.Fields[0].Sub != nil {
		t.Fatalf("record index does not round-trip: %v", err)
	}
	for _, tc := range []struct {
		path, slice string
		parts       bool // answered from parts
	}{
		{".stdout", "100..200", true},
		{".stdout", "-50..", true},
		{".rows[5].name", "", true},
		{".rows[-1]", "", true},
		{".rows.name[2999]", "", true},
		{".rows.name[-3]", "", true},
		{".rows.name", "10..20", true},
		{".rows", "2990..", true},
		{".rows[5]", "", true},
		{".rows[5].name", "0..3", true},
		{".items[7].tag", "", true},
		{".items", "5..9", true},
		{".inner.log", "7..70", true},
		{".inner.n", "", true},
		{".exit", "", true},
		{".note", "1..3", true},
		{".stdout", "", false},    // the whole string
		{".rows.name", "", false}, // a whole column
		{".rows[5]", "0..1", false},
		{".nope", "", false},
		{".rows[3000]", "", false},
		{"[0]", "", false},
	} {
		var p value.Path
		if tc.path != "" {
			if p, err = value.ParsePath(tc.path); err != nil {
				t.Fatal(err)
			}
		}
		var sl value.Slice
		if tc.slice != "" {
			if sl, err = value.ParseSlice(tc.slice); err != nil {
				t.Fatal(err)
			}
		}
		got, off, ok, err := r.Part(hash, p, tc.path != "", sl, tc.slice != "")
		if _, wantErr := selectWhole(v, p, sl, tc.slice != ""); wantErr != nil {
			// A failing selection fails as on the whole value.
			if ok || err == nil || rpc.AsError(err).Message != rpc.AsError(wantErr).Message {
				t.Fatalf("%s %s: ok %v err %v, want error %v", tc.path, tc.slice, ok, err, wantErr)
			}
			continue
		}
		if err != nil || ok != tc.parts {
			t.Fatalf("%s %s: ok %v (want %v), err %v", tc.path, tc.slice, ok, tc.parts, err)
		}
		if !ok {
			continue
		}
		wantV, err := p.Eval(v)
		if err != nil {
			t.Fatal(err)
		}
		wantOff := 0
		if tc.slice != "" {
			if wantV, wantOff, err = value.ApplySliceAt(wantV, sl); err != nil {
				t.Fatal(err)
			}
		}
		if !value.Equal(got, wantV) || off != wantOff {
			t.Fatalf("%s %s: differs from the whole value's answer (offset %d, want %d)", tc.path, tc.slice, off, wantOff)
		}
	}
	if used, max := r.Cached(); used > max {
		t.Fatalf("cache holds %d bytes, bound %d", used, max)
	}
	// A damaged small field is CORRUPT.
	if err := s.Flush(); err != nil {
		t.Fatal(err)
	}
	f := e.Index.Fields[5]
	blob := filepath.Join(s.Dir(), hash[:2], hash[2:4], hash)
	fh, err := os.OpenFile(blob, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	fh.WriteAt([]byte("X"), f.Off+int64(f.Len)-4)
	fh.Close()
	p, _ := value.ParsePath(".note")
	if _, _, _, err := NewReader(s, 0).Part(hash, p, true, value.Slice{}, false); err == nil || rpc.AsError(err).Code != rpc.Corrupt {
		t.Fatalf("damaged field: %v", err)
	}
}

// selectWhole is what a read selects of v in memory.
func selectWhole(v value.Value, p value.Path, sl value.Slice, hasSlice bool) (value.Value, error) {
	v, err := p.Eval(v)
	if err == nil && hasSlice {
		v, _, err = value.ApplySliceAt(v, sl)
	}
	return v, err
}

// TestGrepParts: a grep of an indexed value, or of what a path reaches in
// an indexed record, searched part by part, answers what the grep of the
// whole value answers, pages from the end included; a grep that parts
// cannot answer is left to the whole value.
func TestGrepParts(t *testing.T) {
	tv := testValues()
	v := value.NewRecord(
		value.F("exit", value.Int(1)),
		value.F("stdout", tv["str"]),
		value.F("rows", tv["table"]),
		value.F("items", tv["list"]),
		value.F("note", value.Str("one\ntwo 12\n")),
	)
	e, err := Encode(v, 4096)
	if err != nil {
		t.Fatal(err)
	}
	r := NewReader(testStore(t), 64<<10)
	hash, _, err := r.PutEncoded(e)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		path, pattern, page string
		context             int
		parts               bool
	}{
		{".stdout", `line 3\d\d:`, "", 0, true},
		{".stdout", `^`, "-3..", 0, true},
		{".stdout", `9: `, "10..20", 2, true},
		{".rows", `name "12`, "", 1, true},
		{".rows", `.`, "-2..", 0, true},
		{".items", `"i":7\d`, "", 0, true},
		{".note", `two`, "", 1, true},
		{".rows[5]", `5`, "", 0, false}, // a record: the whole value says why not
		{"", `x`, "", 0, false},
		{".nope", `x`, "", 0, false},
	} {
		g, err := value.ParseGrep(tc.pattern, tc.context)
		if err != nil {
			t.Fatal(err)
		}
		var page *value.Slice
		if tc.page != "" {
			sl, err := value.ParseSlice(tc.page)
			if err != nil {
				t.Fatal(err)
			}
			page = &sl
		}
		var p value.Path
		if tc.path != "" {
			p = value.MustParsePath(tc.path)
		}
		got, ok, err := r.Grep(hash, p, g, page)
		if ok != tc.parts || (ok && err != nil) {
			t.Fatalf("%s grep %q: ok %v (want %v), err %v", tc.path, tc.pattern, ok, tc.parts, err)
		}
		if !ok {
			continue
		}
		sel, err := p.Eval(v)
		if err != nil {
			t.Fatal(err)
		}
		want, err := g.Apply(sel, page)
		if err != nil {
			t.Fatal(err)
		}
		if !value.Equal(got, want) {
			t.Fatalf("%s grep %q page %q: differs from the whole value's grep", tc.path, tc.pattern, tc.page)
		}
		if total, _ := value.Select(got, ".total"); value.Equal(total, value.Int(0)) {
			t.Fatalf("%s grep %q: nothing matched, the case tests nothing", tc.path, tc.pattern)
		}
	}
	if used, _ := r.Cached(); used > 64<<10 {
		t.Fatalf("cache holds %d bytes", used)
	}
}

// TestRuneCount: the word-at-a-time count equals the standard library's
// on valid UTF-8 of every width, at every alignment and length.
func TestRuneCount(t *testing.T) {
	rnd := rand.New(rand.NewPCG(3, 4))
	alphabet := []string{"a", "\n", "é", "✓", "𝄞", "\u009b", "\x7f", "\u2028"}
	for n := range 200 {
		var sb strings.Builder
		for range n {
			sb.WriteString(alphabet[rnd.IntN(len(alphabet))])
		}
		s := sb.String()
		for off := range min(len(s), 9) {
			if got, want := runeCount(s[off:]), utf8.RuneCountInString(s[off:]); utf8.ValidString(s[off:]) && got != want {
				t.Fatalf("runeCount(%q) = %d, want %d", s[off:], got, want)
			}
		}
	}
}

// TestHeadError: a path whose first step fails on a list or table is
// refused from the head of the index, with the error the whole value
// gives, and the index is not loaded for it; a head that does not fit
// its file is not trusted.
func TestHeadError(t *testing.T) {
	s := testStore(t)
	for _, name := range []string{"table", "list"} {
		v := testValues()[name]
		e, err := Encode(v, 4096)
		if err != nil {
			t.Fatal(err)
		}
		hash, _, err := NewReader(s, 0).PutEncoded(e)
		if err != nil {
			t.Fatal(err)
		}
		n := 2500 // the list's items
		if tb, ok := v.(*value.Table); ok {
			n = len(tb.Rows)
		}
		for _, src := range []string{fmt.Sprintf("[%d]", n), fmt.Sprintf("[%d].x", n+5), fmt.Sprintf("[-%d]", n+1), ".nope", ".nope[0]"} {
			path, err := value.ParsePath(src)
			if err != nil {
				t.Fatal(err)
			}
			_, want := path.Eval(v)
			if want == nil {
				t.Fatalf("%s %s: the whole value takes this path", name, src)
			}
			r := NewReader(s, 1<<20)
			_, _, err = r.Select(hash, path, true, value.Slice{}, false)
			if err == nil || err.Error() != want.Error() {
				t.Fatalf("%s %s: %v, the whole value gives %v", name, src, err, want)
			}
			if _, loaded := r.get(cacheKey{hash, -1}); loaded {
				t.Fatalf("%s %s: the index was loaded", name, src)
			}
			good, _ := value.ParsePath("[1]")
			if _, ok, err := r.Select(hash, good, true, value.Slice{}, false); !ok || err != nil {
				t.Fatalf("%s: [1] after a refused step: ok %v, %v", name, ok, err)
			}
		}
		// A head whose records are cut short is not trusted.
		b, err := s.Index(hash)
		if err != nil {
			t.Fatal(err)
		}
		if err := s.PutIndex(hash, b[:len(b)-7]); err != nil {
			t.Fatal(err)
		}
		path, _ := value.ParsePath(fmt.Sprintf("[%d]", n))
		if _, ok, err := NewReader(s, 0).Select(hash, path, true, value.Slice{}, false); ok || err != nil {
			t.Fatalf("%s: a cut index answered: ok %v, %v", name, ok, err)
		}
	}
}
