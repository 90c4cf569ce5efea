package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"text/tabwriter"

	"github.com/shoal-sh/shoal/core/wire"
	"github.com/shoal-sh/shoal/sdk/client"
)

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
	var p wire.Plan
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
	for _, d := range p.EffectDetails {
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
		fmt.Fprintf(w, "  next: %s\n", cliHint(p.Next, p.Session))
	}
	return nil
}

// printExec prints an execution reply: the preview, a status line, and
// what the confinement refused the run (its hint in CLI terms).
func printExec(w io.Writer, r *client.ExecReply, session string) {
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
	if c := r.Confined; c != nil {
		fmt.Fprintf(w, "confined: %s", cliHint(c.Hint, session))
		if len(c.Denied) > 0 {
			fmt.Fprintf(w, " (refused: %s)", strings.Join(c.Denied, ", "))
		}
		fmt.Fprintln(w)
	}
}

// printPlugins is the human form of plugin.list: one row per plugin, then
// the reason of each failed load.
func printPlugins(stdout io.Writer, plugins []wire.PluginStatus) error {
	tw := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "NAME\tVERSION\tKIND\tSERVES\tHEALTH\tLOAD")
	var failed []string
	for _, p := range plugins {
		serves := p.Family
		if serves == "" {
			serves = strings.Join(p.Channels, ",")
		}
		load := "-"
		if p.LoadMS > 0 {
			load = fmt.Sprintf("%dms", p.LoadMS)
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n", p.Name, p.Version, p.Kind, serves, p.Health, load)
		if p.Error != "" {
			failed = append(failed, fmt.Sprintf("%s: %s", p.Name, p.Error))
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

// kernelCalls are the kernel calls (and their MCP tools) the kernel's
// hints name, with the shoal command that does the same; %s is the
// session flag when one is needed. They are compiled on first use: only
// an error's hint needs them, and compiling them at start cost every run
// of the command about 0.1 ms (GODEBUG=inittrace=1).
var kernelCalls = sync.OnceValue(func() []kernelCall {
	return []kernelCall{
		{regexp.MustCompile(`plan\.apply \{ref: "([^"]+)"\}( \(MCP: shoal_apply\))?`), "`shoal plan apply%s $1`"},
		{regexp.MustCompile(`plan\.create \{source\}( \(MCP: shoal_plan\))?`), "`shoal plan create%s SOURCE`"},
		{regexp.MustCompile(`plan\.apply( \(MCP: shoal_apply\))?`), "`shoal plan apply%s REF`"},
		{regexp.MustCompile(`plan\.create( \(MCP: shoal_plan\))?`), "`shoal plan create%s SOURCE`"},
		{regexp.MustCompile(`plan\.list`), "`shoal plan list%s`"},
		{regexp.MustCompile(`task\.list`), "`shoal task list%s`"},
		{regexp.MustCompile(`blob\.put`), "`shoal blob put FILE`"},
		{regexp.MustCompile(` ?\(MCP: shoal_[a-z_]+\)`), ""},
		// A tool named alone: "plan it with shoal_plan", "(shoal_plan)".
		{regexp.MustCompile(`\bshoal_plan\b`), "`shoal plan create%s SOURCE`"},
		{regexp.MustCompile(`\bshoal_apply\b`), "`shoal plan apply%s REF`"},
	}
})

type kernelCall struct {
	re  *regexp.Regexp
	cmd string
}

// cliHint rewrites a kernel message for a person at the command line: the
// kernel calls it names become shoal commands (with --session when the
// session is not main), and the MCP tool names go.
func cliHint(msg, session string) string {
	flag := ""
	if session != "" && session != "main" {
		flag = " --session " + session
	}
	for _, k := range kernelCalls() {
		msg = k.re.ReplaceAllString(msg, strings.ReplaceAll(k.cmd, "%s", flag))
	}
	return msg
}
