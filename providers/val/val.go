// Package val serves the val resource family: immutable values kept in the
// content store ([cas]) and named by their blake3 hash.
//
// shoal://val/<hex>, shoal://val/blake3:<hex> and the short ref
// val:blake3:<hex> all name the same blob. A blob holding a typed-JSON value
// (what the transcript spills there) is served as that value; any other blob
// as bytes. The provider also offers the content store to the other
// providers as the [core.ServiceBlobs] service, adds the blob.get and
// blob.put kernel methods, and collects the store's garbage.
//
// A hash is a name, not a capability: the kernel routes these methods and
// reads only for connections that attached with the token, so knowing a
// hash gives nothing to anyone outside that boundary.
package val

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"log/slog"
	"path/filepath"
	"sync"
	"time"

	"github.com/shoal-sh/shoal/core"
	"github.com/shoal-sh/shoal/core/rpc"
	"github.com/shoal-sh/shoal/core/uri"
	"github.com/shoal-sh/shoal/core/value"
	"github.com/shoal-sh/shoal/core/wire"
	"github.com/shoal-sh/shoal/providers/val/cas"
	"github.com/shoal-sh/shoal/providers/val/spill"
)

// Garbage collection policy (docs/store.md).
const (
	// GCMinAge spares blobs put (or put again) more recently than this,
	// whether or not anything references them yet.
	GCMinAge = 24 * time.Hour
	// GCInterval is the time between two collections.
	GCInterval = 24 * time.Hour
	// GCStartDelay is how long after start the first collection waits, so
	// every provider has registered its roots and the kernel is serving.
	GCStartDelay = time.Minute
)

// BlobReferrer is implemented by services that hold blob references
// durably; the journal does. The collector asks the journal service for
// it at every run.
type BlobReferrer interface {
	BlobRefs(yield func(hash string)) error
}

// Provider is the val family.
type Provider struct {
	journal core.Journal // set at start-up (Needs)
	store   *cas.Store
	parts   *spill.Reader
	uploads uploads
	side    *side // nil when the side socket could not be opened
	ceiling int64
	log     *slog.Logger

	stopOnce sync.Once
	stop     chan struct{}
	done     chan struct{}
}

// New returns the val provider; it serves after Provision.
func New() *Provider { return &Provider{} }

var (
	_ core.Provider       = (*Provider)(nil)
	_ core.Provisioner    = (*Provider)(nil)
	_ core.MethodProvider = (*Provider)(nil)
	_ core.Closer         = (*Provider)(nil)
	_ core.PartReader     = (*Provider)(nil)
	_ core.Starter        = (*Provider)(nil)
	_ core.Blobs          = (*cas.Store)(nil)
)

// Provision opens the content store under the state directory, offers it
// as the blobs service and starts the collector.
func (p *Provider) Provision(h *core.Host) error {
	store, err := cas.OpenWith(filepath.Join(h.StateDir, "cas"), cas.Options{Log: h.Log})
	if err != nil {
		return fmt.Errorf("val: %w", err)
	}
	p.store = store
	p.log = h.Log
	if p.log == nil {
		p.log = slog.New(slog.DiscardHandler)
	}
	p.ceiling = core.DefaultRawCeiling
	if h.Config != nil && h.Config.RawCeiling > 0 {
		p.ceiling = h.Config.RawCeiling
	}
	core.Offer[core.Blobs](h, core.ServiceBlobs, store)
	cache := int64(core.DefaultValueCache)
	if h.Config != nil && h.Config.ValueCache > 0 {
		cache = h.Config.ValueCache
	}
	p.parts = spill.NewReader(store, cache)
	core.Offer(h, spill.Service, p.parts)
	if p.side, err = openSide(store, h.StateDir); err != nil {
		p.log.Warn("blob side channel off; blob.put and blob.get go in chunks", "err", err)
		p.side = nil
	}
	return nil
}

// Offers implements core.Offerer.
func (p *Provider) Offers() []core.AnyKey {
	return []core.AnyKey{core.ServiceBlobs, spill.Service}
}

// Needs implements core.Needer: the collector keeps the blobs journal
// rows reference.
func (p *Provider) Needs() []core.Dependency {
	return []core.Dependency{core.Optional(core.ServiceJournal, &p.journal)}
}

