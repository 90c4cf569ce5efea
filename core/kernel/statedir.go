package kernel

import (
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/shoal-sh/shoal/core/statedir"
)

// DefaultStateDir is $SHOAL_STATE_DIR, else $XDG_STATE_HOME/shoal, else
// ~/.local/state/shoal.
func DefaultStateDir() string { return statedir.Default() }

// Paths of the files in a state directory.
const (
	SocketName        = statedir.SocketName
	TokenName         = statedir.TokenName
	OperatorTokenName = statedir.OperatorTokenName
	HTTPTokenName     = statedir.HTTPTokenName
	LockName          = statedir.LockName
	ConfigName        = statedir.ConfigName
	PolicyName        = statedir.PolicyName
)

// lockStateDir takes an exclusive lock on the state directory so one kernel
// serves it. The lock dies with the process, so a killed kernel never
// leaves it held.
func lockStateDir(stateDir string) (*os.File, error) {
	path := filepath.Join(stateDir, LockName)
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("open lock: %w", err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		b, _ := os.ReadFile(path)
		f.Close()
		pid := strings.TrimSpace(string(b))
		if pid == "" {
			pid = "unknown"
		}
		return nil, &AlreadyRunningError{StateDir: stateDir, PID: pid}
	}
	if err := f.Truncate(0); err == nil {
		_, _ = f.WriteAt([]byte(strconv.Itoa(os.Getpid())+"\n"), 0)
	}
	return f, nil
}

// AlreadyRunningError says another kernel serves the state directory.
type AlreadyRunningError struct {
	StateDir, Socket, PID string
}

func (e *AlreadyRunningError) Error() string {
	if e.Socket != "" {
		return fmt.Sprintf("a kernel is already serving on %s; stop it first or use another --socket", e.Socket)
	}
	return fmt.Sprintf("a kernel (pid %s) is already running on state directory %s; stop it first or use another --state-dir", e.PID, e.StateDir)
}

// listenSocket listens on path, replacing a stale socket left by a killed
// kernel and refusing a live one.
func listenSocket(path string) (net.Listener, error) {
	if fi, err := os.Lstat(path); err == nil {
		if fi.Mode()&os.ModeSocket == 0 {
			return nil, fmt.Errorf("%s exists and is not a socket; move it away or choose another --socket", path)
		}
		c, err := net.DialTimeout("unix", path, 500*time.Millisecond)
		if err == nil {
			c.Close()
			return nil, &AlreadyRunningError{Socket: path}
		}
		if err := os.Remove(path); err != nil && !errors.Is(err, os.ErrNotExist) {
			return nil, fmt.Errorf("remove stale socket %s: %w", path, err)
		}
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return nil, fmt.Errorf("socket dir: %w", err)
	}
	// Create the socket with no group/other bits from the start; chmod
	// after the fact would leave a window.
	old := syscall.Umask(0o177)
	l, err := net.Listen("unix", path)
	syscall.Umask(old)
	if err != nil {
		return nil, fmt.Errorf("listen on %s: %w", path, err)
	}
	if err := os.Chmod(path, 0o600); err != nil {
		l.Close()
		return nil, fmt.Errorf("restrict socket: %w", err)
	}
	// The socket outlives the listener: shutdown removes it only once every
	// provider has closed (no session worker left), so a socket that is
	// gone means a kernel that is gone.
	l.(*net.UnixListener).SetUnlinkOnClose(false)
	return l, nil
}

// removeSocket removes the socket file this kernel listened on, unless it
// is not that file any more (another kernel, on another state dir, took
// the path over after the listener closed).
func (k *Kernel) removeSocket() {
	k.mu.Lock()
	made := k.sockFile
	k.mu.Unlock()
	if made == nil {
		return
	}
	if fi, err := os.Lstat(k.socket); err == nil && os.SameFile(fi, made) {
		_ = os.Remove(k.socket)
	}
}
