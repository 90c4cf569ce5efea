package session

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"runtime"
	"strings"
	"sync"

	"github.com/shoal-sh/shoal/core"
	"github.com/shoal-sh/shoal/core/policy"
	"github.com/shoal-sh/shoal/core/rpc"
	"github.com/shoal-sh/shoal/core/wire"
	"github.com/shoal-sh/shoal/providers/session/sandbox"
	"github.com/shoal-sh/shoal/providers/session/shell"
)

// confinement is one session's sandbox: its domain, the directories made
// for it and what the OS could enforce.
type confinement struct {
	domain   *sandbox.Domain // nil: runs unconfined (best-effort without Landlock)
	rules    sandbox.Rules
	ws       policy.Workspace
	required bool
	root     string // the session's own temp tree (tmp/ and fifo/), removed at close
	fifo     string
	status   sandbox.Status
	err      error // why the domain could not start
}

// View is what session.attach and kernel.status say of it.
func (c *confinement) View() wire.Confinement {
	v := wire.Confinement{
		Confined:       c.status.Confined,
		ABI:            c.status.ABI,
		Scoped:         c.status.Scoped,
		Mode:           c.mode(),
		ReadOnlyMounts: c.status.ReadOnlyMounts,
		MaxTasks:       c.status.MaxTasks,
		Writable:       c.rules.Writable,
		Tmp:            c.ws.Tmp,
		Reason:         c.status.Reason,
	}
	if !policy.WorkspaceWritable(c.ws) {
		v.WorkspaceWritable = new(bool)
		v.WorkspaceNote = fmt.Sprintf("the workspace %s is not writable: a session created for /, the home directory or a directory holding the state directory would open the whole machine; start the client in a project directory", c.ws.Dir)
	}
	if c.err != nil {
		v.Error = c.err.Error()
	}
	return v
}

// mode is the policy's sandbox mode the session was made under.
func (c *confinement) mode() string {
	if c.required {
		return policy.SandboxRequired
	}
	return policy.SandboxBestEffort
}

// refusal is the error an exec gets when the session must be confined and
// cannot be; nil when it may run.
func (c *confinement) refusal(stateDir string) error {
	if !c.required || (c.status.Confined && c.err == nil) {
		return nil
	}
	why := c.status.Reason
	if c.err != nil {
		why = c.err.Error()
	}
	return rpc.Errorf(rpc.SandboxUnavailable,
		"not run: this session cannot be confined by the OS (%s) and the policy requires it; to run unconfined, put sandbox = \"best-effort\" in %s",
		why, filepath.Join(stateDir, "policy.toml"))
}

// close ends the domain (and everything it runs) and removes the temp tree.
func (c *confinement) close() {
	if c.domain != nil {
		c.domain.Close()
	}
	if c.root != "" {
		os.RemoveAll(c.root)
	}
}

var unsafeName = regexp.MustCompile(`[^A-Za-z0-9._-]+`)

// noticeOnce writes the "not confined" notice on stderr once per reason.
var noticeOnce sync.Map

// newConfinement builds the sandbox of a session created for dir.
func (p *Provider) newConfinement(name, dir string) *confinement {
	sb := policy.DefaultSandbox()
	if p.policy != nil {
		sb = *p.policy.Sandbox()
	}
	c := &confinement{required: sb.Required()}
	home, _ := os.UserHomeDir()
	root, err := os.MkdirTemp("", "shoal-"+unsafeName.ReplaceAllString(name, "_")+"-")
	if err != nil {
		c.err = fmt.Errorf("make the session's temp dir: %w", err)
		return c
	}
	c.root = root
	tmp, fifo := filepath.Join(root, "tmp"), filepath.Join(root, "fifo")
	for _, d := range []string{tmp, fifo} {
		if err := os.Mkdir(d, 0o700); err != nil {
			c.err = fmt.Errorf("make the session's temp dir: %w", err)
			return c
		}
	}
	c.fifo = fifo
	c.ws = policy.Workspace{Dir: dir, Tmp: tmp, Home: home, State: p.host.StateDir}
	writable, denied := sb.Paths(c.ws)
	c.rules = sandbox.Rules{
		Writable: writable, Denied: denied, FileRW: []string{fifo},
		Devices: sandbox.DefaultDevices, Required: c.required,
	}
	if sb.NetConnect != nil {
		c.rules.RestrictConnect, c.rules.ConnectTCP = true, sb.NetConnect
	}
	if sb.NetBind != nil {
		c.rules.RestrictBind, c.rules.BindTCP = true, sb.NetBind
	}
	if runtime.GOOS != "linux" {
		c.status = sandbox.Status{Reason: "confinement needs Linux Landlock; this system is " + runtime.GOOS}
		p.notice(c.status.Reason)
		return c
	}
	c.domain = sandbox.NewDomain(c.rules)
	c.status, c.err = c.domain.Status()
	if c.err != nil || !c.status.Confined {
		reason := c.status.Reason
		if c.err != nil {
			reason = c.err.Error()
		}
		p.notice(reason)
	}
	return c
}

