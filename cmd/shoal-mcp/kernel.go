package main

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"sync"
	"syscall"
	"time"

	"github.com/shoal-sh/shoal/core/kernel"
	"github.com/shoal-sh/shoal/internal/boot"
	"github.com/shoal-sh/shoal/sdk/client"
)

// How long the facade waits for a kernel it started to answer. A cold
// start compiles plugins (about a second each), so this is generous.
const kernelStartTimeout = 30 * time.Second

// exitAlreadyRunning is the exit status of a background kernel that lost a
// start race: another kernel holds the state directory, and the facade
// that started the loser simply connects to the winner.
const exitAlreadyRunning = 3

// logName is the background kernel's log, in the state directory.
const logName = "kernel.log"

// logRotateSize is the size past which the background kernel's log is
// moved aside (to kernel.log.1) before a new kernel appends to it.
const logRotateSize = 4 << 20

// dialer opens one attached kernel connection; onEvent receives the
// events pushed on it.
type dialer func(ctx context.Context, onEvent func(client.Event)) (*client.Client, error)

// kernelHandle is how the facade reaches its kernel, and how it lets go.
type kernelHandle struct {
	dialer dialer
	// up makes sure a kernel answers (starting one if need be) without
	// attaching: the session may not be settled yet.
	up   func(ctx context.Context) error
	stop func()
}

// startKernel finds the kernel serving cfg's socket, or starts one: inside
// this process with --in-process, else in the background.
func startKernel(ctx context.Context, cfg *config, t *target, log *slog.Logger) (*kernelHandle, error) {
	stateDir, err := filepath.Abs(cfg.stateDir)
	if err != nil {
		return nil, fmt.Errorf("state dir: %w", err)
	}
	opts := client.Options{StateDir: stateDir, Socket: cfg.socket, Principal: cfg.principal}
	if cfg.inProcess {
		return startInProcess(ctx, cfg, stateDir, opts, t, log)
	}
	bg := &background{cfg: cfg, stateDir: stateDir, opts: opts, target: t, log: log}
	return &kernelHandle{dialer: bg.dial, up: bg.start, stop: func() {}}, nil
}

// startInProcess runs a kernel in this process. It listens on the socket
// like any kernel, so subscriptions and the shoal CLI reach it the same
// way; it stops when the facade ends.
func startInProcess(ctx context.Context, cfg *config, stateDir string, opts client.Options, t *target, log *slog.Logger) (*kernelHandle, error) {
	k, err := boot.NewKernel(kernel.Options{StateDir: stateDir, Socket: cfg.socket, PluginDirs: cfg.pluginDirs, Log: log})
	if err != nil {
		var are *kernel.AlreadyRunningError
		if errors.As(err, &are) {
			return nil, fmt.Errorf("--in-process: %w (or drop --in-process to use the running kernel)", err)
		}
		return nil, fmt.Errorf("start in-process kernel: %w", err)
	}
	served := make(chan error, 1)
	go func() { served <- k.Serve(context.Background()) }()
	stop := func() {
		k.Stop()
		<-served
	}
	if err := waitSocket(ctx, opts.SocketPath(), served, kernelStartTimeout); err != nil {
		stop()
		return nil, fmt.Errorf("in-process kernel: %w", err)
	}
	return &kernelHandle{stop: stop, up: func(context.Context) error { return nil },
		dialer: func(ctx context.Context, onEvent func(client.Event)) (*client.Client, error) {
			o, err := t.apply(ctx, opts)
			if err != nil {
				return nil, err
			}
			o.OnEvent = onEvent
			return client.Dial(ctx, o)
		}}, nil
}

// waitSocket polls until something accepts on path, the kernel's Serve
// returns (served), or the timeout passes.
func waitSocket(ctx context.Context, path string, served <-chan error, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	delay := 2 * time.Millisecond
	for {
		if socketAnswers(path) {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("no answer on %s after %s", path, timeout)
		}
		select {
		case err := <-served:
			if err == nil {
				err = errors.New("it stopped before listening")
			}
			return err
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(delay):
		}
		delay = min(delay*2, 100*time.Millisecond)
	}
}

func socketAnswers(path string) bool {
	c, err := net.DialTimeout("unix", path, time.Second)
	if err != nil {
		return false
	}
	c.Close()
	return true
}

// background dials the kernel of a state directory, starting one in the
// background when nothing answers on the socket.
type background struct {
	cfg      *config
	stateDir string
	opts     client.Options
	target   *target
	log      *slog.Logger

	// mu serializes starts: concurrent dials of one facade start at most
	// one kernel.
	mu sync.Mutex
}

func (b *background) dial(ctx context.Context, onEvent func(client.Event)) (*client.Client, error) {
	o, err := b.target.apply(ctx, b.opts)
	if err != nil {
		return nil, err
	}
	o.OnEvent = onEvent
	c, err := client.Dial(ctx, o)
	if err == nil {
		return c, nil
	}
	if socketAnswers(o.SocketPath()) {
		// A kernel answers but refused us (token, session or principal):
		// starting another would not help.
		return nil, fmt.Errorf("attach to the kernel on %s: %w", o.SocketPath(), err)
	}
	if err := b.start(ctx); err != nil {
		return nil, err
	}
	return client.Dial(ctx, o)
}

