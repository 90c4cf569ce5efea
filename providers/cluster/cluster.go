// Package cluster joins kernels on several hosts through NATS JetStream
// (docs/cluster.md). It is configured by the [cluster] table of
// config.toml (or shoal kernel --nats); without it, Provision returns at
// once and no NATS code runs.
//
// What it shares, each through a narrow hook of the package that owns the
// thing:
//
//   - user.* channels declared shared = true: a JetStream stream each, kept
//     behind the bus as its [bus.SharedStore] (channels.go);
//   - the journal: every kernel exports its rows, with its kernel id and
//     host, to one stream, from a durable cursor in its own journal, and
//     answers journal.query scope=cluster from it (journal.go);
//   - values: blobs put here are copied to an object store bucket, and a
//     val: ref missing here is fetched from it as the content store's
//     [cas.Remote] (values.go).
//
// Sessions, PTYs and tasks stay on their host.
package cluster

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/shoal-sh/shoal/core"
	"github.com/shoal-sh/shoal/core/rpc"
	"github.com/shoal-sh/shoal/core/uri"
	"github.com/shoal-sh/shoal/core/wire"
	"github.com/shoal-sh/shoal/providers/journal"
	"github.com/shoal-sh/shoal/providers/val/cas"
)

// Defaults of the [cluster] table (docs/cluster.md).
const (
	DefaultReplicas       = 1
	DefaultChannelMaxMsgs = 100_000
	DefaultChannelMaxAge  = 30 * 24 * time.Hour
	DefaultJournalMaxAge  = 90 * 24 * time.Hour
)

// Names in NATS. Channel streams are named from the channel (see
// streamName); every kernel agrees on these.
const (
	channelSubjectPrefix = "shoal.ch."
	journalStream        = "SHOAL_JOURNAL"
	journalSubjectPrefix = "shoal.journal."
	valuesBucket         = "shoal_values"
	// IDFile keeps the kernel's generated cluster id in the state dir.
	IDFile = "cluster.id"
)

// opTimeout bounds one NATS request (a publish's ack, a stream lookup).
const opTimeout = 5 * time.Second

// Provider is the cluster family: shoal://cluster shows the cluster state,
// and Provision wires the shared channels, journal and values.
type Provider struct {
	c *Cluster
	// The services a cluster shares, set at start-up (both provisioned
	// before this provider); a cluster is refused without them.
	blobs   core.Blobs
	journal core.Journal
}

// New returns the cluster provider.
func New() *Provider { return &Provider{} }

var (
	_ core.Provider    = (*Provider)(nil)
	_ core.Provisioner = (*Provider)(nil)
	_ core.Closer      = (*Provider)(nil)
	_ core.Needer      = (*Provider)(nil)
	_ core.Offerer     = (*Provider)(nil)
)

// Needs implements core.Needer.
func (p *Provider) Needs() []core.Dependency {
	return []core.Dependency{
		core.Optional(core.ServiceBlobs, &p.blobs),
		core.Optional(core.ServiceJournal, &p.journal),
	}
}

// Offers implements core.Offerer: both are offered only when a cluster
// is configured.
func (p *Provider) Offers() []core.AnyKey {
	return []core.AnyKey{core.ServiceCluster, journal.ServiceCluster}
}

// Cluster is one kernel's membership in a cluster.
type Cluster struct {
	id, host string
	urls     string
	cfg      core.ClusterConfig
	log      *slog.Logger

	nc *nats.Conn
	js jetstream.JetStream

	channels *channels
	export   *exporter
	values   *values

	stop     chan struct{}
	base     context.Context // ends at Close
	cancel   context.CancelFunc
	wg       sync.WaitGroup
	stopOnce sync.Once

	mu      sync.Mutex
	lastErr string
	streams map[string]jetstream.Stream // ensured streams by name
}

