// Package client is a Go client of the Shoal kernel protocol: JSON-RPC 2.0,
// one object per line, over the kernel's unix socket. Besides the standard
// library it uses Shoal's own std-lib-only rpc framing and wire types, and
// zeebo/blake3 to check the blobs a chunked blob.get returns.
//
//	c, err := client.Dial(ctx, client.Options{Principal: "agent:me"})
//	if err != nil { … }
//	defer c.Close()
//	reply, err := c.Exec(ctx, "ls", client.ExecOptions{})
//	page, err := c.Read(ctx, reply.URI+"?path=[0].name")
package client

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/shoal-sh/shoal/core/rpc"
	"github.com/shoal-sh/shoal/core/statedir"
	"github.com/shoal-sh/shoal/core/wire"
)

// EventMethod is the notification method of pushed event frames.
const EventMethod = "events.event"

// MaxReadLimit is the most events one events.read returns.
const MaxReadLimit = 1024

// Options say where the kernel is and who connects.
type Options struct {
	// StateDir is the kernel's state directory (default as the kernel's:
	// $SHOAL_STATE_DIR, $XDG_STATE_HOME/shoal or ~/.local/state/shoal).
	StateDir string
	// Socket overrides $StateDir/kernel.sock.
	Socket string
	// Token overrides the token read from the state directory.
	Token string
	// Operator attaches with the operator credential
	// ($StateDir/operator.token) when it is readable, else with the agent
	// credential ($StateDir/token), which attaches agent:* principals only
	// and never carries Approve. A principal that is not agent:* needs the
	// operator credential, so Dial reads it for those without being asked.
	// A process confined by a session cannot read it.
	Operator bool
	// Session to attach (default "main").
	Session string
	// Principal to act as (default "agent:default").
	Principal string
	// Workspace is the absolute directory a new session is created for
	// (it starts there; it is its writable root). A session that exists
	// keeps its own. Empty: the kernel's default.
	Workspace string
	// OnEvent receives pushed events, in order per channel, on the
	// connection's read goroutine: hand them off quickly.
	OnEvent func(Event)
	// DialTimeout bounds connecting (default 2s).
	DialTimeout time.Duration
}

// Event is one event frame; its IsDrop reports whether it is a
// synthetic drop marker and decodes it.
type Event = wire.Event

// Drop is the payload of a synthetic drop marker.
type Drop = wire.Drop

// Attached is the answer of session.attach.
type Attached = wire.Attached

// Client is one attached kernel connection. Safe for concurrent use.
type Client struct {
	conn     *rpc.Conn
	Attached Attached
	opts     Options
	runErr   chan error
	closeMu  sync.Once
}

// DefaultStateDir is the kernel's default state directory.
func DefaultStateDir() string { return statedir.Default() }

// SocketPath returns the socket the options point at.
func (o Options) SocketPath() string {
	if o.Socket != "" {
		return o.Socket
	}
	dir := o.StateDir
	if dir == "" {
		dir = DefaultStateDir()
	}
	return filepath.Join(dir, statedir.SocketName)
}

// ErrNoKernel is returned by Dial when nothing answers on the socket.
var ErrNoKernel = errors.New("no kernel answers on the socket")

// Dial connects to the kernel and attaches.
func Dial(ctx context.Context, o Options) (*Client, error) {
	if o.StateDir == "" {
		o.StateDir = DefaultStateDir()
	}
	if o.DialTimeout == 0 {
		o.DialTimeout = 2 * time.Second
	}
	d := net.Dialer{Timeout: o.DialTimeout}
	nc, err := d.DialContext(ctx, "unix", o.SocketPath())
	if err != nil {
		return nil, fmt.Errorf("%w: %s: %v", ErrNoKernel, o.SocketPath(), err)
	}
	if o.Token == "" {
		if o.Token, err = readToken(o); err != nil {
			nc.Close()
			return nil, fmt.Errorf("read kernel token: %w (a kernel answers on %s; is its state dir %s?)", err, o.SocketPath(), o.StateDir)
		}
	}
	return attach(ctx, nc, o)
}

// readToken reads the credential o asks for: the operator's when o.Operator
// or the principal is not agent:* and it is readable, else the agent's.
func readToken(o Options) (string, error) {
	if o.Operator || (o.Principal != "" && !strings.HasPrefix(o.Principal, "agent:")) {
		if tok, err := statedir.ReadToken(o.StateDir, statedir.OperatorTokenName); err == nil && tok != "" {
			return tok, nil
		}
	}
	return statedir.ReadToken(o.StateDir, statedir.TokenName)
}

