package plugins

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"

	"github.com/BurntSushi/toml"
)

// ManifestFile is the name of a plugin's manifest inside its folder.
const ManifestFile = "plugin.toml"

// Plugin kinds.
const (
	KindProvider  = "provider"
	KindValidator = "validator"
)

// Limits and their bounds. A manifest asks for limits; the operator's
// [plugins.NAME] grant may replace them; the hard maximums hold for both.
const (
	DefaultMemoryMB  = 64
	MaxMemoryMB      = 256
	DefaultTimeoutMS = 1000
	MaxTimeoutMS     = 60_000
	DefaultInstances = 4
	MaxInstances     = 16
)

// Manifest is a plugin's plugin.toml: who the plugin is, what it serves and
// what it asks for. The kernel reads it before running any of the module's
// code.
type Manifest struct {
	Name        string `toml:"name"`
	Version     string `toml:"version"`
	Kind        string `toml:"kind"`
	ABI         string `toml:"abi"`
	Module      string `toml:"module"`
	Description string `toml:"description"`

	Provider  *ProviderManifest  `toml:"provider"`
	Validator *ValidatorManifest `toml:"validator"`

	Limits       Limits       `toml:"limits"`
	Capabilities Capabilities `toml:"capabilities"`
}

// ProviderManifest is the [provider] table.
type ProviderManifest struct {
	// Family is the URI family served: shoal://{family}/….
	Family string `toml:"family"`
	// Templates and Roots, when given, must be exactly what the module
	// describes; they let an operator read them without running the code.
	Templates []string `toml:"templates"`
	Roots     []string `toml:"roots"`
}

// ValidatorManifest is the [validator] table.
type ValidatorManifest struct {
	// Channels are user.* names or patterns ending in ".*".
	Channels []string `toml:"channels"`
	// Schema is an optional JSON Schema file beside the manifest.
	Schema string `toml:"schema"`
}

// Limits bound one plugin. Zero means the default.
type Limits struct {
	// MemoryMB caps the linear memory of each instance.
	MemoryMB int `toml:"memory_mb" json:"memory_mb"`
	// TimeoutMS is the deadline of one call; waiting for a free instance
	// is bounded by the same length.
	TimeoutMS int `toml:"timeout_ms" json:"timeout_ms"`
	// Instances bounds how many instances serve calls at once.
	Instances int `toml:"instances" json:"instances"`
}

// Capabilities are what a plugin may touch outside its own memory. A
// manifest lists what it asks for; a plugin gets the part the operator
// grants in config.toml.
type Capabilities struct {
	// Env names environment variables of the kernel the plugin may read.
	Env []string `toml:"env" json:"env,omitempty"`
	// FS names host directories the plugin may read, mounted read-only
	// at the same path.
	FS []string `toml:"fs" json:"fs,omitempty"`
	// Clock asks for the real wall and monotonic clocks; without it the
	// plugin sees a deterministic clock starting at 2022-01-01.
	Clock bool `toml:"clock" json:"clock,omitempty"`
}

func (c Capabilities) empty() bool { return len(c.Env) == 0 && len(c.FS) == 0 && !c.Clock }

var (
	nameRE   = regexp.MustCompile(`^[a-z][a-z0-9_-]{0,63}$`)
	familyRE = regexp.MustCompile(`^[a-z][a-z0-9_-]{0,63}$`)
	envRE    = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)
)

// ReadManifest reads and checks dir/plugin.toml. Unknown keys are refused
// so that a typo never silently drops a limit or a capability.
func ReadManifest(dir string) (*Manifest, error) {
	path := filepath.Join(dir, ManifestFile)
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read manifest: %w", err)
	}
	m := &Manifest{}
	md, err := toml.Decode(string(data), m)
	if err != nil {
		return nil, fmt.Errorf("manifest %s: %w", path, err)
	}
	if und := md.Undecoded(); len(und) > 0 {
		keys := make([]string, len(und))
		for i, k := range und {
			keys[i] = k.String()
		}
		return nil, fmt.Errorf("manifest %s: unknown keys %s (see docs/plugins.md for the manifest keys)", path, strings.Join(keys, ", "))
	}
	if err := m.check(); err != nil {
		return nil, fmt.Errorf("manifest %s: %w", path, err)
	}
	return m, nil
}

