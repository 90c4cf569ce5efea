package plan

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/zeebo/blake3"

	"github.com/shoal-sh/shoal/core/policy"
	"github.com/shoal-sh/shoal/providers/plan/analyze"
)

// Staleness: at plan time each concrete target of a write or delete (and
// each script the source runs) is fingerprinted; apply refuses when a
// fingerprint no longer matches. Files get existence, type, size, mtime
// and, up to hashLimit, a blake3 of their content; trees a digest of a
// bounded walk; patterns the set of names they match.
const (
	hashLimit = 1 << 20 // files up to 1 MiB are hashed
	treeCap   = 10000   // entries per tree digest
)

type fpKind int

const (
	fpPath fpKind = iota
	fpTree
	fpGlob
)

type fingerprint struct {
	kind   fpKind
	path   string
	exists bool
	dir    bool
	size   int64
	mtime  int64
	mode   fs.FileMode
	hash   string // content hash, files ≤ hashLimit
	digest string // tree or pattern digest
}

type snapshot []fingerprint

// takeSnapshot fingerprints the targets of effects, now.
func takeSnapshot(effects []analyze.Effect) snapshot {
	var s snapshot
	seen := map[string]bool{}
	for _, e := range effects {
		if e.Dynamic || e.Target == "" {
			continue
		}
		watched := e.Kind == policy.FSWrite || e.Kind == policy.FSDelete || (e.Kind == policy.FSRead && e.Executes)
		if !watched {
			continue
		}
		var fp fingerprint
		switch {
		case e.Glob && strings.HasSuffix(e.Target, "/**"):
			fp = fingerprint{kind: fpTree, path: strings.TrimSuffix(e.Target, "/**")}
		case e.Glob:
			fp = fingerprint{kind: fpGlob, path: e.Target}
		case e.Recursive:
			fp = fingerprint{kind: fpTree, path: e.Target}
		default:
			fp = fingerprint{kind: fpPath, path: e.Target}
		}
		key := fmt.Sprint(fp.kind, fp.path)
		if seen[key] {
			continue
		}
		seen[key] = true
		s = append(s, fp.measure())
	}
	return s
}

// measure fills the fingerprint from the disk.
func (f fingerprint) measure() fingerprint {
	out := fingerprint{kind: f.kind, path: f.path}
	switch f.kind {
	case fpGlob:
		matches, _ := filepath.Glob(f.path)
		h := blake3.New()
		for _, m := range matches {
			writeEntry(h, m)
		}
		out.exists = len(matches) > 0
		out.digest = fmt.Sprintf("%d:%x", len(matches), h.Sum(nil))
		return out
	case fpTree:
		info, err := os.Lstat(f.path)
		if err != nil {
			return out
		}
		out.exists, out.dir, out.mode = true, info.IsDir(), info.Mode()
		if !info.IsDir() {
			out.size, out.mtime = info.Size(), info.ModTime().UnixNano()
			out.hash = hashFile(f.path, info)
			return out
		}
		h := blake3.New()
		n := 0
		_ = filepath.WalkDir(f.path, func(p string, d fs.DirEntry, err error) error {
			if n >= treeCap {
				return filepath.SkipAll
			}
			n++
			if err != nil {
				return nil
			}
			writeEntry(h, p)
			return nil
		})
		out.digest = fmt.Sprintf("%d:%x", n, h.Sum(nil))
		return out
	}
	info, err := os.Lstat(f.path)
	if err != nil {
		return out
	}
	out.exists, out.dir, out.mode = true, info.IsDir(), info.Mode()
	out.size, out.mtime = info.Size(), info.ModTime().UnixNano()
	if info.IsDir() {
		// A directory's own mtime moves when entries are added or removed.
		return out
	}
	out.hash = hashFile(f.path, info)
	return out
}

// writeEntry adds one entry's name, type, size and mtime to a digest.
func writeEntry(h io.Writer, p string) {
	info, err := os.Lstat(p)
	var buf [8]byte
	h.Write([]byte(p))
	h.Write([]byte{0})
	if err != nil {
		h.Write([]byte("?"))
		return
	}
	binary.BigEndian.PutUint64(buf[:], uint64(info.Mode()))
	h.Write(buf[:])
	binary.BigEndian.PutUint64(buf[:], uint64(info.Size()))
	h.Write(buf[:])
	binary.BigEndian.PutUint64(buf[:], uint64(info.ModTime().UnixNano()))
	h.Write(buf[:])
}

func hashFile(p string, info fs.FileInfo) string {
	if !info.Mode().IsRegular() || info.Size() > hashLimit {
		return ""
	}
	f, err := os.Open(p)
	if err != nil {
		return ""
	}
	defer f.Close()
	h := blake3.New()
	if _, err := io.Copy(h, io.LimitReader(f, hashLimit+1)); err != nil {
		return ""
	}
	return fmt.Sprintf("%x", h.Sum(nil))
}

// check measures every fingerprint again and names the first change.
func (s snapshot) check() error {
	for _, was := range s {
		now := was.measure()
		if err := compare(was, now); err != nil {
			return err
		}
	}
	return nil
}

var errChanged = errors.New("target changed")

func compare(was, now fingerprint) error {
	p := was.path
	switch {
	case was.exists && !now.exists:
		if was.kind == fpGlob {
			return fmt.Errorf("%w: the pattern %s matches nothing any more", errChanged, p)
		}
		return fmt.Errorf("%w: %s is gone", errChanged, p)
	case !was.exists && now.exists:
		if was.kind == fpGlob {
			return fmt.Errorf("%w: the pattern %s now matches files", errChanged, p)
		}
		return fmt.Errorf("%w: %s appeared", errChanged, p)
	case !was.exists:
		return nil
	case was.dir != now.dir || was.mode.Type() != now.mode.Type():
		return fmt.Errorf("%w: %s changed type", errChanged, p)
	case was.kind == fpGlob && was.digest != now.digest:
		return fmt.Errorf("%w: the pattern %s now matches other files (or they changed)", errChanged, p)
	case was.kind == fpTree && was.digest != now.digest:
		return fmt.Errorf("%w: the tree below %s changed", errChanged, p)
	case was.size != now.size:
		return fmt.Errorf("%w: %s changed size (%d → %d bytes)", errChanged, p, was.size, now.size)
	case was.hash != now.hash:
		return fmt.Errorf("%w: the content of %s changed", errChanged, p)
	case was.hash == "" && was.mtime != now.mtime:
		return fmt.Errorf("%w: %s was modified", errChanged, p)
	case was.mode != now.mode:
		return fmt.Errorf("%w: the mode of %s changed", errChanged, p)
	}
	return nil
}
