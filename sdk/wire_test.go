package sdk

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"
)

func TestDecodeRead(t *testing.T) {
	tests := []struct {
		in   string
		want *ReadRequest
		err  string
	}{
		{`{"uri":"shoal://kv/a?x=1","family":"kv","segments":["a"],"query":[{"key":"x","value":"1"}],"caller":{"session":"main","principal":"agent:x"}}`,
			&ReadRequest{URI: "shoal://kv/a?x=1", Family: "kv", Segments: []string{"a"}, Query: []Param{{"x", "1"}}, Caller: Caller{"main", "agent:x"}}, ""},
		{` { "segments" : [ "a\"b" , "\u00e9\n\\/" ] , "extra": {"deep":[1,-2.5e3,true,false,null,"s"]}, "query": null } `,
			&ReadRequest{Segments: []string{`a"b`, "é\n\\/"}}, ""},
		{`{"segments":["\ud83d\ude00","\ud83d","\ude00x","\ud83d\u0041"]}`,
			&ReadRequest{Segments: []string{"😀", "\uFFFD", "\uFFFDx", "\uFFFDA"}}, ""},
		{`{"segments":["a"],"segments":["b"]}`, &ReadRequest{Segments: []string{"b"}}, ""},
		{`{}`, &ReadRequest{}, ""},
		{`null`, &ReadRequest{}, ""},
		{``, nil, "want '{'"},
		{`{"uri":1}`, nil, "want a string"},
		{`{"uri":"a`, nil, "unterminated"},
		{"{\"uri\":\"a\x01\"}", nil, "control character"},
		{`{"uri":"\x"}`, nil, "bad escape"},
		{`{"uri":"\u12"}`, nil, "escape"},
		{`{"x":01}`, nil, "bad number"},
		{`{"x":1.}`, nil, "bad number"},
		{`{"x":-}`, nil, "bad number"},
		{`{"x":1e}`, nil, "bad number"},
		{`{"x":tru}`, nil, "want true"},
		{`{"segments":["a" "b"]}`, nil, "want ',' or ']'"},
		{`{"uri":"a" "family":"b"}`, nil, "want ',' or '}'"},
		{`{} {}`, nil, "unexpected data"},
		{`{"x":}`, nil, "want a value"},
	}
	for _, tc := range tests {
		got, err := decodeRead([]byte(tc.in))
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("%s: error %v, want %q", tc.in, err, tc.err)
			}
			continue
		}
		if err != nil || !reflect.DeepEqual(got, tc.want) {
			t.Errorf("%s:\n got %+v, %v\nwant %+v", tc.in, got, err, tc.want)
		}
	}
}

func TestDecodeValidate(t *testing.T) {
	ch, p, err := decodeValidate([]byte(`{"channel":"user.a","payload": {"x":[1,{"y":"}"}]} }`))
	if err != nil || ch != "user.a" || string(p) != `{"x":[1,{"y":"}"}]}` {
		t.Fatalf("got %q %s %v", ch, p, err)
	}
	if _, _, err := decodeValidate([]byte(`{"channel":"user.a"}`)); err == nil {
		t.Fatal("no error without a payload")
	}
	// The kernel's own layout is split without scanning the payload; other
	// spellings of the same request give the same answer through the reader.
	for _, in := range []string{
		`{"channel":"user.build.v1","payload":{"phase":"done","passed":3}}`,
		`{"channel":"user.build.v1","payload":[1,"}",{"a":null}]}`,
		`{"channel":"","payload":0}`,
		`{"channel":"user.\u0062uild","payload":{}}`,
		`{ "channel":"user.a","payload":{}}`,
		`{"channel":"user.a", "payload":{}}`,
		`{"payload":{},"channel":"user.a"}`,
	} {
		fastCh, fastP, fast := hostValidateLayout([]byte(in))
		ch, p, err := decodeValidate([]byte(in))
		if err != nil {
			t.Fatalf("%s: %v", in, err)
		}
		var want struct {
			Channel string          `json:"channel"`
			Payload json.RawMessage `json:"payload"`
		}
		if err := json.Unmarshal([]byte(in), &want); err != nil {
			t.Fatal(err)
		}
		if ch != want.Channel || string(p) != strings.TrimSpace(string(want.Payload)) {
			t.Errorf("%s: got %q %s, want %q %s", in, ch, p, want.Channel, want.Payload)
		}
		if fast && (fastCh != ch || string(fastP) != string(p)) {
			t.Errorf("%s: fast path %q %s differs", in, fastCh, fastP)
		}
		kernelLayout := strings.HasPrefix(in, `{"channel":"user.build`) || strings.HasPrefix(in, `{"channel":""`)
		if fast != kernelLayout {
			t.Errorf("%s: fast path taken = %v", in, fast)
		}
	}
}

