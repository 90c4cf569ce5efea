package val

import (
	"bufio"
	"bytes"
	"encoding/json"
	"net"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/shoal-sh/shoal/core/wire"
	"github.com/shoal-sh/shoal/providers/val/cas"
)

// sidePutTicket asks for a put ticket and checks the kernel offers to
// take a file.
func sidePutTicket(t *testing.T, p *Provider) wire.StreamTicket {
	t.Helper()
	res, err := call(t, p, "blob.put", map[string]any{"stream": true})
	if err != nil {
		t.Fatal(err)
	}
	tk := res.(wire.BlobPutTicket).Stream
	if !tk.File {
		t.Fatal("the put ticket does not offer to take a file")
	}
	return tk
}

// sideSend opens a transfer, sends line with the descriptors fds (none
// when empty) and then body, and returns the kernel's answer line ("" when
// it hung up without one).
func sideSend(t *testing.T, tk wire.StreamTicket, line string, fds []int, body []byte) string {
	t.Helper()
	nc, err := net.Dial("unix", tk.Socket)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	uc := nc.(*net.UnixConn)
	var oob []byte
	if len(fds) > 0 {
		oob = syscall.UnixRights(fds...)
	}
	if _, _, err := uc.WriteMsgUnix([]byte(line+"\n"), oob, nil); err != nil {
		t.Fatal(err)
	}
	if len(body) > 0 {
		_, _ = uc.Write(body)
	}
	_ = uc.CloseWrite()
	answer, _ := bufio.NewReader(uc).ReadString('\n')
	return answer
}

// openFDs counts this process's open descriptors.
func openFDs(t *testing.T) int {
	t.Helper()
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Skip("no /proc/self/fd")
	}
	return len(ents)
}

// TestSidePutFile: a put that hands over a regular file stores the file
// from its offset to its end (bytes sent after the line are not read); a
// descriptor that is not a regular file or not readable, one not
// announced, one announced and missing, and two are refused, and no descriptor is left open in the
// kernel whatever the client sent.
func TestSidePutFile(t *testing.T) {
	p, _ := provision(t, nil)
	if p.side == nil || !sideFiles {
		t.Skip("no side socket taking files here")
	}
	dir := t.TempDir()
	data := make([]byte, 5<<20+333)
	for i := range data {
		data[i] = byte(i*13 + i>>10)
	}
	path := filepath.Join(dir, "src")
	if err := os.WriteFile(path, data, 0o600); err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	const skip = 1000
	if _, err := f.Seek(skip, 0); err != nil {
		t.Fatal(err)
	}
	pr, pw, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	pw.Write([]byte("from a pipe"))
	pw.Close()
	defer pr.Close()
	wo, err := os.OpenFile(filepath.Join(dir, "wo"), os.O_WRONLY|os.O_CREATE, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	defer wo.Close()
	before := openFDs(t)

	tk := sidePutTicket(t, p)
	answer := sideSend(t, tk, tk.Ticket+" fd", []int{int(f.Fd())}, nil)
	var res BlobPutResult
	if err := json.Unmarshal([]byte(answer), &res); err != nil || res.Hash != cas.Sum(data[skip:]) || res.Size != int64(len(data)-skip) {
		t.Fatalf("put of a file: %q (%v), want hash %s size %d", answer, err, cas.Sum(data[skip:]), len(data)-skip)
	}
	got, err := p.Store().Get(res.Hash)
	if err != nil || !bytes.Equal(got, data[skip:]) {
		t.Fatalf("stored %d bytes (%v), want the file from its offset", len(got), err)
	}

	// Bytes sent after the line of a put that hands over a file are not
	// read: the file is what is stored.
	if _, err := f.Seek(skip, 0); err != nil {
		t.Fatal(err)
	}
	tk = sidePutTicket(t, p)
	answer = sideSend(t, tk, tk.Ticket+" fd", []int{int(f.Fd())}, []byte("more"))
	if err := json.Unmarshal([]byte(answer), &res); err != nil || res.Hash != cas.Sum(data[skip:]) {
		t.Fatalf("put of a file with bytes after it: %q (%v)", answer, err)
	}

	refused := []struct {
		name   string
		suffix string
		fds    []int
		body   []byte
		answer bool // an error line rather than a hang-up
	}{
		{"a pipe", " fd", []int{int(pr.Fd())}, nil, true},
		{"a write-only file", " fd", []int{int(wo.Fd())}, nil, true},
		{"announced, not sent", " fd", nil, nil, false},
		{"sent, not announced", "", []int{int(f.Fd())}, []byte("x"), false},
		{"two sent", " fd", []int{int(f.Fd()), int(f.Fd())}, nil, false},
	}
	for _, c := range refused {
		tk := sidePutTicket(t, p)
		answer := sideSend(t, tk, tk.Ticket+c.suffix, c.fds, c.body)
		var reply struct {
			Error string `json:"error"`
			Hash  string `json:"hash"`
		}
		_ = json.Unmarshal([]byte(answer), &reply)
		if reply.Hash != "" || (c.answer && reply.Error == "") || (!c.answer && answer != "") {
			t.Errorf("%s: answered %q", c.name, answer)
		}
	}
	// A descriptor sent with a get ticket is closed too.
	hash, _ := p.Store().Put([]byte("small"))
	if err := p.Store().FlushBlob(hash); err != nil { // its temp file closed
		t.Fatal(err)
	}
	gr, err := call(t, p, "blob.get", map[string]any{"hash": hash, "stream": true})
	if err != nil {
		t.Fatal(err)
	}
	gt := gr.(wire.BlobGetTicket).Stream
	if answer := sideSend(t, gt, gt.Ticket+" fd", []int{int(f.Fd())}, nil); answer != "" {
		t.Errorf("get with a descriptor: %q", answer)
	}
	for len(p.side.slots) > 0 { // transfers still closing
		time.Sleep(time.Millisecond)
	}
	if after := openFDs(t); after != before {
		t.Fatalf("%d descriptors open before the puts, %d after", before, after)
	}
}
