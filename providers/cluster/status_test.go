package cluster

import (
	"bytes"
	"encoding/json"
	"testing"

	"github.com/shoal-sh/shoal/core/wire"
)

// mapStatus is kernel.status's cluster as Status built it while it was a
// map (before wire.ClusterStatus), from the same values: the record
// whose bytes the typed answer keeps.
func mapStatus(s wire.ClusterStatus) map[string]any {
	j := map[string]any{"cursor": s.Journal.Cursor, "last_entry_id": s.Journal.LastEntryID, "behind": s.Journal.Behind,
		"exported": s.Journal.Exported, "last_error": s.Journal.LastError}
	if s.Journal.LastExport != 0 {
		j["last_export"] = s.Journal.LastExport
	}
	st := map[string]any{
		"enabled":    s.Enabled,
		"kernel":     s.Kernel,
		"host":       s.Host,
		"nats":       s.NATS,
		"state":      s.State,
		"connected":  s.Connected,
		"last_error": s.LastError,
		"channels":   map[string]any{"declared": s.Channels.Declared, "followed": s.Channels.Followed},
		"journal":    j,
		"values": map[string]any{"bucket": s.Values.Bucket, "pending_uploads": s.Values.PendingUploads,
			"uploaded": s.Values.Uploaded, "fetched": s.Values.Fetched, "last_error": s.Values.LastError},
	}
	if s.Connected {
		st["server"] = s.Server
	}
	return st
}

// TestStatusBytes: the cluster's status, now a wire.ClusterStatus,
// encodes as the map it replaced, empty, connected with every member
// set, and disconnected (no server) before its first export.
func TestStatusBytes(t *testing.T) {
	filled := wire.ClusterStatus{
		Channels:  wire.ClusterChannels{Declared: []string{"team.>"}, Followed: []string{"team.a", "team.b"}},
		Connected: true, Enabled: true, Host: "h1", Kernel: "k1", LastError: "e", NATS: "nats://***@n1:4222",
		Server: "nats://n1:4222", State: "connected",
		Journal: wire.ClusterExport{Behind: 2, Cursor: 5, Exported: 5, LastEntryID: 7, LastError: "j", LastExport: 1700000000000000000},
		Values:  wire.ClusterValues{Bucket: valuesBucket, Fetched: 3, LastError: "v", PendingUploads: 4, Uploaded: 9},
	}
	down := filled
	down.Connected, down.Server, down.State, down.Journal.LastExport = false, "", "reconnecting", 0
	down.Channels = wire.ClusterChannels{Followed: []string{}}
	for name, s := range map[string]wire.ClusterStatus{"empty": {}, "filled": filled, "down": down} {
		want, err := json.Marshal(mapStatus(s))
		if err != nil {
			t.Fatal(err)
		}
		got, err := json.Marshal(s)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, want) {
			t.Errorf("%s: the typed status changed its bytes:\n%s\n%s", name, want, got)
		}
	}
}
