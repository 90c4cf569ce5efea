package val

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/shoal-sh/shoal/core"
	"github.com/shoal-sh/shoal/core/rpc"
	"github.com/shoal-sh/shoal/core/uri"
	"github.com/shoal-sh/shoal/core/value"
	"github.com/shoal-sh/shoal/providers/val/cas"
)

func provision(t *testing.T, cfg *core.Config) (*Provider, *core.Host) {
	t.Helper()
	return provisionWith(t, cfg, nil)
}

// provisionWith starts the provider with j as the journal service (none
// when nil).
func provisionWith(t *testing.T, cfg *core.Config, j core.Journal) (*Provider, *core.Host) {
	t.Helper()
	h := &core.Host{StateDir: t.TempDir(), Config: cfg}
	if j != nil {
		core.Offer(h, core.ServiceJournal, j)
	}
	p := New()
	if err := core.Wire(h, p); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close() })
	return p, h
}

func call(t *testing.T, p *Provider, method string, params any) (any, error) {
	t.Helper()
	raw, err := json.Marshal(params)
	if err != nil {
		t.Fatal(err)
	}
	return p.Methods()[method](context.Background(), &core.Caller{Session: "main", Principal: "agent:test"}, raw)
}

func TestProvisionOffersBlobs(t *testing.T) {
	p, h := provision(t, nil)
	blobs, ok := core.Get(h, core.ServiceBlobs)
	if !ok {
		t.Fatal("no blobs service")
	}
	hash, err := blobs.Put([]byte("offered"))
	if err != nil || !p.Store().Has(hash) {
		t.Fatalf("service and provider see different stores: %v", err)
	}
	if _, err := os.Stat(filepath.Join(h.StateDir, "cas")); err != nil {
		t.Fatalf("store not under the state directory: %v", err)
	}
}

func TestReadAllRefForms(t *testing.T) {
	p, _ := provision(t, nil)
	rec := value.NewRecord(value.F("name", value.Str("shoal")), value.F("size", value.Int(42)))
	typed, err := value.Marshal(rec)
	if err != nil {
		t.Fatal(err)
	}
	typedHash, _ := p.Store().Put(typed)
	rawHash, _ := p.Store().Put([]byte{0xff, 0x00, 'x'})
	plainHash, _ := p.Store().Put([]byte(`{"not":"typed"}`))

	tests := []struct {
		target string
		want   value.Value
		ref    string
	}{
		{"shoal://val/" + typedHash, rec, "val:blake3:" + typedHash},
		{"shoal://val/blake3:" + typedHash, rec, "val:blake3:" + typedHash},
		{"val:blake3:" + typedHash, rec, "val:blake3:" + typedHash},
		{"shoal://val/" + rawHash + "?format=raw", value.Bytes{0xff, 0x00, 'x'}, "val:blake3:" + rawHash},
		{"shoal://val/blake3:" + plainHash, value.Bytes(`{"not":"typed"}`), "val:blake3:" + plainHash},
	}
	for _, tt := range tests {
		u, err := uri.ParseTarget(tt.target)
		if err != nil {
			t.Fatalf("%s: %v", tt.target, err)
		}
		c, err := p.Read(context.Background(), &core.Caller{}, u)
		if err != nil {
			t.Fatalf("%s: %v", tt.target, err)
		}
		if !value.Equal(c.Value, tt.want) || c.Ref != tt.ref {
			t.Errorf("%s: got %#v ref %q, want %#v ref %q", tt.target, c.Value, c.Ref, tt.want, tt.ref)
		}
	}
}

