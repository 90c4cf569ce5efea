// Package out serves the transcript: every execution's complete value as
// out:N / shoal://out/N, numbered per session from 1.
//
// With a content store the numbering and the values outlive the kernel
// (durable.go). The transcript's memory stays bounded: a value
// whose typed-JSON encoding passes the spill threshold (config
// spill_threshold, 1 MiB by default) is written to the content store and
// the transcript keeps only its hash, so the value also has a durable
// val:blake3:<hex> ref; and once the values kept in memory pass
// transcript_memory (4 MiB of encoding), the oldest move there too and
// are read back on demand. Large lists, tables and strings are stored
// with an index (package spill), so a path or slice read of one decodes
// only the parts it covers.
package out

import (
	"context"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"

	"github.com/shoal-sh/shoal/core"
	"github.com/shoal-sh/shoal/core/rpc"
	"github.com/shoal-sh/shoal/core/uri"
	"github.com/shoal-sh/shoal/core/value"
	"github.com/shoal-sh/shoal/providers/val/cas"
	"github.com/shoal-sh/shoal/providers/val/spill"
)

// ServiceTranscript is the transcript, offered by this provider.
var ServiceTranscript = core.NewKey[*Transcript]("transcript")

// Entry describes one transcript value.
type Entry struct {
	N      int
	Ref    string // out:N
	URI    string // shoal://out/N
	ValRef string // val:blake3:<hex> when the value lives in the content store
	Size   int    // bytes of its typed-JSON encoding
	Marks  []string
}

// entry is one transcript value. It holds no strings it can rebuild
// (out:N, the URI), so a long transcript costs little memory per entry
// once its values have moved to the content store.
type entry struct {
	n       int
	size    int
	marks   []string
	v       value.Value // nil when spilled
	hash    blobID      // zero while the value is only in memory
	pending bool        // reserved, value not recorded yet
	moving  bool        // being moved to the content store (see spillOldest)
	gone    string      // why its value is not there (from before a restart)
}

func (e *entry) Entry() Entry {
	x := Entry{N: e.n, Ref: "out:" + strconv.Itoa(e.n), URI: "shoal://out/" + strconv.Itoa(e.n), Size: e.size, Marks: e.marks}
	if !e.hash.none() {
		x.ValRef = cas.RefPrefix + e.hash.String()
	}
	return x
}

// blobID is a content-store hash in 32 bytes rather than 64 of hex: a
// long transcript holds one per spilled value.
type blobID [32]byte

func toBlobID(hash string) blobID {
	var id blobID
	hex.Decode(id[:], []byte(hash))
	return id
}

func (id blobID) none() bool     { return id == blobID{} }
func (id blobID) String() string { return hex.EncodeToString(id[:]) }

type sessionLog struct {
	next    int
	entries map[int]*entry
	// closedBelow: numbers below it belonged to the session before it was
	// closed (their values were dropped with it).
	closedBelow int
	index       *os.File // the durable index, nil when memory only
}

// held is an in-memory value in the order values were recorded.
type held struct {
	session string
	n       int
	size    int
}

// Transcript holds every session's values.
type Transcript struct {
	blobs     core.Blobs
	parts     *spill.Reader // nil: spill through blobs, read values whole
	threshold int64
	memory    int64  // bound of the values kept in memory, bytes of encoding
	dir       string // the durable index's directory; "" when memory only

	mu       sync.Mutex
	sessions map[string]*sessionLog
	inMemory int64  // encoded bytes of the values in memory
	order    []held // the values in memory, oldest first (a queue)
	// cache keeps the last spilled value decoded, so paging through one
	// large value does not decode it on every read.
	cacheHash string
	cacheVal  value.Value
}

// NewTranscript returns a transcript spilling values larger than
// threshold bytes to blobs (never, when blobs is nil).
func NewTranscript(blobs core.Blobs, threshold int64) *Transcript {
	return &Transcript{blobs: blobs, threshold: threshold, memory: core.DefaultTranscriptMemory, sessions: map[string]*sessionLog{}}
}

// SetMemory bounds the encoded bytes of the values kept in memory: past
// it, the oldest move to the content store and are read back from it on
// demand. It needs a content store; without one values stay in memory.
func (t *Transcript) SetMemory(bound int64) {
	t.mu.Lock()
	t.memory = bound
	t.mu.Unlock()
}

