package cas

import (
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"sync/atomic"

	"github.com/zeebo/blake3"
)

// blobWriter hashes bytes and writes them to a temp file at the same time:
// a goroutine writes each chunk while the caller's goroutine hashes it.
//
// Bytes arrive two ways. [blobWriter.Write] with a large slice hands chunks
// of the caller's own slice to the writer (no copy) and returns once they
// are written, as io.Writer requires; smaller writes are copied into
// chunk buffers. [blobWriter.ReadFrom] reads straight into chunk buffers.
// io.Copy picks whichever the source supports, so a *bytes.Reader (or
// Put's slice) is stored without copying and any other reader with one.
type blobWriter struct {
	s    *Store
	f    *os.File
	h    *blake3.Hasher
	size int64

	buf       []byte      // chunk buffer being filled, nil when none
	allocated int         // chunk buffers made so far, at most chunkBuffers
	free      chan []byte // chunk buffers not in use
	full      chan piece  // chunks for the writer goroutine
	lent      chan struct{}
	done      chan error // the writer goroutine's result

	failed atomic.Bool

	early *earlyWriteback // nil unless the put is flushed at once
}

// piece is one chunk to write: b, or the slices of bs one after the
// other. A lent piece is part of the caller's memory: the writer
// acknowledges it on lent instead of recycling it.
type piece struct {
	b    []byte
	bs   [][]byte
	lent bool
}

// len is how many bytes p holds.
func (p piece) len() int64 {
	n := int64(len(p.b))
	for _, b := range p.bs {
		n += int64(len(b))
	}
	return n
}

// earlyWriteback starts the disk writing a put's temp file while the put
// is still arriving, so that the fsync a waiting caller needs finds most
// of the bytes on disk already. Its own goroutine issues the requests,
// which may block while the disk's queue is full: the writer never waits
// for them.
type earlyWriteback struct {
	f       *os.File
	written atomic.Int64  // bytes of f written so far
	note    chan struct{} // written moved
	done    chan struct{}
}

// writebackStep is how many written bytes gather before writeback of them
// is asked for: a few requests per second of a fast disk, not one per
// chunk.
const writebackStep = 8 << 20

func startEarlyWriteback(f *os.File) *earlyWriteback {
	e := &earlyWriteback{f: f, note: make(chan struct{}, 1), done: make(chan struct{})}
	go func() {
		defer close(e.done)
		var started int64
		for range e.note {
			if w := e.written.Load(); w-started >= writebackStep {
				startWriteback(e.f, started, w-started)
				started = w
			}
		}
	}()
	return e
}

// advance says the first off bytes of the file are written.
func (e *earlyWriteback) advance(off int64) {
	e.written.Store(off)
	select {
	case e.note <- struct{}{}:
	default:
	}
}

// stop ends the goroutine once its last request is made; the caller
// makes sure advance is not called any more.
func (e *earlyWriteback) stop() {
	close(e.note)
	<-e.done
}

// chunkBuffers is how many chunk buffers circulate: one being filled, one
// being written, one spare so neither side waits on the other.
const chunkBuffers = 3

var errWriteFailed = errors.New("write failed")

func (s *Store) newBlobWriter(f *os.File, early bool) *blobWriter {
	w := &blobWriter{
		s: s, f: f, h: blake3.New(),
		free: make(chan []byte, chunkBuffers),
		full: make(chan piece, chunkBuffers),
		lent: make(chan struct{}, chunkBuffers),
		done: make(chan error, 1),
	}
	if early && !s.noSync {
		w.early = startEarlyWriteback(f)
	}
	go w.writeLoop()
	return w
}

// newBuffer returns a chunk buffer, allocating up to chunkBuffers of them
// lazily (a put of a small or lent value needs none).
func (w *blobWriter) newBuffer() []byte {
	select {
	case b := <-w.free:
		return b[:0]
	default:
	}
	if w.allocated < chunkBuffers {
		w.allocated++
		return make([]byte, 0, chunkSize)
	}
	return (<-w.free)[:0]
}

// writeLoop writes the chunks in order. For a put that returns before it
// is durable it asks the kernel for nothing more: the syncer's fsync starts
// the writeback when the put has returned (hinting chunks as they are
// written slows such a put and gains it nothing; see docs/store.md). A put
// whose caller waits for the fsync has its writeback started as it goes.
func (w *blobWriter) writeLoop() {
	var werr error
	var off int64
	for p := range w.full {
		if werr == nil {
			var err error
			if p.bs != nil {
				err = writeBuffers(w.f, p.bs)
			} else {
				_, err = w.f.Write(p.b)
			}
			if err != nil {
				werr = err
				w.failed.Store(true)
			}
			off += p.len()
			if w.early != nil {
				w.early.advance(off)
			}
		}
		if p.lent {
			w.lent <- struct{}{}
		} else {
			w.free <- p.b[:cap(p.b)]
		}
	}
	w.done <- werr
}