// Provision joins the cluster when [cluster] nats (or --nats) is set.
func (p *Provider) Provision(h *core.Host) error {
	cfg := core.ClusterConfig{}
	var decls []core.ChannelDecl
	if h.Config != nil {
		cfg = h.Config.Cluster
		decls = h.Config.Events.Channels
	}
	if cfg.NATS == "" {
		for _, d := range decls {
			if d.Shared {
				return fmt.Errorf("cluster: channel %s is declared shared = true, but the kernel has no cluster: set nats under [cluster] in config.toml or start it with --nats URL", d.Name)
			}
		}
		return nil
	}
	c, err := join(h, cfg, decls, p.blobs, p.journal)
	if err != nil {
		return fmt.Errorf("cluster: %w", err)
	}
	p.c = c
	return nil
}

func join(h *core.Host, cfg core.ClusterConfig, decls []core.ChannelDecl, blobs core.Blobs, jr core.Journal) (*Cluster, error) {
	log := h.Log
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	id, err := kernelID(h.StateDir, cfg.Name)
	if err != nil {
		return nil, err
	}
	host, _ := os.Hostname()
	c := &Cluster{id: id, host: host, urls: cfg.NATS, cfg: cfg, log: log.With("cluster", id),
		stop: make(chan struct{}), streams: map[string]jetstream.Stream{}}
	c.base, c.cancel = context.WithCancel(context.Background())
	if c.cfg.Replicas <= 0 {
		c.cfg.Replicas = DefaultReplicas
	}
	shared, err := newSharedSet(decls)
	if err != nil {
		return nil, err
	}
	maxAge := func(s string, def time.Duration, key string) (time.Duration, error) {
		if s == "" {
			return def, nil
		}
		d, err := time.ParseDuration(s)
		if err != nil || d < 0 {
			return 0, fmt.Errorf("[cluster] %s = %q: give a duration such as \"720h\" (0 keeps forever)", key, s)
		}
		return d, nil
	}
	chAge, err := maxAge(cfg.ChannelMaxAge, DefaultChannelMaxAge, "channel_max_age")
	if err != nil {
		return nil, err
	}
	jAge, err := maxAge(cfg.JournalMaxAge, DefaultJournalMaxAge, "journal_max_age")
	if err != nil {
		return nil, err
	}

	// Every wake-up below is a non-blocking send: the handlers run on
	// nats.go's callback goroutine.
	wakeAll := func() {
		c.export.poke()
		c.values.poke()
	}
	opts := []nats.Option{
		nats.Name("shoal kernel " + id),
		nats.MaxReconnects(-1),
		nats.ReconnectWait(250 * time.Millisecond),
		// No buffering while disconnected: a publish then fails at once
		// instead of sitting in a buffer that a long outage drops.
		nats.ReconnectBufSize(-1),
		// The kernel starts and does its local work while NATS is down.
		nats.RetryOnFailedConnect(true),
		nats.Timeout(2 * time.Second),
		nats.ConnectHandler(func(*nats.Conn) { c.log.Info("cluster connected"); wakeAll() }),
		nats.ReconnectHandler(func(*nats.Conn) { c.log.Info("cluster reconnected"); c.export.reconnected(); wakeAll() }),
		nats.DisconnectErrHandler(func(_ *nats.Conn, err error) {
			if err != nil {
				c.noteErr(fmt.Errorf("disconnected: %w", err))
			}
		}),
	}
	if cfg.Creds != "" {
		opts = append(opts, nats.UserCredentials(cfg.Creds))
	}
	if cfg.TLSCA != "" {
		opts = append(opts, nats.RootCAs(cfg.TLSCA))
	}
	if (cfg.TLSCert == "") != (cfg.TLSKey == "") {
		return nil, errors.New("[cluster] tls_cert and tls_key go together: give both or neither")
	}
	if cfg.TLSCert != "" {
		opts = append(opts, nats.ClientCert(cfg.TLSCert, cfg.TLSKey))
	}

	if blobs == nil || jr == nil {
		return nil, errors.New("a cluster shares the content store and the journal: their providers (val, journal) must be loaded")
	}
	store, ok := blobs.(*cas.Store)
	if !ok {
		return nil, fmt.Errorf("the content store is a %T, not a *cas.Store", blobs)
	}
	j, ok := jr.(*journal.Journal)
	if !ok {
		return nil, fmt.Errorf("the journal is a %T, not a *journal.Journal", jr)
	}
	c.channels = newChannels(c, h.Bus, shared, chAge)
	c.export = newExporter(c, j, jAge)
	c.values = newValues(c, store, cfg.ValuesMaxBytes)

	c.nc, err = nats.Connect(cfg.NATS, opts...)
	if err != nil {
		return nil, fmt.Errorf("connect to %s: %w", cfg.NATS, err)
	}
	if c.js, err = jetstream.New(c.nc); err != nil {
		c.nc.Close()
		return nil, fmt.Errorf("jetstream: %w", err)
	}
	if h.Bus != nil && !shared.empty() {
		h.Bus.SetShared(c.channels)
	}
	store.SetRemote(c.values)
	core.Offer[journal.ClusterQuerier](h, journal.ServiceCluster, c)
	core.Offer[core.ClusterStatus](h, core.ServiceCluster, c)
	c.export.start(h)
	c.values.start()
	return c, nil
}

