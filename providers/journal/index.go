package journal

import (
	"bytes"
	"errors"
	"fmt"
	"slices"
	"sort"

	bolt "go.etcd.io/bbolt"
)

// Index blocks.
//
// For each indexed value an index bucket holds blocks of tsids. A block's
// key is the value's prefix followed by the block's first tsid; its value
// is the block's other tsids, 16 bytes each, ascending, all greater than
// the first. For one value the blocks never overlap: every tsid of a block
// is smaller than the next block's first. So the newest tsid not newer
// than t is in the block with the greatest key not greater than prefix|t,
// found with one seek.
//
// Writing a block of up to maxBlock rows costs one Put where one key per
// row would cost maxBlock, which is what makes indexing a thousand rows
// at once cheap. A key with an empty value is a block of one, which is
// exactly a version 1 index entry: files written before blocks existed
// read without conversion.

// maxBlock is the most tsids a flush puts in one block (the value then
// holds 111 of them, 1,776 bytes), so
// that two blocks and their keys fit in one 4 KiB page at the index
// buckets' fill (128 would leave every page half empty).
const maxBlock = 112

const tsidLen = 16

var errBlock = errors.New("malformed index block")

// blockLast is the greatest tsid of the block with key k and value v.
func blockLast(k, v []byte) []byte {
	if len(v) >= tsidLen {
		return v[len(v)-tsidLen:]
	}
	return k[len(k)-tsidLen:]
}

// blockSeekLE returns the greatest tsid ≤ t in the block with key k
// (whose own tsid is ≤ t) and value v.
func blockSeekLE(k, v, t []byte) ([]byte, error) {
	if len(v)%tsidLen != 0 {
		return nil, fmt.Errorf("%w: %d bytes", errBlock, len(v))
	}
	n := len(v) / tsidLen
	// The first entry of v greater than t; the one before it is the answer.
	i := sort.Search(n, func(i int) bool { return bytes.Compare(v[i*tsidLen:(i+1)*tsidLen], t) > 0 })
	if i == 0 {
		return k[len(k)-tsidLen:], nil
	}
	return v[(i-1)*tsidLen : i*tsidLen], nil
}

// lastBlock is the last block of the value with prefix in c's bucket.
func lastBlock(c *bolt.Cursor, prefix []byte) (k, v []byte) {
	upper := append(bytes.Clone(prefix), bytes.Repeat([]byte{0xff}, tsidLen)...)
	k, v = c.Seek(upper)
	switch {
	case k != nil && bytes.Equal(k, upper):
		return k, v
	case k == nil:
		k, v = c.Last()
	default:
		k, v = c.Prev()
	}
	if !isBlockKey(k, prefix) {
		return nil, nil
	}
	return k, v
}

// blockLE is the block of the value with prefix whose key is the greatest
// not greater than prefix|t.
func blockLE(c *bolt.Cursor, prefix, t []byte) (k, v []byte) {
	want := append(bytes.Clone(prefix), t...)
	k, v = c.Seek(want)
	if k != nil && bytes.Equal(k, want) {
		return k, v
	}
	if k == nil {
		k, v = c.Last()
	} else {
		k, v = c.Prev()
	}
	if !isBlockKey(k, prefix) {
		return nil, nil
	}
	return k, v
}

func isBlockKey(k, prefix []byte) bool {
	return k != nil && len(k) == len(prefix)+tsidLen && bytes.HasPrefix(k, prefix)
}

// indexGroup is the tsids one flush adds to one indexed value.
type indexGroup struct {
	bucket []byte
	prefix []byte
	tsids  [][tsidLen]byte
}

// putIndexes writes the index entries of rows in tx, as blocks.
func putIndexes(tx *bolt.Tx, rows []*storedRow) error {
	// One map per bucket, from the value's prefix to its group.
	groups := map[string]map[string]*indexGroup{}
	var order []*indexGroup
	var buf []byte
	for _, s := range rows {
		var t [tsidLen]byte
		putTSID(t[:], s.TS, s.EntryID)
		buf = indexPrefixes(s, buf, func(bucket, prefix []byte) {
			m := groups[string(bucket)]
			if m == nil {
				m = map[string]*indexGroup{}
				groups[string(bucket)] = m
			}
			g := m[string(prefix)]
			if g == nil {
				g = &indexGroup{bucket: bucket, prefix: bytes.Clone(prefix)}
				m[string(prefix)] = g
				order = append(order, g)
			}
			g.tsids = append(g.tsids, t)
		})
	}
	buckets := map[string]*bolt.Bucket{}
	for _, g := range order {
		b := buckets[string(g.bucket)]
		if b == nil {
			b = writeBucket(tx, g.bucket)
			buckets[string(g.bucket)] = b
		}
		if err := g.write(b); err != nil {
			return fmt.Errorf("index %s: %w", g.bucket, err)
		}
	}
	return nil
}

