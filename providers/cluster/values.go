package cluster

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/shoal-sh/shoal/core/rpc"
	"github.com/shoal-sh/shoal/core/wire"
	"github.com/shoal-sh/shoal/providers/val/cas"
)

// Values anywhere. Every blob put in this kernel's content store (spilled
// transcript values, blob.put) is copied, in the background, to the
// shoal_values object store bucket under its blake3 hash; a val: ref
// missing here is fetched from the bucket by the content store, which
// checks the hash and keeps the copy. Uploads wait out an outage in
// memory; blobs put while the kernel ran disconnected and not uploaded
// before it stopped stay local (docs/cluster.md).

type values struct {
	c        *Cluster
	store    *cas.Store
	maxBytes int64
	wake     chan struct{}

	mu      sync.Mutex
	pending map[string]bool
	obs     jetstream.ObjectStore

	uploaded, fetched atomic.Uint64
	errMu             sync.Mutex
	lastErr           string
}

var _ cas.Remote = (*values)(nil)

func newValues(c *Cluster, store *cas.Store, maxBytes int64) *values {
	return &values{c: c, store: store, maxBytes: maxBytes, wake: make(chan struct{}, 1), pending: map[string]bool{}}
}

func (v *values) poke() {
	select {
	case v.wake <- struct{}{}:
	default:
	}
}

// Stored queues the blob for upload.
func (v *values) Stored(hash string) {
	v.mu.Lock()
	v.pending[hash] = true
	v.mu.Unlock()
	v.poke()
}

func (v *values) pendingCount() int {
	v.mu.Lock()
	defer v.mu.Unlock()
	return len(v.pending)
}

// bucket returns the object store, creating the bucket on first use.
func (v *values) bucket(ctx context.Context) (jetstream.ObjectStore, error) {
	v.mu.Lock()
	obs := v.obs
	v.mu.Unlock()
	if obs != nil {
		return obs, nil
	}
	obs, err := v.c.js.ObjectStore(ctx, valuesBucket)
	if errors.Is(err, jetstream.ErrBucketNotFound) {
		obs, err = v.c.js.CreateObjectStore(ctx, jetstream.ObjectStoreConfig{
			Bucket:      valuesBucket,
			Description: "Shoal values (blobs by blake3 hash)",
			Storage:     jetstream.FileStorage,
			Replicas:    v.c.cfg.Replicas,
			MaxBytes:    cmpOr(v.maxBytes, -1),
		})
		if errors.Is(err, jetstream.ErrBucketExists) || errors.Is(err, jetstream.ErrStreamNameAlreadyInUse) {
			obs, err = v.c.js.ObjectStore(ctx, valuesBucket)
		}
	}
	if err != nil {
		return nil, fmt.Errorf("object store %s: %w", valuesBucket, err)
	}
	v.mu.Lock()
	v.obs = obs
	v.mu.Unlock()
	return obs, nil
}

func (v *values) start() {
	v.c.wg.Add(1)
	go v.loop()
}

func (v *values) loop() {
	defer v.c.wg.Done()
	tick := time.NewTicker(2 * time.Second)
	defer tick.Stop()
	for {
		select {
		case <-v.c.stop:
			return
		case <-v.wake:
		case <-tick.C:
		}
		v.mu.Lock()
		hashes := make([]string, 0, len(v.pending))
		for h := range v.pending {
			hashes = append(hashes, h)
		}
		v.mu.Unlock()
		for _, h := range hashes {
			if !v.c.connected() {
				break
			}
			if err := v.upload(h); err != nil {
				v.noteErr(err)
				break
			}
			v.mu.Lock()
			delete(v.pending, h)
			v.mu.Unlock()
		}
	}
}

func (v *values) noteErr(err error) {
	v.errMu.Lock()
	v.lastErr = err.Error()
	v.errMu.Unlock()
	v.c.log.Debug("cluster values", "err", err)
}

// upload copies one blob to the bucket unless it is there already.
func (v *values) upload(hash string) error {
	ctx, cancel := context.WithTimeout(v.c.base, 10*time.Minute)
	defer cancel()
	obs, err := v.bucket(ctx)
	if err != nil {
		return err
	}
	if _, err := obs.GetInfo(ctx, hash); err == nil {
		return nil
	} else if !errors.Is(err, jetstream.ErrObjectNotFound) {
		return fmt.Errorf("upload %s: %w", hash, err)
	}
	rc, _, err := v.store.Open(hash)
	if err != nil {
		var re *rpc.Error
		if errors.As(err, &re) && re.Code == rpc.NotFound {
			return nil // collected since: nothing to share
		}
		return fmt.Errorf("upload %s: %w", hash, err)
	}
	defer rc.Close()
	if _, err := obs.Put(ctx, jetstream.ObjectMeta{Name: hash}, rc); err != nil {
		return fmt.Errorf("upload %s: %w", hash, err)
	}
	v.uploaded.Add(1)
	return nil
}

// Fetch opens the blob from the bucket.
func (v *values) Fetch(hash string) (io.ReadCloser, error) {
	what := "value val:blake3:" + hash + " is not in this kernel's content store, and fetching it from the cluster"
	if err := v.c.down(what); err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(v.c.base, 10*time.Minute)
	obs, err := v.bucket(ctx)
	if err != nil {
		cancel()
		return nil, v.c.unavailable(what, err)
	}
	res, err := obs.Get(ctx, hash)
	if errors.Is(err, jetstream.ErrObjectNotFound) {
		cancel()
		return nil, rpc.Errorf(rpc.NotFound, "no blob %s here nor in the cluster's object store: it was never stored, was collected, or its kernel has not uploaded it yet (shoal status on that kernel shows pending uploads)", hash)
	}
	if err != nil {
		cancel()
		return nil, v.c.unavailable(what, err)
	}
	v.fetched.Add(1)
	return &fetchReader{ObjectResult: res, cancel: cancel}, nil
}

type fetchReader struct {
	jetstream.ObjectResult
	cancel context.CancelFunc
}

func (r *fetchReader) Close() error {
	err := r.ObjectResult.Close()
	r.cancel()
	return err
}

func (v *values) status() wire.ClusterValues {
	v.errMu.Lock()
	lastErr := v.lastErr
	v.errMu.Unlock()
	return wire.ClusterValues{Bucket: valuesBucket, PendingUploads: v.pendingCount(),
		Uploaded: v.uploaded.Load(), Fetched: v.fetched.Load(), LastError: lastErr}
}
