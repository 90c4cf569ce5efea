package main

import (
	"bytes"
	"strings"
	"testing"

	"github.com/shoal-sh/shoal/core/wire"
)

// TestPrintCluster: shoal status's cluster lines come from the typed
// status, and say "cluster off" without one.
func TestPrintCluster(t *testing.T) {
	var b bytes.Buffer
	printCluster(&b, nil)
	if want := "cluster off (set nats under [cluster] in config.toml, or shoal kernel --nats URL)\n"; b.String() != want {
		t.Errorf("no cluster: %q, want %q", b.String(), want)
	}
	cs := &wire.ClusterStatus{Enabled: true, Kernel: "k1", Host: "h1", NATS: "nats://n1:4222", State: "reconnecting",
		LastError: "connection refused",
		Channels:  wire.ClusterChannels{Declared: []string{"team.>", "ops.*"}, Followed: []string{"team.a"}},
		Journal:   wire.ClusterExport{Cursor: 5, LastEntryID: 7, Behind: 2},
		Values:    wire.ClusterValues{Uploaded: 9, Fetched: 3, PendingUploads: 4}}
	b.Reset()
	printCluster(&b, cs)
	want := "cluster reconnecting as kernel k1 on h1 (nats://n1:4222): connection refused\n" +
		"cluster journal exported to row 5 of 7 (2 behind)\n" +
		"cluster values 9 uploaded, 3 fetched, 4 waiting to upload\n" +
		"shared channels declared team.>,ops.*, followed team.a\n"
	if b.String() != want {
		t.Errorf("cluster lines:\n%s\nwant:\n%s", b.String(), want)
	}
	cs.Connected, cs.State = true, "connected"
	b.Reset()
	printCluster(&b, cs)
	if got := b.String(); !strings.HasPrefix(got, "cluster connected as kernel k1 on h1 (nats://n1:4222)\n") {
		t.Errorf("a connected cluster shows its last error: %q", got)
	}
}
