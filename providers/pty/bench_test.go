package pty

import (
	"bytes"
	"context"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/charmbracelet/x/vt"
	"github.com/creack/pty"
)

// echoProgram reads lines and writes them back; the terminal's own echo
// is off so what shows is the program's answer, a full round trip.
const echoProgram = "stty -echo; exec cat"

// reportLatency adds p50 and p99 of per-iteration latencies.
func reportLatency(b *testing.B, lat []time.Duration) {
	if len(lat) == 0 {
		return
	}
	slices.Sort(lat)
	b.ReportMetric(float64(lat[len(lat)/2].Nanoseconds()), "p50-ns")
	b.ReportMetric(float64(lat[len(lat)*99/100].Nanoseconds()), "p99-ns")
}

// BenchmarkEcho measures write-to-screen-visible latency: write a line to
// `cat` and wait (on change notifications) until the screen shows it.
// The Raw variant is the baseline: the same round trip on a bare PTY,
// reading bytes until the line comes back, with no emulator.
func BenchmarkEcho(b *testing.B) {
	b.Run("Shoal", func(b *testing.B) {
		m := New()
		defer m.Close()
		ctx := context.Background()
		s, err := m.Open(ctx, alice, OpenOptions{Command: echoProgram, Cols: 80, Rows: 24})
		if err != nil {
			b.Fatal(err)
		}
		// Wait until stty has run, so the echo is off for every line.
		if _, err := m.Write(ctx, alice.Session, s.PTY, Input{Text: "ready\r"}); err != nil {
			b.Fatal(err)
		}
		waitLine(b, m, s.PTY, "ready")
		lat := make([]time.Duration, 0, b.N)
		b.ResetTimer()
		for i := range b.N {
			line := "line-" + strconv.Itoa(i)
			t0 := time.Now()
			if _, err := m.Write(ctx, alice.Session, s.PTY, Input{Text: line + "\r"}); err != nil {
				b.Fatal(err)
			}
			waitLine(b, m, s.PTY, line)
			lat = append(lat, time.Since(t0))
		}
		b.StopTimer()
		reportLatency(b, lat)
	})
	b.Run("Raw", func(b *testing.B) {
		cmd := exec.Command("/bin/sh", "-c", echoProgram)
		f, err := pty.Start(cmd)
		if err != nil {
			b.Fatal(err)
		}
		defer func() {
			_ = cmd.Process.Kill()
			_ = cmd.Wait()
			_ = f.Close()
		}()
		buf := make([]byte, 4096)
		var seen []byte
		readUntil := func(want []byte) {
			for !bytes.Contains(seen, want) {
				n, err := f.Read(buf)
				if err != nil {
					b.Fatal(err)
				}
				seen = append(seen, buf[:n]...)
			}
			seen = seen[:0]
		}
		if _, err := f.WriteString("ready\r"); err != nil {
			b.Fatal(err)
		}
		readUntil([]byte("ready\r\n"))
		lat := make([]time.Duration, 0, b.N)
		b.ResetTimer()
		for i := range b.N {
			line := "line-" + strconv.Itoa(i)
			t0 := time.Now()
			if _, err := f.WriteString(line + "\r"); err != nil {
				b.Fatal(err)
			}
			readUntil([]byte(line + "\r\n"))
			lat = append(lat, time.Since(t0))
		}
		b.StopTimer()
		reportLatency(b, lat)
	})
}

// waitLine waits until a row of the screen is exactly line.
func waitLine(b *testing.B, m *Manager, id, line string) {
	ctx, cancel := context.WithTimeout(context.Background(), deadline)
	defer cancel()
	_, err := m.wait(ctx, alice.Session, id, "show "+line, func(s Screen, _ bool) bool {
		return slices.Contains(s.Lines, line)
	})
	if err != nil {
		b.Fatal(err)
	}
}

// fullScreen is a 120×40 emulator with every row filled.
func fullScreen() *vt.Emulator {
	e := vt.NewEmulator(DefaultCols, DefaultRows)
	go func() { // drain replies, as the answer goroutine does
		buf := make([]byte, 1024)
		for {
			if _, err := e.Read(buf); err != nil {
				return
			}
		}
	}()
	var b strings.Builder
	for y := range DefaultRows {
		b.WriteString("\x1b[" + strconv.Itoa(y+1) + ";1H")
		for x := 0; x < DefaultCols-1; x++ {
			b.WriteByte(byte('a' + (x+y)%26))
		}
	}
	_, _ = e.Write([]byte(b.String()))
	return e
}