// SetParts makes spills go through r, which indexes large lists, tables
// and strings so part reads (ReadPart) decode only what they need.
func (t *Transcript) SetParts(r *spill.Reader) { t.parts = r }

// Add records v as the session's next out:N.
func (t *Transcript) Add(session string, v value.Value, marks []string) (Entry, error) {
	e, err := t.Reserve(session)
	if err != nil {
		return Entry{}, err
	}
	return t.Fill(session, e.N, v, marks)
}

// Reserve allocates the session's next out:N before its value exists (an
// execution that may become a task names its ref at once). Reading it
// before Fill says the value is still being computed.
func (t *Transcript) Reserve(session string) (Entry, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	log := t.loadLocked(session)
	e := &entry{n: log.next, pending: true}
	log.next++
	log.entries[e.n] = e
	log.note("r\t%d", e.n)
	return e.Entry(), nil
}

// Unreserve gives back a reserved out:N that will never be filled (its
// execution was refused before it ran). When no later number was handed
// out meanwhile, the number is used again, so a refusal leaves no gap.
func (t *Transcript) Unreserve(session string, n int) {
	t.mu.Lock()
	defer t.mu.Unlock()
	log := t.sessions[session]
	if log == nil {
		return
	}
	if e := log.entries[n]; e != nil && e.pending {
		delete(log.entries, n)
		log.note("u\t%d", n)
		if log.next == n+1 {
			log.next = n
		}
	}
}

// store puts an encoding into the content store and returns its hash.
func (t *Transcript) store(e *spill.Encoded) (string, error) {
	if t.parts != nil {
		hash, _, err := t.parts.PutEncoded(e)
		return hash, err
	}
	return t.blobs.Put(e.Bytes())
}

// Fill stores the value of a reserved out:N. aheads are the parts of
// its strings encoded while they were written (see spill.Ahead), if any.
func (t *Transcript) Fill(session string, n int, v value.Value, marks []string, aheads ...*spill.Ahead) (Entry, error) {
	if v == nil {
		v = value.Null{}
	}
	enc, err := spill.EncodeAhead(v, spill.PartSize, aheads...)
	if err != nil {
		return Entry{}, fmt.Errorf("encode transcript value: %w", err)
	}
	fill := entry{size: int(enc.Size), marks: marks, v: v}
	t.mu.Lock()
	durable := t.dir != ""
	t.mu.Unlock()
	spilled := t.blobs != nil && enc.Size > t.threshold
	// A durable transcript keeps every value for after a restart: a small
	// one inline in its index line, a larger one in the content store
	// (synced now unless it spilled, whose sync the execution waits for).
	inline := durable && !spilled && enc.Size <= InlineMax
	if t.blobs != nil && (spilled || (durable && !inline)) {
		hash, err := t.store(enc)
		if err != nil {
			return Entry{}, fmt.Errorf("store the value in the content store: %w", err)
		}
		fill.hash, fill.v = toBlobID(hash), nil
		if !spilled {
			if err := t.blobs.FlushBlob(hash); err != nil {
				return Entry{}, fmt.Errorf("store the value in the content store: %w", err)
			}
			fill.v = v // small enough to stay in memory as well
		}
	}
	t.mu.Lock()
	log := t.sessions[session]
	if log == nil || log.entries[n] == nil {
		t.mu.Unlock()
		// The session was closed while the value was computed.
		return Entry{}, rpc.Errorf(rpc.NotFound, "session %q was closed before out:%d was recorded", session, n)
	}
	e := log.entries[n]
	fill.n = e.n
	*e = fill
	switch {
	case inline:
		log.note("i\t%d\t%d\t%s\t%s", n, fill.size, strings.Join(marks, ","), enc.Bytes())
	case !fill.hash.none():
		log.note("v\t%d\t%s\t%d\t%s", n, fill.hash.String(), fill.size, strings.Join(marks, ","))
	}
	out := e.Entry()
	if e.v != nil && t.blobs != nil {
		t.order = append(t.order, held{session, n, e.size})
		t.inMemory += int64(e.size)
	}
	over := t.inMemory > t.memory
	t.mu.Unlock()
	if over {
		t.spillOldest()
	}
	return out, nil
}

