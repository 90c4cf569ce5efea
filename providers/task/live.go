package task

import (
	"bytes"
	"fmt"
	"strconv"
	"time"

	"github.com/shoal-sh/shoal/core"
	"github.com/shoal-sh/shoal/core/rpc"
	"github.com/shoal-sh/shoal/core/uri"
	"github.com/shoal-sh/shoal/core/value"
)

// Bounds of live output reads.
const (
	// LiveReadLimit bounds one read with since=.
	LiveReadLimit = 64 << 10
	// liveAllLimit bounds a read without since: all the output kept.
	liveAllLimit = 64 << 20
)

// readStream serves shoal://task/{id}/stdout and …/stderr: the output so
// far as a string value (so path, slice, grep and format apply), with
// meta saying where it starts, where the next read starts and how much
// there is. While the task runs the bytes come from its live output;
// once it ended, from its value.
func (p *Provider) readStream(c *core.Caller, t *Task, stream string, u *uri.URI) (*core.Content, error) {
	since, limit, all := int64(0), liveAllLimit, true
	if s, ok := u.Get("since"); ok && s != "" {
		n, err := strconv.ParseInt(s, 10, 64)
		if err != nil || n < 0 {
			return nil, rpc.Errorf(rpc.InvalidParams, "since is a byte offset ≥ 0, e.g. since=0, then the meta.next of the previous read (got %q)", s)
		}
		since, limit, all = n, LiveReadLimit, false
	}
	rec := t.Record()
	var data []byte
	var from, next, size int64
	open := false
	if t.out != nil && rec.State == Running {
		data, from, next, size, open = readAll(t.out, stream, since, limit, all)
	}
	if !open && rec.State == Running && t.out != nil {
		// The run ended and its value is being recorded: it holds the
		// output in a moment.
		select {
		case <-t.done:
		case <-time.After(10 * time.Second):
		}
		rec = t.Record()
	}
	if !open {
		// The run's value holds the output now.
		full, err := p.finishedStream(c, rec, stream)
		if err != nil {
			return nil, err
		}
		size = int64(len(full))
		from = min(since, size)
		data = full[from:min(size, from+int64(limit))]
		next = from + int64(len(data))
	}
	meta := map[string]any{"task": rec.Task, "stream": stream, "state": rec.State, "since": since, "from": from,
		"next": next, "size": size}
	if from > since {
		meta["skipped"] = from - since
	}
	var v value.Value = value.Str(data)
	return &core.Content{Value: v, Ref: rec.Task, Meta: meta}, nil
}

// readAll reads a stream from since up to limit bytes, across the kept
// head and tail of a long output. The part in between is no longer kept:
// with mark, a note stands for it; without, the read stops before it (the
// next read from next skips it and says so). from is where data starts,
// next the offset after it.
func readAll(out Output, stream string, since int64, limit int, mark bool) (data []byte, from, next, size int64, open bool) {
	var buf bytes.Buffer
	data, from, size, open = out.ReadStream(stream, since, limit)
	buf.Write(data)
	next = from + int64(len(data))
	for open && buf.Len() < limit && next < size {
		more, at, sz, op := out.ReadStream(stream, next, limit-buf.Len())
		if len(more) == 0 || (at > next && !mark) {
			break
		}
		if at > next {
			fmt.Fprintf(&buf, "\n[shoal: %d bytes not kept here]\n", at-next)
		}
		buf.Write(more)
		next, size, open = at+int64(len(more)), sz, op
	}
	return buf.Bytes(), from, next, size, open
}

// finishedStream is a finished task's stdout or stderr, from its value.
func (p *Provider) finishedStream(c *core.Caller, rec Record, stream string) ([]byte, error) {
	if rec.ResultRef == "" || p.values == nil {
		return nil, nil
	}
	content, err := p.values.Content(c.Session, rec.ResultRef)
	if err != nil {
		return nil, err
	}
	r, ok := content.Value.(*value.Record)
	if !ok {
		return nil, nil
	}
	switch s := mustField(r, stream).(type) {
	case value.Str:
		return []byte(s), nil
	case value.Bytes:
		return s, nil
	}
	return nil, nil
}

func mustField(r *value.Record, name string) value.Value {
	v, _ := r.Get(name)
	return v
}
