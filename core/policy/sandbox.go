package policy

import (
	"fmt"
	"path/filepath"
	"slices"
	"strings"
)

// Sandbox is the [sandbox] section of a policy file: what the OS lets a
// session's processes (and its interpreter's own file operations) touch.
// See docs/security.md.
//
//	sandbox = "best-effort"          # the short form: the mode alone
//
//	[sandbox]
//	mode = "required"                # or "best-effort"
//	writable = ["~/src/shared"]      # added to workspace, temp dir, caches
//	caches = ["~/.cache", …]         # replaces the default cache list
//	deny_read = ["~/.ssh", …]        # replaces the default credential list
//	net_connect = [443, 80]          # TCP ports; absent: not restricted
//	net_bind = []                    # TCP ports; absent: not restricted
type Sandbox struct {
	// Mode is "required" (no confinement: exec refused) or
	// "best-effort" (run unconfined and say so).
	Mode string
	// ExtraWritable are the `writable` directories the policy adds.
	ExtraWritable []string
	Caches        []string
	DenyRead      []string
	NetConnect    []uint16 // nil: not restricted
	NetBind       []uint16 // nil: not restricted
}

// Sandbox modes.
const (
	SandboxRequired   = "required"
	SandboxBestEffort = "best-effort"
)

// DefaultCaches are the tool caches a session may write, so `go test`,
// `npm install` and `cargo build` work confined.
var DefaultCaches = []string{
	"~/.cache", "~/go/pkg/mod", "~/.npm", "~/.cargo/registry", "~/.cargo/git",
	"~/.rustup/tmp", "~/.m2/repository", "~/.gradle/caches", "~/.pnpm-store",
	"~/.yarn/berry/cache", "~/.bun/install/cache", "~/.local/share/pnpm",
}

// DefaultDenyRead are the credential files and directories a session may
// not read. The state directory is always denied besides them.
var DefaultDenyRead = []string{
	"~/.ssh", "~/.aws", "~/.config/gh", "~/.netrc", "~/.npmrc", "~/.pypirc",
	"~/.docker/config.json", "~/.kube", "~/.gnupg", "~/.git-credentials",
	"~/.config/gcloud", "~/.azure", "~/.password-store", "~/.vault-token",
}

// DefaultSandbox is the sandbox of a policy that has no [sandbox] section.
func DefaultSandbox() Sandbox {
	return Sandbox{Mode: SandboxRequired, Caches: slices.Clone(DefaultCaches), DenyRead: slices.Clone(DefaultDenyRead)}
}

// Required reports whether an execution must be refused when it cannot be
// confined.
func (s *Sandbox) Required() bool { return s.Mode != SandboxBestEffort }

// Workspace is what the sandbox rules of one session are made from.
type Workspace struct {
	Dir   string // the directory the session was created for
	Tmp   string // its temp dir (TMPDIR)
	Home  string // the home directory "~" stands for
	State string // the kernel's state directory, never readable
}

// Paths are the absolute writable and denied paths for ws. A workspace of
// "/", of the home directory itself or one holding the state directory is
// not made writable: that would be the whole machine, or $HOME at large.
func (s *Sandbox) Paths(ws Workspace) (writable, denied []string) {
	if WorkspaceWritable(ws) {
		writable = append(writable, filepath.Clean(ws.Dir))
	}
	if ws.Tmp != "" {
		writable = append(writable, filepath.Clean(ws.Tmp))
	}
	for _, p := range append(slices.Clone(s.Caches), s.ExtraWritable...) {
		if a := expandHome(p, ws.Home); a != "" {
			writable = append(writable, a)
		}
	}
	if ws.State != "" {
		denied = append(denied, filepath.Clean(ws.State))
	}
	for _, p := range s.DenyRead {
		if a := expandHome(p, ws.Home); a != "" {
			denied = append(denied, a)
		}
	}
	return writable, denied
}

// WorkspaceWritable reports whether ws.Dir may be the session's writable
// root.
func WorkspaceWritable(ws Workspace) bool {
	if ws.Dir == "" || !filepath.IsAbs(ws.Dir) {
		return false
	}
	d := filepath.Clean(ws.Dir)
	if d == "/" || (ws.Home != "" && d == filepath.Clean(ws.Home)) {
		return false
	}
	return ws.State == "" || !inside(filepath.Clean(ws.State), d)
}

