package main

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"sync"
	"time"
)

// maxMessage bounds one incoming MCP message; a longer one is answered
// with an error and skipped (see readLine).
const maxMessage = 16 << 20

// lineWriter writes newline-delimited JSON messages, one at a time.
type lineWriter struct {
	mu  sync.Mutex
	w   *bufio.Writer
	err error
}

func (lw *lineWriter) write(b []byte) error {
	lw.mu.Lock()
	defer lw.mu.Unlock()
	if lw.err != nil {
		return lw.err
	}
	// A message must stay on one line; encoding/json never emits raw
	// newlines, but a pass-through message could carry indentation.
	if bytes.IndexByte(b, '\n') >= 0 {
		b = bytes.ReplaceAll(b, []byte("\n"), nil)
	}
	lw.w.Write(b)
	lw.w.WriteByte('\n')
	lw.err = lw.w.Flush()
	return lw.err
}

// eofGrace bounds how long the requests still running when stdin ends
// may take to answer before they are cancelled.
const eofGrace = 30 * time.Second

// serveStdio serves one MCP session on newline-delimited JSON over stdin
// and stdout. Requests run concurrently, so a long shoal_wait does not
// hold up a ping; responses may come back in any order (JSON-RPC ids pair
// them). When stdin ends, the requests already read still get their
// answers (for up to eofGrace), so `requests | shoal-mcp` works; then, or
// when ctx is cancelled, it ends the session's subscriptions and kernel
// connections and returns.
func serveStdio(ctx context.Context, f *Facade, stdin io.Reader, stdout io.Writer) error {
	s := f.newSession()
	var wg sync.WaitGroup
	defer func() {
		// Ending the session cancels the requests still running, so
		// waiting for them is short.
		s.close()
		wg.Wait()
	}()
	out := &lineWriter{w: bufio.NewWriter(stdout)}

	writerDone := make(chan struct{})
	go func() {
		defer close(writerDone)
		for {
			select {
			case b := <-s.outbox:
				if out.write(b) != nil {
					s.cancel()
					return
				}
			case <-s.Done():
				return
			}
		}
	}()

	lines := make(chan []byte)
	readErr := make(chan error, 1)
	fl := newFlow()
	go func() {
		r := bufio.NewReaderSize(stdin, 64<<10)
		for {
			// Backpressure: the next message is read only when the
			// session has room for its answer.
			if fl.admit(s.ctx) != nil {
				return
			}
			line, big, err := readLine(r)
			if big != nil {
				f.log.Warn("skipped an oversize message", "bytes", big.size)
				line = nil
				if out.write(big.response()) != nil {
					s.cancel()
				}
			}
			if len(bytes.TrimSpace(line)) > 0 {
				select {
				case lines <- line:
				case <-s.Done():
					fl.done()
					return
				}
			} else {
				fl.done()
			}
			if err != nil {
				readErr <- err
				return
			}
		}
	}()

	for {
		select {
		case line := <-lines:
			wg.Go(func() {
				defer fl.done()
				if resp := f.handle(s.ctx, s, line); resp != nil {
					release := fl.hold(len(resp))
					defer release()
					if out.write(resp) != nil {
						s.cancel()
					}
				}
			})
		case err := <-readErr:
			if !errors.Is(err, io.EOF) {
				return fmt.Errorf("read stdin: %w", err)
			}
			answered := make(chan struct{})
			go func() {
				wg.Wait()
				close(answered)
			}()
			select {
			case <-answered:
			case <-time.After(eofGrace):
			case <-ctx.Done():
			case <-s.Done():
				<-writerDone
				if out.err != nil {
					return fmt.Errorf("write stdout: %w", out.err)
				}
			}
			return nil
		case <-ctx.Done():
			return nil
		case <-s.Done():
			<-writerDone
			return fmt.Errorf("write stdout: %w", out.err)
		}
	}
}
