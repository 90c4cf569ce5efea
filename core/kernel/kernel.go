// Package kernel is the Shoal kernel process: the state directory, the
// token, the unix socket, named sessions and principals, the JSON-RPC
// method table, and the wiring between the bus, the router and the
// providers. It knows no resource family by name.
package kernel

import (
	"context"
	"crypto/subtle"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/shoal-sh/shoal/core"
	"github.com/shoal-sh/shoal/core/bus"
	"github.com/shoal-sh/shoal/core/policy"
	"github.com/shoal-sh/shoal/core/rpc"
	"github.com/shoal-sh/shoal/core/statedir"
	"github.com/shoal-sh/shoal/core/uri"
	"github.com/shoal-sh/shoal/core/version"
	"github.com/shoal-sh/shoal/core/wire"
)

// Version is the kernel version reported by session.attach and status.
const Version = version.Version

// StaticChannels are the kernel's own channels, announced at attach.
var StaticChannels = []string{"journal", "approval", "render", "session.transcript"}

// PluginHost is the loaded plugin set, as the kernel sees it. cmd/shoal
// adapts package plugins to it, so the kernel does not import the host.
type PluginHost interface {
	Providers() []core.Provider
	// Bind returns the validator plugin called name for channel, or why
	// it cannot check that channel.
	Bind(name, channel string) (bus.Validator, error)
	Status() []wire.PluginStatus
	Close() error
}

// PluginLoader loads plugins from dirs. reserved lists the families the
// built-in providers already own.
type PluginLoader func(cfg *core.Config, dirs []string, reserved []string, cacheDir string, log *slog.Logger) (PluginHost, error)

// Options configure a kernel.
type Options struct {
	// StateDir holds the socket, token, config, policy, journal and store.
	StateDir string
	// Socket overrides $StateDir/kernel.sock.
	Socket string
	// ConfigPath overrides $StateDir/config.toml.
	ConfigPath string
	// PluginDirs are added to the config's plugin_dirs.
	PluginDirs []string
	// IdleExit stops the kernel after this long with no connection and no
	// busy provider; zero means never; IdleExitFromConfig takes config.toml's
	// idle_exit (10m by default), as background kernels do.
	IdleExit time.Duration
	// Log receives the kernel log; nil discards it.
	Log *slog.Logger
	// LoadPlugins loads the plugin folders; nil loads none.
	LoadPlugins PluginLoader
	// Order arranges resource listings (see core.Order).
	Order core.Order
	// NATS overrides config.toml's [cluster] nats (shoal kernel --nats).
	NATS string
}

// IdleExitFromConfig as Options.IdleExit defers to config.toml's idle_exit.
const IdleExitFromConfig = time.Duration(-1)

// Busy is implemented by providers that keep the kernel alive while they
// hold work (running tasks, open PTYs).
type Busy interface{ Busy() bool }

// Kernel is one running kernel.
type Kernel struct {
	opts      Options
	stateDir  string
	socket    string
	token     string // the agent credential, $STATE/token
	operator  string // the operator credential, $STATE/operator.token
	log       *slog.Logger
	lock      *os.File
	cfg       *core.Config
	policy    *policy.Policy
	bus       *bus.Bus
	router    *core.Router
	host      *core.Host
	providers []core.Provider
	plugins   PluginHost
	methods   map[string]core.Method
	// The services the kernel uses, set at start-up (party).
	journal    core.Journal
	sessionSvc core.Sessions
	cluster    core.ClusterStatus
	// builtin are the methods the kernel serves itself (coreMethodTable).
	builtin map[string]coreMethod
	started time.Time

	mu       sync.Mutex
	listener net.Listener
	sockFile os.FileInfo // the socket file this kernel made, for removeSocket
	conns    map[uint64]*conn
	perUID   map[uint32]int
	// acceptLogged is when a failed accept was last logged (Serve only).
	acceptLogged time.Time
	sessions     map[string]*sessionState
	lastIdle     time.Time
	closed       bool
	nextConn     atomic.Uint64
	wg           sync.WaitGroup
	stopOnce     sync.Once
	stopped      chan struct{}
}

type sessionState struct {
	name     string
	attached int
	created  time.Time
	// workspace is the directory the session was created for.
	workspace string
}

