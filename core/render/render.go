// Package render turns values and kernel records into what a person or a
// model reads, never more than [TextLimit] bytes of it (SPEC V4–V6).
//
// Three formats exist ([Format]): json, the typed JSON of a value with
// large parts cut out and described in-band by elision markers ([JSON]);
// render, plain human text ([Render]); and raw, the string or bytes
// themselves for transfer, bounded by a configurable ceiling instead of
// the text limit ([Raw]). Kernel records, which are plain JSON, are bounded
// the same way by [Record].
//
// Every function here costs in proportion to what it shows, not to the size
// of the value: a ten-million-row table or a 1 GiB string is read only as
// far as the output reaches. docs/values.md describes the markers.
package render

import (
	"github.com/shoal-sh/shoal/core/rpc"
)

// TextLimit caps every text a person or model sees: MCP tool text, resource
// text, and the structured JSON that accompanies it.
const TextLimit = 64 << 10

// MinLimit is the smallest limit [JSON] and [Record] accept: room for the
// elision marker of a value cut to nothing.
const MinLimit = 1 << 10

// Format is how a value read is represented.
type Format uint8

const (
	// FormatJSON is typed JSON, elided to the text limit (the default).
	FormatJSON Format = iota
	// FormatRender is human text (text/plain).
	FormatRender
	// FormatRaw is the string or bytes themselves (text/plain), bounded by
	// the raw ceiling instead of the text limit.
	FormatRaw
)

var formatNames = [...]string{"json", "render", "raw"}

// ParseFormat reads a format name; the empty string is json. An unknown
// name is an INVALID_PARAMS *rpc.Error listing the three.
func ParseFormat(s string) (Format, error) {
	if s == "" {
		return FormatJSON, nil
	}
	for i, n := range formatNames {
		if n == s {
			return Format(i), nil
		}
	}
	return 0, rpc.Errorf(rpc.InvalidParams, "unknown format %q: use json (the default), render or raw", s)
}

func (f Format) String() string {
	if int(f) < len(formatNames) {
		return formatNames[f]
	}
	return "invalid"
}

// MimeType is the MIME type of a read in this format.
func (f Format) MimeType() string {
	if f == FormatJSON {
		return "application/json"
	}
	return "text/plain"
}
