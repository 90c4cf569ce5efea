package main

import (
	"context"
	"github.com/shoal-sh/shoal/sdk/client"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/shoal-sh/shoal/internal/testkernel"
)

// BenchmarkCLIStart times `shoal exec true` as a whole process (the real
// client binary, built for the benchmark, against a shoal-kernel process)
// and `bash -c true`, interleaved in the same run, and reports the ratio
// of their medians (target: ≤ 3×). For where the time goes it also times
// `shoal help` (the process start alone) and the same attach and exec
// from inside this process.
func BenchmarkCLIStart(b *testing.B) {
	bash, err := exec.LookPath("bash")
	if err != nil {
		b.Skip("no bash")
	}
	bin := filepath.Join(b.TempDir(), "shoal")
	// Built as the Makefile builds it: without cgo, a static binary that
	// does not start through the dynamic loader.
	build := exec.Command("go", "build", "-o", bin, ".")
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := build.CombinedOutput(); err != nil {
		b.Fatalf("go build: %v\n%s", err, out)
	}
	kbin := filepath.Join(filepath.Dir(bin), "shoal-kernel")
	if out, err := exec.Command("go", "build", "-o", kbin, "../shoal-kernel").CombinedOutput(); err != nil {
		b.Fatalf("go build: %v\n%s", err, out)
	}
	dir := testkernel.ShortDir(b)
	kc := exec.Command(kbin, "--state-dir", dir)
	if err := kc.Start(); err != nil {
		b.Fatal(err)
	}
	defer func() { kc.Process.Signal(os.Interrupt); kc.Wait() }()
	for i := 0; ; i++ {
		if cl, err := client.Dial(context.Background(), client.Options{StateDir: dir}); err == nil {
			cl.Close()
			break
		}
		if i > 2000 {
			b.Fatal("kernel never answered")
		}
		time.Sleep(10 * time.Millisecond)
	}
	env := append(os.Environ(), "SHOAL_STATE_DIR="+dir)
	var cli, sh, help, inproc []time.Duration
	for b.Loop() {
		t0 := time.Now()
		hc := exec.Command(bin, "help")
		_ = hc.Run()
		help = append(help, time.Since(t0))
		t0 = time.Now()
		cl, err := client.Dial(context.Background(), client.Options{StateDir: dir})
		if err != nil {
			b.Fatal(err)
		}
		if _, err := cl.Exec(context.Background(), "true", client.ExecOptions{}); err != nil {
			b.Fatal(err)
		}
		cl.Close()
		inproc = append(inproc, time.Since(t0))
		c := exec.Command(bin, "exec", "true")
		c.Env = env
		t0 = time.Now()
		if out, err := c.CombinedOutput(); err != nil {
			b.Fatalf("shoal exec true: %v\n%s", err, out)
		}
		cli = append(cli, time.Since(t0))
		t0 = time.Now()
		if err := exec.Command(bash, "-c", "true").Run(); err != nil {
			b.Fatal(err)
		}
		sh = append(sh, time.Since(t0))
	}
	slices.Sort(help)
	slices.Sort(inproc)
	b.ReportMetric(float64(help[len(help)/2].Microseconds()), "help-p50-µs")
	b.ReportMetric(float64(inproc[len(inproc)/2].Microseconds()), "inproc-p50-µs")
	slices.Sort(cli)
	slices.Sort(sh)
	c, s := cli[len(cli)/2], sh[len(sh)/2]
	b.ReportMetric(float64(c.Microseconds()), "shoal-p50-µs")
	b.ReportMetric(float64(s.Microseconds()), "bash-p50-µs")
	b.ReportMetric(float64(c)/float64(s), "ratio")
}
