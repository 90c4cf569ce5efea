package out

import (
	"bufio"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/shoal-sh/shoal/core/rpc"
	"github.com/shoal-sh/shoal/core/value"
	"github.com/shoal-sh/shoal/providers/val/cas"
)

// The transcript outlives the kernel (SPEC X3 beyond): out:N numbering
// continues across restarts, and the values of earlier runs stay
// readable from the content store.
//
// Each session has an append-only index in the state directory,
// transcript/<hex of the session name>.log, one line per event:
//
//	r N                      out:N was handed out (reserved)
//	v N HASH SIZE MARKS      out:N's value is blob HASH
//	i N SIZE MARKS JSON      out:N's value, inline (at most InlineMax bytes)
//	u N                      out:N was given back unused (a refused run)
//	c                        the session was closed
//
// The numbering restarts after the largest N the index names, so no
// number is handed out twice, not even one whose run a crash cut short.
// The lines are written (not synced) before the journal row of the same
// run, so the index is never behind the journal. Every value goes to the
// content store when the index is on; its newest [KeepDurable] values per
// session are garbage-collection roots, older ones may be collected.

// InlineMax bounds the typed-JSON encoding of a value kept in its index
// line rather than in the content store: most results are small, and an
// index line survives a kernel crash without a sync of its own.
const InlineMax = 4 << 10

// KeepDurable is how many values per session stay readable across
// restarts (and protected from the content store's collection).
const KeepDurable = 10000

// Persist turns the durable index on, in dir. Without it (tests, a kernel
// with no content store) the transcript is memory only.
func (t *Transcript) Persist(dir string) error {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("transcript index: %w", err)
	}
	t.mu.Lock()
	t.dir = dir
	t.mu.Unlock()
	return nil
}

func (t *Transcript) indexPath(session string) string {
	return filepath.Join(t.dir, hex.EncodeToString([]byte(session))+".log")
}

// loadLocked returns the session's log, reading its index the first time.
func (t *Transcript) loadLocked(session string) *sessionLog {
	if log := t.sessions[session]; log != nil {
		return log
	}
	log := &sessionLog{next: 1, entries: map[int]*entry{}}
	t.sessions[session] = log
	if t.dir == "" {
		return log
	}
	path := t.indexPath(session)
	if f, err := os.Open(path); err == nil {
		readIndex(f, log)
		f.Close()
	}
	log.index, _ = os.OpenFile(path, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o600)
	return log
}

// readIndex rebuilds a log from its index: values of earlier runs as
// stored entries, numbers whose value never came as gone ones.
func readIndex(f *os.File, log *sessionLog) {
	reserved := map[int]bool{}
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	maxN := 0
	for sc.Scan() {
		fields := strings.Split(sc.Text(), "\t")
		switch fields[0] {
		case "c":
			log.closedBelow = maxN + 1
			log.entries = map[int]*entry{}
			reserved = map[int]bool{}
		case "u":
			if len(fields) == 2 {
				if n, err := strconv.Atoi(fields[1]); err == nil {
					delete(reserved, n)
				}
			}
		case "r", "v", "i":
			if len(fields) < 2 {
				continue
			}
			n, err := strconv.Atoi(fields[1])
			if err != nil || n < 1 {
				continue
			}
			maxN = max(maxN, n)
			if fields[0] == "r" {
				reserved[n] = true
				continue
			}
			if len(fields) < 5 {
				continue
			}
			e := &entry{n: n}
			marks := fields[4]
			if fields[0] == "i" {
				v, err := value.Unmarshal([]byte(fields[4]))
				if err != nil {
					continue
				}
				e.v, marks = v, fields[3]
				e.size, _ = strconv.Atoi(fields[2])
			} else {
				if cas.ValidHash(fields[2]) != nil {
					continue
				}
				e.hash = toBlobID(fields[2])
				e.size, _ = strconv.Atoi(fields[3])
			}
			if marks != "" {
				e.marks = strings.Split(marks, ",")
			}
			log.entries[n] = e
			delete(reserved, n)
		}
	}
	log.next = maxN + 1
	for n := range reserved {
		log.entries[n] = &entry{n: n, gone: "its run was cut short when the kernel stopped, before it had a value"}
	}
	// Only the newest KeepDurable values stay roots of the content store.
	for n, e := range log.entries {
		if n <= maxN-KeepDurable && (!e.hash.none() || e.v != nil) {
			e.hash, e.v = blobID{}, nil
			e.gone = fmt.Sprintf("only the newest %d values of a session are kept across restarts; its value was released to the content store's garbage collection", KeepDurable)
		}
	}
}

// note appends one index line (best effort: an index that cannot be
// written costs durability, never the execution).
func (log *sessionLog) note(format string, args ...any) {
	if log.index == nil {
		return
	}
	_, _ = fmt.Fprintf(log.index, format+"\n", args...)
}

// goneError is the coded error of a ref whose value is not there.
func goneError(session string, n int, why string) error {
	return rpc.Errorf(rpc.NotFound, "out:%d of session %q is gone: %s. Refs are never reused: later runs have higher numbers", n, session, why)
}
