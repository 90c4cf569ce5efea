package client

import (
	"bufio"
	"bytes"
	"context"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"os"
	"strconv"
	"syscall"

	"github.com/shoal-sh/shoal/core/rpc"
	"github.com/shoal-sh/shoal/core/wire"

	"github.com/zeebo/blake3"
)

// BlobChunk is the size of one chunk of BlobPut and BlobGet: large enough
// that the round trips cost little next to the bytes, small enough that
// neither side holds much.
const BlobChunk = 1 << 20

// BlobPutResult is what BlobPut stored.
type BlobPutResult = wire.BlobPut

// BlobPut stores everything r gives, of any size, in the content store:
// raw on the kernel's side socket when it has one (blob.put {stream}),
// else in chunks of BlobChunk bytes (blob.put with more/upload).
func (c *Client) BlobPut(ctx context.Context, r io.Reader) (*BlobPutResult, error) {
	var st wire.BlobPutTicket
	if err := c.Call(ctx, "blob.put", map[string]bool{"stream": true}, &st); err == nil && st.Stream.Ticket != "" {
		return putStream(ctx, &st.Stream, r)
	}
	return c.blobPutChunks(ctx, r)
}

// dial opens the side-socket transfer of ticket t, handing over f when it
// is not nil.
func dial(ctx context.Context, t *wire.StreamTicket, f *os.File) (*net.UnixConn, error) {
	var d net.Dialer
	nc, err := d.DialContext(ctx, "unix", t.Socket)
	if err != nil {
		return nil, fmt.Errorf("blob side socket: %w", err)
	}
	uc := nc.(*net.UnixConn)
	if f == nil {
		_, err = uc.Write([]byte(t.Ticket + "\n"))
	} else {
		var rc syscall.RawConn
		if rc, err = f.SyscallConn(); err == nil {
			cerr := rc.Control(func(fd uintptr) {
				_, _, err = uc.WriteMsgUnix([]byte(t.Ticket+" fd\n"), unixRights(int(fd)), nil)
			})
			if err == nil {
				err = cerr
			}
		}
	}
	if err != nil {
		uc.Close()
		return nil, fmt.Errorf("blob side socket: %w", err)
	}
	return uc, nil
}

// regularFile returns r when it is an open regular file, else nil.
func regularFile(r io.Reader) *os.File {
	f, ok := r.(*os.File)
	if !ok {
		return nil
	}
	if fi, err := f.Stat(); err != nil || !fi.Mode().IsRegular() {
		return nil
	}
	return f
}

// putStream sends r's bytes on the side socket, or, when r is a regular
// file and the kernel takes one, the file itself: the kernel then reads
// it without the bytes crossing the socket (two copies fewer, and none of
// this process's time).
func putStream(ctx context.Context, t *wire.StreamTicket, r io.Reader) (*BlobPutResult, error) {
	var f *os.File
	if t.File {
		f = regularFile(r)
	}
	uc, err := dial(ctx, t, f)
	if err != nil {
		return nil, err
	}
	defer uc.Close()
	if f == nil {
		if _, err := io.CopyBuffer(uc, r, make([]byte, BlobChunk)); err != nil {
			return nil, fmt.Errorf("blob side socket: %w", err)
		}
	}
	if err := uc.CloseWrite(); err != nil {
		return nil, fmt.Errorf("blob side socket: %w", err)
	}
	line, err := bufio.NewReader(uc).ReadBytes('\n')
	if err != nil {
		return nil, fmt.Errorf("blob side socket: no answer: %w", err)
	}
	var res struct {
		BlobPutResult
		Error string `json:"error"`
	}
	if err := json.Unmarshal(line, &res); err != nil {
		return nil, fmt.Errorf("blob side socket: %w", err)
	}
	if res.Error != "" {
		return nil, fmt.Errorf("blob.put: %s", res.Error)
	}
	return &res.BlobPutResult, nil
}

// blobPutChunks is BlobPut through blob.put chunks.
func (c *Client) blobPutChunks(ctx context.Context, r io.Reader) (*BlobPutResult, error) {
	cur, next := make([]byte, BlobChunk), make([]byte, BlobChunk)
	n, err := readChunk(r, cur)
	if err != nil {
		return nil, err
	}
	var upload string
	var sent int64
	for {
		// Read one chunk ahead: the chunk sent last must say so.
		m, err := 0, error(nil)
		if n == len(cur) {
			if m, err = readChunk(r, next); err != nil {
				return nil, err
			}
		}
		last := m == 0
		// Built by hand: base64 needs no escaping, and encoding/json
		// would scan every byte of it to find that out.
		params := make([]byte, 0, 96+base64.StdEncoding.EncodedLen(n))
		params = append(params, `{"b64":"`...)
		params = base64.StdEncoding.AppendEncode(params, cur[:n])
		params = append(params, '"')
		if !last {
			params = append(params, `,"more":true`...)
		}
		if upload != "" {
			params = append(params, `,"upload":`...)
			params = strconv.AppendQuote(params, upload)
			params = append(params, `,"offset":`...)
			params = strconv.AppendInt(params, sent, 10)
		}
		params = append(params, '}')
		if last {
			var res BlobPutResult
			if err := c.Call(ctx, "blob.put", rpc.Encoded(params), &res); err != nil {
				return nil, err
			}
			return &res, nil
		}
		var res wire.BlobUpload
		if err := c.Call(ctx, "blob.put", rpc.Encoded(params), &res); err != nil {
			return nil, err
		}
		upload, sent = res.Upload, res.Size
		cur, next, n = next, cur, m
	}
}

