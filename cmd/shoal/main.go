// Command shoal runs the Shoal kernel (`shoal kernel`, which hands over to
// the shoal-kernel binary) and is its command line client (exec, get, events tail, publish, journal, plan, plugin list,
// status, version, kernel stop). Human output by default, --json for
// machines.
//
// Each subcommand is one entry of a command table ([command]): its name,
// its arguments, its own flags and the function that runs it, so help,
// unknown-command messages and dispatch come from one place.
//
// Exit codes: 0 success (and --help); the command's own status for
// `shoal exec`; 1 a kernel error; 2 bad usage; 3 no kernel answers on the
// socket.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"slices"
	"strconv"
	"strings"
	"syscall"

	"github.com/shoal-sh/shoal/core/rpc"
	"github.com/shoal-sh/shoal/sdk/client"
)

// command is one subcommand: `shoal NAME ARGS`.
type command struct {
	// name is the words that select it: "exec", "plan approve".
	name string
	// args shows its arguments in help: "SOURCE...".
	args string
	// short is one line of help.
	short string
	// noClient: it does not talk to a kernel as a client (kernel,
	// version), so it has no client flags.
	noClient bool
	// raw: its arguments go to run as they are, flags and all (kernel,
	// which hands them to the shoal-kernel binary).
	raw bool
	// flags adds the command's own flags; the client flags are there
	// already unless noClient.
	flags func(fs *flag.FlagSet)
	// run does the work with the positional arguments.
	run func(x *invocation, args []string) error
}

// invocation is what a running command has: its output, its flags and a
// way to reach the kernel.
type invocation struct {
	ctx    context.Context
	stdout io.Writer
	stderr io.Writer
	cf     *clientFlags
	fs     *flag.FlagSet
}

// commands is the table, in the order help lists it. It is built afresh
// for each run, so each run's flags are its own.
func commands() []*command {
	return []*command{
		execCommand(), getCommand(), eventsTailCommand(), publishCommand(), journalCommand(),
		planCreateCommand(), planGetCommand(), planListCommand(),
		planDecideCommand("approve"), planDecideCommand("reject"), planApplyCommand(),
		taskListCommand(), taskCommand("get", "show one task"), taskCommand("cancel", "stop a task: its whole process group ends"), taskWaitCommand(),
		blobPutCommand(), blobGetCommand(),
		pluginListCommand(), statusCommand(), versionCommand(),
		kernelCommand(), kernelStopCommand(),
	}
}

const clientFlagsHelp = `Client flags (every command but kernel and version; before or after the command):
  --state-dir DIR   state directory (env SHOAL_STATE_DIR; default $XDG_STATE_HOME/shoal or ~/.local/state/shoal)
  --socket PATH     kernel socket (default STATE_DIR/kernel.sock)
  --session NAME    session to attach (env SHOAL_SESSION; default main; an MCP host's
                    session is proj-<dir>-<hash>, see 'shoal status')
  --principal NAME  principal to act as (default human:cli)
  --json            print the kernel's JSON answer
`