// check reports every problem of the manifest at once.
func (m *Manifest) check() error {
	var errs []error
	bad := func(format string, args ...any) { errs = append(errs, fmt.Errorf(format, args...)) }
	if !nameRE.MatchString(m.Name) {
		bad("name %q must be 1-64 lowercase letters, digits, '-' or '_', starting with a letter", m.Name)
	}
	if m.Version == "" {
		bad("version is required")
	}
	if m.ABI != ABI {
		if m.ABI == "" {
			bad("abi is required: this kernel speaks %q", ABI)
		} else {
			bad("abi %q is not supported: this kernel speaks %q; rebuild the plugin with a matching sdk", m.ABI, ABI)
		}
	}
	switch {
	case m.Module == "":
		bad("module (the .wasm file beside the manifest) is required")
	case filepath.IsAbs(m.Module) || m.Module != filepath.Base(m.Module):
		bad("module %q must be a file name in the plugin folder, not a path", m.Module)
	}
	switch m.Kind {
	case KindProvider:
		if m.Validator != nil {
			bad("a provider has no [validator] table")
		}
		if m.Provider == nil {
			bad("a provider needs a [provider] table with its family")
			break
		}
		if !familyRE.MatchString(m.Provider.Family) {
			bad("provider.family %q must be lowercase letters, digits, '-' or '_', starting with a letter", m.Provider.Family)
		}
	case KindValidator:
		if m.Provider != nil {
			bad("a validator has no [provider] table")
		}
		if m.Validator == nil || len(m.Validator.Channels) == 0 {
			bad("a validator needs a [validator] table with its channels")
			break
		}
		for _, ch := range m.Validator.Channels {
			if err := checkChannelPattern(ch); err != nil {
				bad("validator.channels: %v", err)
			}
		}
		if s := m.Validator.Schema; s != "" && (filepath.IsAbs(s) || s != filepath.Base(s)) {
			bad("validator.schema %q must be a file name in the plugin folder, not a path", s)
		}
	default:
		bad("kind %q must be %q or %q", m.Kind, KindProvider, KindValidator)
	}
	if l := m.Limits.MemoryMB; l < 0 || l > MaxMemoryMB {
		bad("limits.memory_mb %d must be between 1 and %d", l, MaxMemoryMB)
	}
	if l := m.Limits.TimeoutMS; l < 0 || l > MaxTimeoutMS {
		bad("limits.timeout_ms %d must be between 1 and %d", l, MaxTimeoutMS)
	}
	if l := m.Limits.Instances; l < 0 || l > MaxInstances {
		bad("limits.instances %d must be between 1 and %d", l, MaxInstances)
	}
	for _, e := range m.Capabilities.Env {
		if !envRE.MatchString(e) {
			bad("capabilities.env %q is not an environment variable name", e)
		}
	}
	for _, d := range m.Capabilities.FS {
		if !filepath.IsAbs(d) {
			bad("capabilities.fs %q must be an absolute directory", d)
		}
	}
	return errors.Join(errs...)
}

// checkChannelPattern accepts "user.x.y" and "user.x.*".
func checkChannelPattern(ch string) error {
	name, pattern := strings.CutSuffix(ch, ".*")
	if !strings.HasPrefix(name+".", "user.") || name == "user" && !pattern {
		return fmt.Errorf("%q: validators check user.* channels only (a name like user.build.v1 or a pattern like user.ci.*)", ch)
	}
	for _, part := range strings.Split(name, ".") {
		if part == "" || strings.ContainsAny(part, "* \t\n") {
			return fmt.Errorf("%q: empty or malformed part (a pattern may only end in .*)", ch)
		}
	}
	return nil
}

// matchChannel reports whether a channel falls under a pattern.
func matchChannel(pattern, channel string) bool {
	if prefix, ok := strings.CutSuffix(pattern, "*"); ok {
		return strings.HasPrefix(channel, prefix) && len(channel) > len(prefix)
	}
	return pattern == channel
}
