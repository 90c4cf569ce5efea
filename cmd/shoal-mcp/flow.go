package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"golang.org/x/sync/semaphore"

	"github.com/shoal-sh/shoal/core/rpc"
)

// Bounds on what one MCP client can make the facade hold. A client that
// sends requests and never reads the answers stops being read once
// maxInflight of its requests are served and not yet written, or their
// answers pass maxUnwritten bytes; other sessions are not affected.
const (
	maxInflight  = 256
	maxUnwritten = 8 << 20
	// maxSessionSubscriptions and maxSubscriptions bound the kernel
	// connections subscriptions open (one each): per session, and for
	// the whole facade.
	maxSessionSubscriptions = 64
	maxSubscriptions        = 256
)

// flow is one session's backpressure: a request takes a slot before it
// is read on, and gives it back once its answer is written.
type flow struct {
	slots *semaphore.Weighted
	bytes *semaphore.Weighted
}

func newFlow() *flow {
	return &flow{slots: semaphore.NewWeighted(maxInflight), bytes: semaphore.NewWeighted(maxUnwritten)}
}

// admit waits until the session may read another request: a slot is
// free and the unwritten answers are under their bound. The caller calls
// done when the request's answer is written (or dropped).
func (fl *flow) admit(ctx context.Context) error {
	if err := fl.slots.Acquire(ctx, 1); err != nil {
		return err
	}
	// Wait for room in the byte budget without holding any of it.
	if err := fl.bytes.Acquire(ctx, 1); err != nil {
		fl.slots.Release(1)
		return err
	}
	fl.bytes.Release(1)
	return nil
}

// hold counts an answer of n bytes waiting to be written; the returned
// func uncounts it. An answer larger than the budget holds all of it.
func (fl *flow) hold(n int) func() {
	n = max(1, min(n, maxUnwritten))
	if !fl.bytes.TryAcquire(int64(n)) {
		// Over budget: the answer is written anyway (it exists already);
		// the reader waits for the budget in admit.
		return func() {}
	}
	return func() { fl.bytes.Release(int64(n)) }
}

func (fl *flow) done() { fl.slots.Release(1) }

// subscriptionSlot takes one of the facade's subscription slots; false
// when all are in use.
func (f *Facade) subscriptionSlot() bool {
	if f.subscriptions.Add(1) > maxSubscriptions {
		f.subscriptions.Add(-1)
		return false
	}
	return true
}

func (f *Facade) releaseSubscription() { f.subscriptions.Add(-1) }

// errTooManySubscriptions refuses a subscription over a cap.
func errTooManySubscriptions(scope string, limit int) error {
	return rpc.Errorf(rpc.TooManyConnections, "%s has %d subscriptions, the most it may hold (each uses a kernel connection): unsubscribe from one first", scope, limit)
}

// oversize is a message longer than maxMessage: it was skipped, and id
// is its id when the part read names one.
type oversize struct {
	size int
	id   json.RawMessage
}

func (o *oversize) response() []byte {
	return errorResponse(o.id, -32600, fmt.Sprintf("invalid request: the message is over %d bytes (it had %d) and was not read; send smaller messages (put large data in files or blobs)", maxMessage, o.size), nil)
}

// oversizeHead is how much of an oversize message is kept to find its id.
const oversizeHead = 64 << 10

// readLine reads one line of at most maxMessage bytes (without the
// newline). A longer line is skipped to its end and reported as an
// oversize, so the stream goes on with the next message.
func readLine(r *bufio.Reader) ([]byte, *oversize, error) {
	var line []byte
	for {
		chunk, err := r.ReadSlice('\n')
		if len(line)+len(chunk) > maxMessage {
			return nil, skipLine(r, line, chunk, err), nil
		}
		line = append(line, chunk...)
		if errors.Is(err, bufio.ErrBufferFull) {
			continue
		}
		return bytes.TrimRight(line, "\r\n"), nil, err
	}
}

// skipLine reads past the rest of an oversize line, keeping its head.
func skipLine(r *bufio.Reader, line, chunk []byte, err error) *oversize {
	head := append(line, chunk...)
	size := len(head)
	if len(head) > oversizeHead {
		head = head[:oversizeHead]
	}
	for errors.Is(err, bufio.ErrBufferFull) {
		chunk, err = r.ReadSlice('\n')
		size += len(chunk)
	}
	return &oversize{size: size, id: headID(head)}
}

// headID finds the top-level "id" member in the start of a JSON object,
// when it comes before the cut; nil otherwise.
func headID(head []byte) json.RawMessage {
	dec := json.NewDecoder(bytes.NewReader(head))
	if t, err := dec.Token(); err != nil || t != json.Delim('{') {
		return nil
	}
	for dec.More() {
		t, err := dec.Token()
		if err != nil {
			return nil
		}
		var v json.RawMessage
		if err := dec.Decode(&v); err != nil {
			return nil
		}
		if key, _ := t.(string); key == "id" {
			cut := dec.InputOffset() == int64(len(head)) // a number may go on past the head
			if len(v) > 0 && (v[0] == '"' || !cut && (v[0] == '-' || v[0] >= '0' && v[0] <= '9')) {
				return v
			}
			return nil
		}
	}
	return nil
}
