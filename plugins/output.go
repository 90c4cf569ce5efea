package plugins

import (
	"bytes"
	"log/slog"
	"sync"

	"github.com/shoal-sh/shoal/internal/clip"
)

// Bounds of what a plugin can make the kernel keep or log.
const (
	outputTail     = 4 << 10 // bytes of recent stderr kept to explain failures
	outputLine     = 1 << 10 // longest line logged; the rest is cut
	outputPerCall  = 32      // lines logged per call; the rest are counted
	outputStreamed = "plugin output"
)

// output captures one stream of one instance. Lines go to the kernel log,
// at most outputPerCall per call so a chatty or hostile plugin cannot
// flood it; the last few KiB stay in memory because a Go guest prints the
// reason of a fatal error (deadlock, out of memory) there just before it
// traps.
type output struct {
	log    *slog.Logger
	plugin string
	stream string

	mu         sync.Mutex
	line       []byte
	cut        bool // the current line passed outputLine
	tail       []byte
	logged     int
	suppressed int
}

func newOutput(log *slog.Logger, plugin, stream string) *output {
	return &output{log: log, plugin: plugin, stream: stream}
}

// Write never fails: a plugin's print must not fail because of the host.
func (o *output) Write(p []byte) (int, error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.tail = append(o.tail, p...)
	if len(o.tail) > outputTail {
		o.tail = append(o.tail[:0], o.tail[len(o.tail)-outputTail:]...)
	}
	rest := p
	for len(rest) > 0 {
		i := bytes.IndexByte(rest, '\n')
		chunk := rest
		if i >= 0 {
			chunk = rest[:i]
		}
		if len(o.line)+len(chunk) > outputLine {
			o.cut = true
		}
		if room := outputLine - len(o.line); room > 0 {
			o.line = append(o.line, chunk[:min(room, len(chunk))]...)
		}
		if i < 0 {
			break
		}
		o.emit()
		rest = rest[i+1:]
	}
	return len(p), nil
}

func (o *output) emit() {
	if o.logged < outputPerCall {
		line := string(o.line)
		if o.cut {
			line += " …(line cut)"
		}
		o.log.Info(outputStreamed, "plugin", o.plugin, "stream", o.stream, "line", line)
		o.logged++
	} else {
		o.suppressed++
	}
	o.line, o.cut = o.line[:0], false
}

// endCall flushes a pending partial line and resets the per-call budget.
func (o *output) endCall() {
	o.mu.Lock()
	defer o.mu.Unlock()
	if len(o.line) > 0 {
		o.emit()
	}
	if o.suppressed > 0 {
		o.log.Warn("plugin output suppressed", "plugin", o.plugin, "stream", o.stream, "lines", o.suppressed)
	}
	o.logged, o.suppressed = 0, 0
}

// reason returns the line of the captured output that best explains a
// failure: a Go runtime "fatal error:" or "panic:" line, else the last
// non-empty line.
func (o *output) reason() string {
	o.mu.Lock()
	defer o.mu.Unlock()
	lines := bytes.Split(o.tail, []byte("\n"))
	for _, prefix := range []string{"fatal error:", "panic:", "runtime: out of memory"} {
		for _, l := range lines {
			if bytes.HasPrefix(l, []byte(prefix)) {
				return clip.String(string(l), 300)
			}
		}
	}
	for i := len(lines) - 1; i >= 0; i-- {
		if l := bytes.TrimSpace(lines[i]); len(l) > 0 {
			return clip.String(string(l), 300)
		}
	}
	return ""
}

// mentions reports whether the captured output contains s.
func (o *output) mentions(s string) bool {
	o.mu.Lock()
	defer o.mu.Unlock()
	return bytes.Contains(o.tail, []byte(s))
}
