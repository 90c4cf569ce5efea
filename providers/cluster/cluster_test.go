package cluster_test

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/shoal-sh/shoal/core"
	"github.com/shoal-sh/shoal/core/kernel"
	"github.com/shoal-sh/shoal/core/rpc"
	"github.com/shoal-sh/shoal/internal/boot"
	"github.com/shoal-sh/shoal/internal/testkernel"
	"github.com/shoal-sh/shoal/providers/cluster"
	"github.com/shoal-sh/shoal/providers/journal"
	"github.com/shoal-sh/shoal/sdk/client"
)

// natsServer is an embedded nats-server with JetStream on 127.0.0.1.
type natsServer struct {
	t     testing.TB
	store string
	port  int
	s     *server.Server
}

// startNATS starts a server on a port of its choosing, its JetStream store
// in a temp dir; it is shut down at cleanup.
func startNATS(t testing.TB) *natsServer {
	t.Helper()
	n := &natsServer{t: t, store: t.TempDir(), port: -1}
	n.start()
	t.Cleanup(n.stop)
	return n
}

func (n *natsServer) start() {
	n.t.Helper()
	s, err := server.NewServer(&server.Options{Host: "127.0.0.1", Port: n.port, JetStream: true, StoreDir: n.store,
		NoLog: true, NoSigs: true})
	if err != nil {
		n.t.Fatal(err)
	}
	s.Start()
	if !s.ReadyForConnections(20 * time.Second) {
		n.t.Fatal("nats-server did not start")
	}
	n.s = s
	n.port = s.Addr().(*net.TCPAddr).Port // a restart keeps the port
}

func (n *natsServer) stop() {
	if n.s != nil {
		n.s.Shutdown()
		n.s.WaitForShutdown()
		n.s = nil
	}
}

func (n *natsServer) url() string { return fmt.Sprintf("nats://127.0.0.1:%d", n.port) }

// member is one kernel of the test cluster.
type member struct {
	k    *kernel.Kernel
	c    *client.Client
	cl   *cluster.Cluster
	dir  string
	stop func()
}

const sharedConfig = `
[[events.channel]]
name = "user.ci.*"
shared = true
`

// startMember runs a kernel with its own state dir, joined to url.
func startMember(t testing.TB, name, url, config string, o client.Options) *member {
	t.Helper()
	cfg := filepath.Join(t.TempDir(), "config.toml")
	if !strings.Contains(config, "[cluster]") { // else it is the config's last table
		config += "\n[cluster]"
	}
	if err := os.WriteFile(cfg, []byte(config+"\nname = \""+name+"\"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	return startAt(t, testkernel.ShortDir(t), cfg, "agent:"+name, url, o)
}

// startAt runs a kernel on dir with the config file cfg.
func startAt(t testing.TB, dir, cfg, principal, url string, o client.Options) *member {
	t.Helper()
	k, err := boot.NewKernel(kernel.Options{StateDir: dir, ConfigPath: cfg, NATS: url})
	if err != nil {
		t.Fatal(err)
	}
	stop := testkernel.Serve(t, k)
	svc, _ := core.Get(k.Host(), core.ServiceCluster)
	cl, ok := svc.(*cluster.Cluster)
	if !ok {
		t.Fatalf("the cluster service is a %T", svc)
	}
	if o.Principal == "" {
		o.Principal = principal
	}
	c := testkernel.Attach(t, dir, o)
	return &member{k: k, c: c, cl: cl, dir: dir, stop: func() { c.Close(); stop() }}
}

func ctx(t testing.TB) context.Context {
	c, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	t.Cleanup(cancel)
	return c
}

// waitFor polls cond until it holds or a minute passes (no timing is
// asserted; the minute only keeps a broken test from hanging).
func waitFor(t testing.TB, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(time.Minute); !cond(); time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("gave up waiting for %s", what)
		}
	}
}

func seqsOf(evs []client.Event) []uint64 {
	out := make([]uint64, len(evs))
	for i, e := range evs {
		out[i] = e.Seq
	}
	return out
}

