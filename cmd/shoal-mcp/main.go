// Command shoal-mcp is Shoal's MCP server: a thin facade that attaches to
// one kernel session as one principal and translates MCP requests into
// kernel calls. Tools run and inspect shell work (shoal_exec, shoal_get,
// shoal_plan, shoal_apply, the shoal_pty_* family and shoal_wait);
// resources expose the kernel's shoal:// URIs; subscriptions forward
// kernel events as notifications/resources/updated.
//
// It speaks MCP over stdio (the default) or streamable HTTP (--http ADDR,
// endpoint /mcp). When no kernel answers on the socket it starts one in
// the background — this same binary in a hidden mode, detached, exiting
// after --idle-exit with nothing to do — so a restarted MCP client finds
// its tasks, terminals and transcript again. --in-process keeps the kernel
// inside the facade instead.
//
// Exit codes: 0 after a clean end (stdin closed, SIGTERM), 1 on a runtime
// failure (no kernel could be reached or started), 2 on bad usage.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/shoal-sh/shoal/core/kernel"
	"github.com/shoal-sh/shoal/core/version"
)

// Version is reported to MCP clients in serverInfo.
const Version = version.Version

// kernelMode is the hidden first argument that turns this binary into a
// background kernel. It is not meant to be typed: the facade uses it when
// it starts a kernel of its own.
const kernelMode = "__kernel"

const usage = `shoal-mcp — Shoal's MCP server

Usage:
  shoal-mcp [flags]

Flags (environment variable in brackets):
  --state-dir DIR     kernel state directory [SHOAL_STATE_DIR]
                      (default $XDG_STATE_HOME/shoal, else ~/.local/state/shoal)
  --socket PATH       kernel socket [SHOAL_SOCKET] (default STATE_DIR/kernel.sock)
  --session NAME      kernel session to attach [SHOAL_SESSION] (default: one per
                      project, proj-<dir>-<hash>, from the client's roots or
                      the launch directory)
  --workspace DIR     the project directory a new session starts in and may
                      write [SHOAL_WORKSPACE] (default: the client's first
                      root, else the launch directory; never /)
  --principal NAME    who acts, e.g. agent:reviewer [SHOAL_PRINCIPAL] (default agent:default)
  --http ADDR         serve streamable HTTP at http://ADDR/mcp instead of stdio
                      (loopback only unless --allow-remote); every request
                      needs "Authorization: Bearer <STATE_DIR/http.token>"
  --allow-remote      let --http listen on a non-loopback address
  --plugin-dir DIR    plugin folder for a kernel this facade starts (repeatable)
  --idle-exit DUR     a kernel this facade starts exits after DUR with no
                      connection, task or PTY (default 10m)
  --in-process        run the kernel inside this process; it ends with it
  --log-level LEVEL   debug, info, warn or error, on stderr (default warn)
`

func main() {
	if len(os.Args) > 1 && os.Args[1] == kernelMode {
		os.Exit(runKernel(os.Args[2:], os.Stderr))
	}
	os.Exit(run(os.Args[1:], os.Stdin, os.Stdout, os.Stderr))
}

// config is the facade's parsed command line.
type config struct {
	stateDir    string
	socket      string
	session     string
	workspace   string
	principal   string
	httpAddr    string
	allowRemote bool
	pluginDirs  []string
	idleExit    time.Duration
	inProcess   bool
	logLevel    slog.Level
}

type multiFlag []string

func (m *multiFlag) String() string     { return strings.Join(*m, ",") }
func (m *multiFlag) Set(s string) error { *m = append(*m, s); return nil }

func envOr(name, def string) string {
	if v := os.Getenv(name); v != "" {
		return v
	}
	return def
}

var errUsage = errors.New("usage")