// usage is the whole help, built from the table.
func usage(cmds []*command) string {
	var b strings.Builder
	b.WriteString("shoal — the Shoal kernel and its command line client\n\nUsage:\n")
	for _, c := range cmds {
		fmt.Fprintf(&b, "  shoal %-34s %s\n", strings.TrimSpace(c.name+" "+c.args), c.short)
	}
	b.WriteString("\n" + clientFlagsHelp)
	b.WriteString("\n'shoal COMMAND --help' shows a command's own flags.\n")
	b.WriteString("Exit codes: 0 ok, the command's status for exec, 1 kernel error, 2 usage, 3 no kernel.\n")
	return b.String()
}

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := runCtx(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

type exitError struct{ code int }

func (e exitError) Error() string { return "exit " + strconv.Itoa(e.code) }

var errUsage = errors.New("usage")

func usageErr(format string, args ...any) error {
	return fmt.Errorf("%w: %s", errUsage, fmt.Sprintf(format, args...))
}

// run is runCtx without cancellation (the tests' entry point).
func run(args []string, stdout, stderr io.Writer) int {
	return runCtx(context.Background(), args, stdout, stderr)
}

func runCtx(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	return exitCode(dispatch(ctx, args, stdout, stderr), stderr)
}

// dispatch finds the command args name and runs it.
func dispatch(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	cmds := commands()
	global, args := leadingFlags(args)
	if len(args) == 0 {
		fmt.Fprint(stderr, usage(cmds))
		return exitError{2}
	}
	if args[0] == "help" || isHelp(args[0]) {
		if len(args) > 1 && !isHelp(args[1]) {
			return dispatch(ctx, append(args[1:], "--help"), stdout, stderr)
		}
		fmt.Fprint(stdout, usage(cmds))
		return nil
	}
	c, rest, err := lookup(cmds, args)
	if err != nil {
		return err
	}
	return c.invoke(ctx, append(global, rest...), stdout, stderr)
}

func isHelp(a string) bool { return a == "-h" || a == "--help" || a == "-help" }

// valueFlags are the client flags that take a value, for reading them
// before the command name.
var valueFlags = []string{"state-dir", "socket", "session", "principal"}

// leadingFlags splits the client flags given before the command name from
// the rest: `shoal --session x plan list`.
func leadingFlags(args []string) (flags, rest []string) {
	for len(args) > 0 && strings.HasPrefix(args[0], "-") && !isHelp(args[0]) && args[0] != "--" {
		name, _, hasValue := strings.Cut(strings.TrimLeft(args[0], "-"), "=")
		flags = append(flags, args[0])
		args = args[1:]
		if !hasValue && slices.Contains(valueFlags, name) && len(args) > 0 {
			flags = append(flags, args[0])
			args = args[1:]
		}
	}
	return flags, args
}

// lookup picks the command whose words args start with: the longest
// match, so `kernel stop` wins over `kernel`.
func lookup(cmds []*command, args []string) (*command, []string, error) {
	var best *command
	n := 0
	for _, c := range cmds {
		words := strings.Fields(c.name)
		if len(words) > n && len(args) >= len(words) && slices.Equal(words, args[:len(words)]) {
			best, n = c, len(words)
		}
	}
	if best != nil && !(best.name == "kernel" && len(args) > 1 && !strings.HasPrefix(args[1], "-")) {
		return best, args[n:], nil
	}
	// A group word (plan, events, plugin, kernel) followed by something
	// that is none of its subcommands.
	var subs []string
	for _, c := range cmds {
		if group, sub, ok := strings.Cut(c.name, " "); ok && group == args[0] {
			subs = append(subs, sub)
		}
	}
	if len(subs) == 0 {
		return nil, nil, usageErr("unknown command %q", args[0])
	}
	if len(args) == 1 || isHelp(args[1]) {
		var b strings.Builder
		fmt.Fprintf(&b, "%s subcommands:\n", args[0])
		for _, c := range cmds {
			if strings.HasPrefix(c.name, args[0]+" ") {
				fmt.Fprintf(&b, "  shoal %-34s %s\n", strings.TrimSpace(c.name+" "+c.args), c.short)
			}
		}
		if len(args) > 1 {
			return &command{name: args[0], noClient: true, run: func(x *invocation, _ []string) error {
				fmt.Fprint(x.stdout, b.String())
				return nil
			}}, nil, nil
		}
		return nil, nil, usageErr("%s needs a subcommand: %s", args[0], strings.Join(subs, ", "))
	}
	return nil, nil, usageErr("unknown %s subcommand %q; %s subcommands: %s", args[0], args[1], args[0], strings.Join(subs, ", "))
}

// invoke parses the command's flags and runs it. --help prints its usage
// and succeeds.
func (c *command) invoke(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("shoal "+c.name, flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	x := &invocation{ctx: ctx, stdout: stdout, stderr: stderr, fs: fs}
	if !c.noClient {
		x.cf = newClientFlags(fs)
	}
	if c.raw {
		return c.run(x, args)
	}
	if c.flags != nil {
		c.flags(fs)
	}
	pos, err := parseInterleaved(fs, args)
	if err == nil {
		err = c.run(x, pos)
		var re *rpc.Error
		if x.cf != nil && errors.As(err, &re) {
			// The kernel's hints name kernel calls and MCP tools; a
			// person here runs shoal commands.
			re.Message = cliHint(re.Message, *x.cf.session)
		}
		return err
	}
	if errors.Is(err, flag.ErrHelp) {
		fmt.Fprintf(stdout, "Usage: shoal %s\n\n%s\n", strings.TrimSpace(c.name+" "+c.args), c.short)
		fs.SetOutput(stdout)
		fmt.Fprintln(stdout, "\nFlags:")
		fs.PrintDefaults()
		return nil
	}
	return usageErr("%s: %v", c.name, err)
}

// parseInterleaved parses flags that may come before or after positional
// arguments; "--" ends the flags.
func parseInterleaved(fs *flag.FlagSet, args []string) ([]string, error) {
	var pos []string
	for {
		if err := fs.Parse(args); err != nil {
			return nil, err
		}
		args = fs.Args()
		if len(args) == 0 {
			return pos, nil
		}
		if args[0] == "--" {
			return append(pos, args[1:]...), nil
		}
		pos = append(pos, args[0])
		args = args[1:]
	}
}

// exitCode reports err on stderr as a person reads it and picks the exit
// status.
func exitCode(err error, stderr io.Writer) int {
	var ee exitError
	var re *rpc.Error
	switch {
	case err == nil:
		return 0
	case errors.As(err, &ee):
		return ee.code
	case errors.Is(err, errUsage):
		fmt.Fprintln(stderr, "shoal:", strings.TrimPrefix(err.Error(), errUsage.Error()+": "))
		fmt.Fprintln(stderr, "run 'shoal help' for usage")
		return 2
	case errors.Is(err, client.ErrNoKernel):
		fmt.Fprintln(stderr, "shoal:", err)
		fmt.Fprintln(stderr, "start one with 'shoal kernel' (or let shoal-mcp start it)")
		return 3
	case errors.As(err, &re):
		fmt.Fprintf(stderr, "shoal: %s (%d): %s\n", re.Code.Name(), int(re.Code), re.Message)
		return 1
	default:
		fmt.Fprintln(stderr, "shoal:", err)
		return 1
	}
}
