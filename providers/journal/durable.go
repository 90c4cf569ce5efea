package journal

import (
	"encoding/binary"
	"fmt"
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
		// newest events without visiting the rest. The journal channel
		// walks the rows (seq = entry_id - 1), session.transcript its
		// seq → entry_id map.
		b, top, shift := tx.Bucket(bucketSeqTranscript), to-1, uint64(0)
		if channel == ChannelJournal {
			b, top, shift = rows, to, 1 // entry_id of seq to-1
		}
		c := b.Cursor()
		k, v := c.Seek(be64(top))
		switch {
		case k == nil:
			k, v = c.Last()
		case binary.BigEndian.Uint64(k) > top:
			k, v = c.Prev()
		}
		for ; k != nil; k, v = c.Prev() {
			seq := binary.BigEndian.Uint64(k) - shift
			if seq < from || (limit > 0 && len(out) >= limit) {
				break
			}
			id := seq + 1
			if channel == ChannelTranscript {
				id = binary.BigEndian.Uint64(v)
			}
			s, err := decodeRow(rows, id)
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