func TestReadErrors(t *testing.T) {
	p, _ := provision(t, nil)
	good, _ := p.Store().Put([]byte("x"))
	missing := cas.Sum([]byte("never stored"))
	tests := []struct {
		target string
		code   rpc.Code
	}{
		{"shoal://val/" + good[:10], rpc.BadURI},
		{"shoal://val/sha256:" + good, rpc.BadURI},
		{"shoal://val/" + good + "/extra", rpc.BadURI},
		{"shoal://val", rpc.BadURI},
		{"shoal://val/" + missing, rpc.NotFound},
	}
	for _, tt := range tests {
		u, err := uri.Parse(tt.target)
		if err != nil {
			t.Fatalf("%s: %v", tt.target, err)
		}
		_, err = p.Read(context.Background(), &core.Caller{}, u)
		if rpc.CodeOf(err) != tt.code {
			t.Errorf("%s: got %v, want %s", tt.target, err, tt.code.Name())
		}
	}
}

func TestReadCorruptRefused(t *testing.T) {
	p, _ := provision(t, nil)
	h, _ := p.Store().Put([]byte("precious bytes"))
	if err := p.Store().Flush(); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(p.Store().Dir(), h[:2], h[2:4], h)
	if err := os.WriteFile(path, []byte("precious bytez"), 0o600); err != nil {
		t.Fatal(err)
	}
	u, _ := uri.Parse("shoal://val/" + h)
	c, err := p.Read(context.Background(), &core.Caller{}, u)
	if rpc.CodeOf(err) != rpc.Corrupt || c != nil {
		t.Fatalf("got %v, %v; want CORRUPT and no content", c, err)
	}
	_, err = call(t, p, "blob.get", map[string]string{"hash": h})
	if code := rpc.CodeOf(err); code != rpc.NotFound && code != rpc.Corrupt {
		t.Fatalf("blob.get of a quarantined blob: %v", err)
	}
}

func TestBlobMethods(t *testing.T) {
	p, _ := provision(t, &core.Config{RawCeiling: 16})
	res, err := call(t, p, "blob.put", map[string]string{"text": "hello"})
	if err != nil {
		t.Fatal(err)
	}
	put := res.(BlobPutResult)
	if put.Hash != cas.Sum([]byte("hello")) || put.Ref != "val:blake3:"+put.Hash || put.Size != 5 {
		t.Fatalf("blob.put = %+v", put)
	}
	// The ref is handed out only once the blob is durable, in its place.
	if _, err := os.Stat(filepath.Join(p.Store().Dir(), put.Hash[:2], put.Hash[2:4], put.Hash)); err != nil {
		t.Fatalf("blob.put answered before the blob was durable: %v", err)
	}
	res, err = call(t, p, "blob.put", map[string]string{"b64": base64.StdEncoding.EncodeToString([]byte{1, 2, 3})})
	if err != nil {
		t.Fatal(err)
	}
	binHash := res.(BlobPutResult).Hash

	for _, form := range []string{put.Hash, "blake3:" + put.Hash, put.Ref} {
		res, err = call(t, p, "blob.get", map[string]string{"hash": form})
		if err != nil {
			t.Fatalf("blob.get %s: %v", form, err)
		}
		got := res.(BlobGetResult)
		if got.Hash != put.Hash || got.Size != 5 || got.B64 != base64.StdEncoding.EncodeToString([]byte("hello")) {
			t.Fatalf("blob.get %s = %+v", form, got)
		}
	}
	res, _ = call(t, p, "blob.get", map[string]string{"hash": binHash})
	if res.(BlobGetResult).B64 != "AQID" {
		t.Fatalf("blob.get binary = %+v", res)
	}

	big, _ := p.Store().Put(make([]byte, 17))
	errTests := []struct {
		method string
		params any
		code   rpc.Code
	}{
		{"blob.put", map[string]string{}, rpc.InvalidParams},
		{"blob.put", map[string]string{"text": "a", "b64": "YQ=="}, rpc.InvalidParams},
		{"blob.put", map[string]string{"b64": "not base64!"}, rpc.InvalidParams},
		{"blob.put", map[string]int{"text": 3}, rpc.InvalidParams},
		{"blob.put", map[string]string{"text": "seventeen bytes!!"}, rpc.TooLarge},
		{"blob.put", []int{1}, rpc.InvalidParams},
		{"blob.get", map[string]string{}, rpc.InvalidParams},
		{"blob.get", map[string]string{"hash": "xyz"}, rpc.InvalidParams},
		{"blob.get", map[string]string{"hash": cas.Sum([]byte("absent"))}, rpc.NotFound},
		{"blob.get", map[string]string{"hash": big}, rpc.TooLarge},
	}
	for _, tt := range errTests {
		_, err := call(t, p, tt.method, tt.params)
		if rpc.CodeOf(err) != tt.code {
			t.Errorf("%s %v: got %v, want %s", tt.method, tt.params, err, tt.code.Name())
		}
	}
}

