package uri

import (
	"errors"
	"reflect"
	"testing"

	"github.com/shoal-sh/shoal/core/rpc"
)

var parseTests = []struct {
	in      string
	family  string
	segs    []string
	query   []Param
	wantErr bool
}{
	{in: "shoal://out/17", family: "out", segs: []string{"17"}},
	{in: "shoal://out/17?path=.rows[0].name", family: "out", segs: []string{"17"}, query: []Param{{"path", ".rows[0].name"}}},
	{in: "shoal://out/17?path=.items&slice=0..10&format=json", family: "out", segs: []string{"17"},
		query: []Param{{"path", ".items"}, {"slice", "0..10"}, {"format", "json"}}},
	{in: "shoal://out/17?elide=%7B%22max_rows%22%3A20%7D", family: "out", segs: []string{"17"}, query: []Param{{"elide", `{"max_rows":20}`}}},
	{in: "shoal://val/blake3:8baef", family: "val", segs: []string{"blake3:8baef"}},
	{in: "shoal://task/9/out", family: "task", segs: []string{"9", "out"}},
	{in: "shoal://task/9/out/", family: "task", segs: []string{"9", "out"}},
	{in: "shoal://journal?principal=agent%3Areviewer&ok=false&head=git&limit=25", family: "journal",
		query: []Param{{"principal", "agent:reviewer"}, {"ok", "false"}, {"head", "git"}, {"limit", "25"}}},
	{in: "shoal://journal", family: "journal"},
	{in: "shoal://events/user.build?since=11&limit=100", family: "events", segs: []string{"user.build"}, query: []Param{{"since", "11"}, {"limit", "100"}}},
	{in: "shoal://out/17?path=.%22a%20b%22", family: "out", segs: []string{"17"}, query: []Param{{"path", `."a b"`}}},
	{in: "shoal://out/17?path=a+b", family: "out", segs: []string{"17"}, query: []Param{{"path", "a+b"}}},
	{in: "shoal://session/a%2Fb", family: "session", segs: []string{"a/b"}},
	{in: "shoal://out/17?&&x", family: "out", segs: []string{"17"}, query: []Param{{"x", ""}}},
	{in: "shoal://kv", family: "kv"},
	{in: "http://out/17", wantErr: true},
	{in: "shoal://", wantErr: true},
	{in: "shoal:///17", wantErr: true},
	{in: "shoal://Out/17", wantErr: true},
	{in: "shoal://out//17", wantErr: true},
	{in: "shoal://out/%zz", wantErr: true},
	{in: "shoal://out/17?path=%", wantErr: true},
	{in: "shoal://out/17#frag", wantErr: true},
	{in: "out:17", wantErr: true},
}

func TestParse(t *testing.T) {
	for _, tt := range parseTests {
		u, err := Parse(tt.in)
		if tt.wantErr {
			var re *rpc.Error
			if err == nil || !errors.As(err, &re) || re.Code != rpc.BadURI {
				t.Errorf("Parse(%q) = %v, %v; want BAD_URI", tt.in, u, err)
			}
			continue
		}
		if err != nil {
			t.Errorf("Parse(%q): %v", tt.in, err)
			continue
		}
		if u.Family != tt.family || !reflect.DeepEqual(u.Segments, tt.segs) || !reflect.DeepEqual(u.Query, tt.query) {
			t.Errorf("Parse(%q) = %q %q %q; want %q %q %q", tt.in, u.Family, u.Segments, u.Query, tt.family, tt.segs, tt.query)
		}
		// The canonical form parses back to the same thing.
		u2, err := Parse(u.String())
		if err != nil || u2.Family != u.Family || !reflect.DeepEqual(u2.Segments, u.Segments) || !reflect.DeepEqual(u2.Query, u.Query) {
			t.Errorf("round trip of %q via %q: %v %v", tt.in, u.String(), u2, err)
		}
	}
}

func TestTypedParams(t *testing.T) {
	u, err := Parse("shoal://journal?limit=abc&since=5&ok=maybe&effects=fs.write,,proc.spawn&until=-3")
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := u.Int("limit"); ok {
		t.Error("limit=abc parsed as an int; want it dropped")
	}
	if n, ok := u.Uint("since"); !ok || n != 5 {
		t.Errorf("since = %d %v", n, ok)
	}
	if _, ok := u.Bool("ok"); ok {
		t.Error("ok=maybe parsed as a bool")
	}
	if _, ok := u.Uint("until"); ok {
		t.Error("until=-3 parsed as uint")
	}
	if got := u.List("effects"); !reflect.DeepEqual(got, []string{"fs.write", "proc.spawn"}) {
		t.Errorf("effects = %q", got)
	}
}

func TestParseTarget(t *testing.T) {
	for in, want := range map[string]string{
		"out:17":                         "shoal://out/17",
		"task:9":                         "shoal://task/9",
		"val:blake3:8baef":               "shoal://val/blake3:8baef",
		"plan:7b2fd854cb805ba1":          "shoal://plan/7b2fd854cb805ba1",
		"pty:3":                          "shoal://pty/3",
		" shoal://out/2?path=.a ":        "shoal://out/2?path=.a",
		"out:3?path=.rows[0]&slice=0..2": "shoal://out/3?path=.rows[0]&slice=0..2",
	} {
		u, err := ParseTarget(in)
		if err != nil {
			t.Errorf("ParseTarget(%q): %v", in, err)
			continue
		}
		if u.String() != want {
			t.Errorf("ParseTarget(%q) = %q; want %q", in, u.String(), want)
		}
	}
	for _, bad := range []string{"", "out", "out:", "OUT:1", "out:1/2", ":1", "out:?x=1", "out:1#x"} {
		if _, err := ParseTarget(bad); rpc.CodeOf(err) != rpc.BadURI {
			t.Errorf("ParseTarget(%q) err = %v; want BAD_URI", bad, err)
		}
	}
	if r := New("val", "blake3:ab").Ref(); r != "val:blake3:ab" {
		t.Errorf("Ref = %q", r)
	}
}

func FuzzParse(f *testing.F) {
	for _, tt := range parseTests {
		f.Add(tt.in)
	}
	f.Add("out:17")
	f.Fuzz(func(t *testing.T, s string) {
		for _, fn := range []func(string) (*URI, error){Parse, ParseTarget} {
			u, err := fn(s)
			if err != nil {
				if rpc.CodeOf(err) != rpc.BadURI {
					t.Fatalf("%q: error without BAD_URI code: %v", s, err)
				}
				continue
			}
			u2, err := Parse(u.String())
			if err != nil {
				t.Fatalf("%q: canonical %q does not parse: %v", s, u.String(), err)
			}
			if u2.String() != u.String() {
				t.Fatalf("%q: canonical form not stable: %q vs %q", s, u.String(), u2.String())
			}
		}
	})
}
