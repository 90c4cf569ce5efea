package journal

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/shoal-sh/shoal/core"
	"github.com/shoal-sh/shoal/core/rpc"
	"github.com/shoal-sh/shoal/core/uri"
	"github.com/shoal-sh/shoal/internal/clip"
)

// FileName is the journal's file in the state directory.
const FileName = "journal.db"

// Provider is the journal family: the shoal://journal root, the
// journal.query method, and the journal service for the other providers.
type Provider struct {
	j *Journal
	// cluster answers scope=cluster queries; set at start-up when a
	// cluster is configured.
	cluster ClusterQuerier
}

// New returns the journal provider; it serves after Provision.
func New() *Provider { return &Provider{} }

var (
	_ core.Provider       = (*Provider)(nil)
	_ core.Provisioner    = (*Provider)(nil)
	_ core.MethodProvider = (*Provider)(nil)
	_ core.Closer         = (*Provider)(nil)
	_ core.Offerer        = (*Provider)(nil)
	_ core.Needer         = (*Provider)(nil)
)

// Provision opens the journal in the state directory, offers it as the
// journal service, and backs the journal and session.transcript channels
// with it.
func (p *Provider) Provision(h *core.Host) error {
	opts := Options{Log: h.Log}
	if h.Bus != nil {
		opts.Bus = h.Bus
	}
	j, err := Open(filepath.Join(h.StateDir, FileName), opts)
	if err != nil {
		return err
	}
	if h.Bus != nil {
		for _, ch := range []string{ChannelJournal, ChannelTranscript} {
			if err := h.Bus.AttachDurable(ch, j); err != nil {
				j.Close()
				return fmt.Errorf("journal: %w", err)
			}
		}
	}
	p.j = j
	core.Offer[core.Journal](h, core.ServiceJournal, j)
	return nil
}

// Offers implements core.Offerer.
func (p *Provider) Offers() []core.AnyKey { return []core.AnyKey{core.ServiceJournal} }

// Needs implements core.Needer.
func (p *Provider) Needs() []core.Dependency {
	return []core.Dependency{core.Optional(ServiceCluster, &p.cluster)}
}

// Journal is the open journal (nil before Provision).
func (p *Provider) Journal() *Journal { return p.j }

// Close stops the writer and closes the file.
func (p *Provider) Close() error {
	if p.j == nil {
		return nil
	}
	return p.j.Close()
}

// Family is "journal".
func (p *Provider) Family() string { return "journal" }

// Templates advertises the journal query URI.
func (p *Provider) Templates() []core.Template {
	return []core.Template{{
		URITemplate: "shoal://journal{?principal,ok,head,since,until,effects,limit}",
		Name:        "Journal",
		Description: "Durable history of executions, plan applies, approvals and PTY opens, newest first. " +
			"Filters: principal, head (first command), ok (true/false), since/until (ns timestamps, not event seqs), " +
			"effects (comma list, any of: fs.read, fs.write, fs.delete, proc.spawn, net, env.write, pty, event.publish), limit (default 100, max 1000).",
		MimeType: "application/json",
	}}
}

// List returns the shoal://journal root.
func (p *Provider) List(ctx context.Context, c *core.Caller) ([]core.Resource, error) {
	return []core.Resource{{
		URI:         "shoal://journal",
		Name:        "Journal",
		Description: "The newest journal rows; add ?principal=, head=, ok=, since=, until=, effects=, limit= to filter.",
		MimeType:    "application/json",
	}}, nil
}

// Read answers shoal://journal?…. Query values that do not parse into
// their type are ignored (the default applies), never an error.
func (p *Provider) Read(ctx context.Context, c *core.Caller, u *uri.URI) (*core.Content, error) {
	if len(u.Segments) != 0 {
		return nil, rpc.Errorf(rpc.NotFound, "%s: the journal has one resource, shoal://journal, filtered by query parameters (principal, ok, head, since, until, effects, limit)", u.Path())
	}
	q := QueryFromURI(u)
	if scope, _ := u.Get("scope"); scope != "" {
		res, err := p.scoped(ctx, scope, q)
		if err != nil {
			return nil, err
		}
		if res != nil {
			return &core.Content{Record: res}, nil
		}
	}
	rows, err := p.query(q)
	if err != nil {
		return nil, err
	}
	return &core.Content{Record: QueryResult{Rows: rows}}, nil
}

// scoped answers a query with scope set: nil for "local" (the caller
// queries this kernel's journal), the cluster's answer for "cluster".
func (p *Provider) scoped(ctx context.Context, scope string, q Query) (any, error) {
	switch scope {
	case "local":
		return nil, nil
	case "cluster":
	default:
		return nil, rpc.Errorf(rpc.InvalidParams, "journal scope %q is unknown: use local (this kernel, the default) or cluster (every kernel of the cluster)", scope)
	}
	cq := p.cluster
	if cq == nil {
		return nil, rpc.Errorf(rpc.Unavailable, "scope=cluster needs a cluster: this kernel has none (set nats under [cluster] in config.toml, or start it with --nats URL)")
	}
	res, err := cq.QueryCluster(ctx, q)
	if err != nil {
		return nil, err
	}
	return res, nil
}

