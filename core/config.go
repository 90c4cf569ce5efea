package core

import (
	"errors"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/BurntSushi/toml"

	"github.com/shoal-sh/shoal/core/rpc"
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
	// ValueCache bounds the decoded parts of stored values kept for part
	// reads (path and slice reads of big values), in bytes (64 MiB).
	ValueCache int64 `toml:"value_cache"`
	// TranscriptMemory bounds the transcript values kept in memory, in
	// bytes of their encoding (4 MiB, about 12 MiB of memory); older ones move to the content
	// store and are read back from it on demand.
	TranscriptMemory int64 `toml:"transcript_memory"`
	// IdleExit ends a background kernel after this long with no
	// connection, task or PTY ("10m"); empty or "0" means never.
	IdleExit string `toml:"idle_exit"`
	// Events declares user.* channels and binds validators.
	Events EventsConfig `toml:"events"`
	// Plugins holds the operator's grants per plugin name.
	Plugins map[string]PluginGrant `toml:"plugins"`
	// Cluster joins kernels on several hosts through NATS JetStream
	// (docs/cluster.md); without nats the kernel stands alone.
	Cluster ClusterConfig `toml:"cluster"`
	// Limits bound what one client can make the kernel hold.
	Limits Limits `toml:"limits"`
}

// Limits is the [limits] table: what one connection or peer may make the
// kernel hold before it is slowed down or refused. docs/kernel.md
// ("Limits") says what happens at each.
type Limits struct {
	// ConnectionsPerUID caps the open connections of one peer user id
	// (SO_PEERCRED); one more is refused with TOO_MANY_CONNECTIONS.
	ConnectionsPerUID int `toml:"connections_per_uid"`
	// AttachTimeout closes a connection that has not attached this long
	// after it was accepted (a Go duration).
	AttachTimeout string `toml:"attach_timeout"`
	// FrameBeforeAttach bounds a frame before session.attach succeeded.
	FrameBeforeAttach int `toml:"frame_before_attach"`
	// MaxFrame bounds a frame after attach.
	MaxFrame int `toml:"max_frame"`
	// UnwrittenBytes bounds the answers and event frames of one
	// connection waiting for the peer to read them; past it the kernel
	// reads no more requests from that connection until it drains.
	UnwrittenBytes int `toml:"unwritten_bytes"`
	// RequestsInFlight bounds the requests one connection has served at
	// once; more stay unread until one finishes.
	RequestsInFlight int `toml:"requests_in_flight"`
	// EventPayload bounds one published event's payload.
	EventPayload int `toml:"event_payload"`
	// RingBytes bounds the payload bytes one channel's ring keeps; the
	// oldest events leave first.
	RingBytes int `toml:"ring_bytes"`
}

// Defaults of [Limits].
const (
	DefaultConnectionsPerUID = 512
	DefaultAttachTimeout     = "10s"
	DefaultFrameBeforeAttach = 64 << 10
	DefaultMaxFrame          = rpc.DefaultMaxFrame
	DefaultUnwrittenBytes    = rpc.DefaultMaxUnwritten
	DefaultRequestsInFlight  = rpc.DefaultMaxInflight
	DefaultEventPayload      = 1 << 20
	DefaultRingBytes         = 16 << 20
)

func (l *Limits) fill() {
	def := func(v *int, d int) {
		if *v <= 0 {
			*v = d
		}
	}
	def(&l.ConnectionsPerUID, DefaultConnectionsPerUID)
	def(&l.FrameBeforeAttach, DefaultFrameBeforeAttach)
	def(&l.MaxFrame, DefaultMaxFrame)
	def(&l.UnwrittenBytes, DefaultUnwrittenBytes)
	def(&l.RequestsInFlight, DefaultRequestsInFlight)
	def(&l.EventPayload, DefaultEventPayload)
	def(&l.RingBytes, DefaultRingBytes)
	if l.AttachTimeout == "" {
		l.AttachTimeout = DefaultAttachTimeout
	}
}

// AttachDeadline is AttachTimeout parsed.
func (l *Limits) AttachDeadline() (time.Duration, error) {
	d, err := time.ParseDuration(l.AttachTimeout)
	if err != nil || d <= 0 {
		return 0, fmt.Errorf("limits.attach_timeout: %q is not a positive duration such as \"10s\"", l.AttachTimeout)
	}
	return d, nil
}

// ClusterConfig is the [cluster] table (docs/cluster.md documents each
// key and its default).
type ClusterConfig struct {
	// NATS is the server URL, or a comma-separated list of a cluster's
	// URLs ("nats://host:4222"); empty means no cluster.
	NATS string `toml:"nats"`
	// Creds is a NATS credentials file (JWT and NKey seed).
	Creds string `toml:"creds"`
	// TLSCA is a PEM file of CAs to verify the server by; TLSCert and
	// TLSKey a client certificate and its key.
	TLSCA   string `toml:"tls_ca"`
	TLSCert string `toml:"tls_cert"`
	TLSKey  string `toml:"tls_key"`
	// Name is this kernel's id in the cluster (default: the host name and
	// a random suffix kept in the state directory).
	Name string `toml:"name"`
	// Replicas is the replica count of the streams and the object store
	// bucket this kernel creates (default 1; 3 in a 3-node cluster).
	Replicas int `toml:"replicas"`
	// ChannelMaxMsgs, ChannelMaxAge and ChannelMaxBytes are the retention
	// of each shared channel's stream (defaults 100000, "720h", 0 = no
	// byte limit).
	ChannelMaxMsgs  int64  `toml:"channel_max_msgs"`
	ChannelMaxAge   string `toml:"channel_max_age"`
	ChannelMaxBytes int64  `toml:"channel_max_bytes"`
	// JournalMaxAge is how long the cluster journal keeps rows ("2160h").
	JournalMaxAge string `toml:"journal_max_age"`
	// ValuesMaxBytes caps the object store bucket of values (0: no cap).
	ValuesMaxBytes int64 `toml:"values_max_bytes"`
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
	// Shared makes the channel (or every channel of the pattern) one
	// stream shared by every kernel of the cluster; it needs [cluster].
	Shared bool `toml:"shared"`
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
	DefaultRawCeiling       = 64 << 20
	DefaultSpillThreshold   = 1 << 20
	DefaultValueCache       = 64 << 20
	DefaultTranscriptMemory = 4 << 20
	DefaultIdleExit         = "10m"
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
	if _, err := c.Limits.AttachDeadline(); err != nil {
		return nil, fmt.Errorf("config %s: %w", path, err)
	}
	if c.Limits.FrameBeforeAttach > c.Limits.MaxFrame {
		return nil, fmt.Errorf("config %s: limits.frame_before_attach (%d) is above limits.max_frame (%d)", path, c.Limits.FrameBeforeAttach, c.Limits.MaxFrame)
	}
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
	if c.ValueCache <= 0 {
		c.ValueCache = DefaultValueCache
	}
	if c.TranscriptMemory <= 0 {
		c.TranscriptMemory = DefaultTranscriptMemory
	}
	if c.IdleExit == "" {
		c.IdleExit = DefaultIdleExit
	}
	c.Limits.fill()
}

// DefaultConfig is the configuration used when no file exists.
func DefaultConfig() *Config {
	c := &Config{}
	c.fill()
	return c
}
