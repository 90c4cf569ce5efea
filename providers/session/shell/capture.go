package shell

import (
	"bytes"
	"fmt"
	"strings"
	"sync"
	"unicode/utf8"
	"unsafe"

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
	// head is kept in chunks that are filled and never moved, so a large
	// output is copied once on the way in instead of through a series of
	// doubling reallocations.
	head     [][]byte
	headLen  int
	tail     []byte // ring buffer once full
	tailPos  int    // next write position in tail once it is full
	tailFull bool
	total    int64
	lines    int64 // newlines written, for progress reports
	released bool  // the run's result is built; later output is dropped
	// filter, when set, may replace what one Write writes (the
	// interpreter's own messages, reworded as bash's; see
	// run.filterMessage).
	filter func([]byte) []byte
}

const (
	headChunkMin = 4 << 10
	headChunkMax = 1 << 20
)

func newCapture(limit int) *capture {
	h := limit / 2
	return &capture{headLimit: h, tailLimit: limit - h}
}

// Write never fails: output beyond the budget is counted, not refused, so
// a chatty process is never blocked or killed by its own log.
func (c *capture) Write(p []byte) (int, error) {
	n := len(p)
	if c.filter != nil {
		p = c.filter(p)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.released {
		return n, nil
	}
	c.total += int64(len(p))
	c.lines += int64(bytes.Count(p, newline))
	for len(p) > 0 && c.headLen < c.headLimit {
		last := len(c.head) - 1
		if last < 0 || len(c.head[last]) == cap(c.head[last]) {
			// Chunks grow with the output (4 KiB up to 1 MiB), so a short
			// output allocates little and a long one few chunks.
			size := min(max(headChunkMin, c.headLen), headChunkMax, c.headLimit-c.headLen)
			c.head = append(c.head, make([]byte, 0, size))
			last++
		}
		ch := c.head[last]
		k := min(cap(ch)-len(ch), len(p))
		c.head[last] = append(ch, p[:k]...)
		c.headLen += k
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
// dropped) and the number of bytes dropped. The slice is freshly
// allocated and belongs to the caller.
func (c *capture) bytes() ([]byte, int64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	tailLen := len(c.tail)
	dropped := c.total - int64(c.headLen) - int64(tailLen)
	if c.total == 0 {
		return nil, 0
	}
	// Exactly sized: the result's text shares this memory for as long as
	// the value lives (in the transcript, maybe long), so no spare room.
	const markerMax = 160 // the marker with three 19-digit counts
	room := 0
	if dropped > 0 {
		room = markerMax
	}
	out := make([]byte, 0, c.headLen+tailLen+room)
	for _, ch := range c.head {
		out = append(out, ch...)
	}
	if dropped == 0 {
		return c.appendTail(out), 0
	}
	// Cut on rune boundaries so the halves stay valid text when the
	// stream was text.
	headLen := len(out)
	for k := 1; k <= utf8.UTFMax && k <= headLen; k++ {
		if utf8.RuneStart(out[headLen-k]) {
			if !utf8.FullRune(out[headLen-k:]) {
				dropped += int64(k)
				out = out[:headLen-k]
			}
			break
		}
	}
	headLen = len(out)
	// The tail goes in after the marker, whose length depends on how much
	// of the tail's start is cut: append it, cut it, then move it.
	out = c.appendTail(out)
	tail := out[headLen:]
	skip := 0
	for skip < utf8.UTFMax && skip < len(tail) && !utf8.RuneStart(tail[skip]) {
		skip++
	}
	dropped += int64(skip)
	tailLen = len(tail) - skip
	marker := fmt.Sprintf("\n[shoal: %d bytes elided here; the first %d and last %d bytes are kept]\n", dropped, headLen, tailLen)
	out = out[:headLen+len(marker)+tailLen]
	copy(out[headLen+len(marker):], tail[skip:])
	copy(out[headLen:], marker)
	return out, dropped
}

// appendTail appends the tail ring in order.
func (c *capture) appendTail(out []byte) []byte {
	if c.tailFull {
		out = append(out, c.tail[c.tailPos:]...)
		return append(out, c.tail[:c.tailPos]...)
	}
	return append(out, c.tail...)
}

// cleanOutput turns captured bytes into what a model should read: ANSI
// escape sequences removed, and carriage-return progress rewrites and
// backspace overstrikes (man pages, progress bars) resolved to the text a
// terminal would finally show. Output that is not valid UTF-8 is binary
// and is returned untouched with text=false. cleanOutput takes b over:
// the caller must not change it afterwards.
func cleanOutput(b []byte, raw bool) (s string, text bool) {
	// b is the capture's fresh copy and nothing writes it again, so the
	// string shares its memory instead of copying it once more.
	s = unsafe.String(unsafe.SliceData(b), len(b))
	if plainASCII(s) {
		return s, true // valid, and nothing below would change it
	}
	if !utf8.ValidString(s) {
		return s, false
	}
	if raw {
		return s, true
	}
	// Byte scans (vectorised IndexByte) decide whether any work is due, so
	// clean output costs one pass per check and never a per-rune one. The
	// 8-bit CSI U+009B is the two bytes C2 9B in UTF-8.
	if strings.IndexByte(s, 0x1b) >= 0 || strings.Contains(s, "\u009b") {
		s = ansi.Strip(s)
	}
	if needsOverstrike(s) {
		s = overstrike(s)
	}
	return s, true
}

// plainASCII reports whether s is ASCII without ESC, backspace or carriage
// return: text cleanOutput returns as it is. One pass eight bytes at a
// time decides it for the common case (a build or test log), instead of
// the six passes of the checks it stands for.
func plainASCII(s string) bool {
	const ones, highs = 0x0101010101010101, 0x8080808080808080
	i := 0
	for ; i+8 <= len(s); i += 8 {
		b := s[i : i+8]
		w := uint64(b[0]) | uint64(b[1])<<8 | uint64(b[2])<<16 | uint64(b[3])<<24 |
			uint64(b[4])<<32 | uint64(b[5])<<40 | uint64(b[6])<<48 | uint64(b[7])<<56
		// Non-zero when some byte is not ASCII, or is ESC, \b or \r (the
		// "has a zero byte" test, (x - ones) &^ x, on w with each XORed out).
		esc, bs, cr := w^ones*0x1b, w^ones*'\b', w^ones*'\r'
		if (w|(esc-ones)&^esc|(bs-ones)&^bs|(cr-ones)&^cr)&highs != 0 {
			return false
		}
	}
	for ; i < len(s); i++ {
		if c := s[i]; c >= utf8.RuneSelf || c == 0x1b || c == '\b' || c == '\r' {
			return false
		}
	}
	return true
}

// needsOverstrike reports whether s holds a backspace or a carriage
// return that is not part of a CRLF line end: CRLF-only output (Windows
// tools, HTTP dumps) is left as it is without being rebuilt.
func needsOverstrike(s string) bool {
	if strings.IndexByte(s, '\b') >= 0 {
		return true
	}
	for i := 0; ; {
		j := strings.IndexByte(s[i:], '\r')
		if j < 0 {
			return false
		}
		i += j + 1
		if i == len(s) || s[i] != '\n' {
			return true
		}
	}
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
