// Package statedir names the files of a kernel state directory and finds
// the default one. Kernel and clients share it (standard library only), so
// they always look in the same place.
package statedir

import (
	"errors"
	"fmt"
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

// CheckWorkspace says why dir cannot be a session's workspace, or nil. A
// workspace is an existing absolute directory other than /: it is the
// session's writable root, and / would open the whole machine to it.
func CheckWorkspace(dir string) error {
	if !filepath.IsAbs(dir) {
		return fmt.Errorf("%q is not an absolute path", dir)
	}
	if filepath.Clean(dir) == "/" {
		return errors.New(`"/" cannot be a workspace: a session's workspace is the directory it may write, and / would be the whole machine; start the host in a project directory or name one (shoal-mcp --workspace DIR)`)
	}
	fi, err := os.Stat(dir)
	if err != nil {
		return fmt.Errorf("%q: %w", dir, err)
	}
	if !fi.IsDir() {
		return fmt.Errorf("%q is not a directory", dir)
	}
	return nil
}
