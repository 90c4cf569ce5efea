// Command shoal runs the Shoal kernel (`shoal kernel`, which hands over to
// the shoal-kernel binary) and is its command line client (exec, get, events tail, publish, journal, plan, plugin list,
// status). Human output by default, --json for machines.
//
// Exit codes: 0 success; the command's own status for `shoal exec`;
// 1 a kernel error; 2 bad usage; 3 no kernel answers on the socket.
package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/shoal-sh/shoal/core/rpc"
	"github.com/shoal-sh/shoal/core/statedir"
	"github.com/shoal-sh/shoal/sdk/client"
)

const usage = `shoal — the Shoal kernel and its command line client

Usage:
  shoal kernel [--state-dir DIR] [--socket PATH] [--config FILE] [--plugin-dir DIR]... [--idle-exit DUR]
  shoal exec [--timeout-ms N] [--background] SOURCE...
  shoal get TARGET [--path P] [--slice A..B] [--grep RE [--context N]] [--format json|render|raw]
  shoal events tail CHANNEL [--since N] [--cursor FILE] [--no-follow]
  shoal publish CHANNEL JSON
  shoal journal [--by PRINCIPAL] [--head H] [--ok true|false] [--since NS] [--until NS] [--effects a,b] [--limit N]
  shoal plan create SOURCE... | get REF | list | approve REF [--reason R] | reject REF [--reason R] | apply REF
  shoal plugin list
  shoal status

Client flags (any command but kernel):
  --state-dir DIR   state directory (env SHOAL_STATE_DIR; default $XDG_STATE_HOME/shoal or ~/.local/state/shoal)
  --socket PATH     kernel socket (default STATE_DIR/kernel.sock)
  --session NAME    session to attach (default main)
  --principal NAME  principal to act as (default human:cli)
  --json            print the kernel's JSON answer

Exit codes: 0 ok, the command's status for exec, 1 kernel error, 2 usage, 3 no kernel.
`

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

type exitError struct{ code int }

func (e exitError) Error() string { return "exit " + strconv.Itoa(e.code) }

func run(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 || args[0] == "-h" || args[0] == "--help" || args[0] == "help" {
		fmt.Fprint(stdout, usage)
		if len(args) == 0 {
			return 2
		}
		return 0
	}
	cmd, rest := args[0], args[1:]
	var err error
	switch cmd {
	case "kernel":
		err = runKernel(rest, stderr)
	default:
		err = runClient(cmd, rest, stdout, stderr)
	}
	var ee exitError
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
	default:
		var re *rpc.Error
		if errors.As(err, &re) {
			fmt.Fprintf(stderr, "shoal: %s (%d): %s\n", re.Code.Name(), int(re.Code), re.Message)
		} else {
			fmt.Fprintln(stderr, "shoal:", err)
		}
		return 1
	}
}

var errUsage = errors.New("usage")

func usageErr(format string, args ...any) error {
	return fmt.Errorf("%w: %s", errUsage, fmt.Sprintf(format, args...))
}

// runKernel hands the process over to the shoal-kernel binary (same pid,
// same signals): the client path of this binary, started once per
// command, stays small and links none of the kernel.
func runKernel(args []string, stderr io.Writer) error {
	bin, err := kernelBinary()
	if err != nil {
		return err
	}
	argv := append([]string{bin}, args...)
	if err := syscall.Exec(bin, argv, os.Environ()); err != nil {
		return fmt.Errorf("start %s: %w", bin, err)
	}
	return nil // not reached
}

// kernelBinary finds shoal-kernel beside this binary (both are built into
// the same folder), else on PATH.
func kernelBinary() (string, error) {
	const name = "shoal-kernel"
	if self, err := os.Executable(); err == nil {
		p := filepath.Join(filepath.Dir(self), name)
		if fi, err := os.Stat(p); err == nil && fi.Mode().IsRegular() && fi.Mode()&0o111 != 0 {
			return p, nil
		}
	}
	if p, err := exec.LookPath(name); err == nil {
		return p, nil
	}
	return "", fmt.Errorf("%s is neither beside this binary nor on PATH; 'make build' puts both in bin/ (or: go build -o DIR/%s ./cmd/%s)", name, name, name)
}

