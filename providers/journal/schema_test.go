package journal

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/shoal-sh/shoal/core"
	bolt "go.etcd.io/bbolt"
)

func codecRows() []storedRow {
	seq := uint64(7)
	big := uint64(math.MaxUint64 - 1)
	return []storedRow{
		{JournalRow: core.JournalRow{EntryID: 1, Effects: []string{}}},
		{JournalRow: core.JournalRow{EntryID: 2, TS: -5, Session: "main", Principal: "agent:a", Kind: "exec", Head: "git",
			Source: "git status «redacted» ünïcode", Effects: []string{"fs.read", "proc.spawn"}, OK: true, Exit: 0,
			Ref: "out:3", DurationNS: 12345}, InTranscript: true, TranscriptSeq: &seq},
		{JournalRow: core.JournalRow{EntryID: math.MaxUint64, TS: math.MaxInt64, Principal: "bad \xff utf-8 \x00 nul",
			Head: strings.Repeat("h", 5000), Effects: []string{"", "net", ""}, Exit: -1, DurationNS: math.MinInt64,
			Ref: "val:blake3:" + strings.Repeat("ab", 32)}, InTranscript: true, TranscriptSeq: &big},
		{JournalRow: core.JournalRow{EntryID: 9, TS: math.MinInt64, Exit: math.MaxInt32, Effects: []string{}}},
	}
}

func TestRowCodecRoundTrip(t *testing.T) {
	for _, s := range codecRows() {
		s.JournalSeq = s.EntryID - 1
		got, err := unmarshalRow(encodeRow(&s))
		if err != nil {
			t.Fatalf("row %d: %v", s.EntryID, err)
		}
		if !reflect.DeepEqual(*got, s) {
			t.Fatalf("row %d round trip:\n got %+v\nwant %+v", s.EntryID, *got, s)
		}
	}
}

// A version 1 row (JSON) decodes to what it held.
func TestRowCodecReadsVersion1(t *testing.T) {
	for _, s := range codecRows() {
		s.Principal = strings.ToValidUTF8(s.Principal, "\uFFFD") // JSON kept valid UTF-8 only
		s.JournalSeq = 41
		data, err := json.Marshal(&s)
		if err != nil {
			t.Fatal(err)
		}
		got, err := unmarshalRow(data)
		if err != nil {
			t.Fatalf("row %d: %v", s.EntryID, err)
		}
		if !reflect.DeepEqual(*got, s) {
			t.Fatalf("row %d:\n got %+v\nwant %+v", s.EntryID, *got, s)
		}
	}
}

// Every cut of a valid row, and every corruption of one byte, is either
// an error or a row; it never panics, and a cut row is never accepted.
func TestRowCodecDamage(t *testing.T) {
	for _, s := range codecRows() {
		data := encodeRow(&s)
		for n := range len(data) {
			if _, err := unmarshalRow(data[:n]); err == nil {
				t.Fatalf("row %d cut to %d of %d bytes decoded", s.EntryID, n, len(data))
			}
		}
		for i := range min(len(data), 200) {
			bad := bytes.Clone(data)
			bad[i] ^= 0xa5
			unmarshalRow(bad)
		}
		if _, err := unmarshalRow(append(bytes.Clone(data), 0)); err == nil {
			t.Fatalf("row %d with a trailing byte decoded", s.EntryID)
		}
	}
	if _, err := unmarshalRow([]byte{0x03, 1}); !errors.Is(err, errRowEncoding) {
		t.Fatalf("unknown format: %v", err)
	}
}

