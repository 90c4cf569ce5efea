package journal

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"iter"
	"math"
	"strings"

	"github.com/shoal-sh/shoal/core"
	"github.com/shoal-sh/shoal/providers/val/cas"
	bolt "go.etcd.io/bbolt"
)

// The file layout. Every bucket is top level. Rows are identified in the
// indexes by a 16-byte "tsid" (big-endian ts with the sign bit flipped,
// then big-endian entry_id), so they sort by time then id and a reverse
// walk is newest first. An index holds, per indexed value, blocks of
// tsids: the key is the value's prefix and the block's first tsid, the
// value the block's other tsids, ascending (see index.go). The indexed
// value is prefixed with its uvarint length, which makes prefixes
// unambiguous: the keys of one value are exactly the keys starting with
// its prefix, whatever bytes it holds.
var (
	bucketMeta      = []byte("meta")         // epoch, schema version, indexed
	bucketRows      = []byte("rows")         // be64(entry_id) → encoded row, or a block of rows
	bucketByTS      = []byte("ix.ts")        // tsid → tsids
	bucketPrincipal = []byte("ix.principal") // len|principal|tsid → tsids
	bucketHead      = []byte("ix.head")      // len|head|tsid → tsids
	// principal and head together: the common "what did this agent run"
	// query walks only matching rows, however rare the pair is.
	bucketPrincipalHead = []byte("ix.principal_head") // len|principal|len|head|tsid → tsids
	bucketOK            = []byte("ix.ok")             // 0|1, tsid → tsids
	bucketEffect        = []byte("ix.effect")         // len|effect|tsid → tsids, per effect
	bucketValRefs       = []byte("valrefs")           // blob hash → nil, for content-store GC

	keyEpoch   = []byte("epoch")
	keyVersion = []byte("version")
	// keyIndexed holds be64(entry_id): every row up to it has its index
	// entries; the rows after it are the unindexed tail (see journal.go).
	keyIndexed = []byte("indexed")
)

// Schema versions.
//
// Version 1 stored rows as JSON, kept a seq.journal bucket mapping each
// journal seq to its entry_id, and wrote every row's index entries in the
// row's own transaction.
//
// Version 2 stores rows in a compact binary form, a commit's rows in
// blocks under the first one's entry_id, and a commit's transcript seqs in
// one block; it derives the journal seq from the entry_id (seq =
// entry_id - 1, which version 1 also guaranteed) instead of mapping it;
// it keeps index entries in blocks of many tsids under one key; and it may
// leave the newest rows' index entries for a later transaction, recording
// in meta "indexed" how far the indexes reach. Everything version 1 wrote
// reads as version 2 data: a JSON row is a row of its own, an index key
// with an empty value is a block of one, a transcript seq entry is a
// block of one. A version 1 reader would misread the blocks and silently
// miss the unindexed rows, so version 1 kernels must refuse version 2
// files, which they do. Version 1 files are upgraded in place when opened
// (see migrate).
const (
	schemaVersion   = "2"
	schemaVersionV1 = "1"
)

// Durable channels.
const (
	ChannelJournal    = "journal"
	ChannelTranscript = "session.transcript"
)

// The journal channel's seq is entry_id - 1, so only session.transcript
// needs a seq → entry_id map.
var (
	bucketSeqTranscript = []byte("seq.session.transcript") // be64(first seq) → be64(entry_id)… (see walkSeqsDown)
	bucketSeqJournalV1  = []byte("seq.journal")            // version 1 only
)

var allBuckets = [][]byte{
	bucketMeta, bucketRows, bucketByTS, bucketPrincipal, bucketHead, bucketPrincipalHead, bucketOK,
	bucketEffect, bucketValRefs, bucketSeqTranscript,
}

// maxIndexedValue bounds the bytes of a principal, head or effect that go
// into an index key (bbolt keys are limited to 32 KiB). Longer values are
// indexed by their prefix and confirmed on the row.
const maxIndexedValue = 1024

// storedRow is a row as kept on disk: the row plus the channel seqs it got.
// The JSON form is version 1's row encoding, still read.
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
	putTSID(b[:], ts, id)
	return b[:]
}

func putTSID(b []byte, ts int64, id uint64) {
	binary.BigEndian.PutUint64(b[:8], uint64(ts)^(1<<63))
	binary.BigEndian.PutUint64(b[8:16], id)
}

func tsidID(k []byte) uint64 { return binary.BigEndian.Uint64(k[8:16]) }

// valuePrefix is the index prefix of one indexed string value.
func valuePrefix(v string) []byte {
	return appendValuePrefix(make([]byte, 0, min(len(v), maxIndexedValue)+3), v)
}