func attach(ctx context.Context, nc net.Conn, o Options) (*Client, error) {
	c := &Client{opts: o, runErr: make(chan error, 1)}
	c.conn = rpc.NewConn(nc, rpc.ConnOptions{OnNotify: func(method string, params json.RawMessage) {
		if method != EventMethod || o.OnEvent == nil {
			return
		}
		var ev Event
		if json.Unmarshal(params, &ev) == nil {
			o.OnEvent(ev)
		}
	}})
	go func() { c.runErr <- c.conn.Run() }()
	params := map[string]string{"token": o.Token, "session": o.Session, "principal": o.Principal}
	if o.Workspace != "" {
		params["workspace"] = o.Workspace
	}
	err := c.conn.Call(ctx, "session.attach", params, &c.Attached)
	if err != nil {
		c.Close()
		return nil, err
	}
	return c, nil
}

// Close ends the connection (and its subscriptions).
func (c *Client) Close() error {
	c.closeMu.Do(func() {
		c.conn.Close()
		<-c.conn.Done()
	})
	return nil
}

// Done is closed when the connection has ended.
func (c *Client) Done() <-chan struct{} { return c.conn.Done() }

// Call makes any kernel call. Kernel errors are *rpc.Error values: use
// Code to tell them apart.
func (c *Client) Call(ctx context.Context, method string, params, result any) error {
	return c.conn.Call(ctx, method, params, result)
}

// Code returns the kernel error code of err, or 0 when err is not a kernel
// error.
func Code(err error) int {
	var e *rpc.Error
	if errors.As(err, &e) {
		return int(e.Code)
	}
	return 0
}

// ExecOptions tune Exec.
type ExecOptions struct {
	TimeoutMS  int64
	Background bool
}

// ExecReply is the answer of exec (and plan.apply).
type ExecReply = wire.ExecReply

// Exec runs source in the attached session.
func (c *Client) Exec(ctx context.Context, source string, o ExecOptions) (*ExecReply, error) {
	var r ExecReply
	params := struct {
		Source     string `json:"source"`
		TimeoutMS  int64  `json:"timeout_ms"`
		Background bool   `json:"background"`
	}{source, o.TimeoutMS, o.Background}
	err := c.Call(ctx, "exec", params, &r)
	if err != nil {
		return nil, err
	}
	return &r, nil
}

// Content is one item of a read: MCP's resource content.
type Content = wire.Content

// ReadResult is a resource read: MCP's envelope.
type ReadResult = wire.ReadResult

// Read reads a URI or short ref.
func (c *Client) Read(ctx context.Context, target string) (*ReadResult, error) {
	var r ReadResult
	if err := c.Call(ctx, "resources.read", map[string]string{"uri": target}, &r); err != nil {
		return nil, err
	}
	return &r, nil
}

// Page is an events.read answer.
type Page = wire.Page

// Events reads a channel after since (nil: from the oldest retained).
func (c *Client) Events(ctx context.Context, channel string, since *uint64, limit int) (*Page, error) {
	p := map[string]any{"channel": channel}
	if since != nil {
		p["since"] = *since
	}
	if limit > 0 {
		p["limit"] = limit
	}
	var page Page
	if err := c.Call(ctx, "events.read", p, &page); err != nil {
		return nil, err
	}
	return &page, nil
}

// Published is the answer of events.publish.
type Published = wire.Published

// Publish publishes a user.* event.
func (c *Client) Publish(ctx context.Context, channel string, payload any) (*Published, error) {
	raw, err := json.Marshal(payload)
	if err != nil {
		return nil, err
	}
	var p Published
	if err := c.Call(ctx, "events.publish", map[string]any{"channel": channel, "payload": json.RawMessage(raw)}, &p); err != nil {
		return nil, err
	}
	return &p, nil
}

// Subscribed is the answer of events.subscribe.
type Subscribed = wire.Subscribed

// Subscribe asks for pushed events of a channel; they arrive at
// Options.OnEvent.
func (c *Client) Subscribe(ctx context.Context, channel string) (*Subscribed, error) {
	var s Subscribed
	if err := c.Call(ctx, "events.subscribe", map[string]string{"channel": channel}, &s); err != nil {
		return nil, err
	}
	return &s, nil
}

// SubscribeURI subscribes to the channel behind a subscribable URI.
func (c *Client) SubscribeURI(ctx context.Context, u string) (*Subscribed, error) {
	var s Subscribed
	if err := c.Call(ctx, "events.subscribe", map[string]string{"uri": u}, &s); err != nil {
		return nil, err
	}
	return &s, nil
}

// Unsubscribe stops pushed events of a channel.
func (c *Client) Unsubscribe(ctx context.Context, channel string) error {
	return c.Call(ctx, "events.unsubscribe", map[string]string{"channel": channel}, nil)
}
