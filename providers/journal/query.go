package journal

import (
	"bytes"
	"cmp"
	"errors"
	"fmt"
	"math"
	"slices"

	"github.com/shoal-sh/shoal/core"
	bolt "go.etcd.io/bbolt"
)

// Query limits.
const (
	DefaultLimit = 100
	MaxLimit     = 1000
)

// Query selects rows; every set field must match. Rows come newest first
// (by ts, then entry_id).
type Query struct {
	// Principal and Head match exactly when not empty.
	Principal string `json:"principal,omitempty"`
	Head      string `json:"head,omitempty"`
	// OK matches the row's ok when not nil.
	OK *bool `json:"ok,omitempty"`
	// Since and Until bound ts in nanoseconds: Since <= ts < Until. Zero
	// leaves that side open.
	Since int64 `json:"since,omitempty"`
	Until int64 `json:"until,omitempty"`
	// Effects matches rows having any of the listed effects.
	Effects []string `json:"effects,omitempty"`
	// Limit caps the rows returned: DefaultLimit when ≤ 0, at most MaxLimit.
	Limit int `json:"limit,omitempty"`
}

func (q *Query) limit() int {
	switch {
	case q.Limit <= 0:
		return DefaultLimit
	case q.Limit > MaxLimit:
		return MaxLimit
	}
	return q.Limit
}

// matches confirms a candidate on the row itself. The indexes already
// agree; this catches values longer than an index key holds.
func (q *Query) matches(r *storedRow) bool {
	if q.Principal != "" && r.Principal != q.Principal {
		return false
	}
	if q.Head != "" && r.Head != q.Head {
		return false
	}
	if q.OK != nil && r.OK != *q.OK {
		return false
	}
	if len(q.Effects) > 0 && !slices.ContainsFunc(q.Effects, func(e string) bool { return slices.Contains(r.Effects, e) }) {
		return false
	}
	return (q.Since == 0 || r.TS >= q.Since) && (q.Until == 0 || r.TS < q.Until)
}

// Query returns the rows matching q, newest first.
//
// Each filter is an index walked backwards; the walks leapfrog each other
// (every cursor seeks to the newest key not newer than the current
// candidate until all agree), so the cost follows the number of
// alternations between the indexes, not the number of rows.
func (j *Journal) Query(q Query) ([]core.JournalRow, error) {
	limit := q.limit()
	// Since 0 leaves the lower side open: rows whose writer gave them a
	// negative ts are in it (the tail's check, matches, agrees).
	since := int64(math.MinInt64)
	if q.Since != 0 {
		since = q.Since
	}
	if q.Until != 0 && since >= q.Until {
		return []core.JournalRow{}, nil
	}
	out := make([]core.JournalRow, 0, min(limit, 64))
	var tail []*storedRow // matching rows not in the indexes yet
	err := j.db.View(func(tx *bolt.Tx) error {
		var walkErr error
		newPrefixWalk := func(b *bolt.Bucket, prefix []byte) *prefixWalk {
			return &prefixWalk{c: b.Cursor(), prefix: prefix, buf: make([]byte, 0, len(prefix)+tsidLen), err: &walkErr}
		}
		var walks []walk
		switch {
		case q.Principal != "" && q.Head != "":
			walks = append(walks, newPrefixWalk(tx.Bucket(bucketPrincipalHead),
				append(valuePrefix(q.Principal), valuePrefix(q.Head)...)))
		case q.Principal != "":
			walks = append(walks, newPrefixWalk(tx.Bucket(bucketPrincipal), valuePrefix(q.Principal)))
		case q.Head != "":
			walks = append(walks, newPrefixWalk(tx.Bucket(bucketHead), valuePrefix(q.Head)))
		}
		if q.OK != nil {
			walks = append(walks, newPrefixWalk(tx.Bucket(bucketOK), okPrefix(*q.OK)))
		}
		if len(q.Effects) > 0 {
			var u unionWalk
			seen := map[string]bool{}
			for _, e := range q.Effects {
				if !seen[e] {
					seen[e] = true
					u = append(u, newPrefixWalk(tx.Bucket(bucketEffect), valuePrefix(e)))
				}
			}
			walks = append(walks, u)
		}
		if len(walks) == 0 {
			walks = append(walks, newPrefixWalk(tx.Bucket(bucketByTS), nil))
		}

		until := int64(maxTS)
		if q.Until != 0 {
			until = q.Until - 1
		}
		target := tsid(until, ^uint64(0))
		lower := tsid(since, 0)
		rows := tx.Bucket(bucketRows)
		var err error
		if tail, err = j.tailMatches(tx, &q); err != nil {
			return err
		}
		for len(out) < limit {
			key, ok := leapfrog(walks, target, lower)
			if !ok {
				break
			}
			id := tsidID(key)
			s, err := decodeRow(rows, id)
			if err != nil {
				return err
			}
			if q.matches(s) {
				out = append(out, s.row())
			}
			if !decrement(key) {
				break
			}
			target = key
		}
		return walkErr
	})
	if err != nil {
		return nil, fmt.Errorf("journal query: %w", err)
	}
	return mergeNewest(out, tail, limit), nil
}

