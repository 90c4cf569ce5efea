package journal

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"testing"

	"github.com/shoal-sh/shoal/core"
	"github.com/shoal-sh/shoal/core/bus"
	"github.com/shoal-sh/shoal/core/rpc"
	"github.com/shoal-sh/shoal/core/uri"
)

func provision(t *testing.T, h *core.Host) *Provider {
	t.Helper()
	p := New()
	if err := p.Provision(h); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close() })
	return p
}

func TestQueryFromURI(t *testing.T) {
	yes, no := true, false
	tests := []struct {
		uri  string
		want Query
	}{
		{"shoal://journal", Query{}},
		{"shoal://journal?principal=agent%3Areviewer&ok=false&head=git&limit=25",
			Query{Principal: "agent:reviewer", OK: &no, Head: "git", Limit: 25}},
		{"shoal://journal?since=1750000000000000000&until=1750000300000000000",
			Query{Since: 1750000000000000000, Until: 1750000300000000000}},
		{"shoal://journal?effects=fs.write,proc.spawn", Query{Effects: []string{"fs.write", "proc.spawn"}}},
		{"shoal://journal?effects=net&effects=pty,", Query{Effects: []string{"net", "pty"}}},
		{"shoal://journal?ok=1", Query{OK: &yes}},
		// Values that do not parse are dropped, not errors.
		{"shoal://journal?ok=maybe&since=yesterday&limit=lots", Query{}},
		{"shoal://journal?limit=-4", Query{}},
		{"shoal://journal?limit=99999", Query{Limit: MaxLimit}},
	}
	for _, tt := range tests {
		u, err := uri.Parse(tt.uri)
		if err != nil {
			t.Fatalf("%s: %v", tt.uri, err)
		}
		got := QueryFromURI(u)
		if fmt.Sprint(got.Principal, got.Head, deref(got.OK), got.Since, got.Until, got.Effects, got.Limit) !=
			fmt.Sprint(tt.want.Principal, tt.want.Head, deref(tt.want.OK), tt.want.Since, tt.want.Until, tt.want.Effects, tt.want.Limit) {
			t.Errorf("%s: got %+v, want %+v", tt.uri, got, tt.want)
		}
	}
}

func deref(b *bool) string {
	if b == nil {
		return "nil"
	}
	return fmt.Sprint(*b)
}

func TestQueryFromParams(t *testing.T) {
	no := false
	good := []struct {
		params string
		want   Query
	}{
		{``, Query{}},
		{`null`, Query{}},
		{`{}`, Query{}},
		{`{"principal":"agent:a","head":"git","ok":false,"limit":25}`, Query{Principal: "agent:a", Head: "git", OK: &no, Limit: 25}},
		{`{"since":1750000000000000001,"until":"1750000300000000000"}`, Query{Since: 1750000000000000001, Until: 1750000300000000000}},
		{`{"effects":["fs.write","net"]}`, Query{Effects: []string{"fs.write", "net"}}},
		{`{"effects":"fs.write,net"}`, Query{Effects: []string{"fs.write", "net"}}},
		{`{"limit":5000}`, Query{Limit: MaxLimit}},
	}
	for _, tt := range good {
		got, err := QueryFromParams(json.RawMessage(tt.params))
		if err != nil {
			t.Fatalf("%s: %v", tt.params, err)
		}
		if fmt.Sprint(got.Principal, got.Head, deref(got.OK), got.Since, got.Until, got.Effects, got.Limit) !=
			fmt.Sprint(tt.want.Principal, tt.want.Head, deref(tt.want.OK), tt.want.Since, tt.want.Until, tt.want.Effects, tt.want.Limit) {
			t.Errorf("%s: got %+v, want %+v", tt.params, got, tt.want)
		}
	}
	for _, bad := range []string{
		`[]`, `"x"`, `{"ok":"yes"}`, `{"since":"yesterday"}`, `{"since":1.5}`, `{"limit":-1}`,
		`{"effects":3}`, `{"effects":[1]}`, `{"principal":7}`, `{"prinicpal":"agent:a"}`,
	} {
		if _, err := QueryFromParams(json.RawMessage(bad)); rpc.CodeOf(err) != rpc.InvalidParams {
			t.Errorf("%s: got %v, want INVALID_PARAMS", bad, err)
		}
	}
}

