package journal

import (
	"context"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/shoal-sh/shoal/core"
	"github.com/shoal-sh/shoal/core/rpc"
)

// TestWritable: a journal that cannot write says so before anything
// runs: after a failed commit (and its retry in the reserve's space),
// and once closed. The reserve file exists while all is well.
func TestWritable(t *testing.T) {
	j := openJournal(t, "", Options{NoSync: true})
	if err := j.Writable(); err != nil {
		t.Fatalf("fresh journal: %v", err)
	}
	if fi, err := os.Stat(j.reservePath()); err != nil || fi.Size() != DefaultReserveBytes {
		t.Fatalf("reserve: %v %v", fi, err)
	}
	// Make every commit fail: a closed bbolt DB refuses transactions.
	j.db.Close()
	_, err := j.Append(context.Background(), core.JournalRow{Session: "s", Principal: "agent:a", Head: "ls", Source: "ls"})
	if err == nil {
		t.Fatal("append on a closed database succeeded")
	}
	if _, err := os.Stat(j.reservePath()); !os.IsNotExist(err) {
		t.Fatalf("the reserve was not given up for the retry: %v", err)
	}
	j.health.mu.Lock()
	j.health.checked = time.Time{}
	j.health.mu.Unlock()
	err = j.Writable()
	if rpc.CodeOf(err) != rpc.JournalUnavailable || !strings.Contains(err.Error(), "nothing was run") {
		t.Fatalf("after a failed commit: %v", err)
	}
	// Reopened underneath, the probe finds it writable again.
	db2, err := openBolt(j.path, writeOptions(true))
	if err != nil {
		t.Fatal(err)
	}
	j.db = db2
	j.health.mu.Lock()
	j.health.checked = time.Time{}
	j.health.mu.Unlock()
	if err := j.Writable(); err != nil {
		t.Fatalf("after the cause went away: %v", err)
	}
	if _, err := os.Stat(j.reservePath()); err != nil {
		t.Fatalf("the reserve was not put back: %v", err)
	}
	j.Close()
	if err := j.Writable(); rpc.CodeOf(err) != rpc.JournalUnavailable {
		t.Fatalf("closed journal: %v", err)
	}
}