// FuzzDecodeValidate: whenever the reader accepts a request, the fast path
// either declines it or splits it the same way.
func FuzzDecodeValidate(f *testing.F) {
	f.Add([]byte(`{"channel":"user.a","payload":{"x":1}}`))
	f.Add([]byte(`{"channel":"user.a","payload":"}"}`))
	f.Add([]byte(`{"channel":"a\"b","payload":1}`))
	f.Fuzz(func(t *testing.T, in []byte) {
		fastCh, fastP, fast := hostValidateLayout(in)
		r := reader{b: private(in)}
		var ch string
		var p json.RawMessage
		if r.open('{') {
			for first := true; r.more('}', &first); {
				switch r.key() {
				case "channel":
					ch = r.str()
				case "payload":
					p = r.skip()
				default:
					r.skip()
				}
			}
		}
		// The kernel's layout: the payload is the last member and the
		// closing brace follows it at once.
		if r.end() != nil || p == nil || !fast || len(p) == 0 || &p[len(p)-1] != &r.b[len(r.b)-2] {
			return
		}
		if fastCh != ch || string(fastP) != string(p) {
			t.Fatalf("%q: fast %q %q, reader %q %q", in, fastCh, fastP, ch, p)
		}
	})
}

// FuzzDecodeRead checks the scanner against encoding/json: a request the
// kernel encodes reads back the same, and no input makes it panic or
// accept what is not JSON.
func FuzzDecodeRead(f *testing.F) {
	f.Add("shoal://kv/a", "kv", "a", "path", ".x", "main", "agent:x", []byte(`{"segments":["a"]}`))
	f.Add("", "\u2028", "a/b", "", "\"", "\x00", "é", []byte(`{"segments":["\ud83d\ude00"],"n":-0.5e+3}`))
	f.Fuzz(func(t *testing.T, uri, family, seg, key, val, session, principal string, raw []byte) {
		in := ReadRequest{URI: uri, Family: family, Segments: []string{seg, ""}, Query: []Param{{key, val}}, Caller: Caller{session, principal}}
		data, _ := json.Marshal(in)
		var want ReadRequest
		if err := json.Unmarshal(data, &want); err != nil {
			t.Fatal(err)
		}
		got, err := decodeRead(data)
		if err != nil || !reflect.DeepEqual(*got, want) {
			t.Fatalf("%s:\n got %+v %v\nwant %+v", data, got, err, want)
		}
		if _, err := decodeRead(raw); err == nil && !json.Valid(raw) {
			t.Fatalf("accepted invalid JSON %q", raw)
		}
	})
}

