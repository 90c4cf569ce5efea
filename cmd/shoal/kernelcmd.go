package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"time"

	"github.com/shoal-sh/shoal/core/wire"
)

func kernelCommand() *command {
	return &command{name: "kernel", args: "[flags]", short: "run the kernel in the foreground (the shoal-kernel binary; --help for its flags)",
		noClient: true, raw: true,
		run: func(x *invocation, args []string) error { return runKernel(args) }}
}

// runKernel hands the process over to the shoal-kernel binary (same pid,
// same signals): the client path of this binary, started once per
// command, stays small and links none of the kernel.
func runKernel(args []string) error {
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

// kernelStopWait bounds how long kernel stop waits for the kernel to go.
const kernelStopWait = 30 * time.Second

func kernelStopCommand() *command {
	return &command{name: "kernel stop", short: "stop the running kernel (SIGTERM: tasks and terminals end, the journal is closed)",
		run: func(x *invocation, pos []string) error {
			if len(pos) > 0 {
				return usageErr("kernel stop takes no arguments, got %q", pos)
			}
			c, err := x.dial()
			if err != nil {
				return err
			}
			var st wire.Status
			err = c.Call(x.ctx, "kernel.status", struct{}{}, &st)
			c.Close()
			if err != nil {
				return err
			}
			if st.PID <= 0 {
				return errors.New("the kernel did not say its pid")
			}
			if err := syscall.Kill(st.PID, syscall.SIGTERM); err != nil {
				return fmt.Errorf("stop kernel pid %d: %w", st.PID, err)
			}
			if err := waitGone(x.ctx, x.cf.options(nil).SocketPath(), kernelStopWait); err != nil {
				return fmt.Errorf("kernel pid %d: %w", st.PID, err)
			}
			// The socket goes first; the kernel then ends its sessions'
			// workers and releases the state dir. Wait for that too, so a
			// kernel started right after finds the state dir free.
			for deadline := time.Now().Add(kernelStopWait); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
				if syscall.Kill(st.PID, 0) == syscall.ESRCH {
					break
				}
			}
			fmt.Fprintf(x.stdout, "stopped kernel pid %d\n", st.PID)
			return nil
		}}
}

// waitGone waits until nothing accepts on the socket.
func waitGone(ctx context.Context, socket string, d time.Duration) error {
	deadline := time.Now().Add(d)
	for {
		c, err := net.DialTimeout("unix", socket, time.Second)
		if err != nil {
			return nil
		}
		c.Close()
		if time.Now().After(deadline) {
			return fmt.Errorf("still answering on %s after %s", socket, d)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(20 * time.Millisecond):
		}
	}
}
