package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"strings"
	"time"

	"github.com/shoal-sh/shoal/core/wire"
)

// The task commands: the session's background and timed-out executions.

// taskLine is a task on one line: task:3 running 12s  make test.
func taskLine(r *wire.Task) string {
	took := ""
	if r.Created > 0 {
		end := time.Now()
		if r.Finished > 0 {
			end = time.Unix(0, r.Finished)
		}
		took = end.Sub(time.Unix(0, r.Created)).Round(time.Second).String()
	}
	status := r.State
	if r.Exit != nil {
		status += fmt.Sprintf(" (exit %d)", *r.Exit)
	}
	s := fmt.Sprintf("%-8s %-20s %6s  %s", r.Task, status, took, r.Description)
	if r.ResultRef != "" {
		s += "  → " + r.ResultRef
	}
	return s
}

func printTask(x *invocation, raw json.RawMessage) error {
	var r wire.Task
	if err := json.Unmarshal(raw, &r); err != nil {
		return err
	}
	showTask(x, &r)
	return nil
}

// showTask prints a task: its line, and why it failed.
func showTask(x *invocation, r *wire.Task) {
	fmt.Fprintln(x.stdout, taskLine(r))
	if r.Error != "" && r.State != "completed" {
		fmt.Fprintln(x.stdout, "  "+r.Error)
	}
}

func taskListCommand() *command {
	return &command{name: "task list", short: "the session's tasks, newest first",
		run: func(x *invocation, pos []string) error {
			if len(pos) != 0 {
				return usageErr("task list takes no arguments")
			}
			return x.call("task.list", struct{}{}, func(raw json.RawMessage) error {
				var r wire.TaskList
				if err := json.Unmarshal(raw, &r); err != nil {
					return err
				}
				if len(r.Tasks) == 0 {
					fmt.Fprintln(x.stdout, "no tasks in this session")
				}
				for i := range r.Tasks {
					showTask(x, &r.Tasks[i])
				}
				return nil
			})
		}}
}

// taskCommand is a command on one task: get or cancel.
func taskCommand(verb, short string) *command {
	return &command{name: "task " + verb, args: "TASK", short: short,
		run: func(x *invocation, pos []string) error {
			if len(pos) != 1 {
				return usageErr("task %s needs one TASK (task:3 or 3)", verb)
			}
			return x.call("task."+verb, map[string]any{"task": pos[0]}, func(raw json.RawMessage) error { return printTask(x, raw) })
		}}
}

func taskWaitCommand() *command {
	var timeout time.Duration
	return &command{name: "task wait", args: "TASK", short: "wait until a task ends (exit status: the task's)",
		flags: func(fs *flag.FlagSet) {
			fs.DurationVar(&timeout, "timeout", 10*time.Minute, "give up after this long")
		},
		run: func(x *invocation, pos []string) error {
			if len(pos) != 1 {
				return usageErr("task wait needs one TASK (task:3 or 3)")
			}
			target := pos[0]
			if !strings.HasPrefix(target, "task:") && !strings.HasPrefix(target, "shoal://") {
				target = "task:" + target
			}
			var state wire.Task
			err := x.call("wait", map[string]any{"target": target, "timeout_ms": max(timeout.Milliseconds(), 1)}, func(raw json.RawMessage) error {
				var r wire.WaitResult
				if err := json.Unmarshal(raw, &r); err != nil {
					return err
				}
				if err := json.Unmarshal(r.State, &state); err != nil {
					return err
				}
				if !r.Satisfied {
					fmt.Fprintf(x.stdout, "%s still %s after %s\n", state.Task, state.State, timeout)
					return exitError{124}
				}
				return printTask(x, r.State)
			})
			if err == nil && state.Exit != nil && *state.Exit != 0 {
				return exitError{*state.Exit}
			}
			return err
		}}
}
