package journal

import (
	"encoding/binary"
	"encoding/json"
	"fmt"
	"math"
	"strings"

	"github.com/shoal-sh/shoal/core"
	"github.com/shoal-sh/shoal/providers/val/cas"
	bolt "go.etcd.io/bbolt"
)

// The file layout. Every bucket is top level. Index keys end in a 16-byte
// "tsid" (big-endian ts with the sign bit flipped, then big-endian
// entry_id), so within one indexed value keys sort by time then id and a
// reverse walk is newest first. The indexed value is prefixed with its
// uvarint length, which makes prefixes unambiguous: the keys of one value
// are exactly the keys starting with its prefix, whatever bytes it holds.
var (
	bucketMeta      = []byte("meta")         // epoch, schema version
	bucketRows      = []byte("rows")         // be64(entry_id) → JSON storedRow
	bucketByTS      = []byte("ix.ts")        // tsid → nil
	bucketPrincipal = []byte("ix.principal") // len|principal|tsid → nil
	bucketHead      = []byte("ix.head")      // len|head|tsid → nil
	// principal and head together: the common "what did this agent run"
	// query walks only matching rows, however rare the pair is.
	bucketPrincipalHead = []byte("ix.principal_head") // len|principal|len|head|tsid → nil
	bucketOK            = []byte("ix.ok")             // 0|1, tsid → nil
	bucketEffect        = []byte("ix.effect")         // len|effect|tsid → nil, one key per effect
	bucketValRefs       = []byte("valrefs")           // blob hash → nil, for content-store GC

	keyEpoch   = []byte("epoch")
	keyVersion = []byte("version")
)

const schemaVersion = "1"

// Durable channels and their seq → entry_id buckets.
const (
	ChannelJournal    = "journal"
	ChannelTranscript = "session.transcript"
)

var seqBuckets = map[string][]byte{
	ChannelJournal:    []byte("seq.journal"),
	ChannelTranscript: []byte("seq.session.transcript"),
}

var allBuckets = [][]byte{
	bucketMeta, bucketRows, bucketByTS, bucketPrincipal, bucketHead, bucketPrincipalHead, bucketOK,
	bucketEffect, bucketValRefs, seqBuckets[ChannelJournal], seqBuckets[ChannelTranscript],
}

// maxIndexedValue bounds the bytes of a principal, head or effect that go
// into an index key (bbolt keys are limited to 32 KiB). Longer values are
// indexed by their prefix and confirmed on the row.
const maxIndexedValue = 1024

// storedRow is a row as kept on disk: the row plus the channel seqs it got.
type storedRow struct {
	core.JournalRow
	InTranscript  bool    `json:"transcript,omitempty"`
	JournalSeq    uint64  `json:"journal_seq"`
	TranscriptSeq *uint64 `json:"transcript_seq,omitempty"`
}

func (s *storedRow) row() core.JournalRow {
	r := s.JournalRow
	r.Transcript = s.InTranscript
	return r
}

func be64(n uint64) []byte {
	var b [8]byte
	binary.BigEndian.PutUint64(b[:], n)
	return b[:]
}

// tsid is the 16-byte suffix of every index key.
func tsid(ts int64, id uint64) []byte {
	var b [16]byte
	binary.BigEndian.PutUint64(b[:8], uint64(ts)^(1<<63))
	binary.BigEndian.PutUint64(b[8:], id)
	return b[:]
}

func tsidID(k []byte) uint64 { return binary.BigEndian.Uint64(k[8:16]) }

// valuePrefix is the index prefix of one indexed string value.
func valuePrefix(v string) []byte {
	if len(v) > maxIndexedValue {
		v = v[:maxIndexedValue]
	}
	b := binary.AppendUvarint(make([]byte, 0, len(v)+3), uint64(len(v)))
	return append(b, v...)
}

func okPrefix(ok bool) []byte {
	if ok {
		return []byte{1}
	}
	return []byte{0}
}

func indexKey(prefix, suffix []byte) []byte {
	return append(append(make([]byte, 0, len(prefix)+len(suffix)), prefix...), suffix...)
}

// entry is one key a row writes.
type entry struct {
	bucket, key, value []byte
}

// rowEntries lists every key a row writes: the row itself, its index
// entries and its seq mappings. The row's entry_id, ts and seqs are
// already assigned.
func rowEntries(s *storedRow) ([]entry, error) {
	data, err := json.Marshal(s)
	if err != nil {
		return nil, fmt.Errorf("encode row %d: %w", s.EntryID, err)
	}
	suffix := tsid(s.TS, s.EntryID)
	principal, head := valuePrefix(s.Principal), valuePrefix(s.Head)
	out := make([]entry, 0, 9+len(s.Effects))
	out = append(out,
		entry{bucketRows, be64(s.EntryID), data},
		entry{bucketByTS, suffix, nil},
		entry{bucketPrincipal, indexKey(principal, suffix), nil},
		entry{bucketHead, indexKey(head, suffix), nil},
		entry{bucketPrincipalHead, indexKey(append(principal[:len(principal):len(principal)], head...), suffix), nil},
		entry{bucketOK, indexKey(okPrefix(s.OK), suffix), nil},
		entry{seqBuckets[ChannelJournal], be64(s.JournalSeq), be64(s.EntryID)},
	)
	for _, e := range s.Effects {
		out = append(out, entry{bucketEffect, indexKey(valuePrefix(e), suffix), nil})
	}
	if s.TranscriptSeq != nil {
		out = append(out, entry{seqBuckets[ChannelTranscript], be64(*s.TranscriptSeq), be64(s.EntryID)})
	}
	if h, ok := strings.CutPrefix(s.Ref, cas.RefPrefix); ok && cas.ValidHash(h) == nil {
		out = append(out, entry{bucketValRefs, []byte(h), nil})
	}
	return out, nil
}

// Page fill on split. bbolt splits at half a page by default, which suits
// random inserts; the journal's inserts are appends, either to a whole
// bucket (rows, the ts index, seq maps) or to the end of one indexed
// value's range (new rows have the newest tsid), so fuller pages cost
// nothing later and make the file about half as large.
var (
	appendOnly    = [][]byte{bucketRows, bucketByTS, seqBuckets[ChannelJournal], seqBuckets[ChannelTranscript]}
	appendByValue = [][]byte{bucketPrincipal, bucketHead, bucketPrincipalHead, bucketOK, bucketEffect}
)

// putRow writes one row with its index entries and seq mappings.
func putRow(tx *bolt.Tx, s *storedRow) error {
	entries, err := rowEntries(s)
	if err != nil {
		return err
	}
	for _, e := range entries {
		if err := tx.Bucket(e.bucket).Put(e.key, e.value); err != nil {
			return fmt.Errorf("row %d: put %s: %w", s.EntryID, e.bucket, err)
		}
	}
	return nil
}

// setFill sets the buckets' page fill for one write transaction (bbolt
// does not keep it across transactions).
func setFill(tx *bolt.Tx) {
	for _, name := range appendOnly {
		tx.Bucket(name).FillPercent = 1.0
	}
	for _, name := range appendByValue {
		tx.Bucket(name).FillPercent = 0.95
	}
}

// nextSeq is the next seq of a channel: one past the last mapped seq.
func nextSeq(tx *bolt.Tx, channel string) uint64 {
	k, _ := tx.Bucket(seqBuckets[channel]).Cursor().Last()
	if k == nil {
		return 0
	}
	return binary.BigEndian.Uint64(k) + 1
}

// maxTS is the largest representable ts, for open-ended ranges.
const maxTS = math.MaxInt64
