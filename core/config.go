package core

import (
	"errors"
	"fmt"
	"os"
	"strings"

	"github.com/BurntSushi/toml"
)

// Config is the kernel configuration, read from config.toml in the state
// directory (or --config). Every field has a working default; a missing
// file is the empty config. docs/kernel.md documents each key.
type Config struct {
	// PluginDirs are plugin folders, or folders of plugin folders.
	PluginDirs []string `toml:"plugin_dirs"`
	// RawCeiling bounds format=raw reads, in bytes (default 64 MiB).
	RawCeiling int64 `toml:"raw_ceiling"`
	// SpillThreshold is the encoded size above which a transcript value
	// moves to the content store (default 1 MiB).
	SpillThreshold int64 `toml:"spill_threshold"`
	// IdleExit ends a background kernel after this long with no
	// connection, task or PTY ("10m"); empty or "0" means never.
	IdleExit string `toml:"idle_exit"`
	// Events declares user.* channels and binds validators.
	Events EventsConfig `toml:"events"`
	// Plugins holds the operator's grants per plugin name.
	Plugins map[string]PluginGrant `toml:"plugins"`
}

// EventsConfig is the [events] table.
type EventsConfig struct {
	// Strict refuses publishes on user.* channels not declared below.
	Strict bool `toml:"strict"`
	// Channels are the declared user.* channels.
	Channels []ChannelDecl `toml:"channel"`
}

// ChannelDecl is one [[events.channel]] entry.
type ChannelDecl struct {
	// Name is the channel name or a pattern ending in ".*"
	// ("user.build.v1", "user.ci.*").
	Name string `toml:"name"`
	// Validator names a loaded validator plugin; empty means none.
	Validator string `toml:"validator"`
}

// PluginGrant is what the operator allows one plugin ([plugins.NAME]).
// A plugin gets a capability only when its manifest asks for it and the
// grant allows it.
type PluginGrant struct {
	// Env lists environment variable names the plugin may read.
	Env []string `toml:"env"`
	// FS lists host directories mounted read-only at the same path.
	FS []string `toml:"fs"`
	// Clock allows the real wall clock (otherwise a fixed, deterministic one).
	Clock bool `toml:"clock"`
	// MemoryMB caps the plugin's memory (default from the manifest, at most 256).
	MemoryMB int `toml:"memory_mb"`
	// TimeoutMS is the per-call deadline (default from the manifest).
	TimeoutMS int `toml:"timeout_ms"`
	// Disabled skips the plugin at load.
	Disabled bool `toml:"disabled"`
}

// Defaults for Config fields left zero.
const (
	DefaultRawCeiling     = 64 << 20
	DefaultSpillThreshold = 1 << 20
	DefaultIdleExit       = "10m"
)

// LoadConfig reads a config file. A missing file is the default config; a
// malformed one is an error naming the line and the reason, and unknown
// keys are refused so a typo never silently disables a setting.
func LoadConfig(path string) (*Config, error) {
	c := &Config{}
	if path != "" {
		data, err := os.ReadFile(path)
		switch {
		case errors.Is(err, os.ErrNotExist):
		case err != nil:
			return nil, fmt.Errorf("read config: %w", err)
		default:
			md, err := toml.Decode(string(data), c)
			if err != nil {
				return nil, fmt.Errorf("config %s: %w", path, err)
			}
			if und := md.Undecoded(); len(und) > 0 {
				keys := make([]string, len(und))
				for i, k := range und {
					keys[i] = k.String()
				}
				return nil, fmt.Errorf("config %s: unknown keys: %s", path, strings.Join(keys, ", "))
			}
		}
	}
	c.fill()
	for _, ch := range c.Events.Channels {
		if !strings.HasPrefix(ch.Name, "user.") {
			return nil, fmt.Errorf("config %s: [[events.channel]] name %q: only user.* channels can be declared", path, ch.Name)
		}
	}
	return c, nil
}

func (c *Config) fill() {
	if c.RawCeiling <= 0 {
		c.RawCeiling = DefaultRawCeiling
	}
	if c.SpillThreshold <= 0 {
		c.SpillThreshold = DefaultSpillThreshold
	}
	if c.IdleExit == "" {
		c.IdleExit = DefaultIdleExit
	}
}

// DefaultConfig is the configuration used when no file exists.
func DefaultConfig() *Config {
	c := &Config{}
	c.fill()
	return c
}
