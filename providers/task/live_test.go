package task

import (
	"encoding/json"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/shoal-sh/shoal/core"
	"github.com/shoal-sh/shoal/core/bus"
	"github.com/shoal-sh/shoal/core/uri"
	"github.com/shoal-sh/shoal/core/value"
)

// fakeOutput is a growing stream that, like a long capture, keeps its
// bytes up to headKeptTo and from keptFrom on, not the ones in between.
type fakeOutput struct {
	mu         sync.Mutex
	data       []byte
	keptFrom   int64
	open       bool
	headKeptTo int64
}

func (f *fakeOutput) ReadStream(stream string, since int64, limit int) ([]byte, int64, int64, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	size := int64(len(f.data))
	if stream != "stdout" {
		return nil, since, 0, f.open
	}
	if since >= f.headKeptTo && since < f.keptFrom {
		since = f.keptFrom
	}
	if since >= size || limit <= 0 {
		return nil, min(since, size), size, f.open
	}
	end := min(size, since+int64(limit))
	if since < f.headKeptTo {
		end = min(end, f.headKeptTo)
	}
	return append([]byte(nil), f.data[since:end]...), since, size, f.open
}

func (f *fakeOutput) write(s string) {
	f.mu.Lock()
	f.data = append(f.data, s...)
	f.mu.Unlock()
}

type oneValue struct{ v value.Value }

func (o oneValue) Content(session, ref string) (*core.Content, error) {
	return &core.Content{Value: o.v, Ref: ref}, nil
}

func readLive(t *testing.T, p *Provider, raw string) (string, map[string]any) {
	t.Helper()
	u, err := uri.Parse(raw)
	if err != nil {
		t.Fatal(err)
	}
	c, err := p.Read(t.Context(), &core.Caller{Session: "s"}, u)
	if err != nil {
		t.Fatalf("read %s: %v", raw, err)
	}
	return string(c.Value.(value.Str)), c.Meta
}

func TestLiveStream(t *testing.T) {
	b := bus.New(bus.Options{})
	out := &fakeOutput{open: true, headKeptTo: 1 << 30, keptFrom: 1 << 30}
	p := &Provider{R: NewRegistry(b)}
	tk := p.R.BeginWithOutput("s", "agent:a", "loop", func() {}, time.Now(), out)
	out.write("one\n")
	got, meta := readLive(t, p, "shoal://task/1/stdout?since=0")
	if got != "one\n" || meta["next"] != int64(4) || meta["state"] != Running {
		t.Fatalf("first read %q %v", got, meta)
	}
	out.write("two\n")
	if got, meta = readLive(t, p, "shoal://task/1/stdout?since=4"); got != "two\n" || meta["next"] != int64(8) || meta["size"] != int64(8) {
		t.Fatalf("second read %q %v", got, meta)
	}
	// The middle of a long output is skipped and said so.
	out.mu.Lock()
	out.data = append(out.data, strings.Repeat("x", 100)...)
	out.headKeptTo, out.keptFrom = 8, 50
	out.mu.Unlock()
	if got, meta = readLive(t, p, "shoal://task/1/stdout?since=8"); meta["from"] != int64(50) || meta["skipped"] != int64(42) || len(got) != 58 {
		t.Fatalf("skipping read %d bytes %v", len(got), meta)
	}
	// Without since: all kept, with a note for the gap.
	if got, _ = readLive(t, p, "shoal://task/1/stdout"); !strings.HasPrefix(got, "one\ntwo\n\n[shoal: 42 bytes not kept here]\n") {
		t.Fatalf("whole read %q", got)
	}
	// Once ended, the same URIs read the value.
	p.values = oneValue{value.NewRecord(value.F("exit", value.Int(0)), value.F("stdout", value.Str("final\n")), value.F("stderr", value.Str("")))}
	out.mu.Lock()
	out.open = false
	out.mu.Unlock()
	p.R.Finish(tk, Outcome{ResultRef: "out:1"})
	if got, meta = readLive(t, p, "shoal://task/1/stdout?since=2"); got != "nal\n" || meta["state"] != Completed || meta["next"] != int64(6) {
		t.Fatalf("after the end %q %v", got, meta)
	}
	if _, err := p.Read(t.Context(), &core.Caller{Session: "s"}, mustURI(t, "shoal://task/1/stdout?since=-1")); err == nil {
		t.Fatal("negative since accepted")
	}
	if _, ok := p.Channel(mustURI(t, "shoal://task/1/stdout")); ok {
		t.Fatal("a live output URI is not subscribable")
	}
}

// TestOutputSizesEvent: a running task whose output grows publishes its
// sizes on task.{id}.
func TestOutputSizesEvent(t *testing.T) {
	b := bus.New(bus.Options{})
	out := &fakeOutput{open: true, headKeptTo: 1 << 30, keptFrom: 1 << 30}
	r := NewRegistry(b)
	tk := r.BeginWithOutput("s", "agent:a", "loop", func() {}, time.Now(), out)
	defer r.Finish(tk, Outcome{})
	out.write("hello\n")
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		res, _ := b.Read(Channel(tk.Record().ID), nil, 0)
		for _, ev := range res.Events {
			var p struct {
				Output map[string]int64 `json:"output"`
			}
			json.Unmarshal(ev.Payload, &p)
			if p.Output["stdout"] == 6 {
				return
			}
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Fatal("no output sizes event on task.1")
}

func mustURI(t *testing.T, s string) *uri.URI {
	t.Helper()
	u, err := uri.Parse(s)
	if err != nil {
		t.Fatal(err)
	}
	return u
}