// New prepares a kernel: state directory, lock, token, config, policy,
// providers and plugins. It does not listen yet; call Serve.
func New(opts Options, providers ...core.Provider) (k *Kernel, err error) {
	if opts.StateDir == "" {
		opts.StateDir = DefaultStateDir()
	}
	stateDir, err := filepath.Abs(opts.StateDir)
	if err != nil {
		return nil, err
	}
	if err := os.MkdirAll(stateDir, 0o700); err != nil {
		return nil, fmt.Errorf("create state dir: %w", err)
	}
	log := opts.Log
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	k = &Kernel{opts: opts, stateDir: stateDir, log: log, conns: map[uint64]*conn{}, perUID: map[uint32]int{}, sessions: map[string]*sessionState{},
		methods: map[string]core.Method{}, builtin: coreMethodTable(), started: time.Now(), lastIdle: time.Now(), stopped: make(chan struct{})}
	k.socket = opts.Socket
	if k.socket == "" {
		k.socket = filepath.Join(stateDir, SocketName)
	}
	if k.lock, err = lockStateDir(stateDir); err != nil {
		return nil, err
	}
	kk := k // the named result is nil on the error paths below
	defer func() {
		if err != nil {
			kk.shutdown()
		}
	}()
	if k.token, err = statedir.EnsureToken(stateDir, TokenName); err != nil {
		return nil, err
	}
	if k.operator, err = statedir.EnsureToken(stateDir, OperatorTokenName); err != nil {
		return nil, err
	}
	cfgPath := opts.ConfigPath
	if cfgPath == "" {
		cfgPath = filepath.Join(stateDir, ConfigName)
	}
	if k.cfg, err = core.LoadConfig(cfgPath); err != nil {
		return nil, err
	}
	// idle_exit is checked even when the command line decides (a
	// foreground kernel), so a bad value is refused by every kernel, not
	// only by the background one that uses it.
	idle, err := parseIdle(k.cfg.IdleExit)
	if err != nil {
		return nil, fmt.Errorf("config %s: idle_exit: %w", cfgPath, err)
	}
	if opts.NATS != "" {
		k.cfg.Cluster.NATS = opts.NATS
	}
	if k.opts.IdleExit < 0 {
		k.opts.IdleExit = idle
	}
	if k.policy, err = policy.Load(filepath.Join(stateDir, PolicyName)); err != nil {
		return nil, err
	}
	k.bus = bus.New(bus.Options{RingBytes: k.cfg.Limits.RingBytes, MaxPayload: k.cfg.Limits.EventPayload})
	k.router = core.NewRouter()
	k.router.RawCeiling = k.cfg.RawCeiling
	k.router.SetOrder(opts.Order)
	k.host = &core.Host{StateDir: stateDir, Bus: k.bus, Log: log, Config: k.cfg}
	// The wiring is checked before any provider runs: a service needed
	// and offered by none, or offered twice, stops the start here.
	parties := []core.Party{k.party()}
	for _, p := range providers {
		parties = append(parties, core.PartyOf(p))
	}
	if err := core.CheckWiring(parties); err != nil {
		return nil, fmt.Errorf("wire services: %w", err)
	}
	core.Offer(k.host, core.ServicePolicy, k.policy)
	core.Offer(k.host, core.ServiceWorkspaces, core.Workspaces(k))
	for i, p := range providers {
		if err := k.addProvider(p, parties[i+1]); err != nil {
			return nil, err
		}
	}
	if opts.LoadPlugins != nil {
		dirs := append(slices.Clone(k.cfg.PluginDirs), opts.PluginDirs...)
		k.plugins, err = opts.LoadPlugins(k.cfg, dirs, k.router.Families(), filepath.Join(stateDir, "cache", "wasm"), log)
		if err != nil {
			return nil, fmt.Errorf("load plugins: %w", err)
		}
		plugins := k.plugins.Providers()
		for _, p := range plugins {
			parties = append(parties, core.PartyOf(p))
		}
		if err := core.CheckWiring(parties); err != nil {
			return nil, fmt.Errorf("wire plugin services: %w", err)
		}
		for i, p := range plugins {
			if err := k.addProvider(p, parties[len(parties)-len(plugins)+i]); err != nil {
				return nil, err
			}
		}
	}
	if err := core.Resolve(k.host, parties); err != nil {
		return nil, fmt.Errorf("wire services: %w", err)
	}
	if err := core.StartAll(k.providers); err != nil {
		return nil, err
	}
	if err := k.bindChannels(); err != nil {
		return nil, err
	}
	return k, nil
}