// kernelID is the configured name, or the id kept in the state dir
// (drawn at first start from the host name and a random suffix).
func kernelID(stateDir, name string) (string, error) {
	if name != "" {
		if !validToken(name) {
			return "", fmt.Errorf("[cluster] name %q: use letters, digits, '-' and '_' only (it is a NATS subject token)", name)
		}
		return name, nil
	}
	path := filepath.Join(stateDir, IDFile)
	if b, err := os.ReadFile(path); err == nil {
		if id := strings.TrimSpace(string(b)); validToken(id) {
			return id, nil
		}
		return "", fmt.Errorf("%s holds no valid cluster id; remove it to draw a new one", path)
	} else if !errors.Is(err, os.ErrNotExist) {
		return "", err
	}
	host, _ := os.Hostname()
	var sb strings.Builder
	for _, r := range host {
		if r < 128 && validToken(string(r)) {
			sb.WriteRune(r)
		}
	}
	var suffix [4]byte
	_, _ = rand.Read(suffix[:])
	id := strings.Trim(sb.String(), "-_")
	if id == "" {
		id = "kernel"
	}
	id = fmt.Sprintf("%.40s-%s", id, hex.EncodeToString(suffix[:]))
	if err := os.WriteFile(path, []byte(id+"\n"), 0o600); err != nil {
		return "", fmt.Errorf("keep the cluster id: %w", err)
	}
	return id, nil
}

func validToken(s string) bool {
	if s == "" || len(s) > 64 {
		return false
	}
	for i := 0; i < len(s); i++ {
		ch := s[i]
		if !(ch >= 'a' && ch <= 'z' || ch >= 'A' && ch <= 'Z' || ch >= '0' && ch <= '9' || ch == '-' || ch == '_') {
			return false
		}
	}
	return true
}

// ID is this kernel's id in the cluster.
func (c *Cluster) ID() string { return c.id }

// connected reports whether the NATS connection is up.
func (c *Cluster) connected() bool { return c.nc.Status() == nats.CONNECTED }

// down is the CLUSTER_UNAVAILABLE error for what, or nil when connected.
func (c *Cluster) down(what string) error {
	if c.connected() {
		return nil
	}
	return c.unavailable(what, fmt.Errorf("the connection is %s", strings.ToLower(c.nc.Status().String())))
}

func (c *Cluster) unavailable(what string, err error) error {
	c.noteErr(err)
	return rpc.Errorf(rpc.ClusterDown, "%s: the cluster's NATS servers (%s) cannot be reached (%v); local channels, executions and values go on; retry once `shoal status` shows the cluster connected", what, redact(c.urls), err)
}

func (c *Cluster) noteErr(err error) {
	c.mu.Lock()
	c.lastErr = err.Error()
	c.mu.Unlock()
	c.log.Warn("cluster", "err", err)
}

// ctx is a context for one NATS request, ended by the timeout or Close.
func (c *Cluster) ctx() (context.Context, context.CancelFunc) {
	return context.WithTimeout(c.base, opTimeout)
}

