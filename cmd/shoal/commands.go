package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"runtime"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/shoal-sh/shoal/core/statedir"
	"github.com/shoal-sh/shoal/core/version"
	"github.com/shoal-sh/shoal/core/wire"
	"github.com/shoal-sh/shoal/sdk/client"
)

// clientFlags are the flags of every command that talks to a kernel.
type clientFlags struct {
	stateDir  *string
	socket    *string
	session   *string
	principal *string
	json      *bool
}

func newClientFlags(fs *flag.FlagSet) *clientFlags {
	session := os.Getenv("SHOAL_SESSION")
	if session == "" {
		session = "main"
	}
	return &clientFlags{
		stateDir:  fs.String("state-dir", statedir.Default(), "state directory"),
		socket:    fs.String("socket", "", "kernel socket (default STATE_DIR/kernel.sock)"),
		session:   fs.String("session", session, "session to attach"),
		principal: fs.String("principal", "human:cli", "principal to act as"),
		json:      fs.Bool("json", false, "print the kernel's JSON answer"),
	}
}

// options are the client options of the flags. A new session is created
// in the directory the command runs in (when that can be a workspace).
//
// The CLI attaches with the operator credential when it is readable: it
// is what a person outside any session runs, and approving plans needs
// it. Inside a session (confined, the state dir unreadable) only the
// agent credential is there, and the kernel refuses a human principal.
func (cf *clientFlags) options(onEvent func(client.Event)) client.Options {
	o := client.Options{StateDir: *cf.stateDir, Socket: *cf.socket, Session: *cf.session,
		Principal: *cf.principal, Operator: true, OnEvent: onEvent}
	if wd, err := os.Getwd(); err == nil && statedir.CheckWorkspace(wd) == nil {
		o.Workspace = wd
	}
	return o
}

// dial attaches to the kernel.
func (x *invocation) dial() (*client.Client, error) {
	return client.Dial(x.ctx, x.cf.options(nil))
}

// call makes one kernel call on a connection of its own and prints the
// answer as JSON with --json, else with human (when not nil).
func (x *invocation) call(method string, params any, human func(raw json.RawMessage) error) error {
	c, err := x.dial()
	if err != nil {
		return err
	}
	defer c.Close()
	var raw json.RawMessage
	if err := c.Call(x.ctx, method, params, &raw); err != nil {
		return err
	}
	if *x.cf.json || human == nil {
		return printJSON(x.stdout, raw)
	}
	return human(raw)
}

func execCommand() *command {
	var timeoutMS int64
	var background bool
	return &command{name: "exec", args: "SOURCE...", short: "run shell source in the session; exit status is the command's",
		flags: func(fs *flag.FlagSet) {
			fs.Int64Var(&timeoutMS, "timeout-ms", 0, "become a task after this many milliseconds")
			fs.BoolVar(&background, "background", false, "run as a task at once")
		},
		run: func(x *invocation, pos []string) error {
			if len(pos) == 0 {
				return usageErr("exec needs SOURCE")
			}
			c, err := x.dial()
			if err != nil {
				return err
			}
			defer c.Close()
			r, err := c.Exec(x.ctx, strings.Join(pos, " "), client.ExecOptions{TimeoutMS: timeoutMS, Background: background})
			if err != nil {
				return err
			}
			if *x.cf.json {
				if err := printJSON(x.stdout, r); err != nil {
					return err
				}
			} else {
				printExec(x.stdout, r, *x.cf.session)
			}
			if r.Task == "" && r.Exit != nil && *r.Exit != 0 {
				return exitError{*r.Exit}
			}
			return nil
		}}
}

