package shell

import (
	"bytes"
	"fmt"
	"slices"
	"strings"
	"sync"
	"unicode/utf8"
	"unsafe"

	"github.com/charmbracelet/x/ansi"

	"github.com/shoal-sh/shoal/providers/val/spill"
)

// capture keeps one output stream of a run within a byte budget. It keeps
// the first half of the budget and the most recent half: the start of an
// output says what ran and the end says how it finished, and a model
// reading a truncated log needs both.
type capture struct {
	mu        sync.Mutex
	headLimit int
	tailLimit int
	// buf holds the output as written while it fits the budget, and is
	// only ever appended to: its bytes become the result's text without
	// a copy, and an Ahead encodes its parts as they arrive. Once the
	// output outgrows the budget, buf is the head and tail the most
	// recent bytes, a ring.
	buf      []byte
	tail     []byte // ring once the output outgrew the budget, else nil
	tailPos  int    // next write position in tail
	taken    bool   // bytes() handed out buf: it must not be written over
	mixed    bool   // some byte written was not plain ASCII (see plainASCII)
	total    int64
	lines    int64 // newlines written, for progress reports
	released bool  // the run's result is built; later output is dropped
	// filter, when set, may replace what one Write writes (the
	// interpreter's own messages, reworded as bash's; see
	// run.filterMessage).
	filter func([]byte) []byte
	// ahead, once the output is long enough (aheadFrom), encodes its
	// parts for the content store while the run goes on.
	ahead *spill.Ahead
	// sumAfter, when set, is how the blob this output's text will end up
	// in is guessed to start: its ahead then hashes the blob too (see
	// spill.NewAheadAfter).
	sumAfter []byte
}

const (
	bufMin = 4 << 10
	// bufJump is the size from which buf grows to the whole budget at
	// once (bufBig at least) instead of doubling: a long output is then
	// copied once more at most.
	bufJump = 1 << 20
	bufBig  = 16 << 20
	// aheadFrom is the output size from which its parts are encoded as
	// they arrive: below it, encoding it once complete is quick enough.
	aheadFrom = 8 * spill.PartSize
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
	if !c.released {
		c.keep(p)
	}
	return n, nil
}

// keep writes p (already filtered) into buf or the tail ring; c.mu is
// held.
func (c *capture) keep(p []byte) {
	c.count(p)
	if c.tail == nil {
		if len(c.buf)+len(p) <= c.headLimit+c.tailLimit {
			c.grow(len(p))
			c.buf = append(c.buf, p...)
			c.feedAhead()
			return
		}
		p = c.overflow(p)
	}
	if len(p) >= len(c.tail) {
		copy(c.tail, p[len(p)-len(c.tail):])
		c.tailPos = 0
		return
	}
	for len(p) > 0 {
		k := copy(c.tail[c.tailPos:], p)
		p = p[k:]
		c.tailPos = (c.tailPos + k) % len(c.tail)
	}
}

// count accounts for p, about to be kept or dropped.
func (c *capture) count(p []byte) {
	c.total += int64(len(p))
	c.lines += int64(bytes.Count(p, newline))
	// Checked as it arrives, so that the result of a long plain output
	// does not wait for one more pass over it.
	c.mixed = c.mixed || !plainASCII(unsafe.String(unsafe.SliceData(p), len(p)))
}

// grow makes room in buf for n more bytes (within the budget).
func (c *capture) grow(n int) {
	if cap(c.buf)-len(c.buf) >= n {
		return
	}
	limit := c.headLimit + c.tailLimit
	size := max(2*cap(c.buf), len(c.buf)+n, bufMin)
	if size > bufJump {
		size = max(size, bufBig)
	}
	size = max(min(size, limit), len(c.buf)+n)
	b := makeNoZero(size)
	c.buf = append(b, c.buf...)
}

// makeNoZero returns an empty slice with room for n bytes that are not
// cleared first (what strings.Builder allocates): the capture writes
// every byte it reads, and clearing a buffer of the whole budget cost
// as much as filling it.
func makeNoZero(n int) []byte {
	var b strings.Builder
	b.Grow(n)
	b.WriteByte(0) // so that the string's data is the buffer
	return unsafe.Slice(unsafe.StringData(b.String()), b.Cap())[:0]
}

// feedAhead hands a long output's complete parts to its Ahead, which it
// starts once the output is long enough.
func (c *capture) feedAhead() {
	if c.taken || len(c.buf) < aheadFrom {
		return
	}
	if c.ahead == nil {
		c.ahead = spill.NewAheadAfter(c.sumAfter)
	}
	c.ahead.Feed(unsafe.String(unsafe.SliceData(c.buf), len(c.buf)))
}

