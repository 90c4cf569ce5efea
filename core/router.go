package core

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/shoal-sh/shoal/core/render"
	"github.com/shoal-sh/shoal/core/rpc"
	"github.com/shoal-sh/shoal/core/uri"
	"github.com/shoal-sh/shoal/core/value"
	"github.com/shoal-sh/shoal/core/wire"
	"github.com/shoal-sh/shoal/internal/clip"
)

// Router maps shoal:// URIs to providers by family and applies the shared
// read pipeline: path → slice → format → elide → 64 KiB text.
type Router struct {
	mu        sync.RWMutex
	providers []Provider
	byFamily  map[string]Provider
	order     Order
	// RawCeiling bounds format=raw reads (bytes).
	RawCeiling int64
	// ListTimeout bounds each provider's List in a listing
	// (DefaultListTimeout when zero).
	ListTimeout time.Duration
}

// Order says how listings are arranged: Roots lists families whose root
// resources come first, in that order; Entries lists families whose live
// entries come next, in that order; Templates orders the templates.
// Families not named follow in registration order (plugins come last), so
// registration order can follow provisioning dependencies.
type Order struct {
	Roots     []string
	Entries   []string
	Templates []string
}

// NewRouter returns an empty router.
func NewRouter() *Router {
	return &Router{byFamily: map[string]Provider{}, RawCeiling: DefaultRawCeiling}
}

// SetOrder sets the listing order.
func (r *Router) SetOrder(o Order) {
	r.mu.Lock()
	r.order = o
	r.mu.Unlock()
}

