// Package statedir names the files of a kernel state directory and finds
// the default one. Kernel and clients share it (standard library only), so
// they always look in the same place.
package statedir

import (
	"os"
	"path/filepath"
)

// Files in a state directory.
const (
	SocketName = "kernel.sock"
	TokenName  = "token"
	LockName   = "kernel.lock"
	ConfigName = "config.toml"
	PolicyName = "policy.toml"
)

// Default is $SHOAL_STATE_DIR, else $XDG_STATE_HOME/shoal, else
// ~/.local/state/shoal.
func Default() string {
	if d := os.Getenv("SHOAL_STATE_DIR"); d != "" {
		return d
	}
	if d := os.Getenv("XDG_STATE_HOME"); d != "" {
		return filepath.Join(d, "shoal")
	}
	home, err := os.UserHomeDir()
	if err != nil || home == "" {
		return filepath.Join(os.TempDir(), "shoal-state")
	}
	return filepath.Join(home, ".local", "state", "shoal")
}