// start launches a detached kernel and waits until the socket answers.
// When two facades race, both kernels start, one takes the state
// directory's lock and the other exits with exitAlreadyRunning; either
// way the socket ends up answering.
func (b *background) start(ctx context.Context) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	socket := b.opts.SocketPath()
	if socketAnswers(socket) {
		return nil
	}
	if err := os.MkdirAll(b.stateDir, 0o700); err != nil {
		return fmt.Errorf("create state dir: %w", err)
	}
	self, err := os.Executable()
	if err != nil {
		return fmt.Errorf("find this binary to start a kernel: %w", err)
	}
	logPath := filepath.Join(b.stateDir, logName)
	if fi, err := os.Stat(logPath); err == nil && fi.Size() > logRotateSize {
		_ = os.Rename(logPath, logPath+".1")
	}
	logFile, err := os.OpenFile(logPath, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o600)
	if err != nil {
		return fmt.Errorf("open kernel log: %w", err)
	}
	defer logFile.Close()
	offset, _ := logFile.Seek(0, io.SeekEnd)

	args := []string{kernelMode, "--state-dir", b.stateDir, "--idle-exit", b.cfg.idleExit.String()}
	if b.cfg.socket != "" {
		args = append(args, "--socket", b.cfg.socket)
	}
	for _, d := range b.cfg.pluginDirs {
		abs, err := filepath.Abs(d)
		if err != nil {
			return fmt.Errorf("plugin dir %s: %w", d, err)
		}
		args = append(args, "--plugin-dir", abs)
	}
	cmd := exec.Command(self, args...)
	// Its own session: the kernel outlives this facade and must not get
	// the terminal's or the MCP client's signals meant for the facade.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	cmd.Stderr = logFile // stdin and stdout stay /dev/null
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("start kernel %s: %w", self, err)
	}
	b.log.Info("started background kernel", "pid", cmd.Process.Pid, "state_dir", b.stateDir, "idle_exit", b.cfg.idleExit)
	exited := make(chan error, 1)
	// Reap the child whenever it ends, so it never lingers as a zombie of
	// a long-lived facade.
	go func() { exited <- cmd.Wait() }()

	lostRace := func(err error) bool {
		var ee *exec.ExitError
		return errors.As(err, &ee) && ee.ExitCode() == exitAlreadyRunning
	}
	err = waitSocket(ctx, socket, exited, kernelStartTimeout)
	if err != nil && lostRace(err) {
		// Another facade's kernel won the lock; it is about to listen.
		err = waitSocket(ctx, socket, nil, kernelStartTimeout)
	}
	if err != nil {
		return fmt.Errorf("the kernel started in the background did not come up: %v\nlast lines of %s:\n%s", err, logPath, tail(logPath, offset, 20))
	}
	return nil
}

// tail returns the last n lines written to path after offset.
func tail(path string, offset int64, n int) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return "(" + err.Error() + ")"
	}
	if offset > 0 && offset <= int64(len(b)) {
		b = b[offset:]
	}
	lines := bytes.Split(bytes.TrimRight(b, "\n"), []byte("\n"))
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	if len(lines) == 1 && len(lines[0]) == 0 {
		return "(empty)"
	}
	return string(bytes.Join(lines, []byte("\n")))
}

// runKernel is the hidden background-kernel mode: the same kernel as
// `shoal kernel`, logging to stderr (the state dir's kernel.log).
func runKernel(args []string, stderr io.Writer) int {
	fs := flag.NewFlagSet(kernelMode, flag.ContinueOnError)
	fs.SetOutput(stderr)
	stateDir := fs.String("state-dir", kernel.DefaultStateDir(), "state directory")
	socket := fs.String("socket", "", "socket path")
	idle := fs.Duration("idle-exit", kernel.IdleExitFromConfig, "idle exit (negative: config.toml's idle_exit)")
	var plugins multiFlag
	fs.Var(&plugins, "plugin-dir", "plugin folder (repeatable)")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	log := slog.New(slog.NewTextHandler(stderr, nil))
	k, err := boot.NewKernel(kernel.Options{StateDir: *stateDir, Socket: *socket, PluginDirs: plugins, IdleExit: *idle, Log: log})
	if err != nil {
		var are *kernel.AlreadyRunningError
		if errors.As(err, &are) {
			log.Info("another kernel serves this state directory; leaving it to that one", "err", err)
			return exitAlreadyRunning
		}
		log.Error("kernel did not start", "err", err)
		return 1
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT, syscall.SIGHUP)
	defer stop()
	err = k.Serve(ctx)
	// Serve can return while an idle exit is still closing providers;
	// Stop returns only once that is done (journal closed, children gone).
	k.Stop()
	if err != nil {
		var are *kernel.AlreadyRunningError
		if errors.As(err, &are) {
			log.Info("another kernel serves this socket; leaving it to that one", "err", err)
			return exitAlreadyRunning
		}
		log.Error("kernel failed", "err", err)
		return 1
	}
	return 0
}
