package sdk

import (
	"encoding/json"
	"errors"
	"math"
	"strings"
	"testing"
)

func TestWireForm(t *testing.T) {
	tests := []struct {
		v    Value
		want string
	}{
		{Value{}, `{"$":"null"}`},
		{Null(), `{"$":"null"}`},
		{Bool(true), `{"$":"bool","v":true}`},
		{Bool(false), `{"$":"bool","v":false}`},
		{Int(-42), `{"$":"int","v":-42}`},
		{Int(math.MaxInt64), `{"$":"int","v":9223372036854775807}`},
		{Float(1.5), `{"$":"float","v":1.5}`},
		{Float(2), `{"$":"float","v":2}`},
		{Float(1e21), `{"$":"float","v":1e+21}`},
		{Float(math.NaN()), `{"$":"float","v":"NaN"}`},
		{Float(math.Inf(1)), `{"$":"float","v":"+Inf"}`},
		{Float(math.Inf(-1)), `{"$":"float","v":"-Inf"}`},
		{Str("shoal"), `{"$":"str","v":"shoal"}`},
		{Str(`a "quoted" \ line` + "\n"), `{"$":"str","v":"a \"quoted\" \\ line\n"}`},
		{Str("héllo"), `{"$":"str","v":"héllo"}`},
		{Bytes([]byte("hi")), `{"$":"bytes","b64":"aGk="}`},
		{Bytes(nil), `{"$":"bytes","b64":""}`},
		{List(), `{"$":"list","v":[]}`},
		{List(Int(1), Str("a")), `{"$":"list","v":[{"$":"int","v":1},{"$":"str","v":"a"}]}`},
		{Record(), `{"$":"record","v":{}}`},
		{Record(F("b", Int(1)), F("a", Int(2))), `{"$":"record","v":{"b":{"$":"int","v":1},"a":{"$":"int","v":2}}}`},
		{Record(F("a", Int(1)), F("b", Int(2)), F("a", Int(3))), `{"$":"record","v":{"a":{"$":"int","v":3},"b":{"$":"int","v":2}}}`},
		{Table([]string{"n"}), `{"$":"table","cols":["n"],"rows":[]}`},
		{Table([]string{"n", "ok"}, []Value{Int(1), Bool(true)}, []Value{Int(2), Null()}),
			`{"$":"table","cols":["n","ok"],"rows":[[{"$":"int","v":1},{"$":"bool","v":true}],[{"$":"int","v":2},{"$":"null"}]]}`},
	}
	for _, tc := range tests {
		got, err := json.Marshal(tc.v)
		if err != nil {
			t.Fatal(err)
		}
		if string(got) != tc.want {
			t.Errorf("got  %s\nwant %s", got, tc.want)
		}
	}
}

func TestTableRowWidth(t *testing.T) {
	defer func() {
		if r := recover(); r == nil || !strings.Contains(r.(string), "row 1 has 1 cells, want 2") {
			t.Fatalf("recover() = %v", r)
		}
	}()
	Table([]string{"a", "b"}, []Value{Int(1), Int(2)}, []Value{Int(3)})
}

func TestValueOf(t *testing.T) {
	type named string
	var nilMap map[string]int
	tests := []struct {
		in   any
		want Value
		err  string
	}{
		{nil, Null(), ""},
		{true, Bool(true), ""},
		{int8(-3), Int(-3), ""},
		{uint64(7), Int(7), ""},
		{uint64(math.MaxUint64), Value{}, "does not fit"},
		{float32(0.5), Float(0.5), ""},
		{"s", Str("s"), ""},
		{named("n"), Str("n"), ""},
		{[]byte{1}, Bytes([]byte{1}), ""},
		{json.Number("12"), Int(12), ""},
		{json.Number("1.25"), Float(1.25), ""},
		{[]any{1, "a", nil}, List(Int(1), Str("a"), Null()), ""},
		{[2]bool{true, false}, List(Bool(true), Bool(false)), ""},
		{map[string]any{"z": 1, "a": []int{2}}, Record(F("a", List(Int(2))), F("z", Int(1))), ""},
		{nilMap, Record(), ""},
		{Int(5), Int(5), ""},
		{map[int]string{1: "x"}, Value{}, "not a string"},
		{struct{ A int }{1}, Value{}, "build a sdk.Record"},
		{map[string]any{"bad": make(chan int)}, Value{}, `field "bad"`},
	}
	for _, tc := range tests {
		got, err := ValueOf(tc.in)
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("ValueOf(%#v) error %v, want %q", tc.in, err, tc.err)
			}
			continue
		}
		if err != nil || string(got.wire) != string(tc.want.wire) {
			t.Errorf("ValueOf(%#v) = %s, %v; want %s", tc.in, got.wire, err, tc.want.wire)
		}
	}
}

// register installs a provider or validator for one test.
func register(t *testing.T, p *Provider, v *Validator) {
	t.Helper()
	old := registered
	registered.provider, registered.validator = p, v
	t.Cleanup(func() { registered = old })
}

