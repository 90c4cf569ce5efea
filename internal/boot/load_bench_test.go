package boot_test

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/shoal-sh/shoal/core/kernel"
	"github.com/shoal-sh/shoal/internal/testkernel"
	"github.com/shoal-sh/shoal/sdk/client"
)

const loadChildEnv = "SHOAL_LOAD_KERNEL_DIR"

// TestLoadKernelChild is the kernel process of BenchmarkPipelinedUnread:
// a full kernel on the state directory the environment names, until its
// stdin closes.
func TestLoadKernelChild(t *testing.T) {
	dir := os.Getenv(loadChildEnv)
	if dir == "" {
		t.Skip("run by BenchmarkPipelinedUnread")
	}
	testkernel.Start(t, kernel.Options{StateDir: dir})
	fmt.Println("serving")
	io.Copy(io.Discard, os.Stdin)
}

// BenchmarkPipelinedUnread: one client pipelines 3,000 value.get of a
// 1 MB value and reads no answer; meanwhile another client runs
// `echo hi`. Reported: the kernel's peak RSS (VmHWM) and the other
// client's p50/p99, beside its p99 with no flood (same run). The kernel
// runs in a child process so its memory is its own.
func BenchmarkPipelinedUnread(b *testing.B) {
	dir := testkernel.ShortDir(b)
	cmd := exec.Command(os.Args[0], "-test.run=^TestLoadKernelChild$", "-test.count=1")
	cmd.Env = append(os.Environ(), loadChildEnv+"="+dir)
	stdin, _ := cmd.StdinPipe()
	stdout, _ := cmd.StdoutPipe()
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	defer func() {
		stdin.Close()
		done := make(chan struct{})
		go func() { cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(30 * time.Second):
			cmd.Process.Kill()
			<-done
		}
	}()
	if line, err := bufio.NewReader(stdout).ReadString('\n'); err != nil || line != "serving\n" {
		b.Fatalf("child: %q %v", line, err)
	}
	ctx := context.Background()
	a := attach(b, dir, client.Options{Session: "flood"})
	big, err := a.Exec(ctx, "head -c 1000000 /dev/zero | tr '\\0' x", client.ExecOptions{})
	if err != nil {
		b.Fatal(err)
	}
	other := attach(b, dir, client.Options{Session: "other"})
	echo := func(n int) []time.Duration {
		lat := make([]time.Duration, n)
		for i := range lat {
			start := time.Now()
			if _, err := other.Exec(ctx, "echo hi", client.ExecOptions{}); err != nil {
				b.Fatal(err)
			}
			lat[i] = time.Since(start)
		}
		sort.Slice(lat, func(i, j int) bool { return lat[i] < lat[j] })
		return lat
	}
	quiet := echo(200)
	b.ResetTimer()
	for range b.N {
		flood, err := net.Dial("unix", filepath.Join(dir, kernel.SocketName))
		if err != nil {
			b.Fatal(err)
		}
		tok, _ := os.ReadFile(filepath.Join(dir, kernel.TokenName))
		sent := make(chan error, 1)
		go func() { // blocks once the kernel stops reading
			w := bufio.NewWriter(flood)
			fmt.Fprintf(w, `{"jsonrpc":"2.0","id":0,"method":"session.attach","params":{"token":%q,"session":"flood"}}`+"\n", strings.TrimSpace(string(tok)))
			for i := 1; i <= 3000; i++ {
				fmt.Fprintf(w, `{"jsonrpc":"2.0","id":%d,"method":"value.get","params":{"target":%q,"format":"raw"}}`+"\n", i, big.Ref)
			}
			sent <- w.Flush()
		}()
		time.Sleep(500 * time.Millisecond)
		busy := echo(200)
		rss := procKB(b, cmd.Process.Pid, "VmRSS")
		hwm := procKB(b, cmd.Process.Pid, "VmHWM")
		b.ReportMetric(float64(hwm)/1024, "peak-RSS-MiB")
		b.ReportMetric(float64(rss)/1024, "RSS-MiB")
		b.ReportMetric(float64(busy[len(busy)*99/100])/1e6, "flood-p99-ms")
		b.ReportMetric(float64(busy[len(busy)/2])/1e6, "flood-p50-ms")
		b.ReportMetric(float64(quiet[len(quiet)*99/100])/1e6, "quiet-p99-ms")
		// Now read everything: every request is answered.
		r := bufio.NewReaderSize(flood, 1<<20)
		answers := 0
		for answers < 3001 {
			line, err := r.ReadSlice('\n')
			if err == bufio.ErrBufferFull {
				continue
			}
			if err != nil {
				b.Fatalf("after %d answers: %v", answers, err)
			}
			_ = line
			answers++
		}
		if err := <-sent; err != nil {
			b.Fatal(err)
		}
		flood.Close()
	}
}

// procKB reads a kB field of /proc/PID/status.
func procKB(b *testing.B, pid int, field string) int {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		b.Fatal(err)
	}
	for _, line := range strings.Split(string(data), "\n") {
		if v, ok := strings.CutPrefix(line, field+":"); ok {
			n, _ := strconv.Atoi(strings.TrimSuffix(strings.TrimSpace(v), " kB"))
			return n
		}
	}
	b.Fatalf("no %s in /proc/%d/status", field, pid)
	return 0
}