type fakeJournal struct {
	refs []string
	err  error
}

func (j *fakeJournal) Append(ctx context.Context, row core.JournalRow) (core.JournalRow, error) {
	return row, nil
}

func (j *fakeJournal) BlobRefs(yield func(string)) error {
	for _, r := range j.refs {
		yield(r)
	}
	return j.err
}

type opaqueJournal struct{}

func (opaqueJournal) Append(ctx context.Context, row core.JournalRow) (core.JournalRow, error) {
	return row, nil
}

func agedBlobs(t *testing.T, s *cas.Store, names ...string) []string {
	t.Helper()
	var out []string
	old := time.Now().Add(-2 * GCMinAge)
	for _, n := range names {
		h, err := s.Put([]byte(n))
		if err != nil {
			t.Fatal(err)
		}
		if err := s.Flush(); err != nil {
			t.Fatal(err)
		}
		if err := os.Chtimes(filepath.Join(s.Dir(), h[:2], h[2:4], h), old, old); err != nil {
			t.Fatal(err)
		}
		out = append(out, h)
	}
	return out
}

func TestCollectKeepsJournalAndTranscriptRefs(t *testing.T) {
	j := &fakeJournal{}
	p, _ := provisionWith(t, nil, j)
	hs := agedBlobs(t, p.Store(), "journaled", "in transcript", "orphan")
	young, _ := p.Store().Put([]byte("young orphan"))
	if err := p.Store().Flush(); err != nil { // a pending blob is not scanned
		t.Fatal(err)
	}
	j.refs = []string{hs[0]}
	p.Store().AddRoots("out", func(yield func(string)) error { yield(hs[1]); return nil })

	st, err := p.Collect()
	if err != nil {
		t.Fatal(err)
	}
	if st.Removed != 1 || st.Kept != 2 || st.Young != 1 {
		t.Fatalf("stats %+v", st)
	}
	for hash, want := range map[string]bool{hs[0]: true, hs[1]: true, hs[2]: false, young: true} {
		if p.Store().Has(hash) != want {
			t.Errorf("blob %s present=%v, want %v", hash[:8], !want, want)
		}
	}
}

func TestCollectRefusesWithoutJournalRefs(t *testing.T) {
	for name, j := range map[string]core.Journal{
		"journal fails":       &fakeJournal{err: errors.New("journal closed")},
		"journal cannot list": opaqueJournal{},
	} {
		t.Run(name, func(t *testing.T) {
			p, _ := provisionWith(t, nil, j)
			hs := agedBlobs(t, p.Store(), "orphan")
			if _, err := p.Collect(); err == nil {
				t.Fatal("collection ran without the journal's references")
			}
			if !p.Store().Has(hs[0]) {
				t.Fatal("a refused collection removed a blob")
			}
		})
	}
}

func TestTemplate(t *testing.T) {
	p := New()
	tpl := p.Templates()
	if p.Family() != "val" || len(tpl) != 1 || tpl[0].URITemplate != "shoal://val/{hash}{?path,slice,grep,context,format}" || tpl[0].MimeType != "application/json" {
		t.Fatalf("family %q templates %+v", p.Family(), tpl)
	}
}