// party is the kernel's side of the service wiring: it offers the
// policy and the workspaces, and shows the journal's, the sessions' and
// the cluster's state in kernel.status when they are offered.
func (k *Kernel) party() core.Party {
	return core.Party{
		Name:   "kernel",
		Offers: []core.AnyKey{core.ServicePolicy, core.ServiceWorkspaces},
		Needs: []core.Dependency{
			core.Optional(core.ServiceJournal, &k.journal),
			core.Optional(core.ServiceSessions, &k.sessionSvc),
			core.Optional(core.ServiceCluster, &k.cluster),
		},
	}
}

func (k *Kernel) addProvider(p core.Provider, pt core.Party) error {
	if err := core.Provision(k.host, p, pt); err != nil {
		return fmt.Errorf("provision %s: %w", p.Family(), err)
	}
	if err := k.router.Register(p); err != nil {
		return err
	}
	k.providers = append(k.providers, p)
	if mp, ok := p.(core.MethodProvider); ok {
		for name, m := range mp.Methods() {
			if _, dup := k.methods[name]; dup {
				return fmt.Errorf("method %s is registered twice (second by family %s)", name, p.Family())
			}
			k.methods[name] = m
		}
	}
	return nil
}

// bindChannels gives the bus the operator's declared user.* channels and
// their validators.
func (k *Kernel) bindChannels() error {
	var decls []bus.UserChannel
	for _, d := range k.cfg.Events.Channels {
		uc := bus.UserChannel{Name: d.Name, Validator: d.Validator}
		if d.Validator != "" {
			if k.plugins == nil {
				return fmt.Errorf("channel %s: validator %q: no plugins are loaded", d.Name, d.Validator)
			}
			v, err := k.plugins.Bind(d.Validator, d.Name)
			if err != nil {
				return fmt.Errorf("channel %s: %w", d.Name, err)
			}
			uc.Validate = v
		}
		decls = append(decls, uc)
	}
	return k.bus.SetUserChannels(k.cfg.Events.Strict, decls)
}

// Host returns the host services (for in-process use and tests).
func (k *Kernel) Host() *core.Host { return k.host }

// Bus returns the kernel's bus.
func (k *Kernel) Bus() *bus.Bus { return k.bus }

// Router returns the kernel's router.
func (k *Kernel) Router() *core.Router { return k.router }

// Socket is the socket path.
func (k *Kernel) Socket() string { return k.socket }

// StateDir is the absolute state directory.
func (k *Kernel) StateDir() string { return k.stateDir }

// Token is the agent credential ($STATE/token): agent:* principals only,
// never the Approve grant.
func (k *Kernel) Token() string { return k.token }

// OperatorToken is the operator credential ($STATE/operator.token): any
// principal, with its policy grants.
func (k *Kernel) OperatorToken() string { return k.operator }

// Serve listens on the socket and serves until ctx ends, Stop is called or
// the kernel has been idle for IdleExit. It then stops the kernel: every
// connection closed, every provider closed (no child process left).
func (k *Kernel) Serve(ctx context.Context) error {
	l, err := listenSocket(k.socket)
	if err != nil {
		k.shutdown()
		return err
	}
	fi, _ := os.Lstat(k.socket)
	k.mu.Lock()
	k.listener, k.sockFile = l, fi
	k.mu.Unlock()
	k.log.Info("kernel serving", "socket", k.socket, "state_dir", k.stateDir, "pid", os.Getpid())
	go func() {
		select {
		case <-ctx.Done():
		case <-k.stopped:
		}
		k.Stop()
	}()
	if k.opts.IdleExit > 0 {
		go k.idleWatch()
	}
	var wait time.Duration
	for {
		c, err := l.Accept()
		if err != nil {
			select {
			case <-k.stopped:
				// Stop may still be closing providers on another goroutine
				// (idle exit); Once makes this call wait for it.
				k.Stop()
				k.wg.Wait()
				return nil
			default:
			}
			if errors.Is(err, net.ErrClosed) {
				k.Stop()
				k.wg.Wait()
				return fmt.Errorf("accept: %w", err)
			}
			wait = k.acceptFailed(err, wait)
			continue
		}
		wait = 0
		k.serveConn(c)
	}
}