// Three kernels, one NATS server: a shared channel's events have the same
// seqs everywhere, reach subscribers on every kernel, values and the
// journal are shared, and local channels stay local.
func TestThreeKernels(t *testing.T) {
	n := startNATS(t)
	var mu sync.Mutex
	var onC []client.Event
	a := startMember(t, "a", n.url(), sharedConfig, client.Options{})
	b := startMember(t, "b", n.url(), sharedConfig, client.Options{})
	cm := startMember(t, "c", n.url(), sharedConfig, client.Options{OnEvent: func(e client.Event) {
		mu.Lock()
		onC = append(onC, e)
		mu.Unlock()
	}})
	x := ctx(t)

	// A subscriber on C, before anything is published.
	if _, err := cm.c.Subscribe(x, "user.ci.build"); err != nil {
		t.Fatal(err)
	}
	// B reads once before the publishes, so it follows the channel live.
	if p, err := b.c.Events(x, "user.ci.build", nil, 0); err != nil || len(p.Events) != 0 || p.NextSeq != 0 {
		t.Fatalf("B's first read: %+v %v", p, err)
	}
	for i := range 5 {
		ev, err := a.c.Publish(x, "user.ci.build", map[string]int{"n": i})
		if err != nil {
			t.Fatal(err)
		}
		if ev.Seq != uint64(i) {
			t.Fatalf("publish %d on A: seq %d", i, ev.Seq)
		}
	}
	// A's own read right after its publish sees every event.
	pa, err := a.c.Events(x, "user.ci.build", nil, 0)
	if err != nil || !slices.Equal(seqsOf(pa.Events), []uint64{0, 1, 2, 3, 4}) {
		t.Fatalf("read on A: %+v %v", pa, err)
	}
	// B (live) and C (subscribed) see the same seqs and payloads.
	for _, m := range []*member{b, cm} {
		var p *client.Page
		waitFor(t, "the events on another kernel", func() bool {
			p, err = m.c.Events(x, "user.ci.build", nil, 0)
			return err == nil && len(p.Events) == 5
		})
		for i, ev := range p.Events {
			if ev.Seq != pa.Events[i].Seq || string(ev.Payload) != string(pa.Events[i].Payload) || ev.TS != pa.Events[i].TS {
				t.Fatalf("event %d differs: %+v vs %+v", i, ev, pa.Events[i])
			}
		}
		if *p.LatestSeq != 4 || *p.OldestSeq != 0 || p.Epoch != pa.Epoch {
			t.Fatalf("page meta: %+v (A: %+v)", p, pa)
		}
	}
	// Cursor reads on B: since is exclusive, the newest tail kept.
	p, err := b.c.Events(x, "user.ci.build", ptr(uint64(1)), 2)
	if err != nil || !slices.Equal(seqsOf(p.Events), []uint64{3, 4}) {
		t.Fatalf("cursor read on B: %+v %v", p, err)
	}
	waitFor(t, "C's subscriber", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(onC) >= 5
	})
	mu.Lock()
	if got := seqsOf(onC); !slices.Equal(got, []uint64{0, 1, 2, 3, 4}) || onC[0].Channel != "user.ci.build" {
		t.Fatalf("C's subscriber got %v", onC)
	}
	mu.Unlock()
	// A kernel that joins the channel late (its first use is a cursor
	// read) rebuilds it from the stream with the same seqs.
	p, err = cm.c.Events(x, "user.ci.late", nil, 0)
	if err != nil || len(p.Events) != 0 {
		t.Fatal(p, err)
	}
	// Publishing from B reaches A and C with the next seq.
	if ev, err := b.c.Publish(x, "user.ci.build", "from b"); err != nil || ev.Seq != 5 {
		t.Fatalf("publish on B: %+v %v", ev, err)
	}
	// An undeclared channel is local: the same name on two kernels is two
	// channels.
	if ev, err := a.c.Publish(x, "user.local", 1); err != nil || ev.Seq != 0 {
		t.Fatal(ev, err)
	}
	if p, err := b.c.Events(x, "user.local", nil, 0); err != nil || len(p.Events) != 0 {
		t.Fatalf("a local channel leaked: %+v %v", p, err)
	}

	// A value made on A resolves on B.
	var put struct {
		Ref  string `json:"ref"`
		Hash string `json:"hash"`
	}
	text := strings.Repeat("made on a\n", 1000)
	if err := a.c.Call(x, "blob.put", map[string]string{"text": text}, &put); err != nil {
		t.Fatal(err)
	}
	if err := a.cl.Sync(x); err != nil {
		t.Fatal(err)
	}
	var got struct {
		B64 string `json:"b64"`
	}
	if err := b.c.Call(x, "blob.get", map[string]string{"hash": put.Ref}, &got); err != nil {
		t.Fatal(err)
	}
	if data, _ := base64.StdEncoding.DecodeString(got.B64); string(data) != text {
		t.Fatalf("blob on B: %d bytes", len(data))
	}
	// C never had it either; shoal://val fetches it there too.
	r, err := cm.c.Read(x, "shoal://val/"+put.Hash+"?format=raw")
	if err != nil || !strings.Contains(string(r.StructuredContent), base64.StdEncoding.EncodeToString([]byte(text))[:40]) {
		t.Fatalf("shoal://val on C: %.300s %v", r.StructuredContent, err)
	}
	// The journal: rows of A and B found from C, with kernel and host.
	for _, m := range []*member{a, b} {
		if _, err := m.c.Exec(x, "echo cluster-row", client.ExecOptions{}); err != nil {
			t.Fatal(err)
		}
		if err := m.cl.Sync(x); err != nil {
			t.Fatal(err)
		}
	}
	var res journal.ClusterResult
	if err := cm.c.Call(x, "journal.query", map[string]any{"scope": "cluster", "head": "echo"}, &res); err != nil {
		t.Fatal(err)
	}
	kernels := map[string]int{}
	for _, row := range res.Rows {
		kernels[row.Kernel]++
		if row.Head != "echo" || row.Host == "" || row.Source != "echo cluster-row" {
			t.Fatalf("cluster row %+v", row)
		}
	}
	if kernels["a"] != 1 || kernels["b"] != 1 || len(res.Rows) != 2 || !res.Complete {
		t.Fatalf("scope=cluster rows by kernel %v (%+v)", kernels, res)
	}
	// The same filters: by principal, and through the URI.
	if err := cm.c.Call(x, "journal.query", map[string]any{"scope": "cluster", "principal": "agent:b", "head": "echo"}, &res); err != nil || len(res.Rows) != 1 || res.Rows[0].Kernel != "b" {
		t.Fatalf("principal filter: %+v %v", res, err)
	}
	rd, err := cm.c.Read(x, "shoal://journal?scope=cluster&head=echo&limit=1")
	if err != nil || !strings.Contains(string(rd.StructuredContent), `"kernel":"b"`) {
		t.Fatalf("shoal://journal?scope=cluster: %s %v", rd.StructuredContent, err)
	}
	// Local scope stays local: C ran no echo.
	var local journal.QueryResult
	if err := cm.c.Call(x, "journal.query", map[string]any{"head": "echo"}, &local); err != nil || len(local.Rows) != 0 {
		t.Fatalf("local query on C: %+v %v", local, err)
	}

	// kernel.status shows the cluster.
	var st map[string]any
	if err := a.c.Call(x, "kernel.status", map[string]any{}, &st); err != nil {
		t.Fatal(err)
	}
	cs, _ := st["cluster"].(map[string]any)
	if cs["connected"] != true || cs["kernel"] != "a" {
		t.Fatalf("status cluster: %v", st["cluster"])
	}
}

