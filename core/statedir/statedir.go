// Package statedir names the files of a kernel state directory, finds the
// default one and reads and makes its token files. Kernel and clients
// share it (standard library only), so they always look in the same place.
package statedir

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
)

// Files in a state directory.
const (
	SocketName = "kernel.sock"
	// TokenName is the agent credential: what facades attach with. It
	// attaches agent:* principals only and never carries Approve.
	TokenName = "token"
	// OperatorTokenName is the operator credential: the CLI a person runs
	// attaches with it, as any principal with its policy grants.
	OperatorTokenName = "operator.token"
	// HTTPTokenName is the bearer token `shoal-mcp --http` requires.
	HTTPTokenName = "http.token"
	LockName      = "kernel.lock"
	ConfigName    = "config.toml"
	PolicyName    = "policy.toml"
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

// minToken is the shortest token file taken as made (what earlier kernels
// accepted; they made 64 hex characters).
const minToken = 32

// ReadToken returns the token in the file name of dir, without its
// trailing newline.
func ReadToken(dir, name string) (string, error) {
	b, err := os.ReadFile(filepath.Join(dir, name))
	if err != nil {
		return "", fmt.Errorf("read %s: %w", name, err)
	}
	return strings.TrimSpace(string(b)), nil
}

// EnsureToken returns the token in the file name of dir. A missing (or
// too short) file is made first: 32 random bytes as hex, mode 0600,
// written aside and then linked into place, so no reader sees half a
// token and of two processes making it at once both end up with the one
// that won. An existing file is set back to 0600.
func EnsureToken(dir, name string) (string, error) {
	path := filepath.Join(dir, name)
	tok, err := ReadToken(dir, name)
	if err == nil && len(tok) >= minToken {
		if err := os.Chmod(path, 0o600); err != nil {
			return "", fmt.Errorf("restrict %s: %w", name, err)
		}
		return tok, nil
	}
	missing := errors.Is(err, fs.ErrNotExist)
	buf := make([]byte, 32)
	if _, err := rand.Read(buf); err != nil {
		return "", err
	}
	tok = hex.EncodeToString(buf)
	tmp, err := os.CreateTemp(dir, name+".*.tmp") // 0600
	if err != nil {
		return "", fmt.Errorf("write %s: %w", name, err)
	}
	defer os.Remove(tmp.Name())
	_, err = tmp.WriteString(tok + "\n")
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return "", fmt.Errorf("write %s: %w", name, err)
	}
	if !missing {
		if err := os.Rename(tmp.Name(), path); err != nil {
			return "", fmt.Errorf("write %s: %w", name, err)
		}
		return tok, nil
	}
	if err := os.Link(tmp.Name(), path); err != nil {
		if errors.Is(err, fs.ErrExist) {
			// Another process made it first: theirs is the token.
			if tok, err := ReadToken(dir, name); err == nil && len(tok) >= minToken {
				return tok, nil
			}
		}
		return "", fmt.Errorf("write %s: %w", name, err)
	}
	return tok, nil
}