// BenchmarkScreenRead measures answering a read of a full 120×40 screen:
// Unchanged hits the per-change cache, Changed renders every cell. The
// baseline is the emulator's own String rendering of the same screen.
func BenchmarkScreenRead(b *testing.B) {
	m := New()
	defer m.Close()
	s, err := m.Open(context.Background(), alice, OpenOptions{Command: "sleep 1000"})
	if err != nil {
		b.Fatal(err)
	}
	m.mu.Lock()
	t := m.terms[mustIDB(b, s.PTY)]
	m.mu.Unlock()
	emu := fullScreen()
	t.mu.Lock()
	old := t.emu
	t.emu = emu
	t.change++
	t.mu.Unlock()
	defer func() {
		t.mu.Lock()
		t.emu = old
		t.mu.Unlock()
		_ = emu.InputPipe().(interface{ Close() error }).Close()
	}()

	b.Run("Unchanged", func(b *testing.B) {
		for range b.N {
			if _, err := m.Screen(alice.Session, s.PTY, 0); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("Changed", func(b *testing.B) {
		for range b.N {
			t.mu.Lock()
			t.change++
			t.mu.Unlock()
			got, err := m.Screen(alice.Session, s.PTY, 0)
			if err != nil {
				b.Fatal(err)
			}
			if len(got.Lines[0]) != DefaultCols-1 {
				b.Fatalf("row 0 = %q", got.Lines[0])
			}
		}
	})
	b.Run("BaselineEmulatorString", func(b *testing.B) {
		for range b.N {
			t.mu.Lock()
			_ = strings.Split(emu.String(), "\n")
			t.mu.Unlock()
		}
	})
}

func mustIDB(b *testing.B, ref string) uint64 {
	n, ok := ParseID(ref)
	if !ok {
		b.Fatalf("bad id %q", ref)
	}
	return n
}

// BenchmarkEchoRatio is BenchmarkEcho with the two round trips
// interleaved in one loop, so machine noise hits both alike, reporting
// the ratio of their medians (target: Shoal ≤ 3× raw).
func BenchmarkEchoRatio(b *testing.B) {
	m := New()
	defer m.Close()
	ctx := context.Background()
	s, err := m.Open(ctx, alice, OpenOptions{Command: echoProgram, Cols: 80, Rows: 24})
	if err != nil {
		b.Fatal(err)
	}
	if _, err := m.Write(ctx, alice.Session, s.PTY, Input{Text: "ready\r"}); err != nil {
		b.Fatal(err)
	}
	waitLine(b, m, s.PTY, "ready")
	cmd := exec.Command("/bin/sh", "-c", echoProgram)
	f, err := pty.Start(cmd)
	if err != nil {
		b.Fatal(err)
	}
	defer func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		_ = f.Close()
	}()
	buf := make([]byte, 4096)
	var seen []byte
	readUntil := func(want []byte) {
		for !bytes.Contains(seen, want) {
			n, err := f.Read(buf)
			if err != nil {
				b.Fatal(err)
			}
			seen = append(seen, buf[:n]...)
		}
		seen = seen[:0]
	}
	if _, err := f.WriteString("ready\r"); err != nil {
		b.Fatal(err)
	}
	readUntil([]byte("ready\r\n"))
	var shoal, raw []time.Duration
	for i := 0; b.Loop(); i++ {
		line := "line-" + strconv.Itoa(i)
		t0 := time.Now()
		if _, err := m.Write(ctx, alice.Session, s.PTY, Input{Text: line + "\r"}); err != nil {
			b.Fatal(err)
		}
		waitLine(b, m, s.PTY, line)
		shoal = append(shoal, time.Since(t0))
		t0 = time.Now()
		if _, err := f.WriteString(line + "\r"); err != nil {
			b.Fatal(err)
		}
		readUntil([]byte(line + "\r\n"))
		raw = append(raw, time.Since(t0))
	}
	slices.Sort(shoal)
	slices.Sort(raw)
	sp, rp := shoal[len(shoal)/2], raw[len(raw)/2]
	b.ReportMetric(float64(sp.Nanoseconds()), "shoal-p50-ns")
	b.ReportMetric(float64(rp.Nanoseconds()), "raw-p50-ns")
	b.ReportMetric(float64(sp)/float64(rp), "ratio")
}