func getCommand() *command {
	var path, slice, grep, format string
	var context int
	return &command{name: "get", args: "TARGET", short: "read a ref or shoal:// URI (out:17, task:3, plan:…)",
		flags: func(fs *flag.FlagSet) {
			fs.StringVar(&path, "path", "", "path selector, e.g. [0].name")
			fs.StringVar(&slice, "slice", "", "slice a..b (either bound may be left out or negative)")
			fs.StringVar(&format, "format", "", "json, render or raw")
			fs.StringVar(&grep, "grep", "", "search the value by line, item or row (a regular expression)")
			fs.IntVar(&context, "context", 0, "with --grep: lines around each match")
		},
		run: func(x *invocation, pos []string) error {
			if len(pos) != 1 {
				return usageErr("get needs one TARGET (out:17 or shoal://…)")
			}
			p := map[string]any{"target": pos[0]}
			if context != 0 {
				p["context"] = context
			}
			for k, v := range map[string]string{"path": path, "slice": slice, "grep": grep, "format": format} {
				if v != "" {
					p[k] = v
				}
			}
			return x.call("value.get", p, func(raw json.RawMessage) error {
				var r client.ReadResult
				if err := json.Unmarshal(raw, &r); err != nil {
					return err
				}
				for _, ct := range r.Contents {
					fmt.Fprintln(x.stdout, ct.Text)
				}
				return nil
			})
		}}
}

func publishCommand() *command {
	return &command{name: "publish", args: "CHANNEL JSON", short: "publish an event on a user.* channel",
		run: func(x *invocation, pos []string) error {
			if len(pos) != 2 {
				return usageErr("publish needs CHANNEL and JSON")
			}
			if !json.Valid([]byte(pos[1])) {
				return usageErr("payload is not valid JSON: %s", pos[1])
			}
			return x.call("events.publish", map[string]any{"channel": pos[0], "payload": json.RawMessage(pos[1])}, func(raw json.RawMessage) error {
				var r wire.Published
				if err := json.Unmarshal(raw, &r); err != nil {
					return err
				}
				fmt.Fprintf(x.stdout, "published %s seq %d\n", r.Channel, r.Seq)
				return nil
			})
		}}
}

func journalCommand() *command {
	filters := map[string]*string{}
	var limit int
	var clusterScope bool
	return &command{name: "journal", args: "", short: "query the journal: who ran what, with which effects",
		flags: func(fs *flag.FlagSet) {
			// --principal is who the client acts as; --by filters rows.
			filters["principal"] = fs.String("by", "", "only rows of this principal")
			filters["head"] = fs.String("head", "", "only rows whose command head is this")
			filters["ok"] = fs.String("ok", "", "true or false")
			filters["since"] = fs.String("since", "", "only rows at or after this time (ns since the epoch)")
			filters["until"] = fs.String("until", "", "only rows before this time (ns since the epoch)")
			filters["effects"] = fs.String("effects", "", "only rows with these effects (comma-separated)")
			fs.IntVar(&limit, "limit", 0, "rows (default 100)")
			fs.BoolVar(&clusterScope, "cluster", false, "rows of every kernel of the cluster (docs/cluster.md)")
		},
		run: func(x *invocation, pos []string) error {
			if len(pos) > 0 {
				return usageErr("journal takes flags only, got %q", pos)
			}
			p, err := journalQuery(filters)
			if err != nil {
				return err
			}
			if limit > 0 {
				p["limit"] = limit
			}
			if clusterScope {
				p["scope"] = "cluster"
			}
			return x.call("journal.query", p, func(raw json.RawMessage) error { return printJournal(x, raw) })
		}}
}

// journalQuery is journal.query's params from the flags given.
func journalQuery(filters map[string]*string) (map[string]any, error) {
	p := map[string]any{}
	for k, v := range filters {
		if *v == "" {
			continue
		}
		switch k {
		case "ok":
			b, err := strconv.ParseBool(*v)
			if err != nil {
				return nil, usageErr("--ok takes true or false")
			}
			p[k] = b
		case "since", "until":
			n, err := strconv.ParseInt(*v, 10, 64)
			if err != nil {
				return nil, usageErr("--%s takes nanoseconds since the epoch", k)
			}
			p[k] = n
		case "effects":
			p[k] = strings.Split(*v, ",")
		default:
			p[k] = *v
		}
	}
	return p, nil
}

