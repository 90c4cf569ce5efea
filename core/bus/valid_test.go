package bus

import (
	"encoding/json"
	"strings"
	"testing"
)

var validTests = []struct {
	in   string
	want bool
}{
	{`null`, true},
	{`true`, true},
	{`false`, true},
	{`0`, true},
	{`-0.5e+10`, true},
	{`12.25E-3`, true},
	{`"shoal"`, true},
	{`"esc \" \\ \/ \b \f \n \r \t \u00e9 \uD83D\uDE00"`, true},
	{"\"raw \xff bytes\"", true}, // encoding/json does not insist on UTF-8
	{` { "a" : [ 1 , 2 , { } , [ ] ] , "b" : { "c" : null } } `, true},
	{`[]`, true},
	{`{}`, true},
	{`[[[[[[["deep"]]]]]]]`, true},
	{``, false},
	{` `, false},
	{`nul`, false},
	{`nulll`, false},
	{`True`, false},
	{`01`, false},
	{`-`, false},
	{`1.`, false},
	{`.5`, false},
	{`1e`, false},
	{`1e+`, false},
	{`+1`, false},
	{`0x10`, false},
	{`NaN`, false},
	{`"open`, false},
	{`"bad \x escape"`, false},
	{`"\u12"`, false},
	{`"\u12g4"`, false},
	{"\"tab\tinside\"", false},
	{`{"a":1,}`, false},
	{`[1,]`, false},
	{`[1 2]`, false},
	{`{"a" 1}`, false},
	{`{a:1}`, false},
	{`{"a":1`, false},
	{`[`, false},
	{`]`, false},
	{`{]`, false},
	{`[}`, false},
	{`{"a":1}}`, false},
	{`1 2`, false},
	{`{} {}`, false},
	{`{"a":}`, false},
	{`{,}`, false},
	{`[,1]`, false},
}

func TestValidJSON(t *testing.T) {
	for _, tc := range validTests {
		if got := validJSON([]byte(tc.in)); got != tc.want {
			t.Errorf("validJSON(%q) = %v, want %v", tc.in, got, tc.want)
		}
		if json.Valid([]byte(tc.in)) != tc.want {
			t.Errorf("table disagrees with encoding/json on %q", tc.in)
		}
	}
	// encoding/json's nesting limit is 10000, empty containers included.
	for _, depth := range []int{maxDepth, maxDepth + 1} {
		for _, in := range []string{
			strings.Repeat("[", depth) + strings.Repeat("]", depth),
			strings.Repeat(`{"a":`, depth-1) + "{}" + strings.Repeat("}", depth-1),
		} {
			if got, want := validJSON([]byte(in)), json.Valid([]byte(in)); got != want {
				t.Errorf("depth %d: validJSON %v, encoding/json %v", depth, got, want)
			}
		}
	}
}

// FuzzValidJSON checks that validJSON accepts exactly what json.Valid
// accepts.
func FuzzValidJSON(f *testing.F) {
	for _, tc := range validTests {
		f.Add([]byte(tc.in))
	}
	f.Fuzz(func(t *testing.T, in []byte) {
		if got, want := validJSON(in), json.Valid(in); got != want {
			t.Fatalf("validJSON(%q) = %v, encoding/json says %v", in, got, want)
		}
	})
}

// BenchmarkValidJSON compares validJSON with encoding/json.Valid on a
// typical small payload and on a 4 KiB one.
func BenchmarkValidJSON(b *testing.B) {
	large := []byte(`{"rows":[` + strings.Repeat(`{"name":"shoal","size":1310,"ok":true},`, 100) + `null]}`)
	for _, in := range []struct {
		name string
		p    []byte
	}{{"small", []byte(benchPayload)}, {"4KiB", large}} {
		b.Run(in.name+"/validJSON", func(b *testing.B) {
			b.SetBytes(int64(len(in.p)))
			for b.Loop() {
				if !validJSON(in.p) {
					b.Fatal("invalid")
				}
			}
		})
		b.Run(in.name+"/json.Valid", func(b *testing.B) {
			b.SetBytes(int64(len(in.p)))
			for b.Loop() {
				if !json.Valid(in.p) {
					b.Fatal("invalid")
				}
			}
		})
	}
}