func TestProviderReadAndMethod(t *testing.T) {
	h := &core.Host{StateDir: t.TempDir()}
	p := provision(t, h)
	j, ok := core.Get(h, core.ServiceJournal)
	if !ok {
		t.Fatal("no journal service")
	}
	for i := range 6 {
		if _, err := j.Append(context.Background(), core.JournalRow{
			Principal: []string{"agent:a", "agent:b"}[i%2], Head: "git", OK: i%3 != 0,
			Effects: []string{"proc.spawn"}, TS: int64(1000 + i),
		}); err != nil {
			t.Fatal(err)
		}
	}
	u, _ := uri.Parse("shoal://journal?principal=agent%3Ab&ok=true&limit=bogus")
	c, err := p.Read(context.Background(), &core.Caller{}, u)
	if err != nil {
		t.Fatal(err)
	}
	rows := c.Record.(QueryResult).Rows
	if got := ids(rows); !slices.Equal(got, []uint64{6, 2}) {
		t.Fatalf("read rows %v", got)
	}
	res, err := p.Methods()["journal.query"](context.Background(), &core.Caller{}, json.RawMessage(`{"principal":"agent:b","ok":true,"since":1002}`))
	if err != nil {
		t.Fatal(err)
	}
	if got := ids(res.(QueryResult).Rows); !slices.Equal(got, []uint64{6}) {
		t.Fatalf("journal.query rows %v", got)
	}
	if _, err := p.Methods()["journal.query"](context.Background(), &core.Caller{}, json.RawMessage(`{"ok":"true"}`)); rpc.CodeOf(err) != rpc.InvalidParams {
		t.Fatalf("bad params: %v", err)
	}
	u, _ = uri.Parse("shoal://journal/7")
	if _, err := p.Read(context.Background(), &core.Caller{}, u); rpc.CodeOf(err) != rpc.NotFound {
		t.Fatalf("shoal://journal/7: %v", err)
	}
	list, _ := p.List(context.Background(), &core.Caller{})
	if len(list) != 1 || list[0].URI != "shoal://journal" || list[0].MimeType != "application/json" {
		t.Fatalf("List = %+v", list)
	}
	if tpl := p.Templates(); len(tpl) != 1 || tpl[0].URITemplate != "shoal://journal{?principal,ok,head,since,until,effects,limit}" {
		t.Fatalf("Templates = %+v", tpl)
	}
	if data, _ := json.Marshal(c.Record); !json.Valid(data) {
		t.Fatal("record does not marshal")
	}
}

// TestWithBus runs the journal behind the real bus: live events, reads
// older than the ring rebuilt from the journal, and seqs continuing after a
// restart with a fresh bus.
func TestWithBus(t *testing.T) {
	dir := t.TempDir()
	const ring = 8
	b := bus.New(bus.Options{RingSize: ring})
	h := &core.Host{StateDir: dir, Bus: b}
	p := New()
	if err := p.Provision(h); err != nil {
		t.Fatal(err)
	}
	rows := make([]core.JournalRow, 30)
	for i := range rows {
		rows[i] = core.JournalRow{Head: "echo", Transcript: i%2 == 0, Ref: fmt.Sprintf("out:%d", i+1)}
	}
	for _, r := range rows {
		if _, err := p.Journal().Append(context.Background(), r); err != nil {
			t.Fatal(err)
		}
	}
	since := uint64(2)
	res, err := b.Read(ChannelJournal, &since, 1000)
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Events) != 27 || res.Events[0].Seq != 3 || res.NextSeq != 30 || res.Epoch != p.Journal().Epoch() || res.Truncated {
		t.Fatalf("journal read: %d events from seq %d, next %d, epoch %s, truncated %v",
			len(res.Events), res.Events[0].Seq, res.NextSeq, res.Epoch, res.Truncated)
	}
	for i, ev := range res.Events {
		var pl journalPayload
		if err := json.Unmarshal(ev.Payload, &pl); err != nil || ev.Seq != uint64(3+i) || pl.EntryID != ev.Seq+1 {
			t.Fatalf("event %d: %+v (%v)", i, ev, err)
		}
	}
	tr, err := b.Read(ChannelTranscript, nil, 1000)
	if err != nil || len(tr.Events) != 15 || tr.Events[14].Seq != 14 {
		t.Fatalf("transcript read: %d events, %v", len(tr.Events), err)
	}
	p.Close()
	b.Close()

	b2 := bus.New(bus.Options{RingSize: ring})
	defer b2.Close()
	p2 := provision(t, &core.Host{StateDir: dir, Bus: b2})
	if _, err := p2.Journal().Append(context.Background(), core.JournalRow{Head: "after", Transcript: true}); err != nil {
		t.Fatal(err)
	}
	for ch, want := range map[string]uint64{ChannelJournal: 30, ChannelTranscript: 15} {
		res, err := b2.Read(ch, nil, 3)
		if err != nil {
			t.Fatal(err)
		}
		last := res.Events[len(res.Events)-1]
		if last.Seq != want || res.NextSeq != want+1 || *res.OldestSeq != 0 {
			t.Fatalf("%s after restart: last seq %d, next %d, oldest %d; want last %d", ch, last.Seq, res.NextSeq, *res.OldestSeq, want)
		}
	}
}