func FuzzRowCodec(f *testing.F) {
	for _, s := range codecRows() {
		f.Add(encodeRow(&s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		s, err := unmarshalRow(data)
		if err != nil || data[0] != rowFormat {
			return
		}
		again, err := unmarshalRow(encodeRow(s))
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(again, s) {
			t.Fatalf("re-encoded row differs:\n%+v\n%+v", again, s)
		}
	})
}

// writeV1 writes rows into a new version 1 journal the way version 1 did:
// JSON rows, a seq.journal map, every index entry with its row.
func writeV1(t *testing.T, path string, rows []core.JournalRow) {
	t.Helper()
	db, err := bolt.Open(path, 0o600, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	err = db.Update(func(tx *bolt.Tx) error {
		for _, name := range append(allBuckets, bucketSeqJournalV1) {
			if _, err := tx.CreateBucket(name); err != nil {
				return err
			}
		}
		meta := tx.Bucket(bucketMeta)
		meta.Put(keyVersion, []byte("1"))
		meta.Put(keyEpoch, []byte("0123456789abcdef"))
		var tseq uint64
		for i, r := range rows {
			id, _ := tx.Bucket(bucketRows).NextSequence()
			s := storedRow{JournalRow: r, InTranscript: r.Transcript, JournalSeq: uint64(i)}
			s.EntryID = id
			if s.Effects == nil {
				s.Effects = []string{}
			}
			if s.InTranscript {
				seq := tseq
				s.TranscriptSeq = &seq
				tseq++
				tx.Bucket(bucketSeqTranscript).Put(be64(seq), be64(id))
			}
			data, err := json.Marshal(&s)
			if err != nil {
				return err
			}
			tx.Bucket(bucketRows).Put(be64(id), data)
			tx.Bucket(bucketSeqJournalV1).Put(be64(s.JournalSeq), be64(id))
			// One key per row and index, with an empty value.
			var err2 error
			indexPrefixes(&s, nil, func(bucket, prefix []byte) {
				if err := tx.Bucket(bucket).Put(append(bytes.Clone(prefix), tsid(s.TS, s.EntryID)...), nil); err != nil {
					err2 = err
				}
			})
			if err2 != nil {
				return err2
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

func v1Rows(n int) []core.JournalRow {
	rows := make([]core.JournalRow, n)
	for i := range rows {
		rows[i] = core.JournalRow{TS: int64(1000 + i), Session: "main", Principal: fmt.Sprintf("agent:%d", i%3),
			Kind: "exec", Head: []string{"git", "ls"}[i%2], Source: fmt.Sprintf("cmd %d", i),
			Effects: []string{"fs.read"}, OK: i%4 != 0, Ref: fmt.Sprintf("out:%d", i+1), Transcript: i%2 == 0}
	}
	return rows
}

// A version 1 journal opens: it is upgraded in place, its rows, events
// and seqs read as before, and new rows continue it.
func TestOpenUpgradesVersion1(t *testing.T) {
	path := filepath.Join(t.TempDir(), FileName)
	old := v1Rows(50)
	writeV1(t, path, old)

	rec := &recorder{}
	j, err := Open(path, Options{Bus: rec})
	if err != nil {
		t.Fatal(err)
	}
	if j.Epoch() != "0123456789abcdef" {
		t.Fatalf("epoch %q after the upgrade", j.Epoch())
	}
	j.db.View(func(tx *bolt.Tx) error {
		meta := tx.Bucket(bucketMeta)
		if v := string(meta.Get(keyVersion)); v != schemaVersion {
			t.Errorf("version %q after the upgrade", v)
		}
		if tx.Bucket(bucketSeqJournalV1) != nil {
			t.Error("seq.journal kept")
		}
		if w := indexedThrough(tx); w != 50 {
			t.Errorf("indexed through %d, want 50", w)
		}
		return nil
	})
	for ch, want := range map[string]uint64{ChannelJournal: 50, ChannelTranscript: 25} {
		if next, err := j.NextSeq(ch); err != nil || next != want {
			t.Fatalf("%s next seq %d, %v; want %d", ch, next, err, want)
		}
		if oldest, ok, err := j.OldestSeq(ch); err != nil || !ok || oldest != 0 {
			t.Fatalf("%s oldest seq %d %v %v", ch, oldest, ok, err)
		}
	}
	evs, err := j.ReadRange(ChannelJournal, 10, 13, 0)
	if err != nil || len(evs) != 3 || evs[0].Seq != 10 {
		t.Fatalf("journal events 10..12: %+v, %v", evs, err)
	}
	var p journalPayload
	json.Unmarshal(evs[0].Payload, &p)
	if p.EntryID != 11 || p.Principal != old[10].Principal || evs[0].TS != old[10].TS {
		t.Fatalf("journal event 10 rebuilt as %+v", p)
	}
	no := false
	got, err := j.Query(Query{Principal: "agent:0", OK: &no})
	if err != nil {
		t.Fatal(err)
	}
	if want := naive(withIDs(old), Query{Principal: "agent:0", OK: &no}); !reflect.DeepEqual(ids(got), ids(want)) {
		t.Fatalf("query after the upgrade: %v, want %v", ids(got), ids(want))
	}

	row, err := j.Append(context.Background(), core.JournalRow{Head: "new", Transcript: true})
	if err != nil {
		t.Fatal(err)
	}
	if row.EntryID != 51 || len(rec.events[ChannelJournal]) != 1 || rec.events[ChannelJournal][0].Seq != 50 ||
		rec.events[ChannelTranscript][0].Seq != 25 {
		t.Fatalf("first row after the upgrade: %+v, events %+v", row, rec.events)
	}
	if err := j.Close(); err != nil {
		t.Fatal(err)
	}

	// And it opens again as a version 2 file, old and new rows together.
	j = openJournal(t, path, Options{})
	all, err := j.Query(Query{Limit: MaxLimit})
	if err != nil || len(all) != 51 || all[0].Head != "new" || all[50].Source != "cmd 0" {
		t.Fatalf("rows after reopening: %d, %v", len(all), err)
	}
}

func withIDs(rows []core.JournalRow) []core.JournalRow {
	out := make([]core.JournalRow, len(rows))
	for i, r := range rows {
		r.EntryID = uint64(i + 1)
		out[i] = r
	}
	return out
}

func TestOpenRefusesInconsistentVersion1(t *testing.T) {
	path := filepath.Join(t.TempDir(), FileName)
	writeV1(t, path, v1Rows(5))
	db, err := bolt.Open(path, 0o600, nil)
	if err != nil {
		t.Fatal(err)
	}
	db.Update(func(tx *bolt.Tx) error { return tx.Bucket(bucketSeqJournalV1).Put(be64(9), be64(10)) })
	db.Close()
	_, err = Open(path, Options{})
	if err == nil || !strings.Contains(err.Error(), "journal seqs do not match") || !strings.Contains(err.Error(), "move it aside") {
		t.Fatalf("open of an inconsistent version 1 file: %v", err)
	}
}

func TestOpenRefusesNewerVersion(t *testing.T) {
	j := openJournal(t, "", Options{NoSync: true})
	path := j.Path()
	j.Close()
	db, err := bolt.Open(path, 0o600, nil)
	if err != nil {
		t.Fatal(err)
	}
	db.Update(func(tx *bolt.Tx) error { return tx.Bucket(bucketMeta).Put(keyVersion, []byte("3")) })
	db.Close()
	_, err = Open(path, Options{})
	if err == nil || !strings.Contains(err.Error(), `schema version "3"`) {
		t.Fatalf("open of a version 3 file: %v", err)
	}
}

// checkIndex verifies the blocks of one index bucket (ascending and
// disjoint per value) and returns how many tsids it holds.
func checkIndex(b *bolt.Bucket) (int, error) {
	var n int
	var prevPrefix, prevLast []byte
	err := b.ForEach(func(k, v []byte) error {
		if len(k) < tsidLen || len(v)%tsidLen != 0 {
			return fmt.Errorf("block %x: key or value of the wrong size", k)
		}
		prefix, first := k[:len(k)-tsidLen], k[len(k)-tsidLen:]
		if bytes.Equal(prefix, prevPrefix) && bytes.Compare(first, prevLast) <= 0 {
			return fmt.Errorf("block %x overlaps the one before", k)
		}
		last := first
		for i := 0; i < len(v); i += tsidLen {
			if bytes.Compare(v[i:i+tsidLen], last) <= 0 {
				return fmt.Errorf("block %x is not ascending", k)
			}
			last = v[i : i+tsidLen]
		}
		prevPrefix, prevLast = bytes.Clone(prefix), bytes.Clone(last)
		n += 1 + len(v)/tsidLen
		return nil
	})
	return n, err
}

// checkIndexes verifies every index bucket and that the ts index holds
// rows tsids.
func checkIndexes(tx *bolt.Tx, rows int) error {
	for _, name := range [][]byte{bucketByTS, bucketPrincipal, bucketHead, bucketPrincipalHead, bucketOK, bucketEffect} {
		n, err := checkIndex(tx.Bucket(name))
		if err != nil {
			return fmt.Errorf("%s: %w", name, err)
		}
		switch {
		case string(name) == string(bucketEffect):
		case n != rows:
			return fmt.Errorf("%s holds %d tsids for %d rows", name, n, rows)
		}
	}
	return nil
}

// The hand-built event payloads decode to what encoding/json encodes the
// payload structs from, and match its bytes when no string needs an
// escape the two write differently (encoding/json escapes <, > and &).
func TestEventPayloads(t *testing.T) {
	rows := codecRows()
	seq := uint64(3)
	rows = append(rows, storedRow{JournalRow: core.JournalRow{EntryID: 12, TS: 99, Session: "s \"q\" \\ \n\t", Principal: "p<&>",
		Kind: "exec", Head: "h\u2028\x01", Effects: nil, Ref: "", Exit: 3}, InTranscript: true, TranscriptSeq: &seq})
	for _, s := range rows {
		s.JournalSeq = s.EntryID - 1
		effects := s.Effects
		if effects == nil {
			effects = []string{}
		}
		cases := []struct {
			channel string
			want    any
			got     any
		}{
			{ChannelJournal, journalPayload{EntryID: s.EntryID, TS: s.TS, Session: s.Session, Principal: s.Principal,
				Kind: s.Kind, Head: s.Head, OK: s.OK, Exit: s.Exit, Effects: effects, Ref: s.Ref}, &journalPayload{}},
		}
		if s.TranscriptSeq != nil {
			cases = append(cases, struct {
				channel string
				want    any
				got     any
			}{ChannelTranscript, transcriptPayload{EntryID: s.EntryID, Session: s.Session, Principal: s.Principal,
				Ref: s.Ref, OK: s.OK, Exit: s.Exit, Head: s.Head}, &transcriptPayload{}})
		}
		for _, c := range cases {
			ev := s.event(c.channel)
			if ev.TS != s.TS || ev.Channel != c.channel {
				t.Fatalf("event %+v", ev)
			}
			ref, err := json.Marshal(c.want)
			if err != nil {
				t.Fatal(err)
			}
			if err := json.Unmarshal(ev.Payload, c.got); err != nil {
				t.Fatalf("%s payload %s: %v", c.channel, ev.Payload, err)
			}
			// Compare through encoding/json, which also turns invalid
			// UTF-8 into U+FFFD on both sides.
			want := reflect.New(reflect.TypeOf(c.want))
			json.Unmarshal(ref, want.Interface())
			if !reflect.DeepEqual(want.Interface(), c.got) {
				t.Fatalf("%s payload %s decodes to %+v, want %+v", c.channel, ev.Payload, c.got, want.Interface())
			}
			if !strings.ContainsAny(string(ref), "<>&\\") && !bytes.Equal(ref, ev.Payload) {
				t.Fatalf("%s payload\n got %s\nwant %s", c.channel, ev.Payload, ref)
			}
		}
	}
}

// A block gives back each of its rows, nothing past them, and fails
// cleanly when damaged.
func TestRowBlocks(t *testing.T) {
	db, err := bolt.Open(filepath.Join(t.TempDir(), "b.db"), 0o600, &bolt.Options{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	src := codecRows()
	var encoded [][]byte
	for i := range src {
		src[i].EntryID = uint64(10 + i)
		encoded = append(encoded, encodeRow(&src[i]))
	}
	block := encodeRowBlock(encoded)
	db.Update(func(tx *bolt.Tx) error {
		b, _ := tx.CreateBucket(bucketRows)
		b.Put(be64(5), encodeRow(&storedRow{JournalRow: core.JournalRow{EntryID: 5}}))
		b.Put(be64(10), block)
		b.Put(be64(20), bytes.Clone(block[:len(block)-3])) // cut short
		b.Put(be64(30), []byte{rowBlock, 0xff})            // bad header
		return nil
	})
	db.View(func(tx *bolt.Tx) error {
		b := tx.Bucket(bucketRows)
		for i, want := range encoded {
			got, err := rowData(b, uint64(10+i))
			if err != nil || !bytes.Equal(got, want) {
				t.Fatalf("row %d: %x, %v", 10+i, got, err)
			}
		}
		for _, id := range []uint64{1, 4, 6, 9, uint64(10 + len(encoded))} {
			if _, err := rowData(b, id); !errors.Is(err, errMissingRow) {
				t.Fatalf("row %d: %v, want missing", id, err)
			}
		}
		for id := uint64(20); id < 40; id++ {
			data, err := rowData(b, id)
			if err == nil {
				if _, err := unmarshalRow(data); err == nil && id == 20+uint64(len(encoded))-1 {
					t.Fatalf("the cut row %d decoded", id)
				}
			}
		}
		return nil
	})
}

func FuzzRowBlock(f *testing.F) {
	var encoded [][]byte
	for _, s := range codecRows() {
		encoded = append(encoded, encodeRow(&s))
	}
	f.Add(encodeRowBlock(encoded), uint64(2))
	f.Add([]byte{rowBlock, 1, 0, 0, 0, 1, 2}, uint64(0))
	f.Fuzz(func(t *testing.T, v []byte, i uint64) {
		valueRow(v, 100, 100+i%2000)
	})
}