func printJournal(x *invocation, raw json.RawMessage) error {
	// A local answer decodes as a cluster one without scope, kernel and
	// host.
	var r wire.ClusterJournalRows
	if err := json.Unmarshal(raw, &r); err != nil {
		return err
	}
	cluster := r.Scope == "cluster"
	tw := tabwriter.NewWriter(x.stdout, 0, 4, 2, ' ', 0)
	if cluster {
		fmt.Fprint(tw, "KERNEL\tHOST\t")
	}
	fmt.Fprintln(tw, "ID\tTIME\tPRINCIPAL\tKIND\tHEAD\tOK\tEFFECTS\tREF")
	for _, row := range r.Rows {
		if cluster {
			fmt.Fprintf(tw, "%s\t%s\t", row.Kernel, row.Host)
		}
		fmt.Fprintf(tw, "%d\t%s\t%s\t%s\t%s\t%v\t%s\t%s\n", row.EntryID, time.Unix(0, row.TS).Format("2006-01-02 15:04:05"),
			row.Principal, row.Kind, row.Head, row.OK, strings.Join(row.Effects, ","), row.Ref)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if cluster && !r.Complete {
		fmt.Fprintf(x.stdout, "(stopped after reading %d cluster journal messages; narrow with --since/--until to reach older rows)\n", r.Scanned)
	}
	return nil
}

func planCreateCommand() *command {
	return &command{name: "plan create", args: "SOURCE...", short: "plan source: its effects, targets, reversibility and verdict",
		run: func(x *invocation, pos []string) error {
			if len(pos) == 0 {
				return usageErr("plan create needs SOURCE")
			}
			return x.call("plan.create", map[string]string{"source": strings.Join(pos, " ")}, x.printPlan)
		}}
}

func planGetCommand() *command {
	return &command{name: "plan get", args: "REF", short: "show a plan",
		run: func(x *invocation, pos []string) error {
			if len(pos) != 1 {
				return usageErr("plan get needs REF")
			}
			return x.call("plan.get", map[string]string{"ref": pos[0]}, x.printPlan)
		}}
}

func (x *invocation) printPlan(raw json.RawMessage) error { return printPlan(x.stdout, raw) }

func planListCommand() *command {
	return &command{name: "plan list", short: "the plans of this session this principal may see",
		run: func(x *invocation, pos []string) error {
			if len(pos) > 0 {
				return usageErr("plan list takes no arguments, got %q", pos)
			}
			return x.call("plan.list", map[string]string{}, func(raw json.RawMessage) error {
				var l struct { // each plan printed from its own record
					Plans []json.RawMessage `json:"plans"`
				}
				if err := json.Unmarshal(raw, &l); err != nil {
					return err
				}
				if len(l.Plans) == 0 {
					fmt.Fprintf(x.stdout, "no plans visible to %s in session %s\n", *x.cf.principal, *x.cf.session)
				}
				for _, p := range l.Plans {
					if err := x.printPlan(p); err != nil {
						return err
					}
				}
				return nil
			})
		}}
}

// planDecideCommand is plan approve or plan reject.
func planDecideCommand(verb string) *command {
	var reason string
	return &command{name: "plan " + verb, args: "REF", short: verb + " a plan waiting for approval (needs the Approve grant)",
		flags: func(fs *flag.FlagSet) { fs.StringVar(&reason, "reason", "", "why, kept in the journal") },
		run: func(x *invocation, pos []string) error {
			if len(pos) != 1 {
				return usageErr("plan %s needs REF", verb)
			}
			p := map[string]string{"ref": pos[0]}
			if reason != "" {
				p["reason"] = reason
			}
			return x.call("plan."+verb, p, x.printPlan)
		}}
}

func planApplyCommand() *command {
	return &command{name: "plan apply", args: "REF", short: "run an allowed or approved plan, once",
		run: func(x *invocation, pos []string) error {
			if len(pos) != 1 {
				return usageErr("plan apply needs REF")
			}
			return x.call("plan.apply", map[string]string{"ref": pos[0]}, func(raw json.RawMessage) error {
				var r client.ExecReply
				if err := json.Unmarshal(raw, &r); err != nil {
					return err
				}
				printExec(x.stdout, &r, *x.cf.session)
				return nil
			})
		}}
}

func pluginListCommand() *command {
	return &command{name: "plugin list", short: "the loaded plugins, their health and load times",
		run: func(x *invocation, pos []string) error {
			return x.call("plugin.list", map[string]string{}, func(raw json.RawMessage) error {
				var r wire.PluginList
				if err := json.Unmarshal(raw, &r); err != nil {
					return err
				}
				if len(r.Plugins) == 0 {
					fmt.Fprintln(x.stdout, "no plugins loaded (add folders with --plugin-dir or plugin_dirs in config.toml)")
					return nil
				}
				return printPlugins(x.stdout, r.Plugins)
			})
		}}
}

func statusCommand() *command {
	return &command{name: "status", short: "the kernel: version, uptime, sessions and their workspaces, journal",
		run: func(x *invocation, pos []string) error {
			return x.call("kernel.status", map[string]string{}, func(raw json.RawMessage) error { return printStatus(x, raw) })
		}}
}

func printStatus(x *invocation, raw json.RawMessage) error {
	var r wire.Status
	if err := json.Unmarshal(raw, &r); err != nil {
		return err
	}
	w := x.stdout
	fmt.Fprintf(w, "kernel %s pid %d up %s\nstate dir %s\nsocket %s\nconnections %d\nfamilies %s\n",
		r.Version, r.PID, humanDuration(time.Duration(r.UptimeMS)*time.Millisecond), r.StateDir, r.Socket, r.Connections, strings.Join(r.Families, ","))
	for _, s := range r.Sessions {
		fmt.Fprintf(w, "session %s (%d attached) in %s\n", s.Name, s.Attached, s.Workspace)
	}
	if j := r.Journal; j != nil {
		fmt.Fprintf(w, "journal %d rows in %d commits since start", j.Rows, j.Commits)
		if j.Rows > 0 {
			fmt.Fprintf(w, ", %.2f ms average wait for a durable row", float64(j.WaitNS)/float64(j.Rows)/1e6)
		}
		fmt.Fprintln(w)
	}
	printCluster(w, r.Cluster)
	return nil
}

// printCluster is the cluster part of shoal status; cs is nil when the
// kernel is in no cluster.
func printCluster(w io.Writer, cs *wire.ClusterStatus) {
	if cs == nil {
		fmt.Fprintln(w, "cluster off (set nats under [cluster] in config.toml, or shoal kernel --nats URL)")
		return
	}
	fmt.Fprintf(w, "cluster %s as kernel %s on %s (%s)", cs.State, cs.Kernel, cs.Host, cs.NATS)
	if cs.LastError != "" && !cs.Connected {
		fmt.Fprintf(w, ": %s", cs.LastError)
	}
	fmt.Fprintln(w)
	j, v, c := cs.Journal, cs.Values, cs.Channels
	fmt.Fprintf(w, "cluster journal exported to row %d of %d (%d behind)\n", j.Cursor, j.LastEntryID, j.Behind)
	fmt.Fprintf(w, "cluster values %d uploaded, %d fetched, %d waiting to upload\n", v.Uploaded, v.Fetched, v.PendingUploads)
	fmt.Fprintf(w, "shared channels declared %s, followed %s\n", strings.Join(c.Declared, ","), strings.Join(c.Followed, ","))
}

// humanDuration shows an uptime as a person says it: 45s, 3m12s,
// 2h5m, 39d7h.
func humanDuration(d time.Duration) string {
	switch {
	case d < time.Minute:
		return d.Round(time.Second).String()
	case d < time.Hour:
		return d.Round(time.Second).String()
	case d < 24*time.Hour:
		return strings.TrimSuffix(d.Round(time.Minute).String(), "0s")
	default:
		days := d / (24 * time.Hour)
		return fmt.Sprintf("%dd%dh", days, (d-days*24*time.Hour)/time.Hour)
	}
}

func versionCommand() *command {
	return &command{name: "version", short: "the version of this shoal", noClient: true,
		run: func(x *invocation, pos []string) error {
			fmt.Fprintf(x.stdout, "shoal %s (%s, %s/%s)\n", version.Version, runtime.Version(), runtime.GOOS, runtime.GOARCH)
			return nil
		}}
}
