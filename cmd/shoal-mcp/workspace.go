package main

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"net/url"
	"path/filepath"
	"regexp"
	"sync"
	"time"

	"github.com/shoal-sh/shoal/sdk/client"
)

// apply is o attached where t says: its session, and the workspace
// the session is created for when new.
func (t *target) apply(ctx context.Context, o client.Options) (client.Options, error) {
	name, dir, err := t.get(ctx)
	if err != nil {
		return o, err
	}
	o.Session, o.Workspace = name, dir
	return o, nil
}

// rootsTimeout bounds how long the facade waits for the client's answer
// to roots/list before it settles on its launch directory.
const rootsTimeout = 10 * time.Second

// target is the kernel session the facade attaches to and the workspace a
// new one is created for. It is settled once: at start when --session and
// --workspace leave nothing to learn, else from the first client's roots
// (roots/list, when the client offers roots) or the launch directory. Every
// kernel connection of the facade waits for it, so a tool call that comes
// before the roots are known attaches to the right session.
type target struct {
	// session is --session (or $SHOAL_SESSION); "" derives it.
	session string
	// workspace is --workspace, else the launch directory.
	workspace string
	// fixed: the workspace was named on the command line, roots do not
	// change it.
	fixed bool

	once  sync.Once
	ready chan struct{}
	// Settled values.
	name, dir string
}

func newTarget(session, workspace string, fixed bool) *target {
	return &target{session: session, workspace: workspace, fixed: fixed, ready: make(chan struct{})}
}

// settle fixes the session on dir (the first call wins). An empty dir
// means the launch directory (or --workspace).
func (t *target) settle(dir string) {
	t.once.Do(func() {
		if dir == "" || t.fixed {
			dir = t.workspace
		}
		t.dir = dir
		t.name = t.session
		if t.name == "" {
			t.name = projectSession(dir)
		}
		close(t.ready)
	})
}

// settled reports whether the session is known.
func (t *target) settled() bool {
	select {
	case <-t.ready:
		return true
	default:
		return false
	}
}

// get returns the session and workspace, waiting for them to settle. When
// no client has said anything about roots within rootsTimeout, the launch
// directory is taken.
func (t *target) get(ctx context.Context) (session, workspace string, err error) {
	select {
	case <-t.ready:
	case <-time.After(rootsTimeout):
		t.settle("")
	case <-ctx.Done():
		return "", "", ctx.Err()
	}
	return t.name, t.dir, nil
}

var unsafeName = regexp.MustCompile(`[^A-Za-z0-9._-]+`)

// projectSession is the default session of a project directory:
// proj-<basename>-<8 hex of the path's SHA-256>, so two projects of the
// same name in different places get different sessions, and one project
// gets the same session every time.
func projectSession(dir string) string {
	sum := sha256.Sum256([]byte(filepath.Clean(dir)))
	base := unsafeName.ReplaceAllString(filepath.Base(dir), "-")
	if base == "" || base == "-" || base == "." || base == "/" {
		base = "root"
	}
	if len(base) > 40 {
		base = base[:40]
	}
	return "proj-" + base + "-" + hex.EncodeToString(sum[:4])
}

// rootDir picks the workspace from a roots/list result: the first root
// that is a local directory (file:// URI). "" when none is.
func rootDir(result json.RawMessage) string {
	var r struct {
		Roots []struct {
			URI string `json:"uri"`
		} `json:"roots"`
	}
	if json.Unmarshal(result, &r) != nil {
		return ""
	}
	for _, root := range r.Roots {
		u, err := url.Parse(root.URI)
		if err != nil || u.Scheme != "file" || (u.Host != "" && u.Host != "localhost") {
			continue
		}
		if p := filepath.Clean(u.Path); filepath.IsAbs(p) {
			return p
		}
	}
	return ""
}

// learnRoots asks the client of s for its roots, when it offers them and
// the session is not settled yet, and settles on the first one (or the
// launch directory). It runs after the client's notifications/initialized.
func (f *Facade) learnRoots(s *session) {
	if f.target == nil || f.target.settled() {
		return
	}
	if !s.clientHas("roots") {
		f.target.settle("")
		return
	}
	ctx, cancel := context.WithTimeout(s.ctx, rootsTimeout)
	defer cancel()
	res, err := s.request(ctx, "roots/list", struct{}{})
	if err != nil {
		f.log.Info("roots/list failed; the session follows the launch directory", "err", err)
		f.target.settle("")
		return
	}
	dir := rootDir(res)
	f.log.Info("client roots", "workspace", dir)
	f.target.settle(dir)
}

// rootsInputID names the roots request among a call's input requests.
const rootsInputID = "roots"

// kernelMethods reach the kernel, so the session must be settled before
// they run; the rest (tools/list, ping, logging) do not need it.
var kernelMethods = map[string]bool{
	"tools/call": true, "resources/list": true, "resources/templates/list": true, "resources/read": true,
	"completion/complete": true, "subscriptions/listen": true, "resources/subscribe": true,
}

// rootsStateless settles the session before a request that needs the
// kernel arrives without a handshake. A 2026-07-28 client that declares
// roots in the request's _meta is asked for them the only way that
// revision allows: tools/call and resources/read answer input_required
// with a roots/list input request (SEP-2322), and the client's retry
// carries the roots, which settle the session. It returns the answer to
// send instead of handling m, or nil.
func (f *Facade) rootsStateless(m message) []byte {
	if !isModern(m.Params) {
		f.target.settle("")
		return nil
	}
	if !kernelMethods[m.Method] {
		return nil
	}
	var p struct {
		Meta struct {
			Caps struct {
				Roots json.RawMessage `json:"roots"`
			} `json:"io.modelcontextprotocol/clientCapabilities"`
		} `json:"_meta"`
		InputResponses map[string]json.RawMessage `json:"inputResponses"`
	}
	_ = json.Unmarshal(m.Params, &p)
	if raw, ok := p.InputResponses[rootsInputID]; ok {
		f.target.settle(rootDir(raw))
		return nil
	}
	if len(p.Meta.Caps.Roots) == 0 || (m.Method != "tools/call" && m.Method != "resources/read") {
		f.target.settle("")
		return nil
	}
	result := map[string]any{
		"resultType":    "input_required",
		"inputRequests": map[string]any{rootsInputID: map[string]any{"method": "roots/list", "params": map[string]any{}}},
		"requestState":  "shoal:roots",
	}
	if m.Method == "tools/call" {
		result["content"] = []any{}
	} else {
		result["contents"] = []any{}
	}
	return resultResponse(m.ID, modernResult(result, false))
}
