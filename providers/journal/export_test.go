package journal

import (
	"context"
	"encoding/json"
	"slices"
	"testing"

	"github.com/shoal-sh/shoal/core"
	"github.com/shoal-sh/shoal/core/rpc"
	"github.com/shoal-sh/shoal/core/uri"
)

// The export cursor survives a reopen, and RowsAfter pages from it in
// entry_id order with the full row (source included).
func TestExportCursor(t *testing.T) {
	path := t.TempDir() + "/" + FileName
	j := openJournal(t, path, Options{NoSync: true})
	for i := range 5 {
		appendRow(t, j, core.JournalRow{Principal: "agent:a", Head: "echo", Source: "echo " + string(rune('a'+i))})
	}
	rows, err := j.RowsAfter(1, 3)
	if err != nil {
		t.Fatal(err)
	}
	if got := ids(rows); !slices.Equal(got, []uint64{2, 3, 4}) || rows[0].Source != "echo b" {
		t.Fatalf("RowsAfter(1, 3) = %v", rows)
	}
	if rows, _ := j.RowsAfter(5, 10); len(rows) != 0 {
		t.Fatalf("past the end: %v", rows)
	}
	if c, err := j.ExportCursor("cluster"); err != nil || c != 0 {
		t.Fatalf("fresh cursor %d %v", c, err)
	}
	if err := j.SetExportCursor("cluster", 4); err != nil {
		t.Fatal(err)
	}
	j.Close()
	j = openJournal(t, path, Options{NoSync: true})
	if c, err := j.ExportCursor("cluster"); err != nil || c != 4 {
		t.Fatalf("cursor after reopen %d %v", c, err)
	}
	if last, _ := j.LastEntryID(); last != 5 {
		t.Fatalf("last entry id %d", last)
	}
}

type fakeCluster struct{ got Query }

func (f *fakeCluster) QueryCluster(_ context.Context, q Query) (ClusterResult, error) {
	f.got = q
	return ClusterResult{Scope: "cluster", Rows: []ClusterRow{{Kernel: "k1"}}, Complete: true}, nil
}

// scope=cluster goes to the cluster service with the same filters; without
// one it is UNAVAILABLE; an unknown scope is INVALID_PARAMS.
func TestScope(t *testing.T) {
	h := &core.Host{StateDir: t.TempDir()}
	p := provision(t, h)
	query := p.Methods()["journal.query"]
	ctx := context.Background()
	if _, err := query(ctx, &core.Caller{}, json.RawMessage(`{"scope":"cluster"}`)); rpc.CodeOf(err) != rpc.Unavailable {
		t.Fatalf("no cluster: %v", err)
	}
	if _, err := query(ctx, &core.Caller{}, json.RawMessage(`{"scope":"galaxy"}`)); rpc.CodeOf(err) != rpc.InvalidParams {
		t.Fatalf("unknown scope: %v", err)
	}
	if _, err := query(ctx, &core.Caller{}, json.RawMessage(`{"scope":"local","head":"x"}`)); err != nil {
		t.Fatalf("local scope: %v", err)
	}
	f := &fakeCluster{}
	p.cluster = f
	res, err := query(ctx, &core.Caller{}, json.RawMessage(`{"scope":"cluster","principal":"agent:a","limit":5}`))
	if err != nil {
		t.Fatal(err)
	}
	if r := res.(ClusterResult); len(r.Rows) != 1 || f.got.Principal != "agent:a" || f.got.Limit != 5 {
		t.Fatalf("cluster query: %+v, filters %+v", r, f.got)
	}
	u, _ := uri.Parse("shoal://journal?scope=cluster&head=git")
	c, err := p.Read(ctx, &core.Caller{}, u)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := c.Record.(ClusterResult); !ok || f.got.Head != "git" {
		t.Fatalf("URI read: %T %+v", c.Record, f.got)
	}
}
