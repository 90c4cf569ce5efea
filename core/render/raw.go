package render

import (
	"unicode/utf8"

	"github.com/shoal-sh/shoal/core/rpc"
	"github.com/shoal-sh/shoal/core/value"
)

// Raw returns v for transfer (format=raw): a str as its text, bytes as
// their octets (isText false), and any other kind as its compact typed
// JSON text. A str that is not valid UTF-8 comes back as data, so it
// survives a JSON envelope as base64 instead of losing its bad bytes.
// Output longer than ceiling bytes (the kernel's raw_ceiling) is refused
// with a TOO_LARGE *rpc.Error that gives the size and how to read the value
// in parts; the work done is bounded by the ceiling.
func Raw(v value.Value, ceiling int64) (text string, data []byte, isText bool, err error) {
	switch x := v.(type) {
	case value.Str:
		if int64(len(x)) > ceiling {
			// A page of ceiling/4 characters fits whatever they are.
			return "", nil, false, rawTooLarge("str", int64(len(x)), ceiling, ceiling/utf8.UTFMax)
		}
		if !utf8.ValidString(string(x)) {
			return "", []byte(x), false, nil
		}
		return string(x), nil, true, nil
	case value.Bytes:
		if int64(len(x)) > ceiling {
			return "", nil, false, rawTooLarge("bytes", int64(len(x)), ceiling, ceiling)
		}
		return "", x, false, nil
	}
	e := &emitter{limit: int(min(ceiling, int64(maxInt))), exact: true}
	e.run(v)
	if e.over {
		return "", nil, false, rawJSONTooLarge(kindName(v), ceiling)
	}
	return string(e.buf), nil, true, nil
}

func rawJSONTooLarge(kind string, ceiling int64) error {
	return rpc.Errorf(rpc.TooLarge,
		"the %s's typed JSON is more than %d bytes, the raw ceiling (raw_ceiling in the kernel config); read a part of it with path and slice, or use format=json for an elided view",
		kind, ceiling)
}

const maxInt = int(^uint(0) >> 1)

func rawTooLarge(kind string, size, ceiling, page int64) error {
	return rpc.Errorf(rpc.TooLarge,
		"the %s is %d bytes, more than the raw ceiling of %d bytes (raw_ceiling in the kernel config); read it in parts with slice, e.g. slice=0..%d, then slice=%d..%d",
		kind, size, ceiling, page, page, 2*page)
}

func kindName(v value.Value) string {
	if v == nil {
		return "null"
	}
	return v.Kind().String()
}
