package render

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"strings"

	"github.com/shoal-sh/shoal/core/rpc"
)

// Budget bounds how much of a value [JSON] shows. Each field caps one
// dimension; a zero field takes its default. The limit in bytes applies on
// top: when the budget still yields too much text, JSON tightens it.
type Budget struct {
	// MaxRows is how many rows of a table are shown.
	MaxRows int `json:"max_rows"`
	// MaxItems is how many items of a list are shown.
	MaxItems int `json:"max_items"`
	// MaxString is how many characters (Unicode scalar values) of a string
	// are shown.
	MaxString int `json:"max_string"`
	// MaxBytes is how many octets of a bytes value are shown.
	MaxBytes int `json:"max_bytes"`
	// MaxDepth is how many levels of nesting are shown; containers deeper
	// than that are replaced by a marker with their size and path.
	MaxDepth int `json:"max_depth"`
	// MaxFields is how many fields of a record, or columns of a table, are
	// shown.
	MaxFields int `json:"max_fields"`
}

// The defaults of [Budget]. MaxString is as large as the text limit on
// purpose: a lone string is cut by the room left, not by a count, and
// strings among many values are shortened by the tightening in [JSON].
const (
	DefaultMaxRows   = 100
	DefaultMaxItems  = 100
	DefaultMaxString = TextLimit
	DefaultMaxBytes  = 4096
	DefaultMaxDepth  = 16
	DefaultMaxFields = 100
)

// DefaultBudget returns the budget used when a reader asks for none.
func DefaultBudget() Budget { return Budget{}.WithDefaults() }

// WithDefaults returns b with each zero (or negative) field set to its
// default.
func (b Budget) WithDefaults() Budget {
	def := func(v *int, d int) {
		if *v <= 0 {
			*v = d
		}
	}
	def(&b.MaxRows, DefaultMaxRows)
	def(&b.MaxItems, DefaultMaxItems)
	def(&b.MaxString, DefaultMaxString)
	def(&b.MaxBytes, DefaultMaxBytes)
	def(&b.MaxDepth, DefaultMaxDepth)
	def(&b.MaxFields, DefaultMaxFields)
	return b
}

// ParseBudget reads an elide budget such as {"max_rows":20}. Empty input
// or null is the default budget. Malformed JSON, unknown keys, non-integer
// or negative values are an INVALID_PARAMS *rpc.Error naming the keys.
func ParseBudget(data []byte) (Budget, error) {
	data = bytes.TrimSpace(data)
	if len(data) == 0 || string(data) == "null" {
		return DefaultBudget(), nil
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	var b Budget
	if err := dec.Decode(&b); err != nil {
		var te *json.UnmarshalTypeError
		msg := err.Error()
		switch {
		case errors.As(err, &te):
			msg = "key " + te.Field + " must be a non-negative integer"
		case strings.HasPrefix(msg, "json: unknown field "):
			msg = "unknown key " + strings.TrimPrefix(msg, "json: unknown field ")
		}
		return Budget{}, budgetError(msg)
	}
	if _, err := dec.Token(); err != io.EOF {
		return Budget{}, budgetError("unexpected data after the JSON object")
	}
	for _, f := range []struct {
		name string
		v    int
	}{{"max_rows", b.MaxRows}, {"max_items", b.MaxItems}, {"max_string", b.MaxString}, {"max_bytes", b.MaxBytes}, {"max_depth", b.MaxDepth}, {"max_fields", b.MaxFields}} {
		if f.v < 0 {
			return Budget{}, budgetError("key " + f.name + " is negative")
		}
	}
	return b.WithDefaults(), nil
}

func budgetError(msg string) error {
	return rpc.Errorf(rpc.InvalidParams, "bad elide budget: %s; it is a JSON object with any of the keys max_rows, max_items, max_string, max_bytes, max_depth, max_fields (non-negative integers, 0 or absent means the default)", msg)
}
