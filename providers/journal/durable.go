package journal

import (
	"encoding/binary"
	"fmt"
	"slices"

	"github.com/shoal-sh/shoal/core/bus"
	bolt "go.etcd.io/bbolt"
)

func seqBucket(tx *bolt.Tx, channel string) (*bolt.Bucket, error) {
	name, ok := seqBuckets[channel]
	if !ok {
		return nil, fmt.Errorf("channel %q is not kept by the journal (only %s and %s are)", channel, ChannelJournal, ChannelTranscript)
	}
	return tx.Bucket(name), nil
}

// NextSeq is the seq the channel's next event will get.
func (j *Journal) NextSeq(channel string) (uint64, error) {
	var n uint64
	err := j.db.View(func(tx *bolt.Tx) error {
		if _, err := seqBucket(tx, channel); err != nil {
			return err
		}
		n = nextSeq(tx, channel)
		return nil
	})
	return n, err
}

// OldestSeq is the oldest seq the journal holds for the channel.
func (j *Journal) OldestSeq(channel string) (seq uint64, ok bool, err error) {
	err = j.db.View(func(tx *bolt.Tx) error {
		b, err := seqBucket(tx, channel)
		if err != nil {
			return err
		}
		if k, _ := b.Cursor().First(); k != nil {
			seq, ok = binary.BigEndian.Uint64(k), true
		}
		return nil
	})
	return seq, ok, err
}

// ReadRange rebuilds the channel's events with from <= seq < to, ascending;
// when more than limit match (limit > 0) the newest limit are kept.
func (j *Journal) ReadRange(channel string, from, to uint64, limit int) ([]bus.Event, error) {
	var out []bus.Event
	err := j.db.View(func(tx *bolt.Tx) error {
		b, err := seqBucket(tx, channel)
		if err != nil {
			return err
		}
		if from >= to {
			return nil
		}
		// Walk down from the top of the range so that a limit keeps the
		// newest events without visiting the rest.
		c := b.Cursor()
		var k, v []byte
		if k, _ = c.Seek(be64(to)); k == nil {
			k, v = c.Last()
		} else {
			k, v = c.Prev()
		}
		for ; k != nil; k, v = c.Prev() {
			seq := binary.BigEndian.Uint64(k)
			if seq < from || (limit > 0 && len(out) >= limit) {
				break
			}
			s, err := decodeRow(tx.Bucket(bucketRows), binary.BigEndian.Uint64(v))
			if err != nil {
				return fmt.Errorf("rebuild %s seq %d: %w", channel, seq, err)
			}
			out = append(out, s.event(channel))
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("journal: read %s: %w", channel, err)
	}
	slices.Reverse(out)
	return out, nil
}

// Epoch identifies this journal file: it is drawn at creation and kept, so
// it stays the same across restarts for as long as the file survives.
func (j *Journal) Epoch() string { return j.epoch }
