package value

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"

	"github.com/shoal-sh/shoal/core/rpc"
)

// decoder walks JSON with encoding/json's token stream. [FromPlainJSON]
// reads ordinary JSON with it; the typed wire form has its own single-pass
// scanner (see [Unmarshal]) because it sits on hot read paths.
type decoder struct {
	dec *json.Decoder
}

func newDecoder(data []byte) *decoder {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	return &decoder{dec: dec}
}

// loc is a linked path to the value being decoded, built only when an error
// needs it.
type loc struct {
	parent *loc
	name   string
	index  int
	field  bool
}

func (l *loc) path() Path {
	var steps []step
	for ; l != nil; l = l.parent {
		if l.field {
			steps = append(steps, step{name: l.name, field: true})
		} else {
			steps = append(steps, step{index: l.index})
		}
	}
	for i, j := 0, len(steps)-1; i < j; i, j = i+1, j-1 {
		steps[i], steps[j] = steps[j], steps[i]
	}
	return Path{steps: steps}
}

func (d *decoder) errorf(at *loc, format string, args ...any) error {
	return rpc.Errorf(rpc.InvalidParams, "value at %s (byte %d): %s",
		at.path(), d.dec.InputOffset(), fmt.Sprintf(format, args...))
}

// wrap turns a syntax error from encoding/json into a located error.
func (d *decoder) wrap(at *loc, err error) error {
	if err == io.EOF {
		return d.errorf(at, "unexpected end of input")
	}
	var se *json.SyntaxError
	if errors.As(err, &se) {
		return d.errorf(at, "malformed JSON: %s", se.Error())
	}
	return d.errorf(at, "%s", err.Error())
}

func (d *decoder) token(at *loc) (json.Token, error) {
	t, err := d.dec.Token()
	if err != nil {
		return nil, d.wrap(at, err)
	}
	return t, nil
}

func (d *decoder) expectDelim(at *loc, want json.Delim, what string) error {
	t, err := d.token(at)
	if err != nil {
		return err
	}
	if dl, ok := t.(json.Delim); !ok || dl != want {
		return d.errorf(at, "expected %s, found %s", what, describeToken(t))
	}
	return nil
}

func describeToken(t json.Token) string {
	switch x := t.(type) {
	case json.Delim:
		return fmt.Sprintf("%q", string(x))
	case string:
		if len(x) > 40 {
			x = x[:40] + "…"
		}
		return fmt.Sprintf("string %q", x)
	case json.Number:
		return "number " + string(x)
	case bool:
		return fmt.Sprintf("%t", x)
	case nil:
		return "null"
	}
	return fmt.Sprintf("%v", t)
}
