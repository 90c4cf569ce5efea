package value

import (
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/shoal-sh/shoal/core/rpc"
)

// OpenEnd is the End of a [Slice] written "a.." (no end): up to the length.
const OpenEnd = -1

// Slice is a half-open range [Start, End) over the items of a list, the
// rows of a table, the octets of bytes or the Unicode scalar values of a
// string (SPEC V3). End past the length clamps to it; End == [OpenEnd]
// means the length.
type Slice struct {
	Start, End int
}

// ParseSlice reads "a..b" (a, b non-negative decimal integers, a <= b) or
// "a.." (from a to the end). Anything else is an *rpc.Error with code
// BAD_SLICE.
func ParseSlice(s string) (Slice, error) {
	a, b, ok := strings.Cut(s, "..")
	if strings.HasPrefix(s, "[") {
		return Slice{}, badSlice(s, `slices are written a..b (end exclusive), not as a JSON array: use 0..50`)
	}
	if !ok {
		return Slice{}, badSlice(s, `expected a..b, e.g. 0..50 (end exclusive) or 50.. for the rest`)
	}
	start, err := sliceBound(s, a, "start")
	if err != nil {
		return Slice{}, err
	}
	if b == "" {
		return Slice{Start: start, End: OpenEnd}, nil
	}
	end, err := sliceBound(s, b, "end")
	if err != nil {
		return Slice{}, err
	}
	if start > end {
		return Slice{}, badSlice(s, "start "+a+" is after end "+b+"; write a..b with a <= b")
	}
	return Slice{Start: start, End: end}, nil
}

func sliceBound(s, n, which string) (int, error) {
	if n == "" {
		return 0, badSlice(s, "the "+which+" is missing; write a..b, e.g. 0..50")
	}
	for i := 0; i < len(n); i++ {
		if n[i] < '0' || n[i] > '9' {
			return 0, badSlice(s, "the "+which+" "+strconv.Quote(n)+" is not a non-negative integer")
		}
	}
	v, err := strconv.Atoi(n)
	if err != nil {
		return 0, badSlice(s, "the "+which+" "+n+" is too large")
	}
	return v, nil
}

func badSlice(s, msg string) error {
	return rpc.Errorf(rpc.BadSlice, "malformed slice %q: %s", s, msg)
}

// String returns the slice in its URI form, "a..b" or "a..".
func (s Slice) String() string {
	if s.End == OpenEnd {
		return strconv.Itoa(s.Start) + ".."
	}
	return strconv.Itoa(s.Start) + ".." + strconv.Itoa(s.End)
}

// bounds clamps s to a length n.
func (s Slice) bounds(n int) (int, int) {
	end := s.End
	if end == OpenEnd || end > n {
		end = n
	}
	start := min(s.Start, end)
	return start, end
}

// ApplySlice takes s of v. Lists slice by item, tables by row, bytes by
// octet and strings by Unicode scalar value (an invalid UTF-8 byte counts
// as one); a string is only scanned up to the end of the slice. The result
// shares memory with v. A record or scalar is a BAD_SLICE error.
func ApplySlice(v Value, s Slice) (Value, error) {
	if s.Start < 0 || (s.End < 0 && s.End != OpenEnd) || (s.End != OpenEnd && s.Start > s.End) {
		return nil, rpc.Errorf(rpc.BadSlice, "invalid slice %d..%d: bounds are non-negative and start <= end", s.Start, s.End)
	}
	switch x := v.(type) {
	case List:
		a, b := s.bounds(len(x))
		return x[a:b:b], nil
	case *Table:
		a, b := s.bounds(len(x.Rows))
		return &Table{Cols: x.Cols, Rows: x.Rows[a:b:b]}, nil
	case Bytes:
		a, b := s.bounds(len(x))
		return x[a:b:b], nil
	case Str:
		a, b := StrRange(string(x), s)
		return x[a:b], nil
	}
	return nil, rpc.Errorf(rpc.BadSlice, "cannot slice %s: slices apply to list, table, str and bytes; use a path to reach one first", articleOf(v))
}

// StrRange returns the byte offsets of the characters [s.Start, s.End) of
// str, counting Unicode scalar values (an invalid byte counts as one). It
// reads str only up to the end of the range.
func StrRange(str string, s Slice) (int, int) {
	a := charOffset(str, 0, s.Start)
	if s.End == OpenEnd {
		return a, len(str)
	}
	return a, charOffset(str, a, s.End-s.Start)
}

// charOffset advances n characters from byte offset from.
func charOffset(str string, from, n int) int {
	i := from
	for ; n > 0 && i < len(str); n-- {
		if str[i] < utf8.RuneSelf {
			i++
			continue
		}
		_, size := utf8.DecodeRuneInString(str[i:])
		i += size
	}
	return i
}