func ptr[T any](v T) *T { return &v }

// A spilled transcript value made on one kernel is read by its val: ref
// on another.
func TestSpilledValue(t *testing.T) {
	n := startNATS(t)
	cfg := "spill_threshold = 1024\n"
	a := startMember(t, "a", n.url(), cfg, client.Options{})
	b := startMember(t, "b", n.url(), cfg, client.Options{})
	x := ctx(t)
	r, err := a.c.Exec(x, "seq 1 2000", client.ExecOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if r.ValRef == "" {
		t.Fatalf("the value did not spill: %+v", r)
	}
	if err := a.cl.Sync(x); err != nil {
		t.Fatal(err)
	}
	rd, err := b.c.Read(x, r.ValRef)
	if err != nil || !strings.Contains(string(rd.StructuredContent), "1999") {
		t.Fatalf("read %s on B: %v", r.ValRef, err)
	}
}

// Without [cluster] a shared declaration is refused at start, and
// scope=cluster is UNAVAILABLE.
func TestNoCluster(t *testing.T) {
	dir := testkernel.ShortDir(t)
	cfg := filepath.Join(t.TempDir(), "config.toml")
	os.WriteFile(cfg, []byte(sharedConfig), 0o600)
	if _, err := boot.NewKernel(kernel.Options{StateDir: dir, ConfigPath: cfg}); err == nil || !strings.Contains(err.Error(), "shared = true") {
		t.Fatalf("shared without a cluster: %v", err)
	}
	k := testkernel.Start(t, kernel.Options{StateDir: testkernel.ShortDir(t)})
	c := testkernel.Attach(t, k.StateDir(), client.Options{})
	err := c.Call(ctx(t), "journal.query", map[string]any{"scope": "cluster"}, nil)
	if rpc.CodeOf(err) != rpc.Unavailable {
		t.Fatalf("scope=cluster without a cluster: %v", err)
	}
	var st map[string]any
	if err := c.Call(ctx(t), "kernel.status", map[string]any{}, &st); err != nil || st["cluster"] != nil {
		t.Fatalf("status without a cluster: %v %v", st["cluster"], err)
	}
}

// Outage: the server stops while A publishes and runs commands. Local
// work goes on, shared publishes are refused with CLUSTER_UNAVAILABLE,
// and after the restart nothing acknowledged is lost, no seq repeats, and
// the journal export catches up with every row exactly once.
func TestOutage(t *testing.T) {
	n := startNATS(t)
	a := startMember(t, "a", n.url(), sharedConfig, client.Options{})
	b := startMember(t, "b", n.url(), sharedConfig, client.Options{})
	x := ctx(t)
	if _, err := b.c.Events(x, "user.ci.out", nil, 0); err != nil {
		t.Fatal(err)
	}

	acked := map[uint64]string{} // seq → payload, for every acknowledged publish
	refused := 0
	publish := func(i int) {
		payload := fmt.Sprintf("%q", fmt.Sprint("p", i))
		ev, err := a.c.Publish(x, "user.ci.out", json.RawMessage(payload))
		switch {
		case err == nil:
			if prev, dup := acked[ev.Seq]; dup {
				t.Fatalf("seq %d acknowledged twice (%s, %s)", ev.Seq, prev, payload)
			}
			acked[ev.Seq] = payload
		case rpc.CodeOf(err) == rpc.ClusterDown:
			refused++
		default:
			t.Fatalf("publish %d: %v", i, err)
		}
	}
	var wg sync.WaitGroup
	i := 0
	for ; i < 20; i++ {
		publish(i)
	}
	wg.Add(1)
	stopped := make(chan struct{})
	go func() { // the server goes away mid-publish
		defer wg.Done()
		n.stop()
		close(stopped)
	}()
	for ; i < 40; i++ {
		publish(i)
	}
	<-stopped
	wg.Wait()
	waitFor(t, "A to see the outage", func() bool {
		return !a.cl.Status().Connected
	})
	for ; i < 50; i++ {
		publish(i)
	}
	if refused == 0 {
		t.Fatal("no publish was refused while the server was down")
	}
	// Local work goes on: executions, local channels, journal rows.
	for j := range 5 {
		if r, err := a.c.Exec(x, fmt.Sprintf("echo outage-%d", j), client.ExecOptions{}); err != nil || r.OK == nil || !*r.OK {
			t.Fatalf("exec during the outage: %+v %v", r, err)
		}
	}
	if _, err := a.c.Publish(x, "user.local", 1); err != nil {
		t.Fatalf("local publish during the outage: %v", err)
	}
	var st map[string]any
	if err := a.c.Call(x, "kernel.status", map[string]any{}, &st); err != nil {
		t.Fatal(err)
	}
	if cs := st["cluster"].(map[string]any); cs["connected"] != false {
		t.Fatalf("status during the outage: %v", cs)
	}

	n.start()
	waitFor(t, "A to reconnect", func() bool { return a.cl.Status().Connected })
	waitFor(t, "B to reconnect", func() bool { return b.cl.Status().Connected })
	before := len(acked)
	for ; i < 60; i++ {
		publish(i)
	}
	if len(acked) == before {
		t.Fatal("no publish succeeded after the reconnect")
	}
	if err := a.cl.Sync(x); err != nil {
		t.Fatal(err)
	}
	// Every acknowledged event is on B, at its seq, once; seqs ascend
	// without repeats.
	latest := uint64(0)
	for s := range acked {
		latest = max(latest, s)
	}
	var page *client.Page
	waitFor(t, "B to catch up", func() bool {
		var err error
		page, err = b.c.Events(x, "user.ci.out", nil, 1000)
		return err == nil && page.LatestSeq != nil && *page.LatestSeq >= latest
	})
	seen := map[uint64]bool{}
	payloads := map[string]bool{}
	for k, ev := range page.Events {
		if seen[ev.Seq] || (k > 0 && ev.Seq <= page.Events[k-1].Seq) {
			t.Fatalf("seq %d repeats or goes back: %v", ev.Seq, seqsOf(page.Events))
		}
		seen[ev.Seq] = true
		if payloads[string(ev.Payload)] {
			t.Fatalf("payload %s stored twice", ev.Payload)
		}
		payloads[string(ev.Payload)] = true
	}
	for s, p := range acked {
		if !seen[s] {
			t.Fatalf("acknowledged seq %d (%s) is lost; B has %v", s, p, seqsOf(page.Events))
		}
	}
	for _, ev := range page.Events {
		if p, ok := acked[ev.Seq]; ok && p != string(ev.Payload) {
			t.Fatalf("seq %d: B has %s, A acknowledged %s", ev.Seq, ev.Payload, p)
		}
	}

	// The export caught up: every row of A, once, in the cluster journal.
	last, err := lastEntry(a)
	if err != nil {
		t.Fatal(err)
	}
	var res journal.ClusterResult
	if err := b.c.Call(x, "journal.query", map[string]any{"scope": "cluster", "principal": "agent:a", "limit": 1000}, &res); err != nil {
		t.Fatal(err)
	}
	ids := map[uint64]bool{}
	for _, row := range res.Rows {
		if row.Kernel != "a" || ids[row.EntryID] {
			t.Fatalf("row %d of %s repeated or misattributed", row.EntryID, row.Kernel)
		}
		ids[row.EntryID] = true
	}
	for id := uint64(1); id <= last; id++ {
		if !ids[id] {
			t.Fatalf("row %d of A is missing from the cluster journal (have %d rows, last %d)", id, len(ids), last)
		}
	}
}

func lastEntry(m *member) (uint64, error) {
	j, ok := core.Get(m.k.Host(), core.ServiceJournal)
	if !ok {
		return 0, errors.New("no journal service")
	}
	return j.(*journal.Journal).LastEntryID()
}

// A kernel starts while its NATS server is down, works locally, and joins
// once the server is up: the journal rows written meanwhile are exported.
func TestStartWhileDown(t *testing.T) {
	n := startNATS(t)
	n.stop()
	a := startMember(t, "a", n.url(), sharedConfig, client.Options{})
	x := ctx(t)
	if _, err := a.c.Publish(x, "user.ci.x", 1); rpc.CodeOf(err) != rpc.ClusterDown {
		t.Fatalf("publish before NATS is up: %v", err)
	}
	if _, err := a.c.Events(x, "user.ci.x", nil, 0); rpc.CodeOf(err) != rpc.ClusterDown {
		t.Fatalf("read before NATS is up: %v", err)
	}
	if r, err := a.c.Exec(x, "echo offline", client.ExecOptions{}); err != nil || r.OK == nil || !*r.OK {
		t.Fatalf("exec before NATS is up: %+v %v", r, err)
	}
	n.start()
	waitFor(t, "the connection", func() bool { return a.cl.Status().Connected })
	if ev, err := a.c.Publish(x, "user.ci.x", 1); err != nil || ev.Seq != 0 {
		t.Fatalf("publish once NATS is up: %+v %v", ev, err)
	}
	if err := a.cl.Sync(x); err != nil {
		t.Fatal(err)
	}
	var res journal.ClusterResult
	if err := a.c.Call(x, "journal.query", map[string]any{"scope": "cluster", "head": "echo"}, &res); err != nil || len(res.Rows) != 1 || res.Rows[0].Source != "echo offline" {
		t.Fatalf("the offline row in the cluster journal: %+v %v", res, err)
	}
}

// Retention is the stream's: with channel_max_msgs = 5 a reader sees the
// newest five, oldest_seq moved up, and a cursor behind it truncated.
func TestRetention(t *testing.T) {
	n := startNATS(t)
	cfg := sharedConfig + "\n[cluster]\nchannel_max_msgs = 5\n"
	a := startMember(t, "a", n.url(), cfg, client.Options{})
	b := startMember(t, "b", n.url(), cfg, client.Options{})
	x := ctx(t)
	for i := range 8 {
		if _, err := a.c.Publish(x, "user.ci.r", i); err != nil {
			t.Fatal(err)
		}
	}
	p, err := b.c.Events(x, "user.ci.r", ptr(uint64(0)), 0)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(seqsOf(p.Events), []uint64{3, 4, 5, 6, 7}) || *p.OldestSeq != 3 || *p.LatestSeq != 7 || !p.Truncated {
		t.Fatalf("read after retention: seqs %v oldest %v latest %v truncated %v", seqsOf(p.Events), *p.OldestSeq, *p.LatestSeq, p.Truncated)
	}
}

// A kernel whose export cursor is lost (a crash after the stream acked
// its rows, before the cursor was saved) exports nothing twice after its
// restart, and exports what it wrote while it was stopped.
func TestExportResumes(t *testing.T) {
	n := startNATS(t)
	dir := testkernel.ShortDir(t)
	cfg := filepath.Join(t.TempDir(), "config.toml")
	os.WriteFile(cfg, []byte("[cluster]\nname = \"a\"\n"), 0o600)
	x := ctx(t)
	a := startAt(t, dir, cfg, "agent:a", n.url(), client.Options{})
	for i := range 3 {
		if _, err := a.c.Exec(x, fmt.Sprint("echo ", i), client.ExecOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	if err := a.cl.Sync(x); err != nil {
		t.Fatal(err)
	}
	a.stop()

	j, err := journal.Open(filepath.Join(dir, journal.FileName), journal.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if cur, _ := j.ExportCursor("cluster"); cur != 3 {
		t.Fatalf("cursor after a clean stop: %d", cur)
	}
	if err := j.SetExportCursor("cluster", 0); err != nil {
		t.Fatal(err)
	}
	// A row written while the kernel is away from the cluster.
	if _, err := j.Append(x, core.JournalRow{Principal: "agent:a", Kind: "exec", Head: "offline", Source: "offline"}); err != nil {
		t.Fatal(err)
	}
	j.Close()

	a = startAt(t, dir, cfg, "agent:a", n.url(), client.Options{})
	if _, err := a.c.Exec(x, "echo after", client.ExecOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := a.cl.Sync(x); err != nil {
		t.Fatal(err)
	}
	var res journal.ClusterResult
	if err := a.c.Call(x, "journal.query", map[string]any{"scope": "cluster", "limit": 1000}, &res); err != nil {
		t.Fatal(err)
	}
	var ids []uint64
	for _, r := range res.Rows {
		ids = append(ids, r.EntryID)
	}
	if !slices.Equal(ids, []uint64{5, 4, 3, 2, 1}) {
		t.Fatalf("cluster journal rows %v, want 5 4 3 2 1 once each", ids)
	}
}