// notice says on stderr (once per reason) that sessions run unconfined.
func (p *Provider) notice(reason string) {
	if _, seen := noticeOnce.LoadOrStore(reason, true); seen {
		return
	}
	fmt.Fprintf(os.Stderr, "shoal: sessions are not confined by the OS: %s (policy sandbox mode decides whether they run: see docs/security.md)\n", reason)
}

// Confinement is what session.attach and kernel.status report for a
// session: whether and how the OS confines it.
func (p *Provider) Confinement(session string) wire.Confinement {
	s, err := p.session(session)
	if err != nil {
		return wire.Confinement{Error: err.Error()}
	}
	return s.conf.View()
}

// Widened is a domain for one applied plan: the session's rules plus
// paths, and with hostCaps the kernel's capabilities, in a fresh worker
// (Landlock only narrows, so a wider run needs a new process). The caller
// closes it after the run.
func (p *Provider) widened(s *sess, paths []string, hostCaps bool) *sandbox.Domain {
	if s.conf == nil || s.conf.domain == nil || (len(paths) == 0 && !hostCaps) {
		return nil
	}
	r := s.conf.rules.Widen(paths...)
	r.HostCaps = hostCaps
	return sandbox.NewDomain(r)
}

// SandboxStatus is kernel.status's summary: what this system offers, the
// policy's mode, and how each live session is confined.
func (p *Provider) SandboxStatus() wire.SandboxStatus {
	sb := policy.DefaultSandbox()
	if p.policy != nil {
		sb = *p.policy.Sandbox()
	}
	out := wire.SandboxStatus{LandlockABI: sandbox.ABI(), Mode: sb.Mode, OS: runtime.GOOS,
		Sessions: map[string]wire.SandboxSession{}}
	p.mu.Lock()
	for name, s := range p.sessions {
		out.Sessions[name] = wire.SandboxSession{Confined: s.conf.status.Confined && s.conf.err == nil, Reason: s.conf.status.Reason}
	}
	p.mu.Unlock()
	return out
}

// Domain is a session's confinement, for the PTYs it opens; nil when it
// runs unconfined (best-effort on a system without Landlock).
func (p *Provider) Domain(session string) *sandbox.Domain {
	s, err := p.session(session)
	if err != nil || s.conf == nil {
		return nil
	}
	if s.conf.domain == nil && s.conf.required {
		// No confinement here and the policy requires it: a domain that
		// refuses to start anything.
		return sandbox.NewDomain(s.conf.rules)
	}
	return s.conf.domain
}

// confinedNote says, in an execution reply, that the run hit the
// confinement: the paths the sandbox refused the interpreter, or, when a
// program failed with "Permission denied" in a confined session (or
// "Read-only file system" where its mounts are read-only), that it may
// have (what a program was refused is not visible from outside it).
func confinedNote(s *sess, res *shell.Result) *core.ConfinedNote {
	if s.conf == nil || !s.conf.status.Confined {
		return nil
	}
	writable := "its workspace " + s.conf.ws.Dir + ", its temp dir and the tool caches"
	switch {
	case len(res.Denied) > 0:
		return &core.ConfinedNote{Denied: res.Denied,
			Hint: "the OS confinement refused these paths: this session may write " + writable + ", and may not read the state directory or credential files; to go beyond, plan the command (shoal_plan) and have it approved"}
	case res.Exit != 0 && (strings.Contains(res.Stderr, "Permission denied") || strings.Contains(res.Stderr, "Operation not permitted") ||
		(s.conf.status.ReadOnlyMounts && strings.Contains(res.Stderr, "Read-only file system"))):
		return &core.ConfinedNote{Denied: []string{},
			Hint: "a program was refused permission; if it wrote outside " + writable + " (or read a credential file), the OS confinement stopped it: plan the command (shoal_plan) to have it approved"}
	}
	return nil
}