func TestHandlersProvider(t *testing.T) {
	register(t, &Provider{
		Family:    "demo",
		Templates: []Template{{URITemplate: "shoal://demo/{k}", Name: "k"}},
		Roots:     []Resource{{URI: "shoal://demo", Name: "demo"}},
		Read: func(r *ReadRequest) (any, error) {
			switch r.Segments[0] {
			case "typed":
				q, _ := r.Param("q")
				return Record(F("q", Str(q)), F("who", Str(r.Caller.Principal))), nil
			case "plain":
				return map[string]int{"n": 1}, nil
			case "missing":
				return nil, Errorf(NotFound, "no %s", r.Segments[0])
			case "plainerr":
				return nil, errors.New("disk on fire")
			case "panic":
				panic("boom")
			case "unencodable":
				return make(chan int), nil
			case "forged":
				return nil, &Error{Code: codePanic, Message: "not really"}
			}
			return nil, nil
		},
	}, nil)

	desc := string(handleDescribe())
	want := `{"ok":true,"record":{"abi":"shoal_abi_v1","kind":"provider","family":"demo","templates":[{"uriTemplate":"shoal://demo/{k}","name":"k"}],"roots":[{"uri":"shoal://demo","name":"demo"}]}}`
	if desc != want {
		t.Errorf("describe\n got %s\nwant %s", desc, want)
	}

	req := func(seg string) []byte {
		b, _ := json.Marshal(ReadRequest{Segments: []string{seg}, Query: []Param{{"q", "x y"}}, Caller: Caller{Principal: "agent:a"}})
		return b
	}
	tests := []struct{ seg, want string }{
		{"typed", `{"ok":true,"value":{"$":"record","v":{"q":{"$":"str","v":"x y"},"who":{"$":"str","v":"agent:a"}}}}`},
		{"plain", `{"ok":true,"record":{"n":1}}`},
		{"missing", `{"ok":false,"error":{"code":"NOT_FOUND","message":"no missing"}}`},
		{"plainerr", `{"ok":false,"error":{"code":"FAILED","message":"disk on fire"}}`},
		{"panic", `{"ok":false,"error":{"code":"PANIC","message":"boom"}}`},
		{"unencodable", `{"ok":false,"error":{"code":"FAILED","message":"cannot encode the answer as JSON: json: unsupported type: chan int"}}`},
		{"forged", `{"ok":false,"error":{"code":"FAILED","message":"PANIC: not really"}}`},
		{"nil", `{"ok":true,"record":null}`},
	}
	for _, tc := range tests {
		if got := string(handleRead(req(tc.seg))); got != tc.want {
			t.Errorf("%s:\n got %s\nwant %s", tc.seg, got, tc.want)
		}
	}
	if got := string(handleRead([]byte("{"))); !strings.Contains(got, "malformed read request") {
		t.Errorf("malformed request: %s", got)
	}
	if got := string(handleList([]byte(`{}`))); got != `{"ok":true,"record":[]}` {
		t.Errorf("list without List: %s", got)
	}
	if got := string(handleValidate([]byte(`{}`))); !strings.Contains(got, "no validator") {
		t.Errorf("validate on a provider: %s", got)
	}
}

func TestHandlersValidator(t *testing.T) {
	register(t, nil, &Validator{
		Channels: []string{"user.x.*"},
		Schema:   json.RawMessage(`{"type":"object"}`),
		Validate: func(ch string, p json.RawMessage) error {
			switch string(p) {
			case `"fail"`:
				return Errorf(Failed, "cannot tell")
			case `"no"`:
				return errors.New("no thanks on " + ch)
			}
			return nil
		},
	})
	if got, want := string(handleDescribe()), `{"ok":true,"record":{"abi":"shoal_abi_v1","kind":"validator","channels":["user.x.*"],"schema":{"type":"object"}}}`; got != want {
		t.Errorf("describe\n got %s\nwant %s", got, want)
	}
	tests := []struct{ payload, want string }{
		{`{"a":1}`, `{"ok":true}`},
		{`"no"`, `{"ok":false,"error":{"code":"REJECTED","message":"no thanks on user.x.y"}}`},
		{`"fail"`, `{"ok":false,"error":{"code":"FAILED","message":"cannot tell"}}`},
	}
	for _, tc := range tests {
		req := []byte(`{"channel":"user.x.y","payload":` + tc.payload + `}`)
		if got := string(handleValidate(req)); got != tc.want {
			t.Errorf("%s:\n got %s\nwant %s", tc.payload, got, tc.want)
		}
	}
}

func TestDescribeNothingRegistered(t *testing.T) {
	register(t, nil, nil)
	if got := string(handleDescribe()); !strings.Contains(got, `"code":"FAILED"`) || !strings.Contains(got, "RegisterProvider") {
		t.Errorf("describe: %s", got)
	}
}

func TestRegisterOnce(t *testing.T) {
	register(t, nil, nil)
	RegisterValidator(Validator{Channels: []string{"user.a"}, Validate: func(string, json.RawMessage) error { return nil }})
	defer func() {
		if r := recover(); r == nil || !strings.Contains(r.(string), "exactly one") {
			t.Fatalf("recover() = %v", r)
		}
	}()
	RegisterProvider(Provider{Family: "x", Read: func(*ReadRequest) (any, error) { return nil, nil }})
}

// FuzzStr checks that any string encodes to valid JSON that decodes back
// to the same text (invalid UTF-8 aside, which JSON cannot carry).
func FuzzStr(f *testing.F) {
	for _, s := range []string{"", "plain", `q"uote`, "back\\slash", "\x00\x1f", "héllo", "<&>", "\u2028"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		b, _ := json.Marshal(Record(F(s, Str(s))))
		var w struct {
			V map[string]struct {
				V string `json:"v"`
			} `json:"v"`
		}
		if err := json.Unmarshal(b, &w); err != nil {
			t.Fatalf("%q: invalid JSON %s: %v", s, b, err)
		}
		var want string // what encoding/json makes of invalid UTF-8
		q, _ := json.Marshal(s)
		_ = json.Unmarshal(q, &want)
		if w.V[want].V != want {
			t.Fatalf("%q: round trip gave %+v", s, w.V)
		}
	})
}