// spillOldest moves the oldest values in memory to the content store
// until the rest fit the memory bound. A value stays readable in memory
// until its hash is recorded; one whose session closed meanwhile is
// skipped.
func (t *Transcript) spillOldest() {
	for {
		t.mu.Lock()
		if t.inMemory <= t.memory || len(t.order) == 0 {
			t.mu.Unlock()
			return
		}
		h := t.order[0]
		t.order = t.order[1:]
		if len(t.order) == 0 {
			t.order = nil // let the queue's array go
		}
		var e *entry
		if log := t.sessions[h.session]; log != nil {
			e = log.entries[h.n]
		}
		if e == nil || e.v == nil || e.moving {
			t.mu.Unlock() // its session closed (Drop took it off the count)
			continue
		}
		t.inMemory -= int64(h.size)
		if !e.hash.none() {
			e.v = nil // the content store has it already
			t.mu.Unlock()
			continue
		}
		e.moving = true
		v := e.v
		t.mu.Unlock()
		hash := ""
		if enc, err := spill.Encode(v, spill.PartSize); err == nil {
			hash, _ = t.store(enc)
		}
		t.mu.Lock()
		e.moving = false
		if hash != "" {
			e.hash, e.v = toBlobID(hash), nil
		}
		// A failed put leaves the value in memory: nothing is lost.
		t.mu.Unlock()
	}
}

// Get returns out:n of a session.
func (t *Transcript) Get(session string, n int) (value.Value, Entry, error) {
	e, err := t.lookup(session, n)
	if err != nil {
		return nil, Entry{}, err
	}
	t.mu.Lock()
	if e.v != nil {
		v := e.v
		t.mu.Unlock()
		return v, e.Entry(), nil
	}
	hash := e.hash.String()
	if t.cacheHash == hash {
		v := t.cacheVal
		t.mu.Unlock()
		return v, e.Entry(), nil
	}
	info := e.Entry()
	t.mu.Unlock()
	if t.blobs == nil {
		return nil, Entry{}, goneError(session, n, "this kernel has no content store to read it from")
	}
	data, err := t.blobs.Get(hash)
	if err != nil && rpc.CodeOf(err) == rpc.NotFound {
		return nil, Entry{}, goneError(session, n, "its value was garbage-collected from the content store")
	}
	if err != nil {
		return nil, Entry{}, err
	}
	v, err := value.Unmarshal(data)
	if err != nil {
		return nil, Entry{}, rpc.Errorf(rpc.Corrupt, "out:%d: stored value %s does not decode: %v", n, info.ValRef, err)
	}
	// Only a value that fits the memory bound is kept decoded: a huge
	// one read whole once must not stay in memory.
	if int64(info.Size) <= t.memory {
		t.mu.Lock()
		t.cacheHash, t.cacheVal = hash, v
		t.mu.Unlock()
	}
	return v, info, nil
}

// lookup finds out:n, or the NOT_FOUND error a read of it gets.
func (t *Transcript) lookup(session string, n int) (*entry, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	log := t.loadLocked(session)
	e := log.entries[n]
	if e == nil {
		last := log.next - 1
		if n < log.closedBelow {
			return nil, goneError(session, n, "it belonged to the session before it was closed (session.close), and its values went with it")
		}
		if last == 0 {
			return nil, rpc.Errorf(rpc.NotFound, "out:%d does not exist: session %q has no transcript values yet", n, session)
		}
		return nil, rpc.Errorf(rpc.NotFound, "out:%d does not exist in session %q; its transcript holds out:1 … out:%d", n, session, last)
	}
	if e.gone != "" {
		return nil, goneError(session, n, e.gone)
	}
	if e.pending {
		return nil, rpc.Errorf(rpc.NotFound, "out:%d has no value yet: its execution is still running as a task (see shoal://jobs)", n)
	}
	return e, nil
}

