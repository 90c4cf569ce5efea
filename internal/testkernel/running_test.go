package testkernel

import (
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"
)

// TestRunning: a live child runs; once it exited it does not, both while
// it is a zombie (not reaped yet) and after; this process runs.
func TestRunning(t *testing.T) {
	if _, err := os.Stat("/proc/self/stat"); err != nil {
		t.Skip("no /proc")
	}
	if !Running(os.Getpid()) {
		t.Fatal("this process does not run")
	}
	cmd := exec.Command("sleep", "30")
	if err := cmd.Start(); err != nil {
		t.Skip("no sleep:", err)
	}
	pid := cmd.Process.Pid
	if !Running(pid) {
		t.Error("a sleeping child does not run")
	}
	if err := cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	// Not waited for: it becomes a zombie of this process.
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(5 * time.Millisecond) {
		b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
		if err == nil && strings.Contains(string(b[strings.LastIndexByte(string(b), ')'):]), ") Z") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("child %d never became a zombie", pid)
		}
	}
	if Running(pid) {
		t.Error("a zombie counts as running")
	}
	_ = cmd.Wait()
	if Running(pid) {
		t.Error("a reaped child counts as running")
	}
}
