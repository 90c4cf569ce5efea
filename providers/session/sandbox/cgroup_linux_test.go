//go:build linux

package sandbox

import (
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
)

// A fork bomb in a domain stops at its limit; the machine, and the test,
// keep their processes, and the domain's group is gone after its close.
func TestForkBombContained(t *testing.T) {
	needLandlock(t)
	if _, err := exec.LookPath("python3"); err != nil {
		t.Skip("no python3")
	}
	ws, _, denied, _ := fixture(t)
	d := NewDomain(Rules{Writable: []string{ws}, Denied: []string{denied}, Devices: DefaultDevices, Required: true, MaxTasks: 64})
	defer d.Close()
	st, err := d.Status()
	if err != nil {
		t.Fatal(err)
	}
	if st.MaxTasks == 0 {
		t.Skip("no pids cgroup can be made here")
	}
	if st.MaxTasks != 64 {
		t.Fatalf("status %+v", st)
	}
	w, _ := d.worker()
	dir := w.group.dir
	const bomb = `
import os, signal, time
kids = []
try:
    for i in range(1000):
        pid = os.fork()
        if pid == 0:
            time.sleep(60)
            os._exit(0)
        kids.append(pid)
    print("not stopped", len(kids))
except OSError as e:
    print("stopped", len(kids), e.errno)
for k in kids:
    os.kill(k, signal.SIGKILL)
    os.waitpid(k, 0)
`
	t0 := time.Now()
	out, _ := run(t, d, ws, "/usr/bin/python3", "-c", bomb)
	t.Logf("bomb took %v: %q", time.Since(t0), out)
	f := strings.Fields(out)
	if len(f) != 3 || f[0] != "stopped" || f[2] != "11" {
		t.Fatalf("the fork bomb was not stopped by EAGAIN: %q", out)
	}
	if n, _ := strconv.Atoi(f[1]); n >= 64 || n < 16 {
		t.Errorf("%d children before the limit of 64 tasks", n)
	}
	// Children left behind by a worker that was killed (so it could not
	// end them itself) go with its group.
	out, _ = run(t, d, ws, "/bin/sh", "-c", "for i in 1 2 3 4 5; do setsid sleep 60 >/dev/null 2>&1 & echo $!; done")
	var pids []int
	for _, p := range strings.Fields(out) {
		n, err := strconv.Atoi(p)
		if err != nil {
			t.Fatalf("%q", out)
		}
		pids = append(pids, n)
	}
	w.cmd.Process.Kill()
	<-w.done
	for range 500 {
		_, err := os.Stat(dir)
		if os.IsNotExist(err) && !slices.ContainsFunc(pids, alive) {
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Errorf("after its worker was killed: group %s still there or one of %v alive", dir, pids)
}

func alive(pid int) bool {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	// A zombie is dead; it waits only for its parent.
	return err == nil && !strings.Contains(string(b), ") Z ")
}
