package main

import (
	"bytes"
	"fmt"
	"github.com/shoal-sh/shoal/internal/testkernel"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/rogpeppe/go-internal/testscript"

	"github.com/shoal-sh/shoal/internal/boot"
)

func TestMain(m *testing.M) {
	testscript.Main(m, map[string]func(){
		"shoal": func() { os.Exit(run(os.Args[1:], os.Stdout, os.Stderr)) },
		// What `shoal kernel` hands over to (cmd/shoal-kernel).
		"shoal-kernel": func() { os.Exit(boot.Main(os.Args[1:], os.Stderr)) },
	})
}

// TestScripts runs the CLI scripts in testdata/script against a kernel
// started in the background by the kernel-start command. Each script gets
// its own state directory under a short temp path (unix socket paths are
// limited to 108 bytes).
func TestScripts(t *testing.T) {
	testscript.Run(t, testscript.Params{
		Dir: "testdata/script",
		Setup: func(env *testscript.Env) error {
			dir, err := os.MkdirTemp(testkernel.StateParent(), "shs")
			if err != nil {
				return err
			}
			env.Defer(func() { os.RemoveAll(dir) })
			env.Setenv("SHOAL_STATE_DIR", dir)
			env.Setenv("STATE", dir)
			return nil
		},
		Cmds: map[string]func(ts *testscript.TestScript, neg bool, args []string){
			"kernel-start": kernelStart,
			"kernel-stop":  kernelStop,
		},
	})
}

// kernelStart starts `shoal kernel` in the background and waits until it
// answers on its socket; the kernel is stopped when the script ends.
func kernelStart(ts *testscript.TestScript, neg bool, args []string) {
	dir := ts.Getenv("SHOAL_STATE_DIR")
	bin, err := exec.LookPath("shoal") // the test binary, installed by testscript.Main
	ts.Check(err)
	cmd := exec.Command(bin, append([]string{"kernel", "--state-dir", dir}, args...)...)
	var log bytes.Buffer
	cmd.Stderr = &log
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	ts.Check(cmd.Start())
	// done is closed once the kernel exited (waitErr then holds why): a
	// closed channel, so the start loop and stop can both wait on it.
	done := make(chan struct{})
	var waitErr error
	go func() { waitErr = cmd.Wait(); close(done) }()
	stop := func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-done:
		case <-time.After(15 * time.Second):
			_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
			<-done
		}
	}
	ts.Defer(stop)
	sock := filepath.Join(dir, "kernel.sock")
	deadline := time.Now().Add(20 * time.Second)
	for time.Now().Before(deadline) {
		if c, err := net.Dial("unix", sock); err == nil {
			c.Close()
			ts.Setenv("KERNEL_PID", fmt.Sprint(cmd.Process.Pid))
			return
		}
		select {
		case <-done:
			ts.Fatalf("kernel exited: %v\n%s", waitErr, log.String())
		case <-time.After(10 * time.Millisecond):
		}
	}
	ts.Fatalf("kernel never answered on %s\n%s", sock, log.String())
}

// kernelStop sends SIGTERM to the kernel and waits until its socket is gone.
func kernelStop(ts *testscript.TestScript, neg bool, args []string) {
	var pid int
	_, err := fmt.Sscan(ts.Getenv("KERNEL_PID"), &pid)
	ts.Check(err)
	ts.Check(syscall.Kill(pid, syscall.SIGTERM))
	sock := filepath.Join(ts.Getenv("SHOAL_STATE_DIR"), "kernel.sock")
	deadline := time.Now().Add(15 * time.Second)
	for time.Now().Before(deadline) {
		// Gone once its socket is and it has exited (its state-dir lock
		// with it): its sessions' confined workers end first.
		if _, err := os.Stat(sock); os.IsNotExist(err) && !testkernel.Running(pid) {
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
	ts.Fatalf("kernel did not stop: %s still exists or pid %d runs", sock, pid)
}