// Stop stops serving and releases everything. It is safe to call twice.
func (k *Kernel) Stop() {
	k.stopOnce.Do(func() {
		close(k.stopped)
		k.mu.Lock()
		if k.listener != nil {
			k.listener.Close()
		}
		conns := make([]*conn, 0, len(k.conns))
		for _, c := range k.conns {
			conns = append(conns, c)
		}
		k.mu.Unlock()
		for _, c := range conns {
			c.rc.Close()
			<-c.rc.Done()
		}
		k.shutdown()
		k.log.Info("kernel stopped")
	})
}

// Done is closed once Stop has begun.
func (k *Kernel) Done() <-chan struct{} { return k.stopped }

func (k *Kernel) shutdown() {
	k.mu.Lock()
	if k.closed {
		k.mu.Unlock()
		return
	}
	k.closed = true
	k.mu.Unlock()
	for i := len(k.providers) - 1; i >= 0; i-- {
		if c, ok := k.providers[i].(core.Closer); ok {
			if err := c.Close(); err != nil {
				k.log.Error("close provider", "family", k.providers[i].Family(), "err", err)
			}
		}
	}
	if k.plugins != nil {
		k.plugins.Close()
	}
	k.removeSocket()
	if k.lock != nil {
		k.lock.Close()
	}
}

func (k *Kernel) idleWatch() {
	t := time.NewTicker(time.Second)
	defer t.Stop()
	for {
		select {
		case <-k.stopped:
			return
		case <-t.C:
		}
		if !k.idle() {
			k.mu.Lock()
			k.lastIdle = time.Now()
			k.mu.Unlock()
			continue
		}
		k.mu.Lock()
		since := time.Since(k.lastIdle)
		k.mu.Unlock()
		if since >= k.opts.IdleExit {
			k.log.Info("idle exit", "after", since)
			k.Stop()
			return
		}
	}
}

func (k *Kernel) idle() bool {
	k.mu.Lock()
	n := len(k.conns)
	k.mu.Unlock()
	if n > 0 {
		return false
	}
	for _, p := range k.providers {
		if b, ok := p.(Busy); ok && b.Busy() {
			return false
		}
	}
	return true
}

// inlineMethods never block (they read memory), so the connection serves
// them on its reading goroutine. events.publish is not among them: a
// validator plugin may take up to its deadline.
var inlineMethods = map[string]bool{
	"events.read": true, "events.unsubscribe": true,
	"resources.templates": true, "kernel.status": true, "plugin.list": true,
	// Not cheap (it may create the session), but served on the reader
	// on purpose: the frame limit it lifts holds from the very next
	// frame, and nothing else is read meanwhile.
	"session.attach": true,
}

// conn is one client connection.
type conn struct {
	id     uint64
	rc     *rpc.Conn
	mu     sync.Mutex
	caller *core.Caller
	subs   map[string]*bus.Subscription
	// uid is the peer's user id, counted against its cap when counted.
	uid     uint32
	counted bool
}

func (k *Kernel) serveConn(nc net.Conn) {
	c := &conn{id: k.nextConn.Add(1), subs: map[string]*bus.Subscription{}}
	if !k.admit(c, nc) {
		k.refuse(nc)
		return
	}
	opts := k.connOptions()
	opts.Handler = func(ctx context.Context, method string, params json.RawMessage) (any, error) {
		return k.dispatch(ctx, c, method, params)
	}
	opts.Inline = func(method string) bool { return inlineMethods[method] }
	c.rc = rpc.NewConn(nc, opts)
	k.mu.Lock()
	k.conns[c.id] = c
	k.mu.Unlock()
	deadline := k.attachDeadline(c)
	k.wg.Add(1)
	go func() {
		defer k.wg.Done()
		defer k.release(c)
		_ = c.rc.Run()
		deadline.Stop()
		c.mu.Lock()
		for _, s := range c.subs {
			s.Close()
		}
		c.subs = nil
		caller := c.caller
		c.mu.Unlock()
		k.mu.Lock()
		delete(k.conns, c.id)
		if caller != nil {
			if s := k.sessions[caller.Session]; s != nil {
				s.attached--
			}
		}
		k.lastIdle = time.Now()
		k.mu.Unlock()
	}()
}