// QueryFromURI reads a Query from URI parameters, leniently.
func QueryFromURI(u *uri.URI) Query {
	var q Query
	q.Principal, _ = u.Get("principal")
	q.Head, _ = u.Get("head")
	if ok, valid := u.Bool("ok"); valid {
		q.OK = &ok
	}
	if n, valid := u.Int("since"); valid {
		q.Since = n
	}
	if n, valid := u.Int("until"); valid {
		q.Until = n
	}
	for _, p := range u.Query {
		if p.Key == "effects" {
			q.Effects = append(q.Effects, splitList(p.Value)...)
		}
	}
	if n, valid := u.Int("limit"); valid && n > 0 {
		q.Limit = int(min(n, MaxLimit))
	}
	return q
}

func splitList(s string) []string {
	var out []string
	for _, e := range strings.Split(s, ",") {
		if e = strings.TrimSpace(e); e != "" {
			out = append(out, e)
		}
	}
	return out
}

func (p *Provider) query(q Query) ([]core.JournalRow, error) {
	if p.j == nil {
		return nil, rpc.Errorf(rpc.Unavailable, "the journal is not open")
	}
	rows, err := p.j.Query(q)
	if err != nil {
		return nil, rpc.Errorf(rpc.Internal, "%v", err)
	}
	return rows, nil
}

// Methods adds journal.query.
func (p *Provider) Methods() map[string]core.Method {
	return map[string]core.Method{"journal.query": p.queryMethod}
}

// QueryResult is journal.query's answer and the shoal://journal record.
type QueryResult struct {
	Rows []core.JournalRow `json:"rows"`
}

func (p *Provider) queryMethod(ctx context.Context, c *core.Caller, params json.RawMessage) (any, error) {
	q, scope, err := queryAndScope(params)
	if err != nil {
		return nil, err
	}
	if scope != "" {
		res, err := p.scoped(ctx, scope, q)
		if err != nil || res != nil {
			return res, err
		}
	}
	rows, err := p.query(q)
	if err != nil {
		return nil, err
	}
	return QueryResult{Rows: rows}, nil
}

// queryAndScope splits journal.query's scope member ("local" or
// "cluster") from the query members.
func queryAndScope(params json.RawMessage) (Query, string, error) {
	var m map[string]json.RawMessage
	if json.Unmarshal(params, &m) != nil || m["scope"] == nil {
		q, err := QueryFromParams(params)
		return q, "", err
	}
	var scope string
	if err := json.Unmarshal(m["scope"], &scope); err != nil {
		return Query{}, "", rpc.MemberErrorf("scope", "journal.query: member \"scope\" must be a string, local or cluster")
	}
	delete(m, "scope")
	rest, _ := json.Marshal(m)
	q, err := QueryFromParams(rest)
	return q, scope, err
}

// QueryFromParams reads journal.query params strictly: a member of the
// wrong type or an unknown member is INVALID_PARAMS. effects may be a list
// or a comma-separated string; since, until and limit may be numbers or
// decimal strings (ns timestamps do not fit a float exactly).
func QueryFromParams(params json.RawMessage) (Query, error) {
	var q Query
	if len(bytes.TrimSpace(params)) == 0 || string(bytes.TrimSpace(params)) == "null" {
		return q, nil
	}
	var in struct {
		Principal *string          `json:"principal"`
		Head      *string          `json:"head"`
		OK        *bool            `json:"ok"`
		Since     *json.RawMessage `json:"since"`
		Until     *json.RawMessage `json:"until"`
		Effects   *json.RawMessage `json:"effects"`
		Limit     *json.RawMessage `json:"limit"`
	}
	if err := rpc.DecodeParams(params, &in); err != nil {
		return q, rpc.ExplainParams(err, "journal.query params: ",
			"; expected {principal, head: string, ok: bool, since, until: ns integer, effects: [string], limit: integer, scope: local|cluster}")
	}
	if in.Principal != nil {
		q.Principal = *in.Principal
	}
	if in.Head != nil {
		q.Head = *in.Head
	}
	q.OK = in.OK
	var err error
	if q.Since, err = intParam("since", in.Since); err != nil {
		return q, err
	}
	if q.Until, err = intParam("until", in.Until); err != nil {
		return q, err
	}
	limit, err := intParam("limit", in.Limit)
	if err != nil {
		return q, err
	}
	if limit < 0 {
		return q, rpc.Errorf(rpc.InvalidParams, "journal.query: limit %d is negative; use 1 to %d (default %d)", limit, MaxLimit, DefaultLimit)
	}
	q.Limit = int(min(limit, MaxLimit))
	if in.Effects != nil {
		var list []string
		var one string
		switch {
		case json.Unmarshal(*in.Effects, &list) == nil:
			for _, e := range list {
				q.Effects = append(q.Effects, splitList(e)...)
			}
		case json.Unmarshal(*in.Effects, &one) == nil:
			q.Effects = splitList(one)
		default:
			return q, rpc.Errorf(rpc.InvalidParams, "journal.query: effects must be a list of effect names like [\"fs.write\",\"net\"], got %s", clip.String(string(*in.Effects), 60))
		}
	}
	return q, nil
}

// intParam reads an integer given as a JSON number or a decimal string.
func intParam(name string, raw *json.RawMessage) (int64, error) {
	if raw == nil || string(*raw) == "null" {
		return 0, nil
	}
	text := string(*raw)
	if s, err := strconv.Unquote(text); err == nil {
		text = s
	}
	n, err := strconv.ParseInt(strings.TrimSpace(text), 10, 64)
	if err != nil {
		return 0, rpc.Errorf(rpc.InvalidParams, "journal.query: %s must be an integer (nanoseconds for since/until), got %s", name, clip.String(string(*raw), 60))
	}
	return n, nil
}
