// Package out serves the transcript: every execution's complete value as
// out:N / shoal://out/N, numbered per session from 1.
//
// The transcript lives in memory and ends with the kernel. Memory stays
// bounded: a value whose typed-JSON encoding passes the spill threshold
// (config spill_threshold, 1 MiB by default) is written to the content
// store and the transcript keeps only its hash, so the value also has a
// durable val:blake3:<hex> ref.
package out

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"sync"

	"github.com/shoal-sh/shoal/core"
	"github.com/shoal-sh/shoal/core/rpc"
	"github.com/shoal-sh/shoal/core/uri"
	"github.com/shoal-sh/shoal/core/value"
	"github.com/shoal-sh/shoal/providers/val/cas"
)

// ServiceTranscript names the *Transcript service.
const ServiceTranscript = "transcript"

// Entry describes one transcript value.
type Entry struct {
	N      int
	Ref    string // out:N
	URI    string // shoal://out/N
	ValRef string // val:blake3:<hex> when the value lives in the content store
	Size   int    // bytes of its typed-JSON encoding
	Marks  []string
}

type entry struct {
	Entry
	v       value.Value // nil when spilled
	hash    string
	pending bool // reserved, value not recorded yet
}

type sessionLog struct {
	next    int
	entries map[int]*entry
}

// Transcript holds every session's values.
type Transcript struct {
	blobs     core.Blobs
	threshold int64

	mu       sync.Mutex
	sessions map[string]*sessionLog
	// cache keeps the last spilled value decoded, so paging through one
	// large value does not decode it on every read.
	cacheHash string
	cacheVal  value.Value
}

// NewTranscript returns a transcript spilling values larger than
// threshold bytes to blobs (never, when blobs is nil).
func NewTranscript(blobs core.Blobs, threshold int64) *Transcript {
	return &Transcript{blobs: blobs, threshold: threshold, sessions: map[string]*sessionLog{}}
}

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
	log := t.sessions[session]
	if log == nil {
		log = &sessionLog{next: 1, entries: map[int]*entry{}}
		t.sessions[session] = log
	}
	e := &entry{pending: true}
	e.N = log.next
	log.next++
	e.Ref = "out:" + strconv.Itoa(e.N)
	e.URI = "shoal://out/" + strconv.Itoa(e.N)
	log.entries[e.N] = e
	return e.Entry, nil
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
		if log.next == n+1 {
			log.next = n
		}
	}
}

// Fill stores the value of a reserved out:N.
func (t *Transcript) Fill(session string, n int, v value.Value, marks []string) (Entry, error) {
	if v == nil {
		v = value.Null{}
	}
	enc, err := value.Marshal(v)
	if err != nil {
		return Entry{}, fmt.Errorf("encode transcript value: %w", err)
	}
	fill := entry{Entry: Entry{Size: len(enc), Marks: marks}, v: v}
	if t.blobs != nil && int64(len(enc)) > t.threshold {
		hash, err := t.blobs.Put(enc)
		if err != nil {
			return Entry{}, fmt.Errorf("spill value to the content store: %w", err)
		}
		fill.hash, fill.v, fill.ValRef = hash, nil, "val:blake3:"+hash
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	log := t.sessions[session]
	if log == nil || log.entries[n] == nil {
		// The session was closed while the value was computed.
		return Entry{}, rpc.Errorf(rpc.NotFound, "session %q was closed before out:%d was recorded", session, n)
	}
	e := log.entries[n]
	fill.N, fill.Ref, fill.URI = e.N, e.Ref, e.URI
	*e = fill
	return e.Entry, nil
}

// Get returns out:n of a session.
func (t *Transcript) Get(session string, n int) (value.Value, Entry, error) {
	t.mu.Lock()
	log := t.sessions[session]
	var e *entry
	if log != nil {
		e = log.entries[n]
	}
	if e == nil {
		last := 0
		if log != nil {
			last = log.next - 1
		}
		t.mu.Unlock()
		if last == 0 {
			return nil, Entry{}, rpc.Errorf(rpc.NotFound, "out:%d does not exist: session %q has no transcript values yet (they do not survive a kernel restart; val:blake3 refs do)", n, session)
		}
		return nil, Entry{}, rpc.Errorf(rpc.NotFound, "out:%d does not exist in session %q; its transcript holds out:1 … out:%d", n, session, last)
	}
	if e.pending {
		t.mu.Unlock()
		return nil, Entry{}, rpc.Errorf(rpc.NotFound, "out:%d has no value yet: its execution is still running as a task (see shoal://jobs)", n)
	}
	if e.v != nil {
		t.mu.Unlock()
		return e.v, e.Entry, nil
	}
	if t.cacheHash == e.hash {
		v := t.cacheVal
		t.mu.Unlock()
		return v, e.Entry, nil
	}
	t.mu.Unlock()
	data, err := t.blobs.Get(e.hash)
	if err != nil {
		return nil, Entry{}, err
	}
	v, err := value.Unmarshal(data)
	if err != nil {
		return nil, Entry{}, rpc.Errorf(rpc.Corrupt, "out:%d: stored value %s does not decode: %v", n, e.ValRef, err)
	}
	t.mu.Lock()
	t.cacheHash, t.cacheVal = e.hash, v
	t.mu.Unlock()
	return v, e.Entry, nil
}

// Hashes returns every content-store hash the transcripts reference, for
// garbage collection.
func (t *Transcript) Hashes() map[string]bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	out := map[string]bool{}
	for _, log := range t.sessions {
		for _, e := range log.entries {
			if e.hash != "" {
				out[e.hash] = true
			}
		}
	}
	return out
}

// Drop forgets a session's transcript.
func (t *Transcript) Drop(session string) {
	t.mu.Lock()
	delete(t.sessions, session)
	t.mu.Unlock()
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
}

var (
	_ core.Provider        = (*Provider)(nil)
	_ core.Provisioner     = (*Provider)(nil)
	_ core.SessionObserver = (*Provider)(nil)
)

// New returns the out provider; its transcript is created at Provision.
func New() *Provider { return &Provider{} }

// Family implements core.Provider.
func (*Provider) Family() string { return "out" }

// Provision implements core.Provisioner: it offers the transcript service.
func (p *Provider) Provision(h *core.Host) error {
	blobs, err := core.Lookup[core.Blobs](h, core.ServiceBlobs)
	if err != nil {
		blobs = nil // no content store: values stay in memory
	}
	threshold := int64(core.DefaultSpillThreshold)
	if h.Config != nil {
		threshold = h.Config.SpillThreshold
	}
	p.T = NewTranscript(blobs, threshold)
	h.Provide(ServiceTranscript, p.T)
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