func (k *Kernel) dispatch(ctx context.Context, c *conn, method string, params json.RawMessage) (any, error) {
	if method == "session.attach" {
		return k.attach(c, params)
	}
	c.mu.Lock()
	caller := c.caller
	c.mu.Unlock()
	if caller == nil {
		if _, known := k.methods[method]; !known {
			if _, core := k.builtin[method]; !core {
				return nil, k.unknownMethod(method)
			}
		}
		return nil, rpc.Errorf(rpc.NotAttached, "call session.attach {token, session, principal} first; nothing else works before it")
	}
	if f, ok := k.builtin[method]; ok {
		return f(k, ctx, c, caller, params)
	}
	m, ok := k.methods[method]
	if !ok {
		return nil, k.unknownMethod(method)
	}
	return m(ctx, caller, params)
}

func (k *Kernel) unknownMethod(method string) error {
	names := k.MethodNames()
	var close []string
	prefix, _, _ := strings.Cut(method, ".")
	for _, n := range names {
		if strings.HasPrefix(n, prefix+".") || strings.Contains(n, method) {
			close = append(close, n)
		}
	}
	if len(close) == 0 {
		close = names
	}
	return rpc.Errorf(rpc.MethodNotFound, "unknown method %q; methods: %s", method, strings.Join(close, ", "))
}

