package cas

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"sync/atomic"

	"github.com/shoal-sh/shoal/core/rpc"
)

// Remote is a second home of blobs outside this state directory, such as
// a cluster's object store. With one set ([Store.SetRemote]) the store
// tells it of every blob put here, and a blob missing here is fetched
// from it, checked against its hash and kept here, so a ref made on one
// host resolves on another.
type Remote interface {
	// Fetch returns a reader of the blob's bytes. The store checks them
	// against the hash; the remote need not.
	Fetch(hash string) (io.ReadCloser, error)
	// Stored is told the hash of each blob put here, so that the remote
	// can take a copy. It must not block: copy in the background.
	Stored(hash string)
}

type remoteBox struct{ r Remote }

// SetRemote makes r the store's remote (nil: none). Safe at any time.
func (s *Store) SetRemote(r Remote) { s.remote.Store(&remoteBox{r}) }

func (s *Store) remoteOf() Remote {
	if b := s.remote.Load(); b != nil {
		return b.r
	}
	return nil
}

// stored tells the remote of a put.
func (s *Store) stored(hash string) {
	if r := s.remoteOf(); r != nil {
		r.Stored(hash)
	}
}

// fetchMissing brings a blob that is not here from the remote, when there
// is one: it is stored like a put (hashed as it is written) and kept only
// when its hash is the one asked for. It returns the error to report
// when the blob could not be had, or nil when it is now here.
func (s *Store) fetchMissing(hash string, missing error) error {
	r := s.remoteOf()
	if r == nil || !errors.Is(missing, fs.ErrNotExist) {
		return s.readError(hash, missing)
	}
	rc, err := r.Fetch(hash)
	if err != nil {
		var re *rpc.Error
		if errors.As(err, &re) {
			return err
		}
		return rpc.Errorf(rpc.NotFound, "no blob %s here, and the remote store could not provide it (%v); produce the value again", hash, err)
	}
	defer rc.Close()
	// s.store, not PutReader: the remote need not hear of its own blob.
	got, _, err := s.store(func(w *blobWriter) error {
		_, err := io.Copy(w, rc)
		return err
	}, false)
	if err != nil {
		return fmt.Errorf("fetch blob %s from the remote store: %w", hash, err)
	}
	if got != hash {
		_ = s.Delete(got)
		return rpc.Errorf(rpc.Corrupt, "the remote store's copy of blob %s hashes to %s; it was not kept or served", hash, got)
	}
	return nil
}

// remoteHolder is embedded in Store.
type remoteHolder struct {
	remote atomic.Pointer[remoteBox]
}
