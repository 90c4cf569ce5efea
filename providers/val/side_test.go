package val

import (
	"bytes"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/shoal-sh/shoal/core/wire"
)

// sideGet reads blob hash whole from the side socket.
func sideGet(t *testing.T, p *Provider, hash string) []byte {
	t.Helper()
	res, err := call(t, p, "blob.get", map[string]any{"hash": hash, "stream": true})
	if err != nil {
		t.Fatal(err)
	}
	tk := res.(wire.BlobGetTicket).Stream
	nc, err := net.Dial("unix", tk.Socket)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	fmt.Fprintf(nc, "%s\n", tk.Ticket)
	got, err := io.ReadAll(nc)
	if err != nil {
		t.Fatal(err)
	}
	return got
}

// TestSideGetChecks: a blob the store wrote goes out whole; one whose file
// changed on disk is checked again as it is sent: with the same bytes it
// still goes out whole, with a changed byte it arrives short (the last
// part held back) and is quarantined.
func TestSideGetChecks(t *testing.T) {
	p, h := provision(t, nil)
	if p.side == nil {
		t.Skip("no side socket here")
	}
	data := make([]byte, 3<<20+517)
	for i := range data {
		data[i] = byte(i*31 + i>>11)
	}
	hash, err := p.Store().Put(data)
	if err != nil || p.Store().FlushBlob(hash) != nil {
		t.Fatal(hash, err)
	}
	if got := sideGet(t, p, hash); !bytes.Equal(got, data) {
		t.Fatalf("fresh blob: %d of %d bytes, equal %v", len(got), len(data), bytes.Equal(got, data))
	}
	file := filepath.Join(h.StateDir, "cas", hash[:2], hash[2:4], hash)
	// Touched: the same bytes, a new change time. Checked while sent.
	later := time.Now().Add(time.Minute)
	if err := os.Chtimes(file, later, later); err != nil {
		t.Fatal(err)
	}
	for i := range 2 { // the second send finds it checked by the first
		if got := sideGet(t, p, hash); !bytes.Equal(got, data) {
			t.Fatalf("touched blob, send %d: %d of %d bytes", i+1, len(got), len(data))
		}
	}
	// One byte changed in place.
	f, err := os.OpenFile(file, os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteAt([]byte{data[100] ^ 1}, 100); err != nil {
		t.Fatal(err)
	}
	f.Close()
	if got := sideGet(t, p, hash); len(got) >= len(data) {
		t.Fatalf("damaged blob sent whole (%d bytes)", len(got))
	}
	if p.Store().Has(hash) {
		t.Fatal("damaged blob not quarantined")
	}
	// Stored again, it is served again.
	if _, err := p.Store().Put(data); err != nil || p.Store().FlushBlob(hash) != nil {
		t.Fatal(err)
	}
	if got := sideGet(t, p, hash); !bytes.Equal(got, data) {
		t.Fatalf("repaired blob: %d of %d bytes", len(got), len(data))
	}
}