func appendValuePrefix(b []byte, v string) []byte {
	if len(v) > maxIndexedValue {
		v = v[:maxIndexedValue]
	}
	b = binary.AppendUvarint(b, uint64(len(v)))
	return append(b, v...)
}

func okPrefix(ok bool) []byte {
	if ok {
		return []byte{1}
	}
	return []byte{0}
}

// entry is one key a row writes.
type entry struct {
	bucket, key, value []byte
}

// Row encoding, version 2. A version 1 row is a JSON object, so its first
// byte is '{'; a version 2 row starts with rowFormat:
//
//	rowFormat
//	uvarint entry_id
//	varint  ts
//	byte    flags: 1 ok, 2 transcript (a uvarint transcript seq follows)
//	[uvarint transcript seq]
//	body
//
// The body holds what the caller wrote, so Append encodes it before the
// row is queued and the writer only adds the head:
//
//	string session, principal, kind, head, source
//	uvarint count, then that many strings: effects
//	varint exit
//	string ref
//	varint duration_ns
//
// A string is its uvarint length and its bytes.
const rowFormat = 0x02

const (
	flagOK         = 1
	flagTranscript = 2
)

// encodeBody encodes the caller's part of a row.
func encodeBody(r *core.JournalRow) []byte {
	n := 6*binary.MaxVarintLen32 + 3*binary.MaxVarintLen64 +
		len(r.Session) + len(r.Principal) + len(r.Kind) + len(r.Head) + len(r.Source) + len(r.Ref)
	for _, e := range r.Effects {
		n += binary.MaxVarintLen32 + len(e)
	}
	b := make([]byte, 0, n)
	b = appendString(b, r.Session)
	b = appendString(b, r.Principal)
	b = appendString(b, r.Kind)
	b = appendString(b, r.Head)
	b = appendString(b, r.Source)
	b = binary.AppendUvarint(b, uint64(len(r.Effects)))
	for _, e := range r.Effects {
		b = appendString(b, e)
	}
	b = binary.AppendVarint(b, int64(r.Exit))
	b = appendString(b, r.Ref)
	return binary.AppendVarint(b, r.DurationNS)
}

func appendString(b []byte, s string) []byte {
	return append(binary.AppendUvarint(b, uint64(len(s))), s...)
}

// rowHeadMax bounds the head appendRowHead writes.
const rowHeadMax = 2 + 3*binary.MaxVarintLen64

// appendRowHead writes the head of a version 2 row, for the body that
// follows it.
func appendRowHead(b []byte, s *storedRow) []byte {
	b = append(b, rowFormat)
	b = binary.AppendUvarint(b, s.EntryID)
	b = binary.AppendVarint(b, s.TS)
	var flags byte
	if s.OK {
		flags |= flagOK
	}
	if s.TranscriptSeq != nil {
		flags |= flagTranscript
	}
	b = append(b, flags)
	if s.TranscriptSeq != nil {
		b = binary.AppendUvarint(b, *s.TranscriptSeq)
	}
	return b
}

// encodeRow is the whole version 2 encoding of a row.
func encodeRow(s *storedRow) []byte {
	body := encodeBody(&s.JournalRow)
	return append(appendRowHead(make([]byte, 0, rowHeadMax+len(body)), s), body...)
}

var errRowEncoding = errors.New("malformed row")

// Row blocks. A commit of several rows stores them in a few blocks of
// consecutive rows (rowChunks), each under its first row's entry_id:
//
//	rowBlock
//	uvarint count
//	count × 4-byte big-endian end offset of each row in the data
//	data: the rows, each in the version 2 encoding
//
// A value that is not a block is a single row (of either version), under
// its own entry_id. A Put per block instead of one per row saves most of
// what a commit costs the writer's CPU.
const rowBlock = 0x03

// encodeRowBlock makes a block of encoded rows.
func encodeRowBlock(rows [][]byte) []byte {
	size := 0
	for _, r := range rows {
		size += len(r)
	}
	b := make([]byte, 0, 1+binary.MaxVarintLen32+4*len(rows)+size)
	b = append(b, rowBlock)
	b = binary.AppendUvarint(b, uint64(len(rows)))
	end := 0
	for _, r := range rows {
		end += len(r)
		b = binary.BigEndian.AppendUint32(b, uint32(end))
	}
	for _, r := range rows {
		b = append(b, r...)
	}
	return b
}

// rowData finds the encoded row id: a value of its own, or its part of the
// block it was committed in.
func rowData(rows *bolt.Bucket, id uint64) ([]byte, error) {
	k, v := seekLE(rows.Cursor(), id)
	if k == nil {
		return nil, errMissingRow
	}
	return valueRow(v, binary.BigEndian.Uint64(k), id)
}

