package rpc

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
)

type sampleParams struct {
	Text  *string           `json:"text"`
	Limit int               `json:"limit"`
	Tags  []string          `json:"tags"`
	Env   map[string]string `json:"env"`
	On    bool              `json:"on"`
	Raw   json.RawMessage   `json:"raw"`
}

func TestDecodeParams(t *testing.T) {
	cases := []struct {
		name, params, member, msg string
	}{
		{"unknown member", `{"text":"hi","hsah":"typo"}`, "hsah", `unknown member "hsah"; the members are text, limit, tags, env, on, raw`},
		{"string for integer", `{"limit":"7"}`, "limit", `member "limit" must be an integer, not a string`},
		{"number for string", `{"text":7}`, "text", `member "text" must be a string, not a number`},
		{"string for boolean", `{"on":"yes"}`, "on", `member "on" must be a boolean, not a string`},
		{"object for array", `{"tags":{}}`, "tags", `member "tags" must be an array, not an object`},
		{"wrong element", `{"tags":[1]}`, "tags", `member "tags" must be a string, not a number`},
		{"wrong map value", `{"env":{"A":1}}`, "env", `member "env" must be a string, not a number`},
		{"float for integer", `{"limit":1.5}`, "limit", `member "limit" must be an integer, not a number 1.5`},
		{"array params", `[1]`, "", `params must be a JSON object, not an array`},
		{"string params", `"x"`, "", `params must be a JSON object, not a string`},
		{"truncated", `{"text":`, "", `params are not valid JSON`},
		{"two objects", `{} {}`, "", `params must be one JSON object`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var p sampleParams
			err := DecodeParams(json.RawMessage(c.params), &p)
			var re *Error
			if !errors.As(err, &re) || re.Code != InvalidParams {
				t.Fatalf("DecodeParams(%s) = %v, want INVALID_PARAMS", c.params, err)
			}
			if !strings.Contains(re.Message, c.msg) {
				t.Errorf("message %q, want it to contain %q", re.Message, c.msg)
			}
			data, _ := re.Data.(map[string]any)
			got := data["member"]
			if c.member == "" && got != nil || c.member != "" && got != c.member {
				t.Errorf("data.member = %v, want %q", got, c.member)
			}
		})
	}
}

func TestDecodeParamsAccepts(t *testing.T) {
	for _, params := range []string{``, `null`, ` {} `, `{"text":"hi","limit":3,"tags":["a"],"env":{"A":"1"},"on":true,"raw":[1,{"x":2}]}`} {
		var p sampleParams
		if err := DecodeParams(json.RawMessage(params), &p); err != nil {
			t.Errorf("DecodeParams(%q) = %v", params, err)
		}
	}
	var none struct{}
	err := DecodeParams(json.RawMessage(`{"x":1}`), &none)
	if err == nil || !strings.Contains(err.Error(), `unknown member "x"; this method takes no params`) {
		t.Errorf("no-params method: %v", err)
	}
}

// A member's own decoder keeps its coded error.
type refParam string

func (r *refParam) UnmarshalJSON([]byte) error { return Errorf(BadURI, "not a ref") }

func TestDecodeParamsKeepsMemberErrors(t *testing.T) {
	var p struct {
		Ref refParam `json:"ref"`
	}
	err := DecodeParams(json.RawMessage(`{"ref":"x"}`), &p)
	var re *Error
	if !errors.As(err, &re) || re.Code != BadURI {
		t.Fatalf("err = %v, want BAD_URI from the member's decoder", err)
	}
}

func TestMembers(t *testing.T) {
	type inner struct {
		A string `json:"a"`
	}
	type outer struct {
		inner
		B      int `json:"b,omitempty"`
		Hidden int `json:"-"`
		C      string
		d      int
	}
	_ = outer{}.d
	if got := strings.Join(Members(&outer{}), ","); got != "a,b,C" {
		t.Errorf("Members = %s, want a,b,C", got)
	}
}