// Writable reports whether the rules for ws let a session write path.
// The OS decides; this is for saying so up front, in a plan or a refusal.
func (s *Sandbox) Writable(path string, ws Workspace) bool {
	path = filepath.Clean(path)
	writable, denied := s.Paths(ws)
	for _, d := range denied {
		if inside(path, d) {
			return false
		}
	}
	if path == "/dev/null" || path == "/dev/tty" || inside(path, "/dev/pts") || inside(path, "/dev/shm") {
		return true
	}
	return slices.ContainsFunc(writable, func(w string) bool { return inside(path, w) })
}

// Readable reports whether the rules for ws let a session read path.
func (s *Sandbox) Readable(path string, ws Workspace) bool {
	path = filepath.Clean(path)
	_, denied := s.Paths(ws)
	return !slices.ContainsFunc(denied, func(d string) bool { return inside(path, d) })
}

// inside reports whether p is base or below it.
func inside(p, base string) bool {
	return base == "/" || p == base || strings.HasPrefix(p, base+"/")
}

// expandHome makes p absolute: "~" and "~/x" stand for home; relative
// paths are refused (empty).
func expandHome(p, home string) string {
	switch {
	case p == "~" && home != "":
		return filepath.Clean(home)
	case strings.HasPrefix(p, "~/") && home != "":
		return filepath.Join(home, p[2:])
	case filepath.IsAbs(p):
		return filepath.Clean(p)
	}
	return ""
}

// sandboxDoc decodes the [sandbox] section, or the short `sandbox =
// "mode"`.
type sandboxDoc struct {
	set bool
	sb  Sandbox
}

// UnmarshalTOML implements toml.Unmarshaler. Unknown keys and bad values
// are refused: a typo must never loosen the rules.
func (d *sandboxDoc) UnmarshalTOML(v any) error {
	d.set = true
	d.sb = DefaultSandbox()
	switch v := v.(type) {
	case string:
		return d.mode(v)
	case map[string]any:
		for k, val := range v {
			var err error
			switch k {
			case "mode":
				s, ok := val.(string)
				if !ok {
					return fmt.Errorf("sandbox.mode: want %q or %q", SandboxRequired, SandboxBestEffort)
				}
				err = d.mode(s)
			case "writable":
				d.sb.ExtraWritable, err = pathList(k, val)
			case "caches":
				d.sb.Caches, err = pathList(k, val)
			case "deny_read":
				d.sb.DenyRead, err = pathList(k, val)
			case "net_connect":
				d.sb.NetConnect, err = portList(k, val)
			case "net_bind":
				d.sb.NetBind, err = portList(k, val)
			default:
				err = fmt.Errorf("sandbox: unknown key %q (known: mode, writable, caches, deny_read, net_connect, net_bind)", k)
			}
			if err != nil {
				return err
			}
		}
		return nil
	}
	return fmt.Errorf("sandbox: want a mode string (%q or %q) or a [sandbox] table", SandboxRequired, SandboxBestEffort)
}

func (d *sandboxDoc) mode(s string) error {
	if s != SandboxRequired && s != SandboxBestEffort {
		return fmt.Errorf("sandbox mode %q: want %q or %q", s, SandboxRequired, SandboxBestEffort)
	}
	d.sb.Mode = s
	return nil
}

func pathList(key string, v any) ([]string, error) {
	list, ok := v.([]any)
	if !ok {
		return nil, fmt.Errorf("sandbox.%s: want a list of paths", key)
	}
	out := make([]string, 0, len(list))
	for _, x := range list {
		s, ok := x.(string)
		if !ok || expandHome(s, "/h") == "" {
			return nil, fmt.Errorf("sandbox.%s: %v is not an absolute or ~/ path", key, x)
		}
		out = append(out, s)
	}
	return out, nil
}

func portList(key string, v any) ([]uint16, error) {
	list, ok := v.([]any)
	if !ok {
		return nil, fmt.Errorf("sandbox.%s: want a list of TCP ports", key)
	}
	out := make([]uint16, 0, len(list))
	for _, x := range list {
		n, ok := x.(int64)
		if !ok || n < 1 || n > 65535 {
			return nil, fmt.Errorf("sandbox.%s: %v is not a TCP port (1-65535)", key, x)
		}
		out = append(out, uint16(n))
	}
	return out, nil
}
