//go:build linux

package sandbox

import (
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/landlock-lsm/go-landlock/landlock"
	ll "github.com/landlock-lsm/go-landlock/landlock/syscall"
)

// fsRead is what "readable" grants: read files, list directories, run
// programs.
const fsRead = ll.AccessFSReadFile | ll.AccessFSReadDir | ll.AccessFSExecute

// handledFS are the file-system rights a domain restricts: all of them
// but ioctl on devices (terminal and sound ioctls on devices a program
// opened itself would otherwise fail; the device files that matter are
// not writable anyway) and RESOLVE_UNIX (newer than ABI 7, handled by
// go-landlock's best effort when present).
const handledFS = landlock.AccessFSSet(((1 << 16) - 1) &^ ll.AccessFSIoctlDev)

// ABI returns the running kernel's Landlock ABI version, 0 when it has
// none (or it is disabled).
func ABI() int {
	v, err := ll.LandlockGetABIVersion()
	if err != nil || v < 0 {
		return 0
	}
	return v
}

// confine applies rules to the whole worker process (all its threads, so
// every child it forks inherits them).
func confine(r Rules) Status {
	st := Status{ABI: ABI()}
	if st.ABI < 1 {
		st.Reason = "Landlock is not available in this kernel (it needs Linux 5.13 or later with landlock in the lsm= boot list)"
		return st
	}
	var rules []landlock.Rule
	readable, listable := readRules(r.Denied)
	rules = append(rules, grant(fsRead, readable, false)...)
	rules = append(rules, grant(ll.AccessFSReadDir, listable, false)...)
	rules = append(rules, grant(handledFS, splitAround(r.Writable, r.Denied), true)...)
	rules = append(rules, grant(ll.AccessFSMakeReg|ll.AccessFSMakeDir|ll.AccessFSRemoveFile|ll.AccessFSRemoveDir, splitAround(r.Entries, r.Denied), true)...)
	rules = append(rules, grant(ll.AccessFSReadFile|ll.AccessFSWriteFile|ll.AccessFSTruncate|ll.AccessFSReadDir, r.FileRW, false)...)
	rules = append(rules, grant(handledFS&^(ll.AccessFSMakeBlock|ll.AccessFSMakeChar), r.Devices, false)...)
	cfg := landlock.Config{HandledAccessFS: handledFS}
	if st.ABI >= 4 && (r.RestrictConnect || r.RestrictBind) {
		if r.RestrictConnect {
			cfg.HandledAccessNet |= ll.AccessNetConnectTCP
			for _, p := range r.ConnectTCP {
				rules = append(rules, landlock.ConnectTCP(p))
			}
		}
		if r.RestrictBind {
			cfg.HandledAccessNet |= ll.AccessNetBindTCP
			for _, p := range r.BindTCP {
				rules = append(rules, landlock.BindTCP(p))
			}
		}
		st.Net = true
	}
	if st.ABI >= 6 {
		cfg.Scoped = ll.ScopeSignal | ll.ScopeAbstractUnixSocket
	}
	if err := cfg.BestEffort().Restrict(rules...); err != nil {
		st.Reason = "applying Landlock rules failed: " + err.Error()
		return st
	}
	st.Confined = true
	st.Scoped = st.ABI >= 6
	var missing []string
	if st.ABI < 3 {
		missing = append(missing, "truncate (ABI 3)")
	}
	if (r.RestrictConnect || r.RestrictBind) && !st.Net {
		missing = append(missing, "TCP port rules (ABI 4)")
	}
	if !st.Scoped {
		missing = append(missing, "signal scoping (ABI 6)")
	}
	if len(missing) > 0 {
		st.Reason = "Landlock ABI " + strconv.Itoa(st.ABI) + " lacks " + strings.Join(missing, ", ")
	}
	return st
}

// fileRights are the rights that mean something on a file (Landlock
// refuses directory rights on one).
const fileRights = ll.AccessFSExecute | ll.AccessFSWriteFile | ll.AccessFSReadFile | ll.AccessFSTruncate | ll.AccessFSIoctlDev

