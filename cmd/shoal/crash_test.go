package main

import (
	"context"
	"fmt"
	"github.com/shoal-sh/shoal/internal/testkernel"
	"math/rand/v2"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/shoal-sh/shoal/sdk/client"
)

// startKernelProc runs `shoal kernel` (this test binary, installed on PATH
// by testscript.Main) as a child in its own process group.
func startKernelProc(t *testing.T, dir string) (*exec.Cmd, <-chan struct{}) {
	t.Helper()
	bin, err := exec.LookPath("shoal")
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, "kernel", "--state-dir", dir)
	var log strings.Builder
	cmd.Stderr = &log
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{}) // closed once the kernel has exited
	go func() { cmd.Wait(); close(done) }()
	t.Cleanup(func() {
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		select {
		case <-done:
		case <-time.After(10 * time.Second):
		}
	})
	sock := filepath.Join(dir, "kernel.sock")
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		if c, err := net.Dial("unix", sock); err == nil {
			c.Close()
			return cmd, done
		}
		select {
		case <-done:
			t.Fatalf("kernel exited: %v\n%s", cmd.ProcessState, log.String())
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("kernel never answered:\n%s", log.String())
		}
	}
}

// TestKillNineKernel kills the kernel with SIGKILL while executions are in
// flight, several times over. After each restart the journal opens, every
// execution whose reply arrived is in it, and the journal channel's seqs
// continue with no reuse and no gap.
func TestKillNineKernel(t *testing.T) {
	if testing.Short() {
		t.Skip("kills and restarts a kernel several times")
	}
	dir, err := os.MkdirTemp(testkernel.StateParent(), "shc")
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(dir)
	const rounds = 4
	var acked []string
	for round := 0; round < rounds; round++ {
		cmd, done := startKernelProc(t, dir)
		c, err := client.Dial(context.Background(), client.Options{StateDir: dir, Principal: "agent:crash"})
		if err != nil {
			t.Fatal(err)
		}
		var mu sync.Mutex
		var wg sync.WaitGroup
		for w := 0; w < 4; w++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := 0; ; i++ {
					src := fmt.Sprintf("echo round-%d-worker-%d-%d", round, w, i)
					if _, err := c.Exec(context.Background(), src, client.ExecOptions{}); err != nil {
						return // the kernel died under us
					}
					mu.Lock()
					acked = append(acked, src)
					mu.Unlock()
				}
			}()
		}
		time.Sleep(time.Duration(100+rand.IntN(300)) * time.Millisecond)
		if err := syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL); err != nil {
			t.Fatal(err)
		}
		<-done
		wg.Wait()
		c.Close()
	}
	if len(acked) == 0 {
		t.Fatal("no execution was acknowledged")
	}
	startKernelProc(t, dir)
	c, err := client.Dial(context.Background(), client.Options{StateDir: dir, Principal: "agent:check"})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	seen := map[string]bool{}
	for _, r := range queryAll(t, c, map[string]any{"principal": "agent:crash"}) {
		seen[r.Source] = true
	}
	missing := 0
	for _, src := range acked {
		if !seen[src] {
			missing++
			if missing < 5 {
				t.Errorf("acknowledged execution %q is not in the journal", src)
			}
		}
	}
	if missing > 0 {
		t.Fatalf("%d of %d acknowledged executions missing", missing, len(acked))
	}
	// The journal channel: seqs 0..n-1, each once, across every kernel
	// lifetime. A read keeps the newest 1,024 events, so the tail is
	// checked event by event, and the whole channel by count: one seq per
	// journal row, next_seq equal to the number of rows (a reused seq
	// leaves it short, a gap makes it long).
	page, err := c.Events(context.Background(), "journal", nil, 1024)
	if err != nil {
		t.Fatal(err)
	}
	next := page.NextSeq
	for i, ev := range page.Events {
		if want := next - uint64(len(page.Events)) + uint64(i); ev.Seq != want {
			t.Fatalf("journal seq %d where %d was due (reuse or gap)", ev.Seq, want)
		}
	}
	all := queryAll(t, c, map[string]any{})
	if uint64(len(all)) != next {
		t.Fatalf("the journal holds %d rows but its channel's next seq is %d (reuse or gap)", len(all), next)
	}
	if next < uint64(len(acked)) {
		t.Errorf("journal channel has %d events for %d acknowledged executions", next, len(acked))
	}
	t.Logf("%d acknowledged executions over %d kills; journal channel seqs 0..%d, one per row", len(acked), rounds, next-1)
}

// TestCorruptJournalRefused: a journal file that is not a journal stops
// the kernel with a message naming it, instead of starting empty.
func TestCorruptJournalRefused(t *testing.T) {
	dir, err := os.MkdirTemp(testkernel.StateParent(), "shj")
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(dir)
	if err := os.WriteFile(filepath.Join(dir, "journal.db"), []byte(strings.Repeat("not a bolt file ", 512)), 0o600); err != nil {
		t.Fatal(err)
	}
	bin, err := exec.LookPath("shoal")
	if err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(bin, "kernel", "--state-dir", dir).CombinedOutput()
	if err == nil {
		t.Fatal("kernel started on a corrupt journal")
	}
	if !strings.Contains(string(out), "journal.db") {
		t.Errorf("error does not name the journal file:\n%s", out)
	}
}

type journalRow struct {
	EntryID uint64 `json:"entry_id"`
	TS      int64  `json:"ts"`
	Source  string `json:"source"`
}

// queryAll pages through journal.query (at most 1,000 rows a query, newest
// first): each page ends before the oldest ts of the one before; a ts
// shared across the boundary is asked for again, and entry ids dedupe it.
func queryAll(t *testing.T, c *client.Client, params map[string]any) []journalRow {
	t.Helper()
	var out []journalRow
	ids := map[uint64]bool{}
	params["limit"] = 1000
	for {
		var rows struct {
			Rows []journalRow `json:"rows"`
		}
		if err := c.Call(context.Background(), "journal.query", params, &rows); err != nil {
			t.Fatal(err)
		}
		fresh, oldest := 0, int64(0)
		for _, r := range rows.Rows {
			if !ids[r.EntryID] {
				ids[r.EntryID] = true
				out = append(out, r)
				fresh++
			}
			if oldest == 0 || r.TS < oldest {
				oldest = r.TS
			}
		}
		if len(rows.Rows) < 1000 || fresh == 0 {
			return out
		}
		params["until"] = oldest + 1
	}
}
