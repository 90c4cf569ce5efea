package shell

import (
	"fmt"
	"strings"
	"sync"
	"unicode/utf8"

	"github.com/charmbracelet/x/ansi"
)

// capture keeps one output stream of a run within a byte budget. It keeps
// the first half of the budget and the most recent half: the start of an
// output says what ran and the end says how it finished, and a model
// reading a truncated log needs both.
type capture struct {
	mu        sync.Mutex
	headLimit int
	tailLimit int
	head      []byte
	tail      []byte // ring buffer once full
	tailPos   int    // next write position in tail once it is full
	tailFull  bool
	total     int64
	released  bool // the run's result is built; later output is dropped
}

func newCapture(limit int) *capture {
	h := limit / 2
	return &capture{headLimit: h, tailLimit: limit - h}
}

// Write never fails: output beyond the budget is counted, not refused, so
// a chatty process is never blocked or killed by its own log.
func (c *capture) Write(p []byte) (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := len(p)
	if c.released {
		return n, nil
	}
	c.total += int64(n)
	if room := c.headLimit - len(c.head); room > 0 {
		k := min(room, len(p))
		c.head = append(c.head, p[:k]...)
		p = p[k:]
	}
	if len(p) == 0 || c.tailLimit == 0 {
		return n, nil
	}
	if len(p) >= c.tailLimit {
		if c.tail == nil || cap(c.tail) < c.tailLimit {
			c.tail = make([]byte, c.tailLimit)
		}
		c.tail = c.tail[:c.tailLimit]
		copy(c.tail, p[len(p)-c.tailLimit:])
		c.tailPos, c.tailFull = 0, true
		return n, nil
	}
	if !c.tailFull {
		if len(c.tail)+len(p) <= c.tailLimit {
			c.tail = append(c.tail, p...)
			if len(c.tail) == c.tailLimit {
				c.tailFull, c.tailPos = true, 0
			}
			return n, nil
		}
		// Grow to the full ring, then fall through to wrap-around writes.
		full := make([]byte, c.tailLimit)
		copy(full, c.tail)
		c.tailPos = len(c.tail)
		c.tail = full
		c.tailFull = true
	}
	for len(p) > 0 {
		k := copy(c.tail[c.tailPos:], p)
		p = p[k:]
		c.tailPos = (c.tailPos + k) % c.tailLimit
	}
	return n, nil
}

// release frees the buffers once the run's result is built. Background jobs
// of the run may still write; their output has no reader any more.
func (c *capture) release() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.released = true
	c.head, c.tail = nil, nil
}

// bytes returns the kept output (with an elision marker when something was
// dropped) and the number of bytes dropped.
func (c *capture) bytes() ([]byte, int64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	var tail []byte
	if c.tailFull {
		tail = make([]byte, 0, c.tailLimit)
		tail = append(tail, c.tail[c.tailPos:]...)
		tail = append(tail, c.tail[:c.tailPos]...)
	} else {
		tail = c.tail
	}
	dropped := c.total - int64(len(c.head)) - int64(len(tail))
	if dropped == 0 {
		out := make([]byte, 0, len(c.head)+len(tail))
		return append(append(out, c.head...), tail...), 0
	}
	// Cut on rune boundaries so the halves stay valid text when the
	// stream was text.
	head := c.head
	for k := 1; k <= utf8.UTFMax && k <= len(head); k++ {
		if utf8.RuneStart(head[len(head)-k]) {
			if !utf8.FullRune(head[len(head)-k:]) {
				dropped += int64(k)
				head = head[:len(head)-k]
			}
			break
		}
	}
	for i := 0; i < utf8.UTFMax && len(tail) > 0 && !utf8.RuneStart(tail[0]); i++ {
		tail = tail[1:]
		dropped++
	}
	marker := fmt.Sprintf("\n[shoal: %d bytes elided here; the first %d and last %d bytes are kept]\n", dropped, len(head), len(tail))
	out := make([]byte, 0, len(head)+len(marker)+len(tail))
	out = append(out, head...)
	out = append(out, marker...)
	out = append(out, tail...)
	return out, dropped
}

// cleanOutput turns captured bytes into what a model should read: ANSI
// escape sequences removed, and carriage-return progress rewrites and
// backspace overstrikes (man pages, progress bars) resolved to the text a
// terminal would finally show. Output that is not valid UTF-8 is binary
// and is returned untouched with text=false.
func cleanOutput(b []byte, raw bool) (s string, text bool) {
	if !utf8.Valid(b) {
		return string(b), false
	}
	s = string(b)
	if raw {
		return s, true
	}
	if strings.ContainsAny(s, "\x1b\u009b") {
		s = ansi.Strip(s)
	}
	if strings.ContainsAny(s, "\r\b") {
		s = overstrike(s)
	}
	return s, true
}

// overstrike applies \r (back to column 0) and \b (back one column) the
// way a terminal does, line by line. A \r just before \n is a CRLF line
// end and is kept.
func overstrike(s string) string {
	var out strings.Builder
	out.Grow(len(s))
	for len(s) > 0 {
		line, rest, found := strings.Cut(s, "\n")
		s = rest
		crlf := found && strings.HasSuffix(line, "\r")
		if crlf {
			line = line[:len(line)-1]
		}
		if strings.ContainsAny(line, "\r\b") {
			var cells []rune
			col := 0
			for _, r := range line {
				switch r {
				case '\r':
					col = 0
				case '\b':
					if col > 0 {
						col--
					}
				default:
					if col < len(cells) {
						cells[col] = r
					} else {
						cells = append(cells, r)
					}
					col++
				}
			}
			line = string(cells)
		}
		out.WriteString(line)
		if crlf {
			out.WriteByte('\r')
		}
		if found {
			out.WriteByte('\n')
		}
	}
	return out.String()
}