// valueRow finds row id in the value v stored under entry_id first.
func valueRow(v []byte, first, id uint64) ([]byte, error) {
	if len(v) == 0 || v[0] != rowBlock {
		if first != id {
			return nil, errMissingRow
		}
		return v, nil
	}
	n, w := binary.Uvarint(v[1:])
	if w <= 0 || n == 0 || n > uint64(len(v)) || 1+w+4*int(n) > len(v) {
		return nil, fmt.Errorf("%w: bad block header at row %d", errRowEncoding, first)
	}
	data := 1 + w + 4*int(n)
	i := id - first
	if id < first || i >= n {
		return nil, errMissingRow
	}
	offsets := v[1+w : data]
	start := 0
	if i > 0 {
		start = int(binary.BigEndian.Uint32(offsets[4*(i-1):]))
	}
	end := int(binary.BigEndian.Uint32(offsets[4*i:]))
	if start > end || end > len(v)-data {
		return nil, fmt.Errorf("%w: bad offsets in the block at row %d", errRowEncoding, first)
	}
	return v[data+start : data+end], nil
}

var errMissingRow = errors.New("no such row")

// rowBlockBytes bounds a block's rows, so that two blocks fit in one
// 4 KiB leaf page: a block a little over half a page would take a page of
// its own, and a larger one whole overflow pages.
const rowBlockBytes = 1900

// rowChunks splits encoded rows into blocks of at most rowBlockBytes (a
// larger row is a block of its own), yielding each block's first index
// and length.
func rowChunks(encoded [][]byte) iter.Seq2[int, int] {
	return func(yield func(int, int) bool) {
		start, size := 0, 0
		for i, r := range encoded {
			if i > start && size+len(r)+4 > rowBlockBytes {
				if !yield(start, i-start) {
					return
				}
				start, size = i, 0
			}
			size += len(r) + 4
		}
		if start < len(encoded) {
			yield(start, len(encoded)-start)
		}
	}
}

// blockRows is how many rows the value under a rows key holds.
func blockRows(v []byte) uint64 {
	if len(v) == 0 || v[0] != rowBlock {
		return 1
	}
	n, w := binary.Uvarint(v[1:])
	if w <= 0 || n == 0 {
		return 1
	}
	return n
}

// unmarshalRow decodes a stored row of either version.
func unmarshalRow(data []byte) (*storedRow, error) {
	var s storedRow
	if len(data) > 0 && data[0] == '{' {
		if err := json.Unmarshal(data, &s); err != nil {
			return nil, err
		}
		return &s, nil
	}
	if len(data) == 0 || data[0] != rowFormat {
		return nil, fmt.Errorf("%w: unknown encoding", errRowEncoding)
	}
	d := rowDecoder{data: data[1:]}
	s.EntryID = d.uvarint()
	s.TS = d.varint()
	flags := d.byte()
	if flags&flagTranscript != 0 {
		seq := d.uvarint()
		s.TranscriptSeq = &seq
		s.InTranscript = true
	}
	s.OK = flags&flagOK != 0
	// One allocation holds every string of the row.
	d.str = string(d.data[d.off:])
	d.base = d.off
	s.Session = d.string()
	s.Principal = d.string()
	s.Kind = d.string()
	s.Head = d.string()
	s.Source = d.string()
	n := d.uvarint()
	if n > uint64(len(d.data)) {
		return nil, fmt.Errorf("%w: %d effects", errRowEncoding, n)
	}
	s.Effects = make([]string, n)
	for i := range s.Effects {
		s.Effects[i] = d.string()
	}
	s.Exit = int(d.varint())
	s.Ref = d.string()
	s.DurationNS = d.varint()
	if d.err != nil {
		return nil, d.err
	}
	if d.off != len(d.data) {
		return nil, fmt.Errorf("%w: %d bytes after the row", errRowEncoding, len(d.data)-d.off)
	}
	if s.EntryID == 0 {
		return nil, fmt.Errorf("%w: entry_id 0", errRowEncoding)
	}
	s.JournalSeq = s.EntryID - 1
	return &s, nil
}

// rowDecoder reads a version 2 row; the first error sticks.
type rowDecoder struct {
	data []byte
	off  int
	err  error
	// str is data[base:] as one string; strings are cut from it.
	str  string
	base int
}

func (d *rowDecoder) fail(what string) {
	if d.err == nil {
		d.err = fmt.Errorf("%w: bad %s at byte %d", errRowEncoding, what, d.off+1)
	}
	d.off = len(d.data)
}

func (d *rowDecoder) uvarint() uint64 {
	v, n := binary.Uvarint(d.data[d.off:])
	if n <= 0 {
		d.fail("number")
		return 0
	}
	d.off += n
	return v
}

func (d *rowDecoder) varint() int64 {
	v, n := binary.Varint(d.data[d.off:])
	if n <= 0 {
		d.fail("number")
		return 0
	}
	d.off += n
	return v
}