// Register adds a provider. A family registered twice is an error naming
// both owners.
func (r *Router) Register(p Provider) error {
	fam := p.Family()
	if fam == "" {
		return fmt.Errorf("provider %T has an empty family", p)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if old, dup := r.byFamily[fam]; dup {
		return fmt.Errorf("family %q is served by %T already; %T cannot take it", fam, old, p)
	}
	r.byFamily[fam] = p
	r.providers = append(r.providers, p)
	return nil
}

// Families lists registered family names in registration order.
func (r *Router) Families() []string {
	r.mu.RLock()
	defer r.mu.RUnlock()
	out := make([]string, len(r.providers))
	for i, p := range r.providers {
		out[i] = p.Family()
	}
	return out
}

// Providers returns the registered providers in registration order.
func (r *Router) Providers() []Provider {
	r.mu.RLock()
	defer r.mu.RUnlock()
	return slices.Clone(r.providers)
}

// Provider returns the provider of a family.
func (r *Router) Provider(family string) (Provider, bool) {
	r.mu.RLock()
	defer r.mu.RUnlock()
	p, ok := r.byFamily[family]
	return p, ok
}

func rank(order []string, fam string) int {
	if i := slices.Index(order, fam); i >= 0 {
		return i
	}
	return len(order)
}

// List returns every provider's resources: roots first, then live entries,
// each group ordered by r's Order and then registration order. A provider
// whose List fails is skipped and its error returned beside the rest, so
// one broken plugin does not hide the kernel's own resources.
func (r *Router) List(ctx context.Context, c *Caller) ([]Resource, error) {
	r.mu.RLock()
	provs := slices.Clone(r.providers)
	order := r.order
	r.mu.RUnlock()
	type item struct {
		res      Resource
		fam, pos int
	}
	var roots, entries []item
	var errs []string
	for pi, l := range r.listAll(ctx, c, provs) {
		p := provs[pi]
		if l.err != nil {
			errs = append(errs, fmt.Sprintf("%s: %v", p.Family(), l.err))
			continue
		}
		for i, x := range l.res {
			if x.MimeType == "" {
				x.MimeType = "application/json"
			}
			// A family's bare URI (shoal://jobs) is always one of its roots.
			if x.Root || x.URI == uri.Scheme+p.Family() {
				roots = append(roots, item{x, rank(order.Roots, p.Family())*1000 + pi, i})
			} else {
				entries = append(entries, item{x, rank(order.Entries, p.Family())*1000 + pi, i})
			}
		}
	}
	sortItems := func(xs []item) {
		sort.SliceStable(xs, func(i, j int) bool {
			if xs[i].fam != xs[j].fam {
				return xs[i].fam < xs[j].fam
			}
			return xs[i].pos < xs[j].pos
		})
	}
	sortItems(roots)
	sortItems(entries)
	out := make([]Resource, 0, len(roots)+len(entries))
	for _, x := range roots {
		out = append(out, x.res)
	}
	for _, x := range entries {
		out = append(out, x.res)
	}
	if len(errs) > 0 {
		return out, fmt.Errorf("some providers could not list: %s", strings.Join(errs, "; "))
	}
	return out, nil
}

// DefaultListTimeout bounds one provider's List within [Router.List].
const DefaultListTimeout = 500 * time.Millisecond

type listed struct {
	res []Resource
	err error
}

// listAll calls every provider's List at once, each with the router's
// list deadline: a slow provider (a plugin, say) costs the others
// nothing, and one that misses the deadline is reported, not waited for
// (its call ends on its own; its answer is dropped).
func (r *Router) listAll(ctx context.Context, c *Caller, provs []Provider) []listed {
	timeout := r.ListTimeout
	if timeout <= 0 {
		timeout = DefaultListTimeout
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	out := make([]listed, len(provs))
	type answer struct {
		i int
		listed
	}
	answers := make(chan answer, len(provs)) // buffered: a late answer never blocks
	for i, p := range provs {
		go func() {
			var a answer
			a.i = i
			defer func() {
				if v := recover(); v != nil {
					a.err = fmt.Errorf("list panicked: %v", v)
				}
				answers <- a
			}()
			a.res, a.err = p.List(ctx, c)
		}()
	}
	done := make([]bool, len(provs))
	for range provs {
		select {
		case a := <-answers:
			out[a.i], done[a.i] = a.listed, true
		case <-ctx.Done():
			for drained := false; !drained; {
				select {
				case a := <-answers:
					out[a.i], done[a.i] = a.listed, true
				default:
					drained = true
				}
			}
			for i, ok := range done {
				if !ok {
					out[i].err = fmt.Errorf("did not list within %v; its resources are left out of this listing", timeout)
				}
			}
			return out
		}
	}
	return out
}

// Templates concatenates every provider's templates, ordered by the
// Order's Templates list, then registration order.
func (r *Router) Templates() []Template {
	r.mu.RLock()
	provs := slices.Clone(r.providers)
	order := r.order.Templates
	r.mu.RUnlock()
	sort.SliceStable(provs, func(i, j int) bool { return rank(order, provs[i].Family()) < rank(order, provs[j].Family()) })
	var out []Template
	for _, p := range provs {
		for _, t := range p.Templates() {
			if t.MimeType == "" {
				t.MimeType = "application/json"
			}
			out = append(out, t)
		}
	}
	return out
}

// Channel maps a subscribable URI to its event channel.
func (r *Router) Channel(u *uri.URI) (string, bool) {
	p, ok := r.Provider(u.Family)
	if !ok {
		return "", false
	}
	s, ok := p.(Subscribable)
	if !ok {
		return "", false
	}
	return s.Channel(u)
}

// ReadOptions override or complete the URI's own query parameters (the
// shoal_get tool passes path, slice and elide as arguments).
type ReadOptions struct {
	Path    *string
	Slice   *string
	Format  *string
	Grep    *string
	Context *int
	Elide   json.RawMessage
}

// ContentItem is one item of a read, shaped as an MCP resource content.
type ContentItem = wire.Content

func item(uri, mimeType, text string) ContentItem {
	return ContentItem{URI: uri, MimeType: mimeType, Text: text}
}

// ReadResult is the envelope of a read: MCP's resources/read shape with
// structuredContent beside contents.
type ReadResult = wire.ReadResult

// readSelectors is what a read selects and how it renders, parsed from
// the URI's query and the read options before anything is read, so a
// typo costs nothing.
type readSelectors struct {
	path     value.Path
	hasPath  bool
	sl       value.Slice
	hasSlice bool
	grep     value.Grep
	hasGrep  bool
	format   render.Format
	budget   render.Budget
}

func parseReadSelectors(u *uri.URI, o ReadOptions) (readSelectors, error) {
	var rs readSelectors
	param := func(key string, over *string) (string, bool) {
		if over != nil {
			return *over, *over != ""
		}
		return u.Get(key)
	}
	pathStr, hasPath := param("path", o.Path)
	sliceStr, hasSlice := param("slice", o.Slice)
	formatStr, _ := param("format", o.Format)
	var err error
	if rs.format, err = render.ParseFormat(formatStr); err != nil {
		return rs, err
	}
	budgetJSON := o.Elide
	if budgetJSON == nil {
		if s, ok := u.Get("elide"); ok && s != "" {
			budgetJSON = json.RawMessage(s)
		}
	}
	if rs.budget, err = render.ParseBudget(budgetJSON); err != nil {
		return rs, err
	}
	if hasPath {
		if rs.path, err = value.ParsePath(pathStr); err != nil {
			return rs, err
		}
	}
	if hasSlice {
		if rs.sl, err = value.ParseSlice(sliceStr); err != nil {
			return rs, err
		}
	}
	rs.hasPath, rs.hasSlice = hasPath, hasSlice
	rs.grep, rs.hasGrep, err = readGrep(u, o)
	return rs, err
}

// Read resolves u through its provider and renders the result.
func (r *Router) Read(ctx context.Context, c *Caller, u *uri.URI, o ReadOptions) (*ReadResult, error) {
	p, ok := r.Provider(u.Family)
	if !ok {
		return nil, rpc.Errorf(rpc.NotFound, "no provider serves shoal://%s/…; families: %s", u.Family, strings.Join(r.Families(), ", "))
	}
	rs, err := parseReadSelectors(u, o)
	if err != nil {
		return nil, err
	}
	path, hasPath, sl, hasSlice := rs.path, rs.hasPath, rs.sl, rs.hasSlice
	grep, hasGrep, format, budget := rs.grep, rs.hasGrep, rs.format, rs.budget
	var content *Content
	var partOffset int
	partRead, grepped := false, false
	if gp, ok := p.(PartGrepper); ok && hasGrep {
		content, grepped, err = gp.GrepPart(ctx, c, u, Selection{Path: path, HasPath: hasPath, Slice: sl, HasSlice: hasSlice}, grep)
		if err != nil {
			return nil, err
		}
		partRead = grepped
	}
	if pr, ok := p.(PartReader); ok && !hasGrep {
		content, partOffset, partRead, err = pr.ReadPart(ctx, c, u, Selection{Path: path, HasPath: hasPath, Slice: sl, HasSlice: hasSlice})
		if err != nil {
			return nil, err
		}
	}
	if !partRead {
		if content, err = p.Read(ctx, c, u); err != nil {
			return nil, err
		}
	}
	if content == nil {
		return nil, rpc.Errorf(rpc.Internal, "provider %s returned no content for %s", u.Family, u.Raw)
	}
	display := u.Raw
	if display == "" {
		display = u.String()
	}
	if partRead && content.Sparse != nil {
		res := &ReadResult{Ref: content.Ref, Marks: content.Marks, Meta: content.Meta}
		if format == render.FormatRaw {
			text, data, isText, err := render.RawSparse(content.Sparse, r.RawCeiling)
			if err != nil {
				return nil, err
			}
			return res, setRaw(res, display, content.Ref, text, data, isText)
		}
		origin := render.Origin{Path: path, Offset: partOffset}
		if format == render.FormatRender {
			text, err := render.RenderSparse(content.Sparse, render.TextLimit, origin)
			if err != nil {
				return nil, err
			}
			setRender(res, display, content.Ref, text)
			return res, nil
		}
		structured, text, elided, err := render.JSONSparse(content.Sparse, budget, render.TextLimit, origin)
		if err != nil {
			return nil, err
		}
		setJSON(res, display, structured, text, elided)
		return res, nil
	}
	if content.Value == nil {
		record := content.Record
		if hasPath || hasSlice || hasGrep {
			// A kernel record stays plain JSON, but its parts can be
			// addressed the same way as a value's (the $elided markers of
			// a cut record name such paths and slices).
			if record, err = selectPlain(record, path, hasPath, sl, hasSlice, grep, hasGrep); err != nil {
				return nil, err
			}
		}
		return renderRecord(content, record, format, display, u)
	}
	v := content.Value
	if hasPath && !partRead {
		if v, err = path.Eval(v); err != nil {
			return nil, err
		}
	}
	res := &ReadResult{Ref: content.Ref, Marks: content.Marks, Meta: content.Meta}
	origin := render.Origin{Path: path}
	if grepped {
		origin = render.Origin{} // notes about cuts refer to the grep result
	} else if partRead && hasSlice {
		origin.Offset = partOffset
	} else if hasGrep || hasSlice {
		if v, origin.Offset, err = grepSlice(v, grep, hasGrep, sl, hasSlice); err != nil {
			return nil, err
		}
		if hasGrep {
			// Notes about cuts refer to the grep result, not to the value.
			origin = render.Origin{}
		}
	}
	if err := r.renderValue(res, v, format, budget, origin, display, content.Ref); err != nil {
		return nil, err
	}
	return res, nil
}

// renderRecord answers the read of a plain JSON record (already
// selected) in format: json or render; raw applies to values only.
func renderRecord(content *Content, record any, format render.Format, display string, u *uri.URI) (*ReadResult, error) {
	structured, text, err := render.Record(record, render.TextLimit)
	if err != nil {
		return nil, err
	}
	switch format {
	case render.FormatJSON:
		return &ReadResult{Contents: []ContentItem{item(display, "application/json", text)}, StructuredContent: structured, Ref: content.Ref, Marks: content.Marks, Meta: content.Meta}, nil
	case render.FormatRender:
		sc, _ := json.Marshal(map[string]string{"ref": content.Ref, "render": text})
		return &ReadResult{Contents: []ContentItem{item(display, "text/plain", text)}, StructuredContent: sc, Ref: content.Ref, Marks: content.Marks, Meta: content.Meta}, nil
	default:
		return nil, rpc.Errorf(rpc.InvalidParams, "format=raw applies to values; %s is a kernel record (use format=json or render)", u.Path())
	}
}

// setRender fills res with the human text of a value (format=render).
func setRender(res *ReadResult, display, ref, text string) {
	res.Contents = []ContentItem{item(display, "text/plain", text)}
	res.StructuredContent, _ = json.Marshal(map[string]string{"ref": ref, "render": text})
}

// renderValue fills res's contents and structured content with the
// selected value v in format (json within budget, render, or raw up to
// the router's RawCeiling).
func (r *Router) renderValue(res *ReadResult, v value.Value, format render.Format, budget render.Budget, origin render.Origin, display, ref string) error {
	switch format {
	case render.FormatRender:
		setRender(res, display, ref, render.RenderAt(v, render.TextLimit, origin))
	case render.FormatRaw:
		text, data, isText, err := render.Raw(v, r.RawCeiling)
		if err != nil {
			return err
		}
		return setRaw(res, display, ref, text, data, isText)
	default:
		structured, text, elided, err := render.JSONAt(v, budget, render.TextLimit, origin)
		if err != nil {
			return err
		}
		setJSON(res, display, structured, text, elided)
	}
	return nil
}

// setRaw fills res with a value in format raw: its text, or its data
// (isText false) as base64.
func setRaw(res *ReadResult, display, ref, text string, data []byte, isText bool) error {
	var err error
	if isText {
		res.Contents = []ContentItem{item(display, "text/plain", clipText(text, render.TextLimit))}
		res.StructuredContent, err = json.Marshal(map[string]string{"ref": ref, "raw": text})
	} else {
		b64 := base64.StdEncoding.EncodeToString(data)
		res.Contents = []ContentItem{item(display, "text/plain", clipText(b64, render.TextLimit))}
		res.StructuredContent, err = json.Marshal(map[string]string{"ref": ref, "raw_base64": b64})
	}
	if err != nil {
		return rpc.Errorf(rpc.Internal, "encode raw: %v", err)
	}
	return nil
}

// setJSON fills res with a value rendered in format json.
func setJSON(res *ReadResult, display string, structured json.RawMessage, text string, elided bool) {
	res.Contents = []ContentItem{item(display, "application/json", text)}
	res.StructuredContent = structured
	res.Elided = elided
}

// clipText cuts s to at most limit bytes on a UTF-8 boundary, saying so:
// the raw payload itself is in structuredContent, the text is for display.
func clipText(s string, limit int) string {
	if len(s) <= limit {
		return s
	}
	note := fmt.Sprintf("\n… (%d bytes in all; the text shows the first part, structuredContent holds everything)", len(s))
	return clip.Prefix(s, limit-len(note)) + note
}

// readGrep reads grep and context from the options or the URI query.
func readGrep(u *uri.URI, o ReadOptions) (value.Grep, bool, error) {
	pattern, has := "", false
	if o.Grep != nil {
		pattern, has = *o.Grep, *o.Grep != ""
	} else {
		pattern, has = u.Get("grep")
		has = has && pattern != ""
	}
	context := 0
	if o.Context != nil {
		context = *o.Context
	} else if s, ok := u.Get("context"); ok && s != "" {
		n, err := value.ParseContext(s)
		if err != nil {
			return value.Grep{}, false, err
		}
		context = n
	}
	if !has {
		if context != 0 {
			return value.Grep{}, false, rpc.Errorf(rpc.InvalidParams, "context applies to a grep: give grep (a regular expression) too")
		}
		return value.Grep{}, false, nil
	}
	g, err := value.ParseGrep(pattern, context)
	return g, err == nil, err
}

// selectPlain applies path, grep and slice to a plain JSON record.
func selectPlain(record any, path value.Path, hasPath bool, sl value.Slice, hasSlice bool, grep value.Grep, hasGrep bool) (any, error) {
	raw, err := json.Marshal(record)
	if err != nil {
		return nil, rpc.Errorf(rpc.Internal, "encode record: %v", err)
	}
	v, err := value.FromPlainJSON(raw)
	if err != nil {
		return nil, err
	}
	if hasPath {
		if v, err = path.Eval(v); err != nil {
			return nil, err
		}
	}
	if v, _, err = grepSlice(v, grep, hasGrep, sl, hasSlice); err != nil {
		return nil, err
	}
	return value.ToPlain(v), nil
}

// grepSlice applies a grep (whose matches the slice pages) or else the
// slice, and returns where the result starts in v.
func grepSlice(v value.Value, grep value.Grep, hasGrep bool, sl value.Slice, hasSlice bool) (value.Value, int, error) {
	switch {
	case hasGrep:
		var page *value.Slice
		if hasSlice {
			page = &sl
		}
		out, err := grep.Apply(v, page)
		return out, 0, err
	case hasSlice:
		return value.ApplySliceAt(v, sl)
	}
	return v, 0, nil
}