// Part answers a read of out:n from the parts of its
// stored value (see spill.Reader.Select); ok is false when the value is in
// memory or has no index, and the read then takes the whole value.
func (t *Transcript) Part(session string, n int, sel core.Selection) (spill.Selected, Entry, bool, error) {
	e, err := t.lookup(session, n)
	if err != nil || t.parts == nil {
		return spill.Selected{}, Entry{}, false, nil // Get gives the error
	}
	t.mu.Lock()
	id, info := e.hash, e.Entry()
	t.mu.Unlock()
	if id.none() {
		return spill.Selected{}, Entry{}, false, nil
	}
	got, ok, err := t.parts.Select(id.String(), sel.Path, sel.HasPath, sel.Slice, sel.HasSlice)
	return got, info, ok, err
}

// Grep answers a grep of out:n from the parts of its stored value (see
// spill.Reader.Grep); ok is false when the value is in memory or has no
// index, and the read then takes the whole value.
func (t *Transcript) Grep(session string, n int, sel core.Selection, g value.Grep) (value.Value, Entry, bool, error) {
	e, err := t.lookup(session, n)
	if err != nil || t.parts == nil {
		return nil, Entry{}, false, nil // Get gives the error
	}
	t.mu.Lock()
	id, info := e.hash, e.Entry()
	t.mu.Unlock()
	if id.none() {
		return nil, Entry{}, false, nil
	}
	v, ok, err := t.parts.Grep(id.String(), sel.Path, g, sel.Page())
	return v, info, ok, err
}

// Hashes returns every content-store hash the transcripts reference, for
// garbage collection.
func (t *Transcript) Hashes() map[string]bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	out := map[string]bool{}
	for _, log := range t.sessions {
		for _, e := range log.entries {
			if !e.hash.none() {
				out[e.hash.String()] = true
			}
		}
	}
	return out
}

// Drop forgets a session's transcript values. Its numbering goes on: a
// session of the same name starts after the last number handed out.
func (t *Transcript) Drop(session string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	log := t.sessions[session]
	if log == nil {
		return
	}
	log.note("c")
	t.sessions[session] = &sessionLog{next: log.next, closedBelow: log.next, entries: map[int]*entry{}, index: log.index}
	kept := t.order[:0]
	for _, h := range t.order {
		if h.session != session {
			kept = append(kept, h)
		} else if e := log.entries[h.n]; e != nil && e.v != nil && !e.moving {
			t.inMemory -= int64(h.size)
		}
	}
	clear(t.order[len(kept):])
	t.order = kept
}

// ParseRef parses out:N, N or shoal://out/N into N.
func ParseRef(s string) (int, error) {
	s = strings.TrimPrefix(strings.TrimPrefix(s, "shoal://out/"), "out:")
	n, err := strconv.Atoi(s)
	if err != nil || n < 1 {
		return 0, rpc.Errorf(rpc.BadURI, "transcript refs are out:N with N ≥ 1 (got %q)", s)
	}
	return n, nil
}

// Provider serves shoal://out/{n}.
type Provider struct {
	T *Transcript
	// Services set at start-up, before Provision (both offered by the
	// val provider, provisioned first); nil when not offered.
	blobs core.Blobs
	parts *spill.Reader
}

var (
	_ core.Provider        = (*Provider)(nil)
	_ core.Provisioner     = (*Provider)(nil)
	_ core.SessionObserver = (*Provider)(nil)
	_ core.PartReader      = (*Provider)(nil)
	_ core.Needer          = (*Provider)(nil)
	_ core.Offerer         = (*Provider)(nil)
)

// New returns the out provider; its transcript is created at Provision.
func New() *Provider { return &Provider{} }

// Family implements core.Provider.
func (*Provider) Family() string { return "out" }

// Needs implements core.Needer: without a content store values stay in
// memory.
func (p *Provider) Needs() []core.Dependency {
	return []core.Dependency{
		core.Optional(core.ServiceBlobs, &p.blobs),
		core.Optional(spill.Service, &p.parts),
	}
}

// Offers implements core.Offerer.
func (p *Provider) Offers() []core.AnyKey { return []core.AnyKey{ServiceTranscript} }