func (d *rowDecoder) byte() byte {
	if d.off >= len(d.data) {
		d.fail("flags")
		return 0
	}
	d.off++
	return d.data[d.off-1]
}

func (d *rowDecoder) string() string {
	n := d.uvarint()
	if d.err != nil {
		return ""
	}
	if n > uint64(len(d.data)-d.off) {
		d.fail("string length")
		return ""
	}
	start := d.off - d.base
	d.off += int(n)
	return d.str[start : start+int(n)]
}

// rowEntries lists the keys a row writes in its own transaction: the row,
// its transcript seq mapping and its content-store reference. value is
// the encoded row.
func rowEntries(s *storedRow, value []byte, out []entry) []entry {
	out = append(out, entry{bucketRows, be64(s.EntryID), value})
	if s.TranscriptSeq != nil {
		out = append(out, entry{bucketSeqTranscript, be64(*s.TranscriptSeq), be64(s.EntryID)})
	}
	if h, ok := strings.CutPrefix(s.Ref, cas.RefPrefix); ok && cas.ValidHash(h) == nil {
		// Written with the row, never later: the content store's collector
		// must see every reference an acknowledged row holds.
		out = append(out, entry{bucketValRefs, []byte(h), nil})
	}
	return out
}

// indexPrefixes calls fn with each index bucket a row belongs in and the
// prefix of its value there (empty for the ts index).
func indexPrefixes(s *storedRow, buf []byte, fn func(bucket, prefix []byte)) []byte {
	fn(bucketByTS, nil)
	buf = appendValuePrefix(buf[:0], s.Principal)
	fn(bucketPrincipal, buf)
	buf = appendValuePrefix(buf[:0], s.Head)
	fn(bucketHead, buf)
	buf = appendValuePrefix(appendValuePrefix(buf[:0], s.Principal), s.Head)
	fn(bucketPrincipalHead, buf)
	fn(bucketOK, okPrefix(s.OK))
	for _, e := range s.Effects {
		buf = appendValuePrefix(buf[:0], e)
		fn(bucketEffect, buf)
	}
	return buf
}

// putRow writes one row with its index entries in tx.
func putRow(tx *bolt.Tx, s *storedRow) error {
	for _, e := range rowEntries(s, encodeRow(s), nil) {
		if err := tx.Bucket(e.bucket).Put(e.key, e.value); err != nil {
			return fmt.Errorf("row %d: put %s: %w", s.EntryID, e.bucket, err)
		}
	}
	return putIndexes(tx, []*storedRow{s})
}

// Page fill on split. bbolt splits at half a page by default, which suits
// random inserts; the journal's inserts are appends, either to a whole
// bucket (rows, the ts index, the seq map) or to the end of one indexed
// value's range (new rows have the newest tsid), so fuller pages cost
// nothing later and make the file about half as large. bbolt does not
// keep the fill across transactions, so it is set on every bucket a write
// transaction opens (writeBucket).
func fillPercent(name string) float64 {
	switch name {
	case string(bucketRows), string(bucketByTS), string(bucketSeqTranscript):
		return 1.0
	case string(bucketPrincipal), string(bucketHead), string(bucketPrincipalHead), string(bucketOK), string(bucketEffect):
		return 0.95
	}
	return bolt.DefaultFillPercent
}

// writeBucket opens a bucket for writing in tx, with its page fill set.
func writeBucket(tx *bolt.Tx, name []byte) *bolt.Bucket {
	b := tx.Bucket(name)
	b.FillPercent = fillPercent(string(name))
	return b
}

// setFill sets the page fill of every bucket in tx.
func setFill(tx *bolt.Tx) {
	for _, name := range allBuckets {
		writeBucket(tx, name)
	}
}

// lastRowID is the newest entry_id, 0 when there is no row.
func lastRowID(tx *bolt.Tx) uint64 {
	return tx.Bucket(bucketRows).Sequence()
}

// indexedThrough is the entry_id up to which rows have index entries.
func indexedThrough(tx *bolt.Tx) uint64 {
	v := tx.Bucket(bucketMeta).Get(keyIndexed)
	if len(v) != 8 {
		return 0
	}
	return binary.BigEndian.Uint64(v)
}

// nextSeq is the next seq of a channel.
func nextSeq(tx *bolt.Tx, channel string) uint64 {
	if channel == ChannelJournal {
		return lastRowID(tx)
	}
	k, v := tx.Bucket(bucketSeqTranscript).Cursor().Last()
	if k == nil {
		return 0
	}
	return binary.BigEndian.Uint64(k) + uint64(max(len(v)/8, 1))
}

// maxTS is the largest representable ts, for open-ended ranges.
const maxTS = math.MaxInt64
