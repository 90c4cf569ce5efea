package value

import (
	"math"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/shoal-sh/shoal/core/rpc"
)

// OpenEnd is the End of a [Slice] written "a.." (no end): up to the length.
const OpenEnd = math.MinInt

// Slice is a half-open range [Start, End) over the items of a list, the
// rows of a table, the octets of bytes or the Unicode scalar values of a
// string (SPEC V3). A negative bound counts from the end: -3 is the third
// item from the end, so -3.. is the last three and -20..-10 the ten before
// the last ten. End past the length clamps to it; End == [OpenEnd] means
// the length.
type Slice struct {
	Start, End int
}

// ParseSlice reads "a..b" or "a.." (to the end), where a and b are
// decimal integers, negative ones counting from the end. When both bounds
// count from the same side, a must not be after b. Anything else is an
// *rpc.Error with code BAD_SLICE.
func ParseSlice(s string) (Slice, error) {
	a, b, ok := strings.Cut(s, "..")
	if strings.HasPrefix(s, "[") {
		return Slice{}, badSlice(s, `slices are written a..b (end exclusive), not as a JSON array: use 0..50`)
	}
	if !ok {
		return Slice{}, badSlice(s, `expected a..b, e.g. 0..50 (end exclusive), 50.. for the rest or -20.. for the last twenty`)
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
	if (start < 0) == (end < 0) && start > end {
		return Slice{}, badSlice(s, "start "+a+" is after end "+b+"; write a..b with a <= b")
	}
	return Slice{Start: start, End: end}, nil
}

func sliceBound(s, n, which string) (int, error) {
	if n == "" {
		return 0, badSlice(s, "the "+which+" is missing; write a..b, e.g. 0..50")
	}
	digits := strings.TrimPrefix(n, "-")
	if digits == "" {
		return 0, badSlice(s, "the "+which+" "+strconv.Quote(n)+" is not an integer")
	}
	for i := 0; i < len(digits); i++ {
		if digits[i] < '0' || digits[i] > '9' {
			return 0, badSlice(s, "the "+which+" "+strconv.Quote(n)+" is not an integer (negative counts from the end: -3..)")
		}
	}
	v, err := strconv.Atoi(n)
	if err != nil || v == OpenEnd {
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

// FromEnd reports whether a bound counts from the end, so applying the
// slice needs the length first.
func (s Slice) FromEnd() bool { return s.Start < 0 || (s.End < 0 && s.End != OpenEnd) }

// Bounds resolves s against a length n: negative bounds count from the
// end, everything clamps to [0, n], and a start past the end gives an
// empty range at the end.
func (s Slice) Bounds(n int) (int, int) {
	resolve := func(i int) int {
		if i < 0 {
			i += n
		}
		return min(max(i, 0), n)
	}
	end := n
	if s.End != OpenEnd {
		end = resolve(s.End)
	}
	start := min(resolve(s.Start), end)
	return start, end
}

// ApplySlice takes s of v. Lists slice by item, tables by row, bytes by
// octet and strings by Unicode scalar value (an invalid UTF-8 byte counts
// as one); a string is only scanned up to the end of the slice unless a
// bound counts from the end. The result shares memory with v. A record or
// scalar is a BAD_SLICE error.
func ApplySlice(v Value, s Slice) (Value, error) {
	out, _, err := ApplySliceAt(v, s)
	return out, err
}

// ApplySliceAt is [ApplySlice] that also returns where the result starts
// in v (the resolved start), for notes that name further slices.
func ApplySliceAt(v Value, s Slice) (Value, int, error) {
	if s.End != OpenEnd && (s.Start < 0) == (s.End < 0) && s.Start > s.End {
		return nil, 0, rpc.Errorf(rpc.BadSlice, "invalid slice %s: start is after end", s)
	}
	switch x := v.(type) {
	case List:
		a, b := s.Bounds(len(x))
		return x[a:b:b], a, nil
	case *Table:
		a, b := s.Bounds(len(x.Rows))
		return &Table{Cols: x.Cols, Rows: x.Rows[a:b:b]}, a, nil
	case Bytes:
		a, b := s.Bounds(len(x))
		return x[a:b:b], a, nil
	case Str:
		str := string(x)
		if s.FromEnd() {
			a, _ := s.Bounds(countChars(str))
			i, j := StrRange(str, s)
			return x[i:j], a, nil
		}
		i, j := StrRange(str, s)
		return x[i:j], s.Start, nil
	}
	return nil, 0, rpc.Errorf(rpc.BadSlice, "cannot slice %s: slices apply to list, table, str and bytes; use a path to reach one first", articleOf(v))
}

// StrRange returns the byte offsets of the characters s selects in str,
// counting Unicode scalar values (an invalid byte counts as one). Without
// a bound from the end it reads str only up to the end of the range.
func StrRange(str string, s Slice) (int, int) {
	if s.FromEnd() {
		a, b := s.Bounds(countChars(str))
		i := charOffset(str, 0, a)
		return i, charOffset(str, i, b-a)
	}
	a := charOffset(str, 0, s.Start)
	if s.End == OpenEnd {
		return a, len(str)
	}
	return a, charOffset(str, a, max(s.End-s.Start, 0))
}

// countChars counts str's characters as [StrRange] does: an invalid byte
// is one.
func countChars(str string) int { return utf8.RuneCountInString(str) }

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
