package journal

import (
	"encoding/binary"
	"fmt"
	"math"
	"slices"

	"github.com/shoal-sh/shoal/core/bus"
	bolt "go.etcd.io/bbolt"
)

func checkChannel(channel string) error {
	if channel != ChannelJournal && channel != ChannelTranscript {
		return fmt.Errorf("channel %q is not kept by the journal (only %s and %s are)", channel, ChannelJournal, ChannelTranscript)
	}
	return nil
}

// NextSeq is the seq the channel's next event will get.
func (j *Journal) NextSeq(channel string) (uint64, error) {
	if err := checkChannel(channel); err != nil {
		return 0, err
	}
	var n uint64
	err := j.db.View(func(tx *bolt.Tx) error {
		n = nextSeq(tx, channel)
		return nil
	})
	return n, err
}

// OldestSeq is the oldest seq the journal holds for the channel.
func (j *Journal) OldestSeq(channel string) (seq uint64, ok bool, err error) {
	if err := checkChannel(channel); err != nil {
		return 0, false, err
	}
	err = j.db.View(func(tx *bolt.Tx) error {
		b := tx.Bucket(bucketSeqTranscript)
		if channel == ChannelJournal {
			b = tx.Bucket(bucketRows)
		}
		if k, _ := b.Cursor().First(); k != nil {
			seq, ok = binary.BigEndian.Uint64(k), true
			if channel == ChannelJournal {
				seq-- // entry_id - 1
			}
		}
		return nil
	})
	return seq, ok, err
}

// ReadRange rebuilds the channel's events with from <= seq < to, ascending;
// when more than limit match (limit > 0) the newest limit are kept.
func (j *Journal) ReadRange(channel string, from, to uint64, limit int) ([]bus.Event, error) {
	if err := checkChannel(channel); err != nil {
		return nil, fmt.Errorf("journal: read %s: %w", channel, err)
	}
	var out []bus.Event
	err := j.db.View(func(tx *bolt.Tx) error {
		if from >= to {
			return nil
		}
		rows := tx.Bucket(bucketRows)
		// Walk down from the top of the range so that a limit keeps the
		// newest events without visiting the rest.
		var failed error
		err := walkSeqsDown(tx, channel, to-1, func(seq, id uint64) bool {
			if seq < from || (limit > 0 && len(out) >= limit) {
				return false
			}
			s, err := decodeRow(rows, id)
			if err != nil {
				failed = fmt.Errorf("rebuild %s seq %d: %w", channel, seq, err)
				return false
			}
			out = append(out, s.event(channel))
			return true
		})
		if err != nil {
			return err
		}
		return failed
	})
	if err != nil {
		return nil, fmt.Errorf("journal: read %s: %w", channel, err)
	}
	slices.Reverse(out)
	return out, nil
}

// walkSeqsDown calls fn with the channel's seqs not above top and their
// entry_ids, highest first, until fn returns false. The journal channel's
// seqs are its rows' entry_ids - 1; session.transcript keeps, per commit,
// one block: the key is the commit's first transcript seq, the value the
// entry_ids of that seq and the ones after it, 8 bytes each (a version 1
// entry is a block of one).
func walkSeqsDown(tx *bolt.Tx, channel string, top uint64, fn func(seq, id uint64) bool) error {
	if channel == ChannelJournal {
		if top == math.MaxUint64 {
			top-- // entry_id top+1 must exist as a number
		}
		// Rows are keyed by entry_id, alone or in blocks (rowData).
		c := tx.Bucket(bucketRows).Cursor()
		k, v := seekLE(c, top+1)
		var above uint64 // the first id of the block walked before, 0 at first
		for ; k != nil; k, v = c.Prev() {
			first := binary.BigEndian.Uint64(k)
			if err := adjoins(first, blockRows(v), &above, "rows"); err != nil {
				return err
			}
			for i := min(blockRows(v)-1, top+1-first); ; i-- {
				if id := first + i; !fn(id-1, id) {
					return nil
				}
				if i == 0 {
					break
				}
			}
		}
		return nil
	}
	c := tx.Bucket(bucketSeqTranscript).Cursor()
	k, v := seekLE(c, top)
	var above uint64
	for ; k != nil; k, v = c.Prev() {
		first := binary.BigEndian.Uint64(k)
		if len(v) == 0 || len(v)%8 != 0 {
			return fmt.Errorf("transcript seq block %d is malformed (%d bytes); the journal file is damaged", first, len(v))
		}
		n := uint64(len(v) / 8)
		if err := adjoins(first, n, &above, "transcript seqs"); err != nil {
			return err
		}
		for i := min(n-1, top-first); ; i-- {
			if !fn(first+i, binary.BigEndian.Uint64(v[i*8:])) {
				return nil
			}
			if i == 0 {
				break
			}
		}
	}
	return nil
}

// adjoins checks that a block of n numbers from first ends right below
// the block walked before it (whose first number is *above, 0 for none),
// then makes it that block. Blocks that overlap or leave a gap would
// repeat or skip seqs.
func adjoins(first, n uint64, above *uint64, what string) error {
	if *above != 0 && first+n != *above {
		return fmt.Errorf("%s %d to %d are followed by %d; the journal file is damaged", what, first, first+n-1, *above)
	}
	*above = first
	return nil
}

// seekLE moves c to the greatest be64 key not above n.
func seekLE(c *bolt.Cursor, n uint64) (k, v []byte) {
	k, v = c.Seek(be64(n))
	switch {
	case k == nil:
		return c.Last()
	case binary.BigEndian.Uint64(k) > n:
		return c.Prev()
	}
	return k, v
}

// Epoch identifies this journal file: it is drawn at creation and kept, so
// it stays the same across restarts for as long as the file survives.
func (j *Journal) Epoch() string { return j.epoch }