func parseFlags(args []string, stderr io.Writer) (*config, error) {
	fs := flag.NewFlagSet("shoal-mcp", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	cfg := &config{}
	var plugins multiFlag
	var level string
	fs.StringVar(&cfg.stateDir, "state-dir", kernel.DefaultStateDir(), "")
	fs.StringVar(&cfg.socket, "socket", os.Getenv("SHOAL_SOCKET"), "")
	fs.StringVar(&cfg.session, "session", os.Getenv("SHOAL_SESSION"), "")
	fs.StringVar(&cfg.workspace, "workspace", os.Getenv("SHOAL_WORKSPACE"), "")
	fs.StringVar(&cfg.principal, "principal", envOr("SHOAL_PRINCIPAL", "agent:default"), "")
	fs.StringVar(&cfg.httpAddr, "http", "", "")
	fs.BoolVar(&cfg.allowRemote, "allow-remote", false, "")
	fs.Var(&plugins, "plugin-dir", "")
	fs.DurationVar(&cfg.idleExit, "idle-exit", 10*time.Minute, "")
	fs.BoolVar(&cfg.inProcess, "in-process", false, "")
	fs.StringVar(&level, "log-level", "warn", "")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			fmt.Fprint(stderr, usage)
			return nil, flag.ErrHelp
		}
		return nil, fmt.Errorf("%w: %v", errUsage, err)
	}
	if fs.NArg() > 0 {
		return nil, fmt.Errorf("%w: unexpected arguments %q (shoal-mcp takes flags only)", errUsage, fs.Args())
	}
	if err := cfg.logLevel.UnmarshalText([]byte(level)); err != nil {
		return nil, fmt.Errorf("%w: --log-level: %v", errUsage, err)
	}
	if cfg.idleExit < 0 {
		return nil, fmt.Errorf("%w: --idle-exit must not be negative (0 keeps a started kernel running)", errUsage)
	}
	idleSet := false
	fs.Visit(func(f *flag.Flag) { idleSet = idleSet || f.Name == "idle-exit" })
	if !idleSet {
		cfg.idleExit = kernel.IdleExitFromConfig // config.toml's idle_exit, 10m by default
	}
	if cfg.allowRemote && cfg.httpAddr == "" {
		return nil, fmt.Errorf("%w: --allow-remote only applies with --http ADDR", errUsage)
	}
	if cfg.workspace != "" {
		abs, err := filepath.Abs(cfg.workspace)
		if err != nil {
			return nil, fmt.Errorf("%w: --workspace: %v", errUsage, err)
		}
		if err := kernel.CheckWorkspace(abs); err != nil {
			return nil, fmt.Errorf("%w: --workspace: %v", errUsage, err)
		}
		cfg.workspace = abs
	}
	cfg.pluginDirs = plugins
	return cfg, nil
}

// target is where the facade attaches. Over HTTP, where one facade
// serves many clients, or with --workspace, it is settled at once; over
// stdio it waits for the client's roots.
func (cfg *config) target(shared bool) (*target, error) {
	dir, fixed := cfg.workspace, cfg.workspace != ""
	if !fixed {
		wd, err := os.Getwd()
		if err != nil {
			return nil, fmt.Errorf("launch directory: %w", err)
		}
		dir = wd
	}
	t := newTarget(cfg.session, dir, fixed)
	if fixed || shared {
		t.settle("")
	}
	return t, nil
}

func run(args []string, stdin io.Reader, stdout io.Writer, stderr io.Writer) int {
	cfg, err := parseFlags(args, stderr)
	if errors.Is(err, flag.ErrHelp) {
		return 0
	}
	if err != nil {
		fmt.Fprintln(stderr, "shoal-mcp:", strings.TrimPrefix(err.Error(), "usage: "))
		fmt.Fprintln(stderr, "run 'shoal-mcp --help' for usage")
		return 2
	}
	log := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: cfg.logLevel}))
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT, syscall.SIGHUP)
	defer stop()

	if err := serve(ctx, cfg, stdin, stdout, stderr, log); err != nil {
		if errors.Is(err, errUsage) {
			fmt.Fprintln(stderr, "shoal-mcp:", strings.TrimPrefix(err.Error(), "usage: "))
			return 2
		}
		fmt.Fprintln(stderr, "shoal-mcp:", err)
		return 1
	}
	return 0
}

// serve starts (or finds) the kernel, then serves MCP on the chosen
// transport until the client goes away or a signal arrives.
func serve(ctx context.Context, cfg *config, stdin io.Reader, stdout, stderr io.Writer, log *slog.Logger) error {
	var ln *httpListener
	if cfg.httpAddr != "" {
		// Refuse a bad address before any kernel is started for it.
		var err error
		if ln, err = listenHTTP(cfg.httpAddr, cfg.allowRemote); err != nil {
			return err
		}
		defer ln.Close()
	}

	t, err := cfg.target(ln != nil)
	if err != nil {
		return err
	}
	k, err := startKernel(ctx, cfg, t, log)
	if err != nil {
		return err
	}
	defer k.stop()

	f := newFacade(k.dialer, log)
	f.target = t
	defer f.Close()
	if t.settled() {
		if _, err := f.link.client(ctx); err != nil {
			return err
		}
	} else if err := k.up(ctx); err != nil {
		return err
	}

	if ln != nil {
		name, dir, _ := t.get(ctx)
		token, tokenPath, err := httpToken(cfg.stateDir)
		if err != nil {
			return err
		}
		fmt.Fprintf(stderr, "shoal-mcp: serving MCP on %s (session %s in %s, principal %s)\n", ln.URL(), name, dir, cfg.principal)
		printHTTPHelp(stderr, ln.URL(), tokenPath)
		return serveHTTP(ctx, f, ln, cfg.allowRemote, token, log)
	}
	return serveStdio(ctx, f, stdin, stdout)
}