// ship sends the filled buffer to the writer and hashes it meanwhile.
func (w *blobWriter) ship() {
	b := w.buf
	w.buf = nil
	if len(b) == 0 {
		w.free <- b
		return
	}
	w.full <- piece{b: b}
	w.h.Write(b)
	w.size += int64(len(b))
}

// Write stores p: whole chunks of it are written in place, the rest copied.
func (w *blobWriter) Write(p []byte) (int, error) {
	n := len(p)
	out := 0 // lent chunks not yet acknowledged
	for len(p) > 0 && !w.failed.Load() {
		if w.buf == nil && len(p) >= chunkSize {
			w.lend(piece{b: p[:chunkSize]}, &out)
			p = p[chunkSize:]
			continue
		}
		if w.buf == nil {
			w.buf = w.newBuffer()
		}
		k := copy(w.buf[len(w.buf):cap(w.buf)], p)
		w.buf = w.buf[:len(w.buf)+k]
		p = p[k:]
		if len(w.buf) == cap(w.buf) {
			w.ship()
		}
	}
	w.reclaim(out)
	if w.failed.Load() {
		return n - len(p), errWriteFailed
	}
	return n, nil
}

// writePieces stores the slices one after the other without copying
// them: they go to the writer in batches of about a chunk (one writev
// each where there is one) while this goroutine hashes them.
func (w *blobWriter) writePieces(pieces [][]byte) error {
	out := 0 // lent batches not yet acknowledged
	for len(pieces) > 0 && !w.failed.Load() {
		n, size := 0, 0
		for n < len(pieces) && n < maxBatch && (n == 0 || size+len(pieces[n]) <= chunkSize) {
			size += len(pieces[n])
			n++
		}
		w.lend(piece{bs: pieces[:n:n]}, &out)
		pieces = pieces[n:]
	}
	w.reclaim(out)
	if w.failed.Load() {
		return errWriteFailed
	}
	return nil
}

// lend hands the writer p, a piece of the caller's memory, and hashes it
// meanwhile; it keeps at most chunkBuffers lent pieces in flight, *out
// counting those not yet acknowledged.
func (w *blobWriter) lend(p piece, out *int) {
	p.lent = true
	w.full <- p
	*out++
	if p.bs == nil {
		w.h.Write(p.b)
		w.size += int64(len(p.b))
	}
	for _, b := range p.bs {
		w.h.Write(b)
		w.size += int64(len(b))
	}
	for *out >= chunkBuffers {
		<-w.lent
		*out--
	}
}

// reclaim waits until the writer has acknowledged the out pieces still
// lent, so the caller may reuse their memory.
func (w *blobWriter) reclaim(out int) {
	for ; out > 0; out-- {
		<-w.lent
	}
}

// maxBatch bounds the slices of one batch of writePieces and of one
// writev call (IOV_MAX is 1024 on Linux).
const maxBatch = 256

// ReadFrom reads r to its end straight into chunk buffers.
func (w *blobWriter) ReadFrom(r io.Reader) (int64, error) {
	var total int64
	for !w.failed.Load() {
		if w.buf == nil {
			w.buf = w.newBuffer()
		}
		n, err := io.ReadFull(r, w.buf[len(w.buf):cap(w.buf)])
		w.buf = w.buf[:len(w.buf)+n]
		total += int64(n)
		if len(w.buf) == cap(w.buf) {
			w.ship()
		}
		if err == io.EOF || err == io.ErrUnexpectedEOF {
			return total, nil
		}
		if err != nil {
			return total, readError{err}
		}
	}
	return total, errWriteFailed
}

// readError marks an error of the source, as opposed to the store's own.
type readError struct{ err error }

func (e readError) Error() string { return e.err.Error() }
func (e readError) Unwrap() error { return e.err }

// close ships what is buffered, stops the writer and returns the hash, or
// the write error.
func (w *blobWriter) close() (string, error) {
	if w.buf != nil {
		w.ship()
	}
	close(w.full)
	err := <-w.done
	if w.early != nil {
		w.early.stop()
	}
	if err != nil {
		return "", err
	}
	return hex.EncodeToString(w.h.Sum(nil)), nil
}

// store writes everything src produces into a temp file while hashing it,
// then completes the put. src feeds the writer (io.Copy or one Write).
// With early, the disk starts writing the bytes as they come (see
// earlyWriteback), for a caller that waits for the fsync.
func (s *Store) store(src func(w *blobWriter) error, early bool) (hash string, size int64, err error) {
	f, err := s.createTemp()
	if err != nil {
		return "", 0, err
	}
	w := s.newBlobWriter(f, early)
	srcErr := src(w)
	hash, werr := w.close()
	if werr != nil {
		return "", 0, s.abandon(f, fmt.Errorf("store blob: %w", werr))
	}
	if srcErr != nil {
		var re readError
		if errors.As(srcErr, &re) {
			srcErr = re.err
		}
		return "", 0, s.abandon(f, fmt.Errorf("store blob: read input: %w", srcErr))
	}
	if s.present(hash, w.size) {
		return hash, w.size, s.abandon(f, nil)
	}
	if err := s.finish(f, hash, w.size); err != nil {
		return "", 0, err
	}
	return hash, w.size, nil
}
