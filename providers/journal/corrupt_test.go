package journal

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"math"
	"path/filepath"
	"strings"
	"testing"

	"github.com/shoal-sh/shoal/core"
	bolt "go.etcd.io/bbolt"
)

// corruptFixture writes a closed, fully indexed journal whose rows were
// committed in multi-row blocks, and returns its path and rows.
func corruptFixture(t *testing.T) (string, []core.JournalRow) {
	t.Helper()
	path := filepath.Join(t.TempDir(), FileName)
	j, err := Open(path, Options{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	rows := make([]core.JournalRow, 300)
	for i := range rows {
		rows[i] = core.JournalRow{Principal: fmt.Sprintf("agent:%d", i%3), Head: "git", Source: strings.Repeat("s", i%40),
			Effects: []string{"fs.read"}, Transcript: i%2 == 0}
	}
	rows = appendAll(t, j, rows)
	if err := j.Close(); err != nil {
		t.Fatal(err)
	}
	return path, rows
}

// multiRowBlock finds a rows value holding several rows.
func multiRowBlock(t *testing.T, tx *bolt.Tx) (k, v []byte) {
	t.Helper()
	c := tx.Bucket(bucketRows).Cursor()
	for k, v := c.First(); k != nil; k, v = c.Next() {
		if blockRows(v) > 2 {
			return bytes.Clone(k), bytes.Clone(v)
		}
	}
	t.Fatal("no multi-row block: the rows were not committed in batches")
	return nil, nil
}

// Damaged values in the file give an error naming the problem from every
// read that reaches them: never a panic, never rows or events silently
// missing, doubled or made up.
func TestCorruptValues(t *testing.T) {
	tests := []struct {
		name    string
		corrupt func(t *testing.T, tx *bolt.Tx) error
		// openFails: Open itself refuses the file.
		openFails bool
	}{
		{"row block cut short", func(t *testing.T, tx *bolt.Tx) error {
			k, v := multiRowBlock(t, tx)
			return tx.Bucket(bucketRows).Put(k, v[:len(v)-5])
		}, false},
		{"row block cut inside its offsets", func(t *testing.T, tx *bolt.Tx) error {
			k, v := multiRowBlock(t, tx)
			return tx.Bucket(bucketRows).Put(k, v[:4])
		}, false},
		{"row block claiming a row fewer", func(t *testing.T, tx *bolt.Tx) error {
			k, v := multiRowBlock(t, tx)
			n, w := binary.Uvarint(v[1:])
			if w != 1 {
				t.Skip("block count is not one byte")
			}
			v[1] = byte(n - 1)
			return tx.Bucket(bucketRows).Put(k, v)
		}, false},
		{"row block claiming rows more", func(t *testing.T, tx *bolt.Tx) error {
			k, v := multiRowBlock(t, tx)
			n, w := binary.Uvarint(v[1:])
			if w != 1 || n > 120 {
				t.Skip("block count is not one small byte")
			}
			// Two more rows, whose offsets are the block's end: they
			// overlap the next block's first rows.
			end := binary.BigEndian.Uint32(v[1+w+4*int(n)-4:])
			nv := []byte{rowBlock, byte(n + 2)}
			nv = append(nv, v[1+w:1+w+4*int(n)]...)
			nv = binary.BigEndian.AppendUint32(nv, end)
			nv = binary.BigEndian.AppendUint32(nv, end)
			nv = append(nv, v[1+w+4*int(n):]...)
			return tx.Bucket(bucketRows).Put(k, nv)
		}, false},
		{"row garbage", func(t *testing.T, tx *bolt.Tx) error {
			k, _ := multiRowBlock(t, tx)
			return tx.Bucket(bucketRows).Put(k, []byte("garbage"))
		}, false},
		{"index block of a bad length", func(t *testing.T, tx *bolt.Tx) error {
			b := tx.Bucket(bucketPrincipal)
			k, v := b.Cursor().Seek(valuePrefix("agent:1"))
			return b.Put(bytes.Clone(k), append(bytes.Clone(v), 1, 2, 3))
		}, false},
		{"index entry naming a row that does not exist", func(t *testing.T, tx *bolt.Tx) error {
			return tx.Bucket(bucketByTS).Put(tsid(math.MaxInt64-1, 1000), nil)
		}, false},
		{"transcript seq block of a bad length", func(t *testing.T, tx *bolt.Tx) error {
			b := tx.Bucket(bucketSeqTranscript)
			k, v := b.Cursor().First()
			return b.Put(bytes.Clone(k), append(bytes.Clone(v), 9))
		}, false},
		{"transcript seq naming a row that does not exist", func(t *testing.T, tx *bolt.Tx) error {
			b := tx.Bucket(bucketSeqTranscript)
			k, v := b.Cursor().First()
			v = bytes.Clone(v)
			binary.BigEndian.PutUint64(v, 5000)
			return b.Put(bytes.Clone(k), v)
		}, false},
		{"unindexed row damaged", func(t *testing.T, tx *bolt.Tx) error {
			k, v := multiRowBlock(t, tx)
			// The rows from this block on wait for their index entries,
			// as after a crash; Open reads them first.
			if err := tx.Bucket(bucketMeta).Put(keyIndexed, be64(binary.BigEndian.Uint64(k)-1)); err != nil {
				return err
			}
			return tx.Bucket(bucketRows).Put(k, v[:len(v)-5])
		}, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			path, rows := corruptFixture(t)
			db, err := bolt.Open(path, 0o600, nil)
			if err != nil {
				t.Fatal(err)
			}
			err = db.Update(func(tx *bolt.Tx) error { return tt.corrupt(t, tx) })
			db.Close()
			if err != nil {
				t.Fatal(err)
			}
			j, err := Open(path, Options{NoSync: true})
			if tt.openFails {
				if err == nil {
					j.Close()
					t.Fatal("the damaged journal opened")
				}
				if !strings.Contains(err.Error(), path) || !strings.Contains(err.Error(), "move it aside") {
					t.Fatalf("open: %v", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			defer j.Close()
			// Reads that cover everything: each is right or an error.
			var errs int
			for _, q := range []Query{{Limit: MaxLimit}, {Principal: "agent:1", Limit: MaxLimit}} {
				got, err := j.Query(q)
				if err != nil {
					errs++
					continue
				}
				if want := naive(rows, q); !equalIDs(got, want) {
					t.Errorf("query %+v answered wrong rows without an error:\n got %v\nwant %v", q, ids(got), ids(want))
				}
			}
			for _, ch := range []string{ChannelJournal, ChannelTranscript} {
				want := uint64(len(rows))
				if ch == ChannelTranscript {
					want = uint64(len(rows) / 2)
				}
				evs, err := j.ReadRange(ch, 0, math.MaxUint64, 0)
				if err != nil {
					errs++
					continue
				}
				ok := uint64(len(evs)) == want
				for i, ev := range evs {
					ok = ok && ev.Seq == uint64(i)
				}
				if !ok {
					t.Errorf("%s read %d events without an error, want seqs 0 to %d", ch, len(evs), want-1)
				}
			}
			if errs == 0 {
				t.Error("no read noticed the damage")
			}
		})
	}
}

func equalIDs(a, b []core.JournalRow) bool {
	x, y := ids(a), ids(b)
	if len(x) != len(y) {
		return false
	}
	for i := range x {
		if x[i] != y[i] {
			return false
		}
	}
	return true
}