func TestParseObject(t *testing.T) {
	o, err := ParseObject([]byte(` {"s":"a\"b","n":-12,"f":1.5e2,"b":true,"z":null,"o":{"x":[1]},"n2":1.0,"s":"last"} `))
	if err != nil {
		t.Fatal(err)
	}
	if s, ok := o.Str("s"); !ok || s != "last" {
		t.Errorf("Str(s) = %q %v", s, ok)
	}
	if n, ok := o.Int("n"); !ok || n != -12 {
		t.Errorf("Int(n) = %d %v", n, ok)
	}
	if _, ok := o.Int("n2"); ok {
		t.Error("Int(n2) accepted 1.0")
	}
	if _, ok := o.Int("s"); ok {
		t.Error("Int(s) accepted a string")
	}
	if f, ok := o.Float("f"); !ok || f != 150 {
		t.Errorf("Float(f) = %v %v", f, ok)
	}
	if _, ok := o.Float("b"); ok {
		t.Error("Float(b) accepted a bool")
	}
	if b, ok := o.Bool("b"); !ok || !b {
		t.Errorf("Bool(b) = %v %v", b, ok)
	}
	if raw, ok := o.Raw("o"); !ok || string(raw) != `{"x":[1]}` {
		t.Errorf("Raw(o) = %s %v", raw, ok)
	}
	if !o.Has("z") || o.Has("missing") {
		t.Error("Has")
	}
	if _, ok := o.Str("missing"); ok {
		t.Error("Str(missing)")
	}
	for _, bad := range []string{`[1]`, `null`, `{"a":}`, `{"a":1`, `"s"`, ``} {
		if _, err := ParseObject([]byte(bad)); err == nil {
			t.Errorf("ParseObject(%q) accepted", bad)
		}
	}
}

// TestPlainRun checks the word-at-a-time scan against a byte loop: every
// byte value at every position of a word, over fillers that sit next to
// the thresholds (0x1f/0x20, 0x7f/0x80, 0xff, and the bytes one above
// the quote and the backslash).
func TestPlainRun(t *testing.T) {
	naive := func(b []byte, i int) int {
		for ; i < len(b); i++ {
			if c := b[i]; c == '"' || c == '\\' || c < 0x20 {
				return i
			}
		}
		return len(b)
	}
	for _, fill := range []byte{'a', ' ', '#', ']', 0x7f, 0x80, 0xff, '!'} {
		for n := 0; n <= 20; n++ {
			for at := -1; at < n; at++ {
				for c := 0; c < 256; c++ {
					b := []byte(strings.Repeat(string(fill), n))
					if at >= 0 {
						b[at] = byte(c)
					}
					for from := 0; from <= min(n, 3); from++ {
						// Either the first such byte, or the start of the
						// tail shorter than a word when none comes before it.
						got, want := plainRun(b, from), naive(b, from)
						tail := from + (len(b)-from)/8*8
						if got != want && (got != tail || want < tail) {
							t.Fatalf("plainRun(% x, %d) = %d, want %d (tail from %d)", b, from, got, want, tail)
						}
					}
				}
			}
		}
	}
}

// TestHostReadLayout: the kernel's request takes the literal path; the
// same request in another order or spacing takes the general reader and
// decodes the same.
func TestHostReadLayout(t *testing.T) {
	in := ReadRequest{URI: "shoal://kv/a?path=.x", Family: "kv", Segments: []string{"a"}, Query: []Param{{"path", ".x"}}, Caller: Caller{"main", "agent:x"}}
	data, err := json.Marshal(in)
	if err != nil {
		t.Fatal(err)
	}
	if got, ok := hostReadLayout(data); !ok || !reflect.DeepEqual(*got, in) {
		t.Fatalf("kernel layout %s: got %+v %v", data, got, ok)
	}
	other := []byte(`{"family":"kv", "uri":"shoal://kv/a?path=.x","segments":["a"],"query":[{"key":"path","value":".x"}],"caller":{"principal":"agent:x","session":"main"}}`)
	if _, ok := hostReadLayout(other); ok {
		t.Fatalf("literal path took %s", other)
	}
	if got, err := decodeRead(other); err != nil || !reflect.DeepEqual(*got, in) {
		t.Fatalf("general reader: %+v %v", got, err)
	}
	if _, ok := hostReadLayout(append(data[:len(data):len(data)], ' ')); ok {
		t.Fatal("literal path took a request with trailing data")
	}
}