// tailMatches returns the rows past the indexes' reach in tx that match q,
// newest first. Most come decoded from the writer's tail; a row the
// snapshot lacks (the tail moved on since tx began) is read from tx.
func (j *Journal) tailMatches(tx *bolt.Tx, q *Query) ([]*storedRow, error) {
	from, to := indexedThrough(tx), lastRowID(tx)
	if to <= from {
		return nil, nil
	}
	snap := j.tailSnapshot()
	var first uint64
	if len(snap) > 0 {
		first = snap[0].EntryID
	}
	rows := tx.Bucket(bucketRows)
	var out []*storedRow
	for id := from + 1; id <= to && id > from; id++ {
		var s *storedRow
		if i := id - first; first != 0 && id >= first && i < uint64(len(snap)) && snap[i].EntryID == id {
			s = snap[i]
		} else {
			var err error
			if s, err = decodeRow(rows, id); err != nil {
				return nil, err
			}
		}
		if q.matches(s) {
			out = append(out, s)
		}
	}
	slices.SortFunc(out, func(a, b *storedRow) int { return newerFirst(a.TS, a.EntryID, b.TS, b.EntryID) })
	return out, nil
}

// newerFirst orders rows newest first: by ts, then entry_id.
func newerFirst(ats int64, aid uint64, bts int64, bid uint64) int {
	if c := cmp.Compare(bts, ats); c != 0 {
		return c
	}
	return cmp.Compare(bid, aid)
}

// mergeNewest merges two newest-first lists into the newest limit rows.
func mergeNewest(indexed []core.JournalRow, tail []*storedRow, limit int) []core.JournalRow {
	if len(tail) == 0 {
		return indexed
	}
	out := make([]core.JournalRow, 0, min(limit, len(indexed)+len(tail)))
	for len(out) < limit && (len(indexed) > 0 || len(tail) > 0) {
		if len(tail) == 0 || len(indexed) > 0 && newerFirst(indexed[0].TS, indexed[0].EntryID, tail[0].TS, tail[0].EntryID) < 0 {
			out = append(out, indexed[0])
			indexed = indexed[1:]
		} else {
			// The tail's rows stay in memory: a reader gets its own
			// effects slice.
			r := tail[0].row()
			r.Effects = slices.Clone(r.Effects)
			out = append(out, r)
			tail = tail[1:]
		}
	}
	return out
}

func decodeRow(rows *bolt.Bucket, id uint64) (*storedRow, error) {
	data, err := rowData(rows, id)
	if errors.Is(err, errMissingRow) {
		return nil, fmt.Errorf("row %d is missing although an index names it; the journal file is damaged", id)
	}
	if err != nil {
		return nil, err
	}
	s, err := unmarshalRow(data)
	if err != nil {
		return nil, fmt.Errorf("decode row %d: %w", id, err)
	}
	if s.EntryID != id {
		return nil, fmt.Errorf("decode row %d: it says it is row %d; the journal file is damaged", id, s.EntryID)
	}
	return s, nil
}

// leapfrog returns the newest tsid not newer than target and not older
// than lower on which every walk agrees.
func leapfrog(walks []walk, target, lower []byte) ([]byte, bool) {
	target = bytes.Clone(target)
	for {
		agreed := true
		for _, w := range walks {
			k, ok := w.seekLE(target)
			if !ok || bytes.Compare(k, lower) < 0 {
				return nil, false
			}
			if !bytes.Equal(k, target) {
				copy(target, k)
				agreed = false
				break
			}
		}
		if agreed {
			return target, true
		}
	}
}

// decrement turns a 16-byte big-endian tsid into the one just below it,
// reporting false when it was already the smallest.
func decrement(k []byte) bool {
	for i := len(k) - 1; i >= 0; i-- {
		k[i]--
		if k[i] != 0xff {
			return true
		}
	}
	return false
}

// walk is a backwards walk over one filter's tsids.
type walk interface {
	// seekLE returns the largest tsid ≤ k the filter holds.
	seekLE(k []byte) ([]byte, bool)
}

// prefixWalk walks the index blocks of one indexed value (see index.go).
type prefixWalk struct {
	c      *bolt.Cursor
	prefix []byte
	buf    []byte
	err    *error // where a malformed block is reported
}

func (w *prefixWalk) seekLE(t []byte) ([]byte, bool) {
	w.buf = append(append(w.buf[:0], w.prefix...), t...)
	k, _ := w.c.Seek(w.buf)
	if k != nil && bytes.Equal(k, w.buf) {
		return k[len(w.prefix):], true
	}
	var v []byte
	if k == nil {
		k, v = w.c.Last()
	} else {
		k, v = w.c.Prev()
	}
	if !isBlockKey(k, w.prefix) {
		return nil, false
	}
	got, err := blockSeekLE(k, v, t)
	if err != nil {
		*w.err = err
		return nil, false
	}
	return got, true
}

// unionWalk matches when any of its walks does (effects any-of).
type unionWalk []*prefixWalk

func (u unionWalk) seekLE(k []byte) ([]byte, bool) {
	var best []byte
	for _, w := range u {
		if got, ok := w.seekLE(k); ok && (best == nil || bytes.Compare(got, best) > 0) {
			best = got
		}
	}
	return best, best != nil
}
