package shell

import (
	"bytes"
	"sync"
)

var newline = []byte{'\n'}

// Live is the output of a run while it runs: what a task has printed so
// far can be read from an offset, and its size and last line reported as
// progress. The zero value is ready; [RunOptions.Live] hands one to a run.
// Once the run's result is built the output lives in its value and Live
// reads nothing more.
type Live struct {
	mu             sync.Mutex
	stdout, stderr *capture
}

// Stream names accepted by [Live.Read].
const (
	StreamStdout = "stdout"
	StreamStderr = "stderr"
)

func (l *Live) attach(stdout, stderr *capture) {
	l.mu.Lock()
	l.stdout, l.stderr = stdout, stderr
	l.mu.Unlock()
}

func (l *Live) stream(name string) *capture {
	l.mu.Lock()
	defer l.mu.Unlock()
	if name == StreamStderr {
		return l.stderr
	}
	return l.stdout
}

// Chunk is what one [Live.Read] returns.
type Chunk struct {
	// Data are the bytes from From on, at most the read's max.
	Data []byte
	// From is where Data starts: the offset asked for, or later when the
	// bytes in between are no longer kept (the middle of a long output;
	// see Options.MaxCapture).
	From int64
	// Size is how many bytes the stream has written so far.
	Size int64
	// Open is false once the run's result is built: read its value.
	Open bool
}

// Read returns up to limit bytes of a stream from offset since.
func (l *Live) Read(stream string, since int64, limit int) Chunk {
	c := l.stream(stream)
	if c == nil {
		return Chunk{From: since}
	}
	return c.readFrom(since, limit)
}

// Progress is a stream's size so far in bytes and lines and its last
// line (at most 200 bytes).
type Progress struct {
	Bytes, Lines int64
	Last         string
}

// Progress reports both streams.
func (l *Live) Progress() (stdout, stderr Progress) {
	return progressOf(l.stream(StreamStdout)), progressOf(l.stream(StreamStderr))
}

func progressOf(c *capture) Progress {
	if c == nil {
		return Progress{}
	}
	c.mu.Lock()
	p := Progress{Bytes: c.total, Lines: c.lines}
	c.mu.Unlock()
	if p.Bytes > 0 {
		from := max(p.Bytes-512, 0)
		tail := c.readFrom(from, 512).Data
		tail = bytes.TrimRight(tail, "\r\n")
		if i := bytes.LastIndexByte(tail, '\n'); i >= 0 {
			tail = tail[i+1:]
		}
		if len(tail) > 200 {
			tail = tail[len(tail)-200:]
		}
		p.Last = string(bytes.ToValidUTF8(tail, nil))
	}
	return p
}

// readFrom copies up to limit bytes from offset since out of what the
// capture keeps: the head, then the tail ring.
func (c *capture) readFrom(since int64, limit int) Chunk {
	c.mu.Lock()
	defer c.mu.Unlock()
	ch := Chunk{From: since, Size: c.total, Open: !c.released}
	if c.released || since >= c.total || limit <= 0 {
		ch.From = min(since, c.total)
		return ch
	}
	since = max(since, 0)
	ch.From = since
	if since < int64(len(c.buf)) {
		// From the output as written, or the head.
		k := min(len(c.buf)-int(since), limit)
		ch.Data = append([]byte(nil), c.buf[since:int(since)+k]...)
		return ch
	}
	tailStart := c.total - int64(len(c.tail))
	if since < tailStart {
		since = tailStart // the middle is no longer kept
		ch.From = since
	}
	i := int(since - tailStart)
	n := min(len(c.tail)-i, limit)
	ch.Data = make([]byte, 0, n)
	for len(ch.Data) < n {
		pos := (c.tailPos + i + len(ch.Data)) % len(c.tail)
		end := min(len(c.tail), pos+n-len(ch.Data))
		ch.Data = append(ch.Data, c.tail[pos:end]...)
	}
	return ch
}
