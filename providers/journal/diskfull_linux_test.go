package journal_test

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/shoal-sh/shoal/core/kernel"
	"github.com/shoal-sh/shoal/core/rpc"
	"github.com/shoal-sh/shoal/internal/testkernel"
	"github.com/shoal-sh/shoal/providers/journal"
	"github.com/shoal-sh/shoal/sdk/client"
)

const diskFullEnv = "SHOAL_JOURNAL_DISKFULL_DIR"

// TestFullDisk: a kernel whose state directory is a 12 MiB tmpfs runs
// executions that fill it. Each is recorded, or refused before it runs
// (JOURNAL_UNAVAILABLE, and its file is not there); none runs without a
// journal row. Once space is freed, executions run again. The tmpfs is
// mounted in a child process with a mount namespace of its own.
func TestFullDisk(t *testing.T) {
	if os.Getenv(diskFullEnv) != "" {
		fullDiskChild(t, os.Getenv(diskFullEnv))
		return
	}
	if os.Geteuid() != 0 {
		t.Skip("mounting a tmpfs needs root")
	}
	dir := testkernel.ShortDir(t)
	cmd := exec.Command(os.Args[0], "-test.run=^TestFullDisk$", "-test.count=1", "-test.v")
	cmd.Env = append(os.Environ(), diskFullEnv+"="+dir)
	cmd.SysProcAttr = &syscall.SysProcAttr{Unshareflags: syscall.CLONE_NEWNS}
	out, err := cmd.CombinedOutput()
	if strings.Contains(string(out), "--- SKIP") {
		t.Skipf("child skipped:\n%s", out)
	}
	if err != nil {
		t.Fatalf("child: %v\n%s", err, out)
	}
	sc := bufio.NewScanner(strings.NewReader(string(out)))
	for sc.Scan() {
		if strings.Contains(sc.Text(), "ran=") {
			t.Log(strings.TrimSpace(sc.Text()))
		}
	}
}

func fullDiskChild(t *testing.T, dir string) {
	if err := syscall.Mount("tmpfs", dir, "tmpfs", 0, "size=12m"); err != nil {
		t.Skipf("mount tmpfs: %v", err)
	}
	defer syscall.Unmount(dir, syscall.MNT_DETACH)
	state := filepath.Join(dir, "s")
	work := filepath.Join(dir, "w")
	os.Mkdir(work, 0o700)
	k := testkernel.Start(t, kernel.Options{StateDir: state})
	c := testkernel.Attach(t, state, client.Options{Workspace: work})
	ctx := context.Background()
	if _, err := c.Exec(ctx, "cd "+work, client.ExecOptions{}); err != nil {
		t.Fatal(err)
	}
	var ran, recorded, refused, failed int
	recordedRun := map[int]bool{}
	for i := range 12 {
		_, err := c.Exec(ctx, fmt.Sprintf("head -c 3000000 /dev/zero > f%d; echo %d", i, i), client.ExecOptions{})
		_, statErr := os.Stat(filepath.Join(work, fmt.Sprintf("f%d", i)))
		didRun := statErr == nil
		if didRun {
			ran++
		}
		if err == nil {
			recorded++
			recordedRun[i] = true
			continue
		}
		switch code := rpc.CodeOf(err); {
		case code == rpc.JournalUnavailable:
			refused++
			if didRun {
				t.Errorf("run %d was refused (%v) but ran", i, err)
			}
		case code == rpc.JournalWriteFailed:
			failed++
		default:
			t.Fatalf("run %d: %v", i, err)
		}
	}
	var rows struct {
		Rows []struct {
			Source string `json:"source"`
		} `json:"rows"`
	}
	if err := c.Call(ctx, "journal.query", map[string]any{"head": "head", "limit": 1000}, &rows); err != nil {
		t.Fatal(err)
	}
	journaled := map[int]bool{}
	for _, r := range rows.Rows {
		var i int
		if _, err := fmt.Sscanf(r.Source, "head -c 3000000 /dev/zero > f%d", &i); err == nil {
			journaled[i] = true
		}
	}
	unrecorded := 0
	for i := range 12 {
		if _, err := os.Stat(filepath.Join(work, fmt.Sprintf("f%d", i))); err == nil && !journaled[i] {
			unrecorded++
		}
		if recordedRun[i] && !journaled[i] {
			t.Errorf("run %d answered ok but has no row", i)
		}
	}
	_, reserveErr := os.Stat(filepath.Join(state, journal.FileName+".reserve"))
	fmt.Printf("ran=%d recorded=%d refused=%d write_failed=%d ran_without_row=%d reserve_used=%v\n",
		ran, recorded, refused, failed, unrecorded, reserveErr != nil)
	if unrecorded != 0 || failed != 0 {
		t.Fatalf("%d executions ran without a journal row (%d answered JOURNAL_WRITE_FAILED)", unrecorded, failed)
	}
	if refused == 0 {
		t.Fatal("the disk never filled: no execution was refused")
	}
	// Freed space makes the journal writable again.
	for i := range 12 {
		os.Remove(filepath.Join(work, fmt.Sprintf("f%d", i)))
	}
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		_, err := c.Exec(ctx, "echo again", client.ExecOptions{})
		if err == nil {
			break
		}
		if rpc.CodeOf(err) != rpc.JournalUnavailable || time.Now().After(deadline) {
			t.Fatalf("after freeing space: %v", err)
		}
	}
	_ = k
}