// readChunk fills buf as far as r goes; the end of r is no error.
func readChunk(r io.Reader, buf []byte) (int, error) {
	n, err := io.ReadFull(r, buf)
	if err == io.EOF || err == io.ErrUnexpectedEOF {
		err = nil
	}
	if err != nil {
		return n, fmt.Errorf("read blob: %w", err)
	}
	return n, nil
}

// BlobGet writes blob hash to w and returns its size: raw from the side
// socket when the kernel has one (the kernel checks the bytes and a
// damaged blob arrives short, an error), else in ranges of BlobChunk bytes
// whose blake3 it checks against the hash. Either failure is an error
// after the bytes were written.
func (c *Client) BlobGet(ctx context.Context, hash string, w io.Writer) (int64, error) {
	var st wire.BlobGetTicket
	if err := c.Call(ctx, "blob.get", map[string]any{"hash": hash, "stream": true}, &st); err == nil && st.Stream.Ticket != "" {
		uc, err := dial(ctx, &st.Stream, nil)
		if err != nil {
			return 0, err
		}
		defer uc.Close()
		// The kernel checks the blob as it sends it (or knows its file
		// to be right) and holds the last part back from a damaged one,
		// so a blob that arrives whole is right; hashing it here again
		// would halve the speed on two cores.
		n, err := io.CopyBuffer(w, uc, make([]byte, BlobChunk))
		if err != nil {
			return n, fmt.Errorf("blob side socket: %w", err)
		}
		if n != st.Size {
			return n, fmt.Errorf("blob %s: %d of %d bytes came (it failed its check in the store, or the kernel stopped)", st.Hash, n, st.Size)
		}
		return n, nil
	}
	h := blake3.New()
	var off, size int64 = 0, -1
	for size < 0 || off < size {
		var raw json.RawMessage
		if err := c.Call(ctx, "blob.get", map[string]any{"hash": hash, "offset": off, "length": BlobChunk}, &raw); err != nil {
			return 0, err
		}
		res, err := parseRange(raw)
		if err != nil {
			return 0, fmt.Errorf("blob.get answer: %w", err)
		}
		data := res.data
		if size < 0 {
			size, hash = res.size, res.hash
		}
		if len(data) == 0 && off < size {
			return 0, fmt.Errorf("blob.get: empty range at %d of %d bytes", off, size)
		}
		if _, err := w.Write(data); err != nil {
			return 0, err
		}
		h.Write(data)
		off += int64(len(data))
	}
	if got := hex.EncodeToString(h.Sum(nil)); got != hash {
		return size, fmt.Errorf("blob %s: the bytes received hash to %s", hash, got)
	}
	return size, nil
}

type blobRange struct {
	hash string
	size int64
	data []byte
}

// parseRange reads a ranged blob.get answer. The kernel sends the base64
// last and unescaped, so it is cut out and decoded without a JSON pass
// over it; anything else goes through encoding/json.
func parseRange(raw []byte) (blobRange, error) {
	const key = `,"b64":"`
	if i := bytes.LastIndex(raw, []byte(key)); i >= 0 && bytes.HasSuffix(raw, []byte(`"}`)) {
		b64 := raw[i+len(key) : len(raw)-2]
		if bytes.IndexByte(b64, '"') < 0 && bytes.IndexByte(b64, '\\') < 0 {
			var head wire.BlobRange
			rest := append(append([]byte(nil), raw[:i]...), '}')
			if err := json.Unmarshal(rest, &head); err != nil {
				return blobRange{}, err
			}
			data := make([]byte, base64.StdEncoding.DecodedLen(len(b64)))
			n, err := base64.StdEncoding.Decode(data, b64)
			return blobRange{head.Hash, head.Size, data[:n]}, err
		}
	}
	var r wire.BlobRange
	if err := json.Unmarshal(raw, &r); err != nil {
		return blobRange{}, err
	}
	data, err := base64.StdEncoding.DecodeString(r.B64)
	return blobRange{r.Hash, r.Size, data}, err
}