// Start implements core.Starter: it starts the collector, once the
// journal (provisioned after this provider) is set.
func (p *Provider) Start() error {
	p.stop = make(chan struct{})
	p.done = make(chan struct{})
	go p.collectLoop()
	return nil
}

// Store is the content store (nil before Provision).
func (p *Provider) Store() *cas.Store { return p.store }

// Close stops the collector and flushes the store's pending puts (the
// kernel closes providers in reverse order, so this one, provisioned
// first, closes last). The store keeps working: later puts sync inline.
func (p *Provider) Close() error {
	if p.stop == nil {
		return nil
	}
	p.stopOnce.Do(func() { close(p.stop) })
	<-p.done
	p.uploads.abortAll()
	if p.side != nil {
		p.side.close()
	}
	if err := p.store.Close(); err != nil {
		return fmt.Errorf("val: flush the content store: %w", err)
	}
	return nil
}

func (p *Provider) collectLoop() {
	defer close(p.done)
	t := time.NewTimer(GCStartDelay)
	defer t.Stop()
	for {
		select {
		case <-p.stop:
			return
		case <-t.C:
		}
		st, err := p.Collect()
		if err != nil {
			p.log.Error("content store garbage collection skipped", "err", err)
		} else {
			p.log.Info("content store garbage collected", "scanned", st.Scanned, "kept", st.Kept,
				"young", st.Young, "removed", st.Removed, "freed_bytes", st.FreedBytes, "leftovers", st.Leftovers)
		}
		t.Reset(GCInterval)
	}
}

// Collect runs one collection now: it keeps blobs referenced by journal
// rows, by every holder registered with [cas.Store.AddRoots] (live
// transcripts), and every blob younger than [GCMinAge].
func (p *Provider) Collect() (cas.GCStats, error) {
	var extra []cas.Roots
	if p.journal != nil {
		ref, ok := p.journal.(BlobReferrer)
		if !ok {
			// A journal we cannot ask might reference anything.
			return cas.GCStats{}, fmt.Errorf("the journal service (%T) cannot list its blob references", p.journal)
		}
		extra = append(extra, ref.BlobRefs)
	}
	return p.store.Collect(GCMinAge, extra...)
}

// Family is "val".
func (p *Provider) Family() string { return "val" }

// Templates advertises shoal://val/{hash}.
func (p *Provider) Templates() []core.Template {
	return []core.Template{{
		URITemplate: "shoal://val/{hash}{?path,slice,grep,context,format}",
		Name:        "Stored value",
		Description: "An immutable value in the content store, by blake3 hash (bare hex or blake3:<hex>); " +
			"refs look like val:blake3:<hex>. Use path and slice to read part of a large value.",
		MimeType: "application/json",
	}}
}

// List returns nothing: blobs are reached through refs, not enumerated.
func (p *Provider) List(ctx context.Context, c *core.Caller) ([]core.Resource, error) {
	return nil, nil
}

func hashOf(u *uri.URI) (string, error) {
	if len(u.Segments) != 1 {
		return "", rpc.Errorf(rpc.BadURI, "%s: a val URI has exactly one segment, the blob hash: shoal://val/<hex> or shoal://val/blake3:<hex>", u.Path())
	}
	hash, err := cas.ParseRef(u.Segments[0])
	if err != nil {
		return "", rpc.Errorf(rpc.BadURI, "%s: %s", u.Path(), rpc.AsError(err).Message)
	}
	return hash, nil
}

// ReadPart implements core.PartReader: a read of an indexed value, whole
// or through a path or slice, decodes only the parts it covers.
func (p *Provider) ReadPart(ctx context.Context, c *core.Caller, u *uri.URI, sel core.Selection) (*core.Content, int, bool, error) {
	hash, err := hashOf(u)
	if err != nil {
		return nil, 0, false, err
	}
	got, ok, err := p.parts.Select(hash, sel.Path, sel.HasPath, sel.Slice, sel.HasSlice)
	if err != nil || !ok {
		return nil, 0, false, err
	}
	return &core.Content{Value: got.Value, Sparse: got.Sparse, Ref: cas.Ref(hash)}, got.Offset, true, nil
}

