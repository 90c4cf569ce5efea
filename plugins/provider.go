package plugins

import (
	"context"
	"encoding/json"

	"github.com/tetratelabs/wazero/api"

	"github.com/shoal-sh/shoal/core"
	"github.com/shoal-sh/shoal/core/rpc"
	"github.com/shoal-sh/shoal/core/uri"
	"github.com/shoal-sh/shoal/core/value"
	"github.com/shoal-sh/shoal/internal/clip"
)

// provider adapts a provider plugin to core.Provider: the router treats
// it like any built-in family.
type provider struct{ p *plugin }

var _ core.Provider = provider{}

func (pv provider) Family() string { return pv.p.man.Provider.Family }

// Templates are the module's once it has loaded. While it loads they are
// the manifest's, when it lists them (the load checks that they agree);
// a plugin that failed to load has none.
func (pv provider) Templates() []core.Template {
	p := pv.p
	switch done, err := p.loaded(); {
	case !done:
		out := make([]core.Template, len(p.man.Provider.Templates))
		for i, t := range p.man.Provider.Templates {
			out[i] = core.Template{URITemplate: t, Name: p.name, Description: p.man.Description, MimeType: "application/json"}
		}
		return out
	case err != nil:
		return nil
	}
	return append([]core.Template(nil), p.templates...)
}

type caller struct {
	Session   string `json:"session"`
	Principal string `json:"principal"`
}

func callerOf(c *core.Caller) caller {
	if c == nil {
		return caller{}
	}
	return caller{Session: c.Session, Principal: c.Principal}
}

// List returns the described roots, then the module's live entries when
// it has any. It waits for the load (as long as ctx allows); a plugin that
// failed to load answers its PLUGIN_ERROR, which the router reports
// beside the other families' resources.
func (pv provider) List(ctx context.Context, c *core.Caller) ([]core.Resource, error) {
	p := pv.p
	if err := p.wait(ctx); err != nil {
		return nil, err
	}
	out := append([]core.Resource(nil), p.roots...)
	if !p.desc.List {
		return out, nil
	}
	req, err := json.Marshal(struct {
		Caller caller `json:"caller"`
	}{callerOf(c)})
	if err != nil {
		return nil, err
	}
	env, err := p.invoke(ctx, func(in *instance) api.Function { return in.list }, req)
	if err != nil {
		return nil, err
	}
	if err := p.guestError(env); err != nil {
		return nil, err
	}
	var live []descResource
	if err := json.Unmarshal(env.Record, &live); err != nil {
		return nil, p.failed(ctx, pluginError(p.name, "malformed answer to shoal_list: want a list of resources: %v", err))
	}
	for _, r := range live {
		out = append(out, core.Resource{URI: r.URI, Name: r.Name, Description: r.Description, MimeType: mimeOr(r.MimeType)})
	}
	return out, nil
}

type param struct {
	Key   string `json:"key"`
	Value string `json:"value"`
}

// readRequest is the request of shoal_read (sdk.ReadRequest).
type readRequest struct {
	URI      string   `json:"uri"`
	Family   string   `json:"family"`
	Segments []string `json:"segments"`
	Query    []param  `json:"query"`
	Caller   caller   `json:"caller"`
}

// Read sends the decoded URI to the module and returns what it answers:
// a typed value, or a plain record. Path, slice, format and elision are
// the router's.
func (pv provider) Read(ctx context.Context, c *core.Caller, u *uri.URI) (*core.Content, error) {
	p := pv.p
	segs := u.Segments
	if segs == nil {
		segs = []string{}
	}
	query := make([]param, len(u.Query))
	for i, q := range u.Query {
		query[i] = param{q.Key, q.Value}
	}
	raw := u.Raw
	if raw == "" {
		raw = u.String()
	}
	req, err := json.Marshal(readRequest{URI: raw, Family: u.Family, Segments: segs, Query: query, Caller: callerOf(c)})
	if err != nil {
		return nil, err
	}
	env, err := p.invoke(ctx, func(in *instance) api.Function { return in.read }, req)
	if err != nil {
		return nil, err
	}
	if err := p.guestError(env); err != nil {
		return nil, err
	}
	switch {
	case len(env.Value) > 0:
		v, err := value.Unmarshal(env.Value)
		if err != nil {
			return nil, p.failed(ctx, pluginError(p.name, "malformed answer: the typed value does not decode: %s", rpc.AsError(err).Message))
		}
		return &core.Content{Value: v}, nil
	case len(env.Record) > 0:
		return &core.Content{Record: env.Record}, nil
	}
	return nil, p.failed(ctx, pluginError(p.name, "malformed answer: ok without a value or a record"))
}

// guestError maps an error envelope from a provider call to a kernel
// error: the codes a provider may use keep their meaning, the rest are
// plugin failures.
func (p *plugin) guestError(env *envelope) error {
	if env.OK {
		return nil
	}
	msg := clip.String(env.Error.Message, 2000)
	switch env.Error.Code {
	case guestNotFound:
		return rpc.Errorf(rpc.NotFound, "%s", msg)
	case guestBadURI:
		return rpc.Errorf(rpc.BadURI, "%s", msg)
	case guestInvalidParams:
		return rpc.Errorf(rpc.InvalidParams, "%s", msg)
	}
	return p.failed(context.Background(), pluginError(p.name, "%s: %s", env.Error.Code, msg))
}
