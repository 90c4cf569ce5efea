package cas

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"
)

// GCStats says what one collection did.
type GCStats struct {
	// Scanned is the number of blobs looked at.
	Scanned int `json:"scanned"`
	// Kept is the number of blobs a root still references.
	Kept int `json:"kept"`
	// Young is the number of unreferenced blobs spared for being younger
	// than the minimum age.
	Young int `json:"young"`
	// Removed is the number of blobs deleted, FreedBytes their total size.
	Removed    int   `json:"removed"`
	FreedBytes int64 `json:"freed_bytes"`
	// Leftovers is the number of stale temp files (from puts cut short by
	// a crash) and expired quarantined blobs deleted.
	Leftovers int `json:"leftovers"`
}

// GC removes every blob for which keep returns false and whose last put is
// older than minAge. Unexpected names in the store are left alone.
func (s *Store) GC(keep func(hash string) bool, minAge time.Duration) (GCStats, error) {
	var st GCStats
	now := time.Now()
	cutoff := now.Add(-minAge)
	err := filepath.WalkDir(s.dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) {
				return nil
			}
			return err
		}
		rel, _ := filepath.Rel(s.dir, p)
		if d.IsDir() {
			switch {
			case rel == ".":
			case rel == tmpDir:
				st.Leftovers += s.sweepTemps(p, cutoff)
				return filepath.SkipDir
			case rel == quarantineDir:
				st.Leftovers += s.sweepOld(p, now.Add(-quarantineKeep))
				return filepath.SkipDir
			case !isFanOut(rel):
				return filepath.SkipDir
			}
			return nil
		}
		name := d.Name()
		if ValidHash(name) != nil || s.path(name) != p {
			return nil
		}
		st.Scanned++
		if keep(name) {
			st.Kept++
			return nil
		}
		removed, size, err := s.removeIfOld(name, cutoff)
		if err != nil {
			return err
		}
		if removed {
			st.Removed++
			st.FreedBytes += size
		} else {
			st.Young++
		}
		return nil
	})
	if err != nil {
		return st, fmt.Errorf("collect content store garbage: %w", err)
	}
	return st, nil
}

// removeIfOld deletes an unreferenced blob unless a put touched it after
// cutoff or a put of it is still being synced. Both are checked again under
// the exclusive lock so a put that refreshed the blob an instant ago wins.
func (s *Store) removeIfOld(hash string, cutoff time.Time) (bool, int64, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.isPending(hash) {
		return false, 0, nil
	}
	p := s.path(hash)
	fi, err := os.Stat(p)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return false, 0, nil
		}
		return false, 0, err
	}
	if fi.ModTime().After(cutoff) {
		return false, 0, nil
	}
	if err := os.Remove(p); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return false, 0, err
	}
	s.dropIndex(hash)
	s.checked.drop(hash)
	return true, fi.Size(), nil
}

// sweep deletes the files in dir last modified before cutoff for which
// remove reports success.
func sweep(dir string, cutoff time.Time, remove func(name string) bool) int {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return 0
	}
	n := 0
	for _, e := range entries {
		fi, err := e.Info()
		if err != nil || !fi.Mode().IsRegular() || fi.ModTime().After(cutoff) {
			continue
		}
		if remove(e.Name()) {
			n++
		}
	}
	return n
}

// sweepOld deletes the files in dir last modified before cutoff.
func (s *Store) sweepOld(dir string, cutoff time.Time) int {
	return sweep(dir, cutoff, func(name string) bool { return os.Remove(filepath.Join(dir, name)) == nil })
}

// sweepTemps deletes temp files last modified before cutoff, except those
// of this process's puts still being written or synced. Each removal holds
// the store lock alone, against which a put creates and registers its
// temp file in one step.
func (s *Store) sweepTemps(dir string, cutoff time.Time) int {
	return sweep(dir, cutoff, func(name string) bool {
		s.mu.Lock()
		defer s.mu.Unlock()
		return !s.isLive(name) && os.Remove(filepath.Join(dir, name)) == nil
	})
}

// isFanOut reports whether rel is "ab" or "ab/cd": two hex characters per level.
func isFanOut(rel string) bool {
	parts := strings.Split(filepath.ToSlash(rel), "/")
	if len(parts) > 2 {
		return false
	}
	for _, p := range parts {
		if len(p) != 2 || !isLowerHex(p) {
			return false
		}
	}
	return true
}

// AddRoots registers a holder of blob references under a name (registering
// a name again replaces it). [Store.Collect] keeps every blob any holder
// reports.
func (s *Store) AddRoots(name string, r Roots) {
	s.rootsMu.Lock()
	defer s.rootsMu.Unlock()
	s.roots[name] = r
}

// Collect runs GC keeping every blob reported by the registered roots and
// by extra. When any holder fails to report, nothing is removed: a blob
// whose referrer could not be asked is presumed referenced.
func (s *Store) Collect(minAge time.Duration, extra ...Roots) (GCStats, error) {
	s.rootsMu.Lock()
	names := make([]string, 0, len(s.roots))
	for n := range s.roots {
		names = append(names, n)
	}
	sort.Strings(names)
	all := make([]Roots, 0, len(names)+len(extra))
	for _, n := range names {
		all = append(all, s.roots[n])
	}
	s.rootsMu.Unlock()
	all = append(all, extra...)

	keep := map[string]struct{}{}
	for i, r := range all {
		if err := r(func(h string) { keep[h] = struct{}{} }); err != nil {
			who := "extra roots"
			if i < len(names) {
				who = names[i]
			}
			return GCStats{}, fmt.Errorf("collect content store garbage: roots %q: %w (nothing removed)", who, err)
		}
	}
	return s.GC(func(h string) bool { _, ok := keep[h]; return ok }, minAge)
}