// Provision implements core.Provisioner: it offers the transcript service.
func (p *Provider) Provision(h *core.Host) error {
	blobs := p.blobs
	threshold := int64(core.DefaultSpillThreshold)
	if h.Config != nil {
		threshold = h.Config.SpillThreshold
	}
	p.T = NewTranscript(blobs, threshold)
	if blobs != nil && h.StateDir != "" {
		if err := p.T.Persist(filepath.Join(h.StateDir, "transcript")); err != nil {
			return err
		}
	}
	if h.Config != nil && h.Config.TranscriptMemory > 0 {
		p.T.SetMemory(h.Config.TranscriptMemory)
	}
	if p.parts != nil {
		p.T.SetParts(p.parts)
	}
	core.Offer(h, ServiceTranscript, p.T)
	// Spilled values are held by the live transcript: the store's garbage
	// collection must keep them however old they are.
	if s, ok := blobs.(*cas.Store); ok {
		s.AddRoots("transcript", func(yield func(hash string)) error {
			for h := range p.T.Hashes() {
				yield(h)
			}
			return nil
		})
	}
	return nil
}

// Templates implements core.Provider.
func (*Provider) Templates() []core.Template {
	return []core.Template{{
		URITemplate: "shoal://out/{n}{?path,slice,grep,context,format}",
		Name:        "out",
		Description: "The complete value of execution N in this session (out:N). path selects a part (.rows[0].name), slice pages a list, table, string or bytes (0..50; -20.. is the last twenty), grep searches it by line, item or row (a regular expression; context=N adds the lines around each match), format is json (default), render or raw. Reading never runs anything again.",
		MimeType:    "application/json",
	}}
}

// List implements core.Provider: transcript values are found through
// execution replies, not listed.
func (*Provider) List(context.Context, *core.Caller) ([]core.Resource, error) { return nil, nil }

// Read implements core.Provider.
func (p *Provider) Read(_ context.Context, c *core.Caller, u *uri.URI) (*core.Content, error) {
	if len(u.Segments) != 1 {
		return nil, rpc.Errorf(rpc.BadURI, "use shoal://out/{n}, e.g. shoal://out/17?path=.rows[0].name")
	}
	n, err := ParseRef(u.Segments[0])
	if err != nil {
		return nil, err
	}
	v, e, err := p.T.Get(c.Session, n)
	if err != nil {
		return nil, err
	}
	return &core.Content{Value: v, Ref: e.Ref, Marks: e.Marks}, nil
}

// ReadPart implements core.PartReader for values the transcript keeps in
// the content store.
func (p *Provider) ReadPart(_ context.Context, c *core.Caller, u *uri.URI, sel core.Selection) (*core.Content, int, bool, error) {
	if len(u.Segments) != 1 {
		return nil, 0, false, nil
	}
	n, err := ParseRef(u.Segments[0])
	if err != nil {
		return nil, 0, false, nil
	}
	got, e, ok, err := p.T.Part(c.Session, n, sel)
	if err != nil || !ok {
		return nil, 0, false, err
	}
	return &core.Content{Value: got.Value, Sparse: got.Sparse, Ref: e.Ref, Marks: e.Marks}, got.Offset, true, nil
}

// GrepPart implements core.PartGrepper for values the transcript keeps
// in the content store.
func (p *Provider) GrepPart(_ context.Context, c *core.Caller, u *uri.URI, sel core.Selection, g value.Grep) (*core.Content, bool, error) {
	if len(u.Segments) != 1 {
		return nil, false, nil
	}
	n, err := ParseRef(u.Segments[0])
	if err != nil {
		return nil, false, nil
	}
	v, e, ok, err := p.T.Grep(c.Session, n, sel, g)
	if err != nil || !ok {
		return nil, false, err
	}
	return &core.Content{Value: v, Ref: e.Ref, Marks: e.Marks}, true, nil
}

// SessionClosed implements core.SessionObserver.
func (p *Provider) SessionClosed(session string) { p.T.Drop(session) }

// Content returns the transcript value behind a ref (out:N) as provider
// content; other providers (task output) resolve result refs with it.
func (t *Transcript) Content(session, ref string) (*core.Content, error) {
	n, err := ParseRef(ref)
	if err != nil {
		return nil, err
	}
	v, e, err := t.Get(session, n)
	if err != nil {
		return nil, err
	}
	return &core.Content{Value: v, Ref: e.Ref, Marks: e.Marks}, nil
}
