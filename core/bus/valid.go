package bus

import "bytes"

// validJSON reports whether p is exactly one JSON value, accepting the
// same inputs as encoding/json.Valid (FuzzValidJSON checks the two agree).
//
// Why not json.Valid itself: on the publish path it cost about 250 ns for
// a 30-byte payload here, half of the whole publish budget, because its
// scanner calls a state function per byte and takes a pooled scanner per
// call. This single pass does the same check in a fraction of that.
func validJSON(p []byte) bool {
	var stackBuf [32]byte
	stack := stackBuf[:0] // open containers, '{' or '['
	i := 0
value:
	i = skipSpace(p, i)
	if i >= len(p) {
		return false
	}
	switch p[i] {
	case '{', '[':
		// encoding/json counts empty containers toward its depth limit too.
		if len(stack) >= maxDepth {
			return false
		}
		open, closer := p[i], p[i]+2 // '{'+2 == '}', '['+2 == ']'
		i = skipSpace(p, i+1)
		if i < len(p) && p[i] == closer {
			i++
			break
		}
		stack = append(stack, open)
		if open == '{' {
			goto key
		}
		goto value
	case '"':
		if i = scanString(p, i); i < 0 {
			return false
		}
	case 't':
		if !bytes.HasPrefix(p[i:], litTrue) {
			return false
		}
		i += len(litTrue)
	case 'f':
		if !bytes.HasPrefix(p[i:], litFalse) {
			return false
		}
		i += len(litFalse)
	case 'n':
		if !bytes.HasPrefix(p[i:], litNull) {
			return false
		}
		i += len(litNull)
	default:
		if i = scanNumber(p, i); i < 0 {
			return false
		}
	}
	// A value ended: close containers until one continues with a comma.
	for {
		i = skipSpace(p, i)
		if len(stack) == 0 {
			return i == len(p)
		}
		if i >= len(p) {
			return false
		}
		top := stack[len(stack)-1]
		switch {
		case p[i] == ',':
			i++
			if top == '{' {
				goto key
			}
			goto value
		case p[i] == top+2:
			i++
			stack = stack[:len(stack)-1]
		default:
			return false
		}
	}
key:
	i = skipSpace(p, i)
	if i >= len(p) || p[i] != '"' {
		return false
	}
	if i = scanString(p, i); i < 0 {
		return false
	}
	i = skipSpace(p, i)
	if i >= len(p) || p[i] != ':' {
		return false
	}
	i++
	goto value
}

// maxDepth is encoding/json's nesting limit.
const maxDepth = 10000

var (
	litTrue  = []byte("true")
	litFalse = []byte("false")
	litNull  = []byte("null")
)

func skipSpace(p []byte, i int) int {
	for i < len(p) {
		switch p[i] {
		case ' ', '\t', '\n', '\r':
			i++
		default:
			return i
		}
	}
	return i
}

// scanString scans the string starting at the quote p[i] and returns the
// index after its closing quote, or -1. Like encoding/json it does not
// insist on valid UTF-8.
func scanString(p []byte, i int) int {
	for i++; i < len(p); i++ {
		// Plain characters are the common case: skip them in a tight loop.
		for i < len(p) && plain[p[i]] {
			i++
		}
		if i >= len(p) {
			return -1
		}
		switch c := p[i]; {
		case c == '"':
			return i + 1
		case c < 0x20:
			return -1
		case c == '\\':
			i++
			if i >= len(p) {
				return -1
			}
			switch p[i] {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
			case 'u':
				if i+4 >= len(p) {
					return -1
				}
				for _, h := range p[i+1 : i+5] {
					if !isHex(h) {
						return -1
					}
				}
				i += 4
			default:
				return -1
			}
		}
	}
	return -1
}

// plain marks the bytes that may stand for themselves inside a string.
var plain = func() (t [256]bool) {
	for c := 0x20; c < 256; c++ {
		t[c] = c != '"' && c != '\\'
	}
	return t
}()

func isHex(c byte) bool {
	return c >= '0' && c <= '9' || c >= 'a' && c <= 'f' || c >= 'A' && c <= 'F'
}

// scanNumber scans the number starting at p[i] and returns the index after
// it, or -1.
func scanNumber(p []byte, i int) int {
	if i < len(p) && p[i] == '-' {
		i++
	}
	switch {
	case i >= len(p):
		return -1
	case p[i] == '0':
		i++
	case p[i] >= '1' && p[i] <= '9':
		i = digits(p, i)
	default:
		return -1
	}
	if i < len(p) && p[i] == '.' {
		j := digits(p, i+1)
		if j == i+1 {
			return -1
		}
		i = j
	}
	if i < len(p) && (p[i] == 'e' || p[i] == 'E') {
		i++
		if i < len(p) && (p[i] == '+' || p[i] == '-') {
			i++
		}
		j := digits(p, i)
		if j == i {
			return -1
		}
		i = j
	}
	return i
}

func digits(p []byte, i int) int {
	for i < len(p) && p[i] >= '0' && p[i] <= '9' {
		i++
	}
	return i
}