func cmpTSID(a, b [tsidLen]byte) int { return bytes.Compare(a[:], b[:]) }

// write adds the group's tsids to the value's blocks. New rows are almost
// always newer than every indexed one, so their tsids extend the last
// block and then start new ones; a tsid older than the value's newest
// (a row whose writer supplied its ts) goes into the block that covers
// it.
func (g *indexGroup) write(b *bolt.Bucket) error {
	ts := g.tsids
	if !slices.IsSortedFunc(ts, cmpTSID) {
		slices.SortFunc(ts, cmpTSID)
	}
	ts = slices.CompactFunc(ts, func(a, b [tsidLen]byte) bool { return a == b })

	k, v := lastBlock(b.Cursor(), g.prefix)
	if k != nil {
		last := blockLast(k, v)
		i := sort.Search(len(ts), func(i int) bool { return bytes.Compare(ts[i][:], last) > 0 })
		for _, t := range ts[:i] {
			if err := g.insert(b, t); err != nil {
				return err
			}
		}
		ts = ts[i:]
		if len(ts) == 0 {
			return nil
		}
		if i > 0 {
			k, v = lastBlock(b.Cursor(), g.prefix)
		}
		if len(v)%tsidLen != 0 {
			return fmt.Errorf("%w: %d bytes", errBlock, len(v))
		}
		// Fill the last block up to maxBlock.
		if room := maxBlock - 1 - len(v)/tsidLen; room > 0 {
			n := min(room, len(ts))
			nv := make([]byte, 0, len(v)+n*tsidLen)
			nv = append(nv, v...)
			for _, t := range ts[:n] {
				nv = append(nv, t[:]...)
			}
			if err := b.Put(bytes.Clone(k), nv); err != nil {
				return err
			}
			ts = ts[n:]
		}
	}
	for len(ts) > 0 {
		n := min(maxBlock, len(ts))
		if err := b.Put(blockKey(g.prefix, ts[0][:]), blockValue(ts[1:n])); err != nil {
			return err
		}
		ts = ts[n:]
	}
	return nil
}

// insert adds one tsid older than the value's newest to the block that
// covers it, or makes it a block of its own before the first one. A block
// grown past twice maxBlock is split in two.
func (g *indexGroup) insert(b *bolt.Bucket, t [tsidLen]byte) error {
	k, v := blockLE(b.Cursor(), g.prefix, t[:])
	if k == nil {
		return b.Put(blockKey(g.prefix, t[:]), nil)
	}
	if len(v)%tsidLen != 0 {
		return fmt.Errorf("%w: %d bytes", errBlock, len(v))
	}
	if bytes.Equal(k[len(g.prefix):], t[:]) {
		return nil // already there
	}
	all := make([][tsidLen]byte, 0, 2+len(v)/tsidLen)
	all = append(all, [tsidLen]byte(k[len(g.prefix):]))
	for i := 0; i < len(v); i += tsidLen {
		all = append(all, [tsidLen]byte(v[i:i+tsidLen]))
	}
	i, found := slices.BinarySearchFunc(all, t, cmpTSID)
	if found {
		return nil
	}
	all = slices.Insert(all, i, t)
	k = bytes.Clone(k)
	if len(all) <= 2*maxBlock {
		return b.Put(k, blockValue(all[1:]))
	}
	half := len(all) / 2
	if err := b.Put(k, blockValue(all[1:half])); err != nil {
		return err
	}
	return b.Put(blockKey(g.prefix, all[half][:]), blockValue(all[half+1:]))
}

func blockKey(prefix, first []byte) []byte {
	return append(append(make([]byte, 0, len(prefix)+tsidLen), prefix...), first...)
}

func blockValue(ts [][tsidLen]byte) []byte {
	if len(ts) == 0 {
		return nil
	}
	v := make([]byte, 0, len(ts)*tsidLen)
	for _, t := range ts {
		v = append(v, t[:]...)
	}
	return v
}
