package journal

import (
	"context"
	"encoding/binary"
	"fmt"

	"github.com/shoal-sh/shoal/core"
	bolt "go.etcd.io/bbolt"
)

// Exporting: a kernel in a cluster copies its rows elsewhere in entry_id
// order and remembers, durably, how far it got. RowsAfter reads the rows
// from a cursor on; SetExportCursor records the cursor once the copies
// are safe. A crash between the two repeats rows, never skips them; the
// exporter's destination removes the repeats (see providers/cluster).

// RowsAfter returns up to limit rows with entry_id > after, ascending by
// entry_id. Rows are read from the rows bucket, which holds every
// acknowledged row (index entries may lag; rows never do).
func (j *Journal) RowsAfter(after uint64, limit int) ([]core.JournalRow, error) {
	var out []core.JournalRow
	err := j.db.View(func(tx *bolt.Tx) error {
		rows := tx.Bucket(bucketRows)
		last := lastRowID(tx)
		first := uint64(1)
		if k, _ := rows.Cursor().First(); k != nil {
			first = binary.BigEndian.Uint64(k)
		}
		for id := max(after+1, first); id <= last && len(out) < limit; id++ {
			s, err := decodeRow(rows, id)
			if err != nil {
				return err
			}
			out = append(out, s.row())
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("journal: rows after %d: %w", after, err)
	}
	return out, nil
}

func exportKey(name string) []byte { return []byte("export." + name) }

// ExportCursor is the entry_id up to which the exporter called name has
// exported the rows (0: none yet).
func (j *Journal) ExportCursor(name string) (uint64, error) {
	var id uint64
	err := j.db.View(func(tx *bolt.Tx) error {
		if v := tx.Bucket(bucketMeta).Get(exportKey(name)); len(v) == 8 {
			id = binary.BigEndian.Uint64(v)
		}
		return nil
	})
	return id, err
}

// SetExportCursor records durably that the exporter called name has
// exported every row up to entry_id id.
func (j *Journal) SetExportCursor(name string, id uint64) error {
	err := j.db.Update(func(tx *bolt.Tx) error {
		return tx.Bucket(bucketMeta).Put(exportKey(name), be64(id))
	})
	if err != nil {
		return fmt.Errorf("journal: save export cursor %s: %w", name, err)
	}
	return nil
}

// LastEntryID is the entry_id of the newest row (0 when empty).
func (j *Journal) LastEntryID() (uint64, error) {
	var id uint64
	err := j.db.View(func(tx *bolt.Tx) error {
		id = lastRowID(tx)
		return nil
	})
	return id, err
}

// ServiceCluster is the service a cluster offers for journal.query with
// scope=cluster.
var ServiceCluster = core.NewKey[ClusterQuerier]("journal.cluster")

// ClusterQuerier answers journal queries over every kernel of a cluster.
type ClusterQuerier interface {
	QueryCluster(ctx context.Context, q Query) (ClusterResult, error)
}

// ClusterRow is a journal row as the cluster journal holds it: the row
// and the kernel and host that wrote it.
type ClusterRow struct {
	core.JournalRow
	Kernel string `json:"kernel"`
	Host   string `json:"host"`
}

// ClusterResult is journal.query's answer with scope=cluster.
type ClusterResult struct {
	Scope string       `json:"scope"` // "cluster"
	Rows  []ClusterRow `json:"rows"`
	// Scanned is how many cluster journal messages the query looked at;
	// Complete is false when it stopped at its scan bound before the
	// oldest message, so older matches may exist (narrow since/until).
	Scanned  int  `json:"scanned"`
	Complete bool `json:"complete"`
}

// Matches reports whether row passes q's filters (the same ones Query
// applies through its indexes).
func (q *Query) Matches(row core.JournalRow) bool {
	return q.matches(&storedRow{JournalRow: row})
}

// EffectiveLimit is the number of rows q returns at most.
func (q *Query) EffectiveLimit() int { return q.limit() }