// stopAhead stops the encoding ahead (the output is taken or outgrew the
// budget): its goroutine reads buf no more.
func (c *capture) stopAhead() {
	if c.ahead != nil {
		c.ahead.Stop()
	}
}

// overflow turns buf into the head and the tail ring, the first time the
// output outgrows the budget, and returns what of p is left for the ring.
// The ring is buf's second half unless bytes() handed buf out.
func (c *capture) overflow(p []byte) []byte {
	c.stopAhead()
	if k := c.headLimit - len(c.buf); k > 0 {
		c.grow(k)
		c.buf = append(c.buf, p[:k]...)
		p = p[k:]
	}
	kept := c.buf[c.headLimit:]
	if c.taken || cap(c.buf) < c.headLimit+c.tailLimit {
		c.tail = make([]byte, c.tailLimit)
		copy(c.tail, kept)
	} else {
		c.tail = c.buf[c.headLimit : c.headLimit+c.tailLimit]
	}
	c.tailPos = 0
	if len(c.tail) > 0 {
		c.tailPos = len(kept) % len(c.tail)
	}
	c.buf = c.buf[:c.headLimit:c.headLimit]
	return p
}

// plain reports whether every byte written was plain ASCII, which the
// kept output (with its marker, if any) then is too.
func (c *capture) plain() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return !c.mixed
}

// release frees the buffers once the run's result is built. Background jobs
// of the run may still write; their output has no reader any more.
func (c *capture) release() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.stopAhead()
	c.released = true
	c.buf, c.tail = nil, nil
}

// bytes returns the kept output (with an elision marker when something was
// dropped) and the number of bytes dropped. The capture does not write
// the returned bytes again. The Ahead that encoded parts of them, if any,
// is stopped.
func (c *capture) bytes() ([]byte, int64, *spill.Ahead) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.stopAhead()
	if c.total == 0 {
		return nil, 0, nil
	}
	if c.tail == nil {
		// The result's text shares this memory for as long as the value
		// lives (in the transcript, maybe long): a buffer mostly empty is
		// copied to one of the right size.
		if cap(c.buf)-len(c.buf) > len(c.buf) {
			out := slices.Clip(slices.Clone(c.buf))
			if c.ahead != nil {
				c.ahead.Moved(unsafe.String(unsafe.SliceData(out), len(out)))
			}
			return out, 0, c.ahead
		}
		c.taken = true
		return slices.Clip(c.buf), 0, c.ahead
	}
	dropped := c.total - int64(len(c.buf)) - int64(len(c.tail))
	const markerMax = 160 // the marker with three 19-digit counts
	out := make([]byte, 0, len(c.buf)+len(c.tail)+markerMax)
	out = append(out, c.buf...)
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
	out = append(out, c.tail[c.tailPos:]...)
	out = append(out, c.tail[:c.tailPos]...)
	tail := out[headLen:]
	skip := 0
	for skip < utf8.UTFMax && skip < len(tail) && !utf8.RuneStart(tail[skip]) {
		skip++
	}
	dropped += int64(skip)
	tailLen := len(tail) - skip
	marker := fmt.Sprintf("\n[shoal: %d bytes elided here; the first %d and last %d bytes are kept]\n", dropped, headLen, tailLen)
	out = out[:headLen+len(marker)+tailLen]
	copy(out[headLen+len(marker):], tail[skip:])
	copy(out[headLen:], marker)
	return out, dropped, nil
}

// cleanOutput turns captured bytes into what a model should read: ANSI
// escape sequences removed, and carriage-return progress rewrites and
// backspace overstrikes (man pages, progress bars) resolved to the text a
// terminal would finally show. Output that is not valid UTF-8 is binary
// and is returned untouched with text=false. cleanOutput takes b over:
// the caller must not change it afterwards. plain says that b is known
// to be plain ASCII (see plainASCII).
func cleanOutput(b []byte, raw, plain bool) (s string, text bool) {
	// Nothing writes b again (see capture.bytes), so the string shares
	// its memory instead of copying it once more.
	s = unsafe.String(unsafe.SliceData(b), len(b))
	if plain || plainASCII(s) {
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
		// Most words are printable ASCII, told by one test ("has a byte
		// less than 0x20": (x - 0x20s) &^ x), 2.5 times as fast as the
		// exact one below.
		if (w|(w-ones*0x20)&^w)&highs == 0 {
			continue
		}
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
