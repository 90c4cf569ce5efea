package shell

import (
	"bytes"
	"context"
	"os/exec"
	"slices"
	"testing"
	"time"
)

// BenchmarkRun measures a run of a shell builtin and of an external
// program, and the same program started directly with os/exec in the same
// benchmark, reporting the ratio (target: external ≤ 1.5× os/exec).
func BenchmarkRun(b *testing.B) {
	e, _ := newTestEvaluator(b, nil, Options{})
	ctx := context.Background()

	b.Run("builtin-echo", func(b *testing.B) {
		for b.Loop() {
			if _, err := e.Run(ctx, "echo hi"); err != nil {
				b.Fatal(err)
			}
		}
	})

	// Interleave the two so that machine noise hits both alike.
	b.Run("external-true-vs-os-exec", func(b *testing.B) {
		var evalTime, execTime, capTime time.Duration
		for b.Loop() {
			t0 := time.Now()
			res, err := e.Run(ctx, "/bin/true")
			if err != nil || res.Exit != 0 {
				b.Fatal(err, res)
			}
			t1 := time.Now()
			if err := exec.Command("/bin/true").Run(); err != nil {
				b.Fatal(err)
			}
			t2 := time.Now()
			var out, errb bytes.Buffer
			cmd := exec.Command("/bin/true")
			cmd.Stdout, cmd.Stderr = &out, &errb
			if err := cmd.Run(); err != nil {
				b.Fatal(err)
			}
			t3 := time.Now()
			evalTime += t1.Sub(t0)
			execTime += t2.Sub(t1)
			capTime += t3.Sub(t2)
		}
		n := float64(b.N)
		b.ReportMetric(float64(evalTime.Nanoseconds())/n, "eval-ns/op")
		b.ReportMetric(float64(execTime.Nanoseconds())/n, "osexec-ns/op")
		b.ReportMetric(float64(capTime.Nanoseconds())/n, "osexec-captured-ns/op")
		b.ReportMetric(float64(evalTime)/float64(execTime), "x-osexec")
		b.ReportMetric(float64(evalTime)/float64(capTime), "x-osexec-captured")
	})
}

// BenchmarkEmitHistory runs 10,000 emits on one channel per round and
// compares the 10th with the 10,000th (the medians of the eleven around
// each, over all rounds): remembering the evaluator's own events must not
// grow with how many came before (target: ≤ 1.2×).
func BenchmarkEmitHistory(b *testing.B) {
	const total, window = 10000, 5
	var early, late []time.Duration
	ctx := context.Background()
	for b.Loop() {
		bus := newFakeBus()
		e, _ := newTestEvaluator(b, nil, Options{Emit: bus.Emit, NextEvent: bus.NextEvent})
		for i := 1; i <= total; i++ {
			t0 := time.Now()
			if res, err := e.Run(ctx, `emit user.bench '{"n":1}'`); err != nil || res.Exit != 0 {
				b.Fatal(err, res)
			}
			d := time.Since(t0)
			switch {
			case i >= 10-window && i <= 10+window:
				early = append(early, d)
			case i >= total-2*window:
				late = append(late, d)
			}
		}
	}
	slices.Sort(early)
	slices.Sort(late)
	e, l := early[len(early)/2], late[len(late)/2]
	b.ReportMetric(float64(e.Nanoseconds()), "10th-ns")
	b.ReportMetric(float64(l.Nanoseconds()), "10000th-ns")
	b.ReportMetric(float64(l)/float64(e), "ratio")
}