// GrepPart implements core.PartGrepper: a grep of an indexed value
// searches its parts one at a time.
func (p *Provider) GrepPart(ctx context.Context, c *core.Caller, u *uri.URI, sel core.Selection, g value.Grep) (*core.Content, bool, error) {
	hash, err := hashOf(u)
	if err != nil {
		return nil, false, err
	}
	v, ok, err := p.parts.Grep(hash, sel.Path, g, sel.Page())
	if err != nil || !ok {
		return nil, false, err
	}
	return &core.Content{Value: v, Ref: cas.Ref(hash)}, true, nil
}

// Read serves one blob.
func (p *Provider) Read(ctx context.Context, c *core.Caller, u *uri.URI) (*core.Content, error) {
	hash, err := hashOf(u)
	if err != nil {
		return nil, err
	}
	data, err := p.store.Get(hash)
	if err != nil {
		return nil, err
	}
	return &core.Content{Value: Decode(data), Ref: cas.Ref(hash)}, nil
}

// Decode turns a blob into the value it holds: the typed value when the
// blob is typed JSON, else the bytes themselves.
func Decode(data []byte) value.Value {
	// Typed JSON is always an object; skip the decoder for anything else.
	if t := bytes.TrimLeft(data, " \t\r\n"); len(t) > 0 && t[0] == '{' {
		if v, err := value.Unmarshal(data); err == nil {
			return v
		}
	}
	return value.Bytes(data)
}

// Methods adds blob.get and blob.put.
func (p *Provider) Methods() map[string]core.Method {
	return map[string]core.Method{
		"blob.get": p.blobGet,
		"blob.put": p.blobPut,
	}
}

// BlobGetParams are the params of blob.get.
type BlobGetParams struct {
	// Hash is the blob's hash, bare or as blake3:<hex> or val:blake3:<hex>.
	Hash string `json:"hash"`
	// Offset and Length ask for a range (at most 16 MiB); the answer then
	// also carries its offset, and the blob may be of any size.
	Offset *int64 `json:"offset"`
	Length *int64 `json:"length"`
	// Stream asks for a ticket to read the whole blob, raw, from the side
	// socket (see side.go and docs/store.md).
	Stream bool `json:"stream"`
}

// BlobGetResult is blob.get's answer.
type BlobGetResult = wire.BlobGet

func (p *Provider) blobGet(ctx context.Context, c *core.Caller, params json.RawMessage) (any, error) {
	var in BlobGetParams
	if err := rpc.DecodeParams(params, &in); err != nil {
		return nil, err
	}
	if in.Hash == "" {
		return nil, rpc.Errorf(rpc.InvalidParams, "blob.get needs {\"hash\": \"<hex>\"}")
	}
	hash, err := cas.ParseRef(in.Hash)
	if err != nil {
		return nil, err
	}
	size, err := p.store.Size(hash)
	if err != nil {
		return nil, err
	}
	if in.Offset != nil || in.Length != nil {
		return p.ranged(ctx, hash, size, in)
	}
	if in.Stream {
		if p.side == nil {
			return nil, rpc.Errorf(rpc.Unavailable, "blob.get: the side socket is off on this kernel; read in ranges (offset, length)")
		}
		return wire.BlobGetTicket{Hash: hash, Size: size, Stream: p.side.issue(ticket{hash: hash})}, nil
	}
	if size > p.ceiling {
		return nil, rpc.Errorf(rpc.TooLarge, "blob %s is %d bytes, above the raw ceiling of %d bytes; read it in ranges (offset, length) or as shoal://val/%s with path and slice", hash, size, p.ceiling, hash)
	}
	data, err := p.store.Get(hash)
	if err != nil {
		return nil, err
	}
	return BlobGetResult{Hash: hash, Size: int64(len(data)), B64: base64.StdEncoding.EncodeToString(data)}, nil
}

// BlobPutParams are the params of blob.put: exactly one of B64 and Text.
type BlobPutParams struct {
	B64  *string `json:"b64"`
	Text *string `json:"text"`
	// More says another chunk follows: the first chunk opens an upload
	// and the answer names it; later chunks give Upload (and may give
	// Offset, the bytes sent before, as a check); the chunk without More
	// ends it and the answer carries the ref. The raw ceiling bounds a
	// chunk, not the blob.
	More   bool   `json:"more"`
	Upload string `json:"upload"`
	Offset *int64 `json:"offset"`
	// Stream asks for a ticket to send the blob, raw, on the side socket
	// instead (with neither b64 nor text).
	Stream bool `json:"stream"`
}