// MethodNames lists every method the kernel serves, sorted.
func (k *Kernel) MethodNames() []string {
	names := make([]string, 0, len(k.methods)+len(k.builtin)+1)
	names = append(names, "session.attach")
	for n := range k.builtin {
		names = append(names, n)
	}
	for n := range k.methods {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

var (
	sessionRe   = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$`)
	principalRe = regexp.MustCompile(`^[a-z][a-z0-9-]{0,31}:[A-Za-z0-9][A-Za-z0-9._@+-]{0,127}$`)
)

type attachParams struct {
	Token     string `json:"token"`
	Session   string `json:"session"`
	Principal string `json:"principal"`
	// Workspace is the directory a new session is created for (absolute);
	// a session that exists keeps its own.
	Workspace string `json:"workspace"`
}

// credential tells which credential tok is. Both are compared, in
// constant time, whatever tok is.
func (k *Kernel) credential(tok string) (core.Credential, bool) {
	agent := subtle.ConstantTimeCompare([]byte(tok), []byte(k.token)) == 1
	operator := subtle.ConstantTimeCompare([]byte(tok), []byte(k.operator)) == 1
	switch {
	case tok == "":
		return "", false
	case operator:
		return core.CredentialOperator, true
	case agent:
		return core.CredentialAgent, true
	}
	return "", false
}

// agentPrincipal is the kind of principal the agent credential may attach.
const agentPrincipal = "agent:"

func (k *Kernel) attach(c *conn, raw json.RawMessage) (any, error) {
	var p attachParams
	if err := rpc.DecodeParams(raw, &p); err != nil {
		return nil, err
	}
	c.mu.Lock()
	prev := c.caller
	c.mu.Unlock()
	if prev != nil {
		return nil, alreadyAttached(prev)
	}
	cred, ok := k.credential(p.Token)
	if !ok {
		return nil, rpc.Errorf(rpc.Unauthorized, "wrong or missing token: read it from %s (a person's CLI uses %s)",
			filepath.Join(k.stateDir, TokenName), filepath.Join(k.stateDir, OperatorTokenName))
	}
	if p.Session == "" {
		p.Session = "main"
	}
	if p.Principal == "" {
		p.Principal = "agent:default"
	}
	if !sessionRe.MatchString(p.Session) {
		return nil, rpc.Errorf(rpc.InvalidParams, "session %q: use 1-64 letters, digits, '.', '_' or '-'", p.Session)
	}
	if !principalRe.MatchString(p.Principal) {
		return nil, rpc.Errorf(rpc.InvalidParams, "principal %q: use kind:name, e.g. agent:reviewer or human:owner", p.Principal)
	}
	if p.Workspace != "" {
		if err := CheckWorkspace(p.Workspace); err != nil {
			return nil, rpc.Errorf(rpc.InvalidParams, "workspace: %v", err)
		}
	}
	grants := k.policy.Grants(p.Principal)
	if cred == core.CredentialAgent {
		if !strings.HasPrefix(p.Principal, agentPrincipal) {
			return nil, rpc.Errorf(rpc.PrincipalRefused, "the agent credential (%s) attaches only agent:* principals, not %s; a person acts as %s through the shoal CLI, which uses %s",
				filepath.Join(k.stateDir, TokenName), p.Principal, p.Principal, filepath.Join(k.stateDir, OperatorTokenName))
		}
		// Whatever the policy grants, approving needs the operator's
		// credential, which a confined process cannot read.
		grants = slices.DeleteFunc(slices.Clone(grants), func(g string) bool { return g == policy.GrantApprove })
	}
	caller := &core.Caller{Session: p.Session, Principal: p.Principal, Grants: grants, Credential: cred, ConnID: c.id,
		Notify: c.rc.Notify}
	c.mu.Lock()
	if prev := c.caller; prev != nil { // a concurrent attach won
		c.mu.Unlock()
		return nil, alreadyAttached(prev)
	}
	c.caller = caller
	c.mu.Unlock()
	k.mu.Lock()
	s := k.sessions[p.Session]
	if s == nil {
		s = &sessionState{name: p.Session, created: time.Now(), workspace: p.Workspace}
		if s.workspace == "" {
			s.workspace = defaultWorkspace()
		}
		k.sessions[p.Session] = s
	}
	s.attached++
	workspace := s.workspace
	k.mu.Unlock()
	k.attached(c)
	return wire.Attached{
		Session:     caller.Session,
		Principal:   caller.Principal,
		Grants:      nonNil(caller.Grants),
		Credential:  string(caller.Credential),
		Workspace:   workspace,
		Cwd:         k.cwd(caller.Session),
		Confinement: k.confinement(caller.Session),
		Channels:    StaticChannels,
		Epoch:       k.bus.Epoch(),
		Kernel:      wire.AttachedKernel{Version: Version, PID: os.Getpid(), StateDir: k.stateDir, Socket: k.socket},
	}, nil
}

func alreadyAttached(prev *core.Caller) error {
	return rpc.Errorf(rpc.AlreadyAttached, "this connection is attached already (session %s, principal %s); one session.attach per connection: open a new connection for another session or principal",
		prev.Session, prev.Principal)
}

func nonNil(g core.Grants) []string {
	if g == nil {
		return []string{}
	}
	return g
}

// SessionConfinement is implemented by the sessions service: how the OS
// confines a session, and a summary for kernel.status.
type SessionConfinement interface {
	Confinement(session string) wire.Confinement
	SandboxStatus() wire.SandboxStatus
}

func (k *Kernel) confinement(session string) *wire.Confinement {
	c := wire.Confinement{Reason: "no session provider is loaded"}
	if s, ok := k.sessionSvc.(SessionConfinement); ok {
		c = s.Confinement(session)
	}
	return &c
}

func (k *Kernel) cwd(session string) string {
	if k.sessionSvc != nil {
		return k.sessionSvc.Cwd(session)
	}
	wd, _ := os.Getwd()
	return wd
}

// Workspace implements core.Workspaces.
func (k *Kernel) Workspace(session string) string {
	k.mu.Lock()
	defer k.mu.Unlock()
	if s := k.sessions[session]; s != nil {
		return s.workspace
	}
	return ""
}

// CheckWorkspace is [statedir.CheckWorkspace].
var CheckWorkspace = statedir.CheckWorkspace

// defaultWorkspace is the workspace of a session attached without one:
// the kernel's directory, or the home directory when that is / (a kernel
// started by a host that runs in /).
func defaultWorkspace() string {
	wd, err := os.Getwd()
	if err == nil && wd != "/" {
		return wd
	}
	if home, err := os.UserHomeDir(); err == nil && CheckWorkspace(home) == nil {
		return home
	}
	return wd
}

// ParseTarget is uri.ParseTarget, re-exported for method handlers.
var ParseTarget = uri.ParseTarget

// parseIdle reads idle_exit: a Go duration ("10m", "90s"), "0" for never.
func parseIdle(s string) (time.Duration, error) {
	if s == "0" || s == "" {
		return 0, nil
	}
	d, err := time.ParseDuration(s)
	if err != nil || d < 0 {
		return 0, fmt.Errorf("%q is not a duration such as \"10m\" (or \"0\" for never)", s)
	}
	return d, nil
}
