package val

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"io"
	"strconv"
	"sync"
	"time"

	"github.com/shoal-sh/shoal/core/rpc"
	"github.com/shoal-sh/shoal/core/wire"
	"github.com/shoal-sh/shoal/providers/val/cas"
)

// Blobs of any size go through blob.put and blob.get in chunks: an
// upload streams each chunk into the content store as it arrives (the
// kernel holds one chunk at a time), and a ranged blob.get reads only the
// range asked for.
const (
	// maxRange bounds one ranged blob.get.
	maxRange = 16 << 20
	// uploadIdle aborts an upload nobody added to for this long.
	uploadIdle = 10 * time.Minute
	// maxUploads bounds the uploads open at once.
	maxUploads = 64
)

// upload is one chunked blob.put in progress: its chunks go through a pipe
// into a content-store put running on its own goroutine.
type upload struct {
	mu     sync.Mutex // one chunk at a time, in order
	w      *io.PipeWriter
	size   int64
	last   time.Time
	result chan uploadResult
}

type uploadResult struct {
	hash string
	size int64
	err  error
}

type uploads struct {
	mu sync.Mutex
	m  map[string]*upload
}

// start opens an upload into store.
func (us *uploads) start(store *cas.Store) (string, *upload, error) {
	us.mu.Lock()
	defer us.mu.Unlock()
	if us.m == nil {
		us.m = map[string]*upload{}
	}
	now := time.Now()
	for id, u := range us.m {
		if u.mu.TryLock() {
			if now.Sub(u.last) > uploadIdle {
				u.w.CloseWithError(fmt.Errorf("upload %s abandoned", id))
				delete(us.m, id)
			}
			u.mu.Unlock()
		}
	}
	if len(us.m) >= maxUploads {
		return "", nil, rpc.Errorf(rpc.TooLarge, "blob.put: %d uploads are open already; finish one (a last chunk without \"more\") first", len(us.m))
	}
	var b [8]byte
	rand.Read(b[:])
	id := "up-" + hex.EncodeToString(b[:])
	r, w := io.Pipe()
	u := &upload{w: w, last: now, result: make(chan uploadResult, 1)}
	go func() {
		hash, size, err := store.PutReader(r)
		r.CloseWithError(err) // a failed put fails the writer's next chunk
		u.result <- uploadResult{hash, size, err}
	}()
	us.m[id] = u
	return id, u, nil
}

func (us *uploads) get(id string) *upload {
	us.mu.Lock()
	defer us.mu.Unlock()
	return us.m[id]
}

// abortAll ends every open upload (the kernel is stopping).
func (us *uploads) abortAll() {
	us.mu.Lock()
	open := us.m
	us.m = nil
	us.mu.Unlock()
	for id, u := range open {
		u.w.CloseWithError(fmt.Errorf("upload %s: the kernel is stopping", id))
		<-u.result
	}
}

func (us *uploads) drop(id string) {
	us.mu.Lock()
	delete(us.m, id)
	us.mu.Unlock()
}

// chunked serves a blob.put that is part of an upload: the first chunk
// (more, no upload id), a middle one (upload, more) or the last (upload,
// no more). Each answers the bytes received so far; the last also the ref.
func (p *Provider) chunked(in BlobPutParams, data []byte) (any, error) {
	var id string
	var u *upload
	if in.Upload == "" {
		var err error
		if id, u, err = p.uploads.start(p.store); err != nil {
			return nil, err
		}
		u.mu.Lock()
	} else {
		id = in.Upload
		if u = p.uploads.get(id); u == nil {
			return nil, rpc.Errorf(rpc.NotFound, "blob.put: no upload %s is open (it finished, failed, or was idle over %s); start again with a first chunk and \"more\": true", id, uploadIdle)
		}
		u.mu.Lock()
	}
	defer u.mu.Unlock()
	if in.Offset != nil && *in.Offset != u.size {
		return nil, rpc.Errorf(rpc.InvalidParams, "blob.put: upload %s has %d bytes; this chunk says offset %d (send the chunks in order, once each)", id, u.size, *in.Offset)
	}
	if _, err := u.w.Write(data); err != nil {
		p.uploads.drop(id)
		res := <-u.result
		if res.err != nil {
			err = res.err
		}
		return nil, fmt.Errorf("blob.put: upload %s: %w", id, err)
	}
	u.size += int64(len(data))
	u.last = time.Now()
	if in.More {
		return wire.BlobUpload{Upload: id, Size: u.size}, nil
	}
	p.uploads.drop(id)
	u.w.Close()
	res := <-u.result
	if res.err != nil {
		return nil, fmt.Errorf("blob.put: upload %s: %w", id, res.err)
	}
	if err := p.store.FlushBlob(res.hash); err != nil {
		return nil, fmt.Errorf("blob.put: %w", err)
	}
	return BlobPutResult{Ref: cas.Ref(res.hash), Hash: res.hash, Size: res.size}, nil
}

// ranged serves a blob.get with offset or length: those bytes, unchecked
// (a range cannot be checked against the whole blob's hash; whoever reads
// every range checks the hash of what it put together, as `shoal blob get`
// does).
func (p *Provider) ranged(ctx context.Context, hash string, size int64, in BlobGetParams) (any, error) {
	off := int64(0)
	if in.Offset != nil {
		off = *in.Offset
	}
	n := min(size-off, maxRange)
	if in.Length != nil {
		n = min(*in.Length, size-off)
	}
	if off < 0 || off > size || n < 0 || n > maxRange {
		return nil, rpc.Errorf(rpc.InvalidParams, "blob.get: range %d+%d is outside blob %s of %d bytes, or above %d bytes at once", off, n, hash, size, maxRange)
	}
	data, err := p.store.ReadRange(hash, off, int(n))
	if err != nil {
		return nil, err
	}
	// Built by hand: the base64 needs no escaping, and encoding/json
	// would scan megabytes of it to find that out.
	b := make([]byte, 0, 128+base64.StdEncoding.EncodedLen(len(data)))
	b = append(b, `{"hash":"`...)
	b = append(b, hash...)
	b = append(b, `","size":`...)
	b = strconv.AppendInt(b, size, 10)
	b = append(b, `,"offset":`...)
	b = strconv.AppendInt(b, off, 10)
	b = append(b, `,"b64":"`...)
	b = base64.StdEncoding.AppendEncode(b, data)
	b = append(b, `"}`...)
	return rpc.Encoded(b), nil
}
