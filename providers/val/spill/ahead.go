package spill

import (
	"bytes"
	"encoding/hex"
	"slices"
	"sync"
	"sync/atomic"
	"unicode/utf8"
	"unsafe"

	"github.com/zeebo/blake3"
)

// Ahead encodes the parts of a string while it is still being written (a
// command's output as it arrives), on a goroutine of its own, so that
// once the string is complete [EncodeAhead] has only its last part left
// to quote, count and hash. A part is cut where encodeStr cuts it, which
// depends only on the bytes before it and the first byte after it.
//
// The writer calls [Ahead.Feed] with everything written so far, in
// memory that is only ever appended to, then [Ahead.Stop] once it has
// its final string. EncodeAhead uses the parts of an Ahead only for the
// string that starts at the very address of the bytes it was fed (or
// given to [Ahead.Moved]), and each part only where its cut falls, so an
// Ahead fed with other bytes (output that was cleaned up, cut, or is not
// text) costs work but never changes an encoding.
type Ahead struct {
	partSize int
	todo     chan aheadPart
	stopped  atomic.Bool // no more work wanted
	done     chan struct{}

	feedMu sync.Mutex // orders Feed against Stop's close of todo
	closed bool
	next   int // where the next part starts in the fed string
	count  int // parts cut so far

	base atomic.Pointer[byte] // where the fed string lies

	mu    sync.Mutex
	parts []aheadPart // encoded, in order

	// Hashing ahead (NewAheadAfter): the blob's hash on the guess that
	// the blob starts with after, then the fed string's quoted parts.
	after  []byte
	sum    *blake3.Hasher // after and parts[:summed]; nil once a part was missed
	summed int
}

type aheadPart struct {
	k     int           // the part's number
	off   int           // where it starts in the fed string
	n     int           // how many bytes it has there
	raw   string        // its bytes, until encoded
	piece []byte        // quoted, without the quotes
	part  Part          // First holds the part's own character count; Off unset
	valid bool          // the part is UTF-8 (else piece and part are unset)
	ack   chan struct{} // set on settle's marker instead
}

// aheadQueue bounds the parts waiting for the goroutine; a part that
// finds the queue full is left for EncodeAhead.
const aheadQueue = 1024

// NewAhead starts an Ahead cutting parts of PartSize bytes. Stop must be
// called to end its goroutine.
func NewAhead() *Ahead { return newAhead(nil, aheadQueue).start() }

// NewAheadAfter is NewAhead that also hashes the blob the string will be
// part of, on the guess that the blob starts with after and goes on with
// the string (StrFieldAfter makes such a guess): each part is hashed as
// it is encoded, so that once the string is complete the blob's hash
// needs only its last parts and what follows them. EncodeAhead uses the
// hash (Encoded.Sum) only when the encoding it made starts with exactly
// after, followed by exactly the parts hashed; otherwise the hashing was
// work for nothing. With after nil it is NewAhead.
func NewAheadAfter(after []byte) *Ahead { return newAhead(after, aheadQueue).start() }

// newAhead makes an Ahead whose goroutine start starts.
func newAhead(after []byte, queue int) *Ahead {
	a := &Ahead{partSize: PartSize, todo: make(chan aheadPart, queue), done: make(chan struct{})}
	if after != nil {
		a.after, a.sum = slices.Clone(after), blake3.New()
		a.sum.Write(after)
	}
	return a
}

func (a *Ahead) start() *Ahead {
	go a.run()
	return a
}

func (a *Ahead) run() {
	defer close(a.done)
	for p := range a.todo {
		if p.ack != nil {
			close(p.ack)
			continue
		}
		if a.stopped.Load() {
			continue // drain: what is left is EncodeAhead's
		}
		p.piece, p.part, p.valid = encodePart(p.raw)
		p.raw = ""
		a.mu.Lock()
		a.parts = append(a.parts, p)
		a.mu.Unlock()
		if a.sum != nil {
			// Only the parts from the first, none missed, make a prefix
			// of the blob.
			if p.valid && p.k == a.summed {
				a.sum.Write(p.piece)
				a.summed++
			} else {
				a.sum = nil
			}
		}
	}
}