// ensureStream returns the stream called name, creating it with cfg when
// it does not exist. A stream that exists keeps its own configuration:
// the first kernel to need it decides, and operators change it with the
// nats CLI (docs/cluster.md).
func (c *Cluster) ensureStream(ctx context.Context, cfg jetstream.StreamConfig) (jetstream.Stream, error) {
	c.mu.Lock()
	s := c.streams[cfg.Name]
	c.mu.Unlock()
	if s != nil {
		return s, nil
	}
	s, err := c.js.Stream(ctx, cfg.Name)
	if errors.Is(err, jetstream.ErrStreamNotFound) {
		s, err = c.js.CreateStream(ctx, cfg)
		if errors.Is(err, jetstream.ErrStreamNameAlreadyInUse) {
			s, err = c.js.Stream(ctx, cfg.Name)
		}
	}
	if err != nil {
		return nil, fmt.Errorf("stream %s: %w", cfg.Name, err)
	}
	c.mu.Lock()
	c.streams[cfg.Name] = s
	c.mu.Unlock()
	return s, nil
}

// Status is the cluster state kernel.status and shoal://cluster show.
func (c *Cluster) Status() wire.ClusterStatus {
	c.mu.Lock()
	lastErr := c.lastErr
	c.mu.Unlock()
	st := wire.ClusterStatus{
		Enabled:   true,
		Kernel:    c.id,
		Host:      c.host,
		NATS:      redact(c.urls),
		State:     strings.ToLower(c.nc.Status().String()),
		Connected: c.connected(),
		LastError: lastErr,
		Channels:  c.channels.status(),
		Journal:   c.export.status(),
		Values:    c.values.status(),
	}
	if st.Connected {
		st.Server = c.nc.ConnectedUrlRedacted()
	}
	return st
}

// redact drops user:password from NATS URLs.
func redact(urls string) string {
	parts := strings.Split(urls, ",")
	for i, u := range parts {
		u = strings.TrimSpace(u)
		if at := strings.LastIndex(u, "@"); at >= 0 {
			if scheme := strings.Index(u, "://"); scheme >= 0 && scheme < at {
				u = u[:scheme+3] + "***@" + u[at+1:]
			}
		}
		parts[i] = u
	}
	return strings.Join(parts, ",")
}

// Sync waits until every journal row written so far is exported and every
// value put so far is uploaded, or ctx ends. Tests and `shoal status`
// watchers use it; the kernel never waits for it.
func (c *Cluster) Sync(ctx context.Context) error {
	target, err := c.export.j.LastEntryID()
	if err != nil {
		return err
	}
	for {
		c.export.poke()
		c.values.poke()
		if c.export.cursor.Load() >= target && c.values.pendingCount() == 0 {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("cluster sync: export at %d of %d, %d uploads pending: %w", c.export.cursor.Load(), target, c.values.pendingCount(), ctx.Err())
		case <-time.After(5 * time.Millisecond):
		}
	}
}

// Close stops the exporter, uploader and channel consumers and closes the
// connection. What was not exported yet is exported at the next start
// (the cursor is in the journal).
func (c *Cluster) Close() error {
	c.stopOnce.Do(func() {
		close(c.stop)
		c.cancel()
		c.export.close()
		c.channels.close()
		c.wg.Wait()
		c.nc.Close()
	})
	return nil
}

// Close leaves the cluster.
func (p *Provider) Close() error {
	if p.c == nil {
		return nil
	}
	return p.c.Close()
}

// Cluster is the membership (nil without [cluster]).
func (p *Provider) Cluster() *Cluster { return p.c }

// Family is "cluster".
func (p *Provider) Family() string { return "cluster" }

// Templates: shoal://cluster is not advertised; docs/cluster.md names it.
func (p *Provider) Templates() []core.Template { return nil }

// List lists nothing: the listings' roots are fixed (SPEC M2).
func (p *Provider) List(context.Context, *core.Caller) ([]core.Resource, error) { return nil, nil }

// Read answers shoal://cluster with the cluster state.
func (p *Provider) Read(_ context.Context, _ *core.Caller, u *uri.URI) (*core.Content, error) {
	if len(u.Segments) != 0 {
		return nil, rpc.Errorf(rpc.NotFound, "%s: the cluster family has one resource, shoal://cluster (this kernel's cluster state)", u.Path())
	}
	if p.c == nil {
		return &core.Content{Record: map[string]any{"enabled": false}}, nil
	}
	return &core.Content{Record: p.c.Status()}, nil
}