type clientFlags struct {
	fs        *flag.FlagSet
	stateDir  *string
	socket    *string
	session   *string
	principal *string
	json      *bool
}

func newClientFlags(name string, stderr io.Writer) *clientFlags {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(stderr)
	return &clientFlags{
		fs:        fs,
		stateDir:  fs.String("state-dir", statedir.Default(), "state directory"),
		socket:    fs.String("socket", "", "kernel socket"),
		session:   fs.String("session", "main", "session"),
		principal: fs.String("principal", "human:cli", "principal"),
		json:      fs.Bool("json", false, "print JSON"),
	}
}

// parse parses flags that may come before or after positional arguments.
func (cf *clientFlags) parse(args []string) ([]string, error) {
	var pos []string
	for {
		if err := cf.fs.Parse(args); err != nil {
			return nil, usageErr("%v", err)
		}
		args = cf.fs.Args()
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

func (cf *clientFlags) dial(ctx context.Context, onEvent func(client.Event)) (*client.Client, error) {
	return client.Dial(ctx, client.Options{StateDir: *cf.stateDir, Socket: *cf.socket, Session: *cf.session,
		Principal: *cf.principal, OnEvent: onEvent})
}

// printJSON prints v indented, numbers exact and "&" as "&".
func printJSON(w io.Writer, v any) error {
	if raw, ok := v.(json.RawMessage); ok {
		var buf bytes.Buffer
		if err := json.Indent(&buf, raw, "", "  "); err != nil {
			return err
		}
		buf.WriteByte('\n')
		_, err := w.Write(buf.Bytes())
		return err
	}
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	enc.SetEscapeHTML(false)
	return enc.Encode(v)
}

// printPlan shows a plan record for a person.
func printPlan(w io.Writer, raw json.RawMessage) error {
	var p struct {
		Ref        string   `json:"ref"`
		Source     string   `json:"source"`
		Principal  string   `json:"principal"`
		Effects    []string `json:"effects"`
		Reversible bool     `json:"reversible"`
		Verdict    string   `json:"verdict"`
		Approval   string   `json:"approval"`
		Next       string   `json:"next"`
		Details    []struct {
			Kind       string `json:"kind"`
			Target     string `json:"target"`
			Reversible bool   `json:"reversible"`
			Reason     string `json:"reason"`
		} `json:"effect_details"`
		Estimates struct {
			Files     int64 `json:"files"`
			Bytes     int64 `json:"bytes"`
			Truncated bool  `json:"truncated"`
		} `json:"estimates"`
	}
	if err := json.Unmarshal(raw, &p); err != nil {
		return printJSON(w, raw)
	}
	fmt.Fprintf(w, "%s  %s  verdict %s, approval %s\n", p.Ref, p.Principal, p.Verdict, p.Approval)
	fmt.Fprintf(w, "  source: %s\n", strings.ReplaceAll(p.Source, "\n", "\n          "))
	rev := "reversible"
	if !p.Reversible {
		rev = "NOT reversible"
	}
	fmt.Fprintf(w, "  effects: %s (%s)\n", strings.Join(p.Effects, ", "), rev)
	for _, d := range p.Details {
		r := ""
		if !d.Reversible {
			r = " [irreversible]"
		}
		fmt.Fprintf(w, "    %-13s %s%s\n", d.Kind, d.Target, r)
	}
	if p.Estimates.Files > 0 || p.Estimates.Bytes > 0 {
		more := ""
		if p.Estimates.Truncated {
			more = " or more"
		}
		fmt.Fprintf(w, "  touches: %d files, %d bytes%s\n", p.Estimates.Files, p.Estimates.Bytes, more)
	}
	if p.Next != "" {
		fmt.Fprintf(w, "  next: %s\n", p.Next)
	}
	return nil
}

func runClient(cmd string, args []string, stdout, stderr io.Writer) error {
	if cmd == "events" {
		if len(args) == 0 || args[0] != "tail" {
			return usageErr("use 'shoal events tail CHANNEL'")
		}
		return eventsTail(args[1:], stdout, stderr)
	}
	if cmd == "plugin" {
		if len(args) == 0 || args[0] != "list" {
			return usageErr("use 'shoal plugin list'")
		}
		cmd, args = "plugin-list", args[1:]
	}
	if cmd == "plan" {
		if len(args) == 0 {
			return usageErr("use 'shoal plan create|get|list|approve|reject|apply'")
		}
		cmd, args = "plan-"+args[0], args[1:]
	}
	cf := newClientFlags(cmd, stderr)
	var (
		timeoutMS  *int64
		background *bool
		path       *string
		slice      *string
		grep       *string
		grepCtx    *int
		format     *string
		reason     *string
		jq         = map[string]*string{}
		limit      *int
	)
	switch cmd {
	case "exec":
		timeoutMS = cf.fs.Int64("timeout-ms", 0, "become a task after this many milliseconds")
		background = cf.fs.Bool("background", false, "run as a task at once")
	case "get":
		path = cf.fs.String("path", "", "path selector")
		slice = cf.fs.String("slice", "", "slice a..b (a negative bound counts from the end: -3..)")
		grep = cf.fs.String("grep", "", "search the value by line, item or row (regular expression)")
		grepCtx = cf.fs.Int("context", 0, "with --grep: lines around each match")
		format = cf.fs.String("format", "", "json, render or raw")
	case "journal":
		// --principal is who the client acts as; --by filters rows.
		jq["principal"] = cf.fs.String("by", "", "only rows of this principal")
		for _, k := range []string{"head", "ok", "since", "until", "effects"} {
			jq[k] = cf.fs.String(k, "", "filter by "+k)
		}
		limit = cf.fs.Int("limit", 0, "rows (default 100)")
	case "plan-approve", "plan-reject":
		reason = cf.fs.String("reason", "", "why")
	case "publish", "status", "plugin-list", "plan-create", "plan-get", "plan-list", "plan-apply":
	default:
		return usageErr("unknown command %q", cmd)
	}
	pos, err := cf.parse(args)
	if err != nil {
		return err
	}
	ctx := context.Background()
	c, err := cf.dial(ctx, nil)
	if err != nil {
		return err
	}
	defer c.Close()
	var result json.RawMessage
	switch cmd {
	case "exec":
		if len(pos) == 0 {
			return usageErr("exec needs SOURCE")
		}
		r, err := c.Exec(ctx, strings.Join(pos, " "), client.ExecOptions{TimeoutMS: *timeoutMS, Background: *background})
		if err != nil {
			return err
		}
		if *cf.json {
			if err := printJSON(stdout, r); err != nil {
				return err
			}
		} else {
			printExec(stdout, r)
		}
		if r.Task == "" && r.Exit != nil && *r.Exit != 0 {
			return exitError{*r.Exit}
		}
		return nil
	case "get":
		if len(pos) != 1 {
			return usageErr("get needs one TARGET (out:17 or shoal://…)")
		}
		p := map[string]any{"target": pos[0]}
		if *path != "" {
			p["path"] = *path
		}
		if *slice != "" {
			p["slice"] = *slice
		}
		if *grep != "" {
			p["grep"] = *grep
		}
		if *grepCtx != 0 {
			p["context"] = *grepCtx
		}
		if *format != "" {
			p["format"] = *format
		}
		var r client.ReadResult
		if err := c.Call(ctx, "value.get", p, &r); err != nil {
			return err
		}
		if *cf.json {
			return printJSON(stdout, r)
		}
		for _, ct := range r.Contents {
			fmt.Fprintln(stdout, ct.Text)
		}
		return nil
	case "publish":
		if len(pos) != 2 {
			return usageErr("publish needs CHANNEL and JSON")
		}
		if !json.Valid([]byte(pos[1])) {
			return usageErr("payload is not valid JSON: %s", pos[1])
		}
		r, err := c.Publish(ctx, pos[0], json.RawMessage(pos[1]))
		if err != nil {
			return err
		}
		if *cf.json {
			return printJSON(stdout, r)
		}
		fmt.Fprintf(stdout, "published %s seq %d\n", r.Channel, r.Seq)
		return nil
	case "journal":
		p := map[string]any{}
		for k, v := range jq {
			if *v == "" {
				continue
			}
			switch k {
			case "ok":
				b, err := strconv.ParseBool(*v)
				if err != nil {
					return usageErr("--ok takes true or false")
				}
				p[k] = b
			case "since", "until":
				n, err := strconv.ParseInt(*v, 10, 64)
				if err != nil {
					return usageErr("--%s takes nanoseconds since the epoch", k)
				}
				p[k] = n
			case "effects":
				p[k] = strings.Split(*v, ",")
			default:
				p[k] = *v
			}
		}
		if *limit > 0 {
			p["limit"] = *limit
		}
		var raw json.RawMessage
		if err := c.Call(ctx, "journal.query", p, &raw); err != nil {
			return err
		}
		if *cf.json {
			return printJSON(stdout, raw)
		}
		var r struct {
			Rows []map[string]any `json:"rows"`
		}
		dec := json.NewDecoder(bytes.NewReader(raw))
		dec.UseNumber()
		if err := dec.Decode(&r); err != nil {
			return err
		}
		tw := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "ID\tTIME\tPRINCIPAL\tKIND\tHEAD\tOK\tEFFECTS\tREF")
		for _, row := range r.Rows {
			ts, _ := row["ts"].(json.Number).Int64()
			fmt.Fprintf(tw, "%v\t%s\t%v\t%v\t%v\t%v\t%v\t%v\n", row["entry_id"], time.Unix(0, int64(ts)).Format("2006-01-02 15:04:05"),
				row["principal"], row["kind"], row["head"], row["ok"], joinAny(row["effects"]), row["ref"])
		}
		return tw.Flush()
	case "plan-create":
		if len(pos) == 0 {
			return usageErr("plan create needs SOURCE")
		}
		err = c.Call(ctx, "plan.create", map[string]string{"source": strings.Join(pos, " ")}, &result)
	case "plan-get":
		if len(pos) != 1 {
			return usageErr("plan get needs REF")
		}
		err = c.Call(ctx, "plan.get", map[string]string{"ref": pos[0]}, &result)
	case "plan-list":
		err = c.Call(ctx, "plan.list", map[string]string{}, &result)
	case "plan-approve", "plan-reject":
		if len(pos) != 1 {
			return usageErr("%s needs REF", strings.Replace(cmd, "-", " ", 1))
		}
		p := map[string]string{"ref": pos[0]}
		if *reason != "" {
			p["reason"] = *reason
		}
		err = c.Call(ctx, strings.Replace(cmd, "-", ".", 1), p, &result)
	case "plan-apply":
		if len(pos) != 1 {
			return usageErr("plan apply needs REF")
		}
		var r client.ExecReply
		if err := c.Call(ctx, "plan.apply", map[string]string{"ref": pos[0]}, &r); err != nil {
			return err
		}
		if *cf.json {
			return printJSON(stdout, r)
		}
		printExec(stdout, &r)
		return nil
	case "plugin-list":
		var r struct {
			Plugins []map[string]any `json:"plugins"`
		}
		if err := c.Call(ctx, "plugin.list", map[string]string{}, &r); err != nil {
			return err
		}
		if *cf.json {
			return printJSON(stdout, r)
		}
		if len(r.Plugins) == 0 {
			fmt.Fprintln(stdout, "no plugins loaded (add folders with --plugin-dir or plugin_dirs in config.toml)")
			return nil
		}
		return printPlugins(stdout, r.Plugins)
	case "status":
		var r map[string]any
		if err := c.Call(ctx, "kernel.status", map[string]string{}, &r); err != nil {
			return err
		}
		if *cf.json {
			return printJSON(stdout, r)
		}
		fmt.Fprintf(stdout, "kernel %v pid %v up %v ms\nstate dir %v\nsocket %v\nconnections %v\nfamilies %v\n",
			r["version"], r["pid"], r["uptime_ms"], r["state_dir"], r["socket"], r["connections"], joinAny(r["families"]))
		if ss, ok := r["sessions"].([]any); ok {
			for _, s := range ss {
				m, _ := s.(map[string]any)
				fmt.Fprintf(stdout, "session %v (%v attached)\n", m["name"], m["attached"])
			}
		}
		if j, ok := r["journal"].(map[string]any); ok {
			rows, _ := j["rows"].(float64)
			commits, _ := j["commits"].(float64)
			wait, _ := j["wait_ns"].(float64)
			fmt.Fprintf(stdout, "journal %.0f rows in %.0f commits since start", rows, commits)
			if rows > 0 {
				fmt.Fprintf(stdout, ", %.2f ms average wait for a durable row", wait/rows/1e6)
			}
			fmt.Fprintln(stdout)
		}
		return nil
	}
	if err != nil {
		return err
	}
	if *cf.json {
		return printJSON(stdout, result)
	}
	if cmd == "plan-list" {
		var l struct {
			Plans []json.RawMessage `json:"plans"`
		}
		if json.Unmarshal(result, &l) == nil {
			if len(l.Plans) == 0 {
				fmt.Fprintln(stdout, "no plans visible to this principal in this session")
			}
			for _, p := range l.Plans {
				if err := printPlan(stdout, p); err != nil {
					return err
				}
			}
			return nil
		}
	}
	return printPlan(stdout, result)
}

func joinAny(v any) string {
	xs, _ := v.([]any)
	s := make([]string, len(xs))
	for i, x := range xs {
		s[i] = fmt.Sprint(x)
	}
	return strings.Join(s, ",")
}

func printExec(w io.Writer, r *client.ExecReply) {
	if r.Task != "" {
		fmt.Fprintf(w, "%s is running as %s (%s); its value will be %s\n", r.Ref, r.Task, r.TaskURI, r.URI)
		return
	}
	if r.PreviewText != "" {
		fmt.Fprintln(w, strings.TrimRight(r.PreviewText, "\n"))
	}
	status := "ok"
	if r.Exit != nil && *r.Exit != 0 {
		status = "exit " + strconv.Itoa(*r.Exit)
	}
	extra := ""
	if r.ValRef != "" {
		extra = " " + r.ValRef
	}
	fmt.Fprintf(w, "── %s %s%s\n", r.Ref, status, extra)
}

// eventsTail prints a channel's events and follows it. With --cursor it
// resumes after the seq saved in FILE (with the channel's epoch, so a
// channel that restarted from 0 is noticed) and saves each printed seq, so
// a restarted tail neither repeats nor skips. Gaps and drop markers are
// reported on stderr, never skipped silently.
func eventsTail(args []string, stdout, stderr io.Writer) error {
	cf := newClientFlags("events tail", stderr)
	since := cf.fs.Int64("since", -1, "start after this seq (exclusive)")
	cursor := cf.fs.String("cursor", "", "file holding the last processed seq; read at start, written after each event")
	noFollow := cf.fs.Bool("no-follow", false, "print what is retained and exit")
	pos, err := cf.parse(args)
	if err != nil {
		return err
	}
	if len(pos) != 1 {
		return usageErr("events tail needs one CHANNEL")
	}
	channel := pos[0]
	var last *uint64
	epoch := ""
	if *since >= 0 {
		s := uint64(*since)
		last = &s
	} else if *cursor != "" {
		if b, err := os.ReadFile(*cursor); err == nil {
			f := strings.Fields(string(b))
			if len(f) >= 1 {
				if n, err := strconv.ParseUint(f[0], 10, 64); err == nil {
					last = &n
				}
			}
			if len(f) >= 2 {
				epoch = f[1]
			}
		}
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	live := make(chan client.Event, 1024)
	c, err := cf.dial(ctx, func(ev client.Event) {
		select {
		case live <- ev:
		default: // the kernel's own drop marker will tell us
		}
	})
	if err != nil {
		return err
	}
	defer c.Close()
	save := func() error {
		if *cursor == "" || last == nil {
			return nil
		}
		tmp := *cursor + ".tmp"
		if err := os.WriteFile(tmp, []byte(fmt.Sprintf("%d %s\n", *last, epoch)), 0o600); err != nil {
			return err
		}
		return os.Rename(tmp, *cursor)
	}
	emit := func(ev client.Event) error {
		if last != nil && ev.Seq <= *last {
			return nil // duplicate
		}
		if *cf.json {
			b, _ := json.Marshal(ev)
			fmt.Fprintln(stdout, string(b))
		} else {
			fmt.Fprintf(stdout, "%s #%d %s %s\n", ev.Channel, ev.Seq, time.Unix(0, ev.TS).Format("15:04:05.000"), ev.Payload)
		}
		s := ev.Seq
		last = &s
		return save()
	}
	catchUp := func() error {
		for {
			page, err := c.Events(ctx, channel, last, client.MaxReadLimit)
			if err != nil {
				return err
			}
			if epoch != "" && page.Epoch != epoch {
				fmt.Fprintf(stderr, "%s restarted (epoch %s → %s): its seqs began again at 0; reading from the start\n", channel, epoch, page.Epoch)
				last = nil
				epoch = page.Epoch
				continue
			}
			epoch = page.Epoch
			if len(page.Events) > 0 {
				next := uint64(0)
				if last != nil {
					next = *last + 1
				}
				if first := page.Events[0].Seq; first > next {
					if page.Truncated {
						fmt.Fprintf(stderr, "gap: seq %d..%d are older than what %s retains\n", next, first-1, channel)
					} else {
						fmt.Fprintf(stderr, "gap: seq %d..%d not shown: more than %d events were waiting (events.read keeps the newest; for the journal, 'shoal journal' has them all)\n", next, first-1, client.MaxReadLimit)
					}
				}
			}
			for _, ev := range page.Events {
				if err := emit(ev); err != nil {
					return err
				}
			}
			if len(page.Events) < client.MaxReadLimit {
				return save()
			}
		}
	}
	if !*noFollow {
		if _, err := c.Subscribe(ctx, channel); err != nil {
			return err
		}
	}
	if err := catchUp(); err != nil {
		return err
	}
	if *noFollow {
		return nil
	}
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-c.Done():
			return errors.New("the kernel closed the connection")
		case ev := <-live:
			if d, ok := ev.IsDrop(); ok {
				fmt.Fprintf(stderr, "dropped %d events up to seq %d (slow consumer); catching up\n", d.Dropped, d.LatestSeq)
				if err := catchUp(); err != nil {
					return err
				}
				continue
			}
			if last != nil && ev.Seq > *last+1 {
				if err := catchUp(); err != nil { // a jump: read what lies between
					return err
				}
				continue
			}
			if err := emit(ev); err != nil {
				return err
			}
		}
	}
}

// printPlugins is the human form of plugin.list: one row per plugin, then
// the reason of each failed load.
func printPlugins(stdout io.Writer, plugins []map[string]any) error {
	tw := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "NAME\tVERSION\tKIND\tSERVES\tHEALTH\tLOAD")
	var failed []string
	for _, p := range plugins {
		serves := p["family"]
		if serves == nil || serves == "" {
			serves = joinAny(p["channels"])
		}
		load := "-"
		if ms, ok := p["load_ms"].(float64); ok {
			load = fmt.Sprintf("%.0fms", ms)
		}
		fmt.Fprintf(tw, "%v\t%v\t%v\t%v\t%v\t%s\n", p["name"], p["version"], p["kind"], serves, p["health"], load)
		if e, ok := p["error"].(string); ok && e != "" {
			failed = append(failed, fmt.Sprintf("%v: %s", p["name"], e))
		}
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	for _, f := range failed {
		fmt.Fprintln(stdout, f)
	}
	return nil
}