// Feed hands the goroutine every part of s, the string written so far,
// that is complete. s must extend the bytes of the previous call; it may
// lie elsewhere (a grown buffer), but the memory of earlier calls must
// not be written again. Feed does not block.
func (a *Ahead) Feed(s string) {
	if a.stopped.Load() {
		return
	}
	a.feedMu.Lock()
	defer a.feedMu.Unlock()
	if a.closed || len(s) == 0 {
		return
	}
	a.base.Store(unsafe.StringData(s))
	for a.next+a.partSize < len(s) {
		j := a.next + a.partSize
		end := min(len(s), j+utf8.UTFMax)
		for j < end && !utf8.RuneStart(s[j]) {
			j++
		}
		if j == len(s) {
			return // the part's end is not known yet
		}
		if j == end {
			// Not UTF-8: the value will be bytes, read whole.
			a.stopped.Store(true)
			return
		}
		select {
		case a.todo <- aheadPart{k: a.count, off: a.next, n: j - a.next, raw: s[a.next:j]}:
		default:
		}
		a.next = j
		a.count++
	}
}

// settle waits until the parts fed so far are encoded (tests).
func (a *Ahead) settle() {
	ack := make(chan struct{})
	a.todo <- aheadPart{ack: ack}
	<-ack
}

// Stop ends the goroutine once the part it is encoding is done; the
// parts still queued are left for EncodeAhead. It may be called more
// than once, and from any goroutine.
func (a *Ahead) Stop() {
	a.stopped.Store(true)
	a.feedMu.Lock()
	if !a.closed {
		a.closed = true
		close(a.todo)
	}
	a.feedMu.Unlock()
	<-a.done
}

// Moved tells a stopped Ahead that its string now lies in s, a copy of
// the bytes fed.
func (a *Ahead) Moved(s string) {
	if len(s) > 0 {
		a.base.Store(unsafe.StringData(s))
	}
}

// encoded returns the parts encoded, after Stop.
func (a *Ahead) encoded() []aheadPart {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.parts
}

// use returns the parts of aheads encoded from s itself, by number: an
// Ahead's parts when it was fed s's bytes where they lie, and of those
// the ones that start and end where cuts says.
func use(s string, cuts []int, aheads []*Ahead) map[int]aheadPart {
	var got map[int]aheadPart
	for _, a := range aheads {
		if a == nil || len(s) == 0 {
			continue
		}
		a.Stop()
		if a.base.Load() != unsafe.StringData(s) {
			continue
		}
		for _, p := range a.encoded() {
			if p.k >= len(cuts) {
				continue
			}
			start := 0
			if p.k > 0 {
				start = cuts[p.k-1]
			}
			if p.off != start || start+p.n != cuts[p.k] {
				continue
			}
			if got == nil {
				got = make(map[int]aheadPart)
			}
			got[p.k] = p
		}
	}
	return got
}

// summedAhead returns the hash of e's whole encoding when an Ahead hashed
// its start: e's pieces up to the first part that Ahead encoded are the
// bytes it guessed, and the pieces from there are the very parts it
// hashed. The rest is hashed now. It returns "" when no Ahead did.
func summedAhead(e *Encoded, aheads []*Ahead) string {
	for _, a := range aheads {
		if a == nil {
			continue
		}
		a.Stop() // its goroutine no longer writes sum
		if a.sum == nil || a.summed == 0 {
			continue
		}
		parts := a.encoded()[:a.summed]
		i := slices.IndexFunc(e.Pieces, func(b []byte) bool { return samePiece(b, parts[0].piece) })
		if i < 0 || len(e.Pieces)-i < len(parts) || !piecesAre(e.Pieces[:i], a.after) ||
			!slices.EqualFunc(e.Pieces[i:i+len(parts)], parts, func(b []byte, p aheadPart) bool { return samePiece(b, p.piece) }) {
			continue
		}
		h := a.sum.Clone()
		for _, b := range e.Pieces[i+len(parts):] {
			h.Write(b)
		}
		return hex.EncodeToString(h.Sum(nil))
	}
	return ""
}

// samePiece reports whether a and b are the same bytes in memory.
func samePiece(a, b []byte) bool {
	return len(a) == len(b) && len(a) > 0 && unsafe.SliceData(a) == unsafe.SliceData(b)
}

// piecesAre reports whether the pieces one after the other are b.
func piecesAre(pieces [][]byte, b []byte) bool {
	for _, p := range pieces {
		if !bytes.HasPrefix(b, p) {
			return false
		}
		b = b[len(p):]
	}
	return len(b) == 0
}