// BlobPutResult is blob.put's answer.
type BlobPutResult = wire.BlobPut

func (p *Provider) blobPut(ctx context.Context, c *core.Caller, params json.RawMessage) (any, error) {
	var in BlobPutParams
	var data []byte
	if b64, rest, ok := cutB64(params); ok {
		// A chunk as sdk/client sends it: its base64 is decoded straight
		// from the frame, without a JSON pass over megabytes.
		if err := rpc.DecodeParams(rest, &in); err != nil {
			return nil, err
		}
		if in.B64 != nil || in.Text != nil {
			return nil, rpc.Errorf(rpc.InvalidParams, "blob.put takes exactly one of {\"b64\": \"<base64>\"} or {\"text\": \"<string>\"}")
		}
		data = make([]byte, base64.StdEncoding.DecodedLen(len(b64)))
		n, err := base64.StdEncoding.Decode(data, b64)
		if err != nil {
			return nil, rpc.Errorf(rpc.InvalidParams, "blob.put: b64 is not standard base64 (%v); encode with padding, alphabet A-Z a-z 0-9 + /", err)
		}
		data = data[:n]
		empty := ""
		in.B64 = &empty // decoded already
	} else if err := rpc.DecodeParams(params, &in); err != nil {
		return nil, err
	}
	if in.Stream {
		if in.B64 != nil || in.Text != nil || in.More || in.Upload != "" {
			return nil, rpc.Errorf(rpc.InvalidParams, "blob.put {\"stream\": true} takes nothing else: the bytes go on the side socket")
		}
		if p.side == nil {
			return nil, rpc.Errorf(rpc.Unavailable, "blob.put: the side socket is off on this kernel; send chunks (\"more\": true, then \"upload\")")
		}
		st := p.side.issue(ticket{put: true})
		st.File = sideFiles
		return wire.BlobPutTicket{Stream: st}, nil
	}
	switch {
	case data != nil:
	case (in.B64 == nil) == (in.Text == nil):
		return nil, rpc.Errorf(rpc.InvalidParams, "blob.put takes exactly one of {\"b64\": \"<base64>\"} or {\"text\": \"<string>\"}")
	case in.Text != nil:
		data = []byte(*in.Text)
	default:
		var err error
		if data, err = base64.StdEncoding.DecodeString(*in.B64); err != nil {
			return nil, rpc.Errorf(rpc.InvalidParams, "blob.put: b64 is not standard base64 (%v); encode with padding, alphabet A-Z a-z 0-9 + /", err)
		}
	}
	if int64(len(data)) > p.ceiling {
		return nil, rpc.Errorf(rpc.TooLarge, "blob.put: %d bytes is above the raw ceiling of %d bytes; send them in chunks (\"more\": true, then \"upload\")", len(data), p.ceiling)
	}
	if in.More || in.Upload != "" {
		return p.chunked(in, data)
	}
	hash, err := p.store.Put(data)
	if err != nil {
		return nil, err
	}
	// The reply hands out the ref, which the caller may record anywhere:
	// the blob must be durable first. FlushBlob, not Flush: a failed sync
	// of this put may be reported to another caller's Flush.
	if err := p.store.FlushBlob(hash); err != nil {
		return nil, fmt.Errorf("blob.put: %w", err)
	}
	return BlobPutResult{Ref: cas.Ref(hash), Hash: hash, Size: int64(len(data))}, nil
}

// cutB64 splits params that start with a plain "b64" string member (no
// escapes) into its bytes and the other members as an object.
func cutB64(params []byte) (b64, rest []byte, ok bool) {
	const key = `{"b64":"`
	if !bytes.HasPrefix(params, []byte(key)) {
		return nil, nil, false
	}
	end := bytes.IndexByte(params[len(key):], '"')
	if end < 0 {
		return nil, nil, false
	}
	b64 = params[len(key) : len(key)+end]
	if bytes.IndexByte(b64, '\\') >= 0 {
		return nil, nil, false
	}
	after := bytes.TrimLeft(params[len(key)+end+1:], " \t\r\n")
	after = bytes.TrimPrefix(after, []byte(","))
	return b64, append([]byte("{"), after...), true
}
