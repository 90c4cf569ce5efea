//go:build linux

package client

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/shoal-sh/shoal/core/wire"
)

// fakeSide accepts one side-socket put and reports what came: the first
// line, the bytes of the descriptor handed over (if one came), and the
// bytes sent on the socket.
func fakeSide(t *testing.T) (string, <-chan string) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "side.sock")
	ln, err := net.ListenUnix("unix", &net.UnixAddr{Name: path, Net: "unix"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	got := make(chan string, 1)
	go func() {
		uc, err := ln.AcceptUnix()
		if err != nil {
			got <- err.Error()
			return
		}
		defer uc.Close()
		buf, oob := make([]byte, 256), make([]byte, 64)
		n, on, _, _, err := uc.ReadMsgUnix(buf, oob)
		if err != nil {
			got <- err.Error()
			return
		}
		line, rest, _ := strings.Cut(string(buf[:n]), "\n")
		var file string
		if on > 0 {
			msgs, _ := syscall.ParseSocketControlMessage(oob[:on])
			fds, _ := syscall.ParseUnixRights(&msgs[0])
			f := os.NewFile(uintptr(fds[0]), "handed over")
			b, _ := io.ReadAll(f)
			f.Close()
			file = string(b)
		}
		more, _ := io.ReadAll(uc)
		fmt.Fprintf(uc, "{\"hash\":\"h\",\"size\":1}\n")
		got <- fmt.Sprintf("line=%q file=%q sent=%q", line, file, rest+string(more))
	}()
	return path, got
}

// TestPutStreamHandsOverFiles: a regular file goes to a kernel that takes
// files as its descriptor, not its bytes; to one that does not, and any
// other reader to either, as bytes.
func TestPutStreamHandsOverFiles(t *testing.T) {
	src := filepath.Join(t.TempDir(), "src")
	if err := os.WriteFile(src, []byte("file bytes"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name  string
		takes bool
		file  bool
		want  string
	}{
		{"file, kernel takes files", true, true, `line="T fd" file="file bytes" sent=""`},
		{"file, kernel does not", false, true, `line="T" file="" sent="file bytes"`},
		{"other reader", true, false, `line="T" file="" sent="reader bytes"`},
	} {
		sock, got := fakeSide(t)
		var r io.Reader = bytes.NewReader([]byte("reader bytes"))
		if c.file {
			f, err := os.Open(src)
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			r = f
		}
		res, err := putStream(context.Background(), &wire.StreamTicket{Socket: sock, Ticket: "T", File: c.takes}, r)
		if err != nil || res.Hash != "h" {
			t.Fatalf("%s: %+v %v", c.name, res, err)
		}
		if g := <-got; g != c.want {
			t.Errorf("%s: the side socket got %s, want %s", c.name, g, c.want)
		}
	}
}
