package boot

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os/signal"
	"strings"
	"syscall"

	"github.com/shoal-sh/shoal/core/kernel"
	"github.com/shoal-sh/shoal/core/statedir"
)

// KernelUsage is the synopsis of the foreground kernel command.
const KernelUsage = "shoal kernel [--state-dir DIR] [--socket PATH] [--config FILE] [--plugin-dir DIR]... [--idle-exit DUR] [--log-level L] [--nats URL]"

// Main runs a kernel in the foreground until SIGTERM, SIGINT or SIGHUP
// (or --idle-exit): what `shoal kernel` does, in the shoal-kernel binary.
// It returns the process exit code: 0 after a clean stop, 1 when the
// kernel failed, 2 for bad usage. Messages go to stderr.
func Main(args []string, stderr io.Writer) int {
	err := runKernel(args, stderr)
	var ue usageError
	switch {
	case err == nil:
		return 0
	case errors.Is(err, flag.ErrHelp):
		return 0
	case errors.As(err, &ue):
		fmt.Fprintln(stderr, "shoal kernel:", ue.msg)
		fmt.Fprintln(stderr, "usage:", KernelUsage)
		return 2
	default:
		fmt.Fprintln(stderr, "shoal kernel:", err)
		return 1
	}
}

type usageError struct{ msg string }

func (e usageError) Error() string { return e.msg }

type multi []string

func (m *multi) String() string     { return strings.Join(*m, ",") }
func (m *multi) Set(s string) error { *m = append(*m, s); return nil }

func runKernel(args []string, stderr io.Writer) error {
	fs := flag.NewFlagSet("kernel", flag.ContinueOnError)
	fs.SetOutput(stderr)
	stateDir := fs.String("state-dir", statedir.Default(), "state directory")
	socket := fs.String("socket", "", "socket path (default STATE_DIR/kernel.sock)")
	config := fs.String("config", "", "config file (default STATE_DIR/config.toml)")
	idle := fs.Duration("idle-exit", 0, "exit after this long with no connection, task or PTY (0: never)")
	logLevel := fs.String("log-level", "info", "debug, info, warn or error")
	natsURL := fs.String("nats", "", "join the cluster of this NATS server; overrides [cluster] nats in config.toml (docs/cluster.md)")
	var pluginDirs multi
	fs.Var(&pluginDirs, "plugin-dir", "plugin folder, or folder of plugin folders (repeatable)")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return err
		}
		return usageError{err.Error()}
	}
	if fs.NArg() > 0 {
		return usageError{fmt.Sprintf("kernel takes no arguments, got %q", fs.Args())}
	}
	var lvl slog.Level
	if err := lvl.UnmarshalText([]byte(*logLevel)); err != nil {
		return usageError{fmt.Sprintf("--log-level: %v", err)}
	}
	log := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: lvl}))
	k, err := NewKernel(kernel.Options{StateDir: *stateDir, Socket: *socket, ConfigPath: *config,
		PluginDirs: pluginDirs, IdleExit: *idle, Log: log, NATS: *natsURL})
	if err != nil {
		return err
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT, syscall.SIGHUP)
	defer stop()
	return k.Serve(ctx)
}