// grant is a rule giving access to paths: directories get all of it,
// files its file part. Paths that do not exist are left out.
func grant(access landlock.AccessFSSet, paths []string, refer bool) []landlock.Rule {
	var dirs, files []string
	for _, p := range paths {
		fi, err := os.Stat(p)
		switch {
		case err != nil, fi.Mode()&(os.ModeNamedPipe|os.ModeSocket) != 0:
			// Missing, or not on a file system Landlock can name (a
			// pipe behind /dev/stderr).
		case fi.IsDir():
			dirs = append(dirs, p)
		default:
			files = append(files, p)
		}
	}
	var out []landlock.Rule
	if len(dirs) > 0 {
		r := landlock.PathAccess(access, dirs...).IgnoreIfMissing()
		if refer {
			r = r.WithRefer()
		}
		out = append(out, r)
	}
	if fa := access & fileRights; len(files) > 0 && fa != 0 {
		out = append(out, landlock.PathAccess(fa, files...).IgnoreIfMissing())
	}
	return out
}

// readRules turns "everything but denied" into what Landlock can say:
// it only grants, so every entry beside a denied path is granted on its
// own, down the chain of directories that lead to one. Those leading
// directories themselves may only be listed (so `ls ~` works; the names
// in a denied directory are visible, its contents are not).
func readRules(denied []string) (readable, listable []string) {
	var deny []string
	for _, d := range denied {
		if d == "" || !filepath.IsAbs(d) {
			continue
		}
		d = filepath.Clean(d)
		deny = append(deny, d)
		if real, err := filepath.EvalSymlinks(d); err == nil && real != d {
			deny = append(deny, real)
		}
	}
	if len(deny) == 0 {
		return []string{"/"}, nil
	}
	leads := func(p string) bool { // p is an ancestor of a denied path
		for _, d := range deny {
			if p != d && within(d, p) {
				return true
			}
		}
		return false
	}
	isDenied := func(p string) bool {
		return slices.ContainsFunc(deny, func(d string) bool { return within(p, d) })
	}
	var visit func(dir string)
	visit = func(dir string) {
		listable = append(listable, dir)
		ents, err := os.ReadDir(dir)
		if err != nil {
			return
		}
		for _, e := range ents {
			p := filepath.Join(dir, e.Name())
			if isDenied(p) {
				continue
			}
			if e.Type()&os.ModeSymlink != 0 {
				// A link is granted as its target: never one that leads
				// into, or is above, a denied path.
				real, err := filepath.EvalSymlinks(p)
				if err != nil || isDenied(real) || leads(real) {
					continue
				}
			}
			if e.IsDir() && leads(p) {
				visit(p)
				continue
			}
			readable = append(readable, p)
		}
	}
	visit("/")
	return readable, listable
}

// splitAround keeps denied paths out of writable trees. A Landlock rule
// covers a whole hierarchy, so a writable directory holding a denied one
// (a writable /tmp with the state dir below it) is granted entry by entry
// instead, down the chain of directories that lead to the denied path;
// those leading directories themselves get no write right. A writable
// path inside a denied one is dropped.
func splitAround(writable, denied []string) []string {
	var deny []string
	for _, d := range denied {
		if d != "" && filepath.IsAbs(d) {
			deny = append(deny, filepath.Clean(d))
		}
	}
	var out []string
	var visit func(dir string)
	visit = func(dir string) {
		ents, err := os.ReadDir(dir)
		if err != nil {
			return
		}
		for _, e := range ents {
			add(filepath.Join(dir, e.Name()), &out, deny, visit)
		}
	}
	for _, w := range writable {
		add(filepath.Clean(w), &out, deny, visit)
	}
	return out
}

func add(p string, out *[]string, deny []string, visit func(string)) {
	for _, d := range deny {
		if within(p, d) {
			return // denied, or inside a denied path
		}
	}
	for _, d := range deny {
		if within(d, p) {
			if fi, err := os.Lstat(p); err == nil && fi.IsDir() {
				visit(p)
			}
			return
		}
	}
	*out = append(*out, p)
}
