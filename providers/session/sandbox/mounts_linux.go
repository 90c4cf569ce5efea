//go:build linux

package sandbox

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// Read-only mounts
//
// Landlock has no right for changing a file's metadata: chmod, chown and
// utimes pass it wherever the file is, and a link made in the workspace
// reaches any file. A worker that may have a mount namespace of its own
// (the kernel holds CAP_SYS_ADMIN: it runs as root, or in a container
// that grants it) therefore gets one in which every mount is read-only
// but the paths the rules let it write. A metadata change anywhere else
// then fails with EROFS in the VFS, before any file system sees it,
// whatever program makes it. Landlock still decides every open, create,
// rename and removal; the mounts only add the refusal Landlock cannot
// give.
//
// Without CAP_SYS_ADMIN the worker would need a user namespace, and in
// one every file not owned by the user shows as nobody:nogroup (and `id`
// shows the user's groups so), which would break what commands print.
// There the mounts are not made and the status says so.

// envMounts tells a worker it was started in a mount namespace of its own.
const envMounts = "SHOAL_SANDBOX_MOUNTS"

// atRecursive is AT_RECURSIVE for mount_setattr(2).
const atRecursive = 0x8000

// wantMounts decides whether a new worker gets read-only mounts (a
// benchmark turns them off to compare).
var wantMounts = mayUnshareMounts

// mayUnshareMounts reports whether this process may give a child a mount
// namespace of its own without a user namespace.
func mayUnshareMounts() bool {
	var data [2]unix.CapUserData
	hdr := unix.CapUserHeader{Version: unix.LINUX_CAPABILITY_VERSION_3}
	if err := unix.Capget(&hdr, &data[0]); err != nil {
		return false
	}
	return data[0].Effective&(1<<capSysAdmin) != 0
}

// readOnlyMounts makes every mount of the worker's namespace read-only
// but the paths r lets it write, which stay as they were, and the denied
// paths inside those, which become read-only too. It runs before
// Landlock (which forbids mount operations) and before dropCaps takes
// CAP_SYS_ADMIN away.
func readOnlyMounts(r Rules) error {
	wasRO, err := readOnlyNow()
	if err != nil {
		return err
	}
	// Only the outermost writable paths become mounts: one inside
	// another is covered by its recursive flags, and a mount point cannot
	// be removed or renamed (an approved plan's target must be).
	// A writable path inside a denied one stays read-only, as Landlock
	// leaves it out (splitAround).
	denied := mountPaths(r.Denied, false)
	var rw []string
	for _, p := range mountPaths(slices.Concat(r.Writable, r.Entries, r.FileRW, r.Devices), true) {
		if !slices.ContainsFunc(rw, func(w string) bool { return within(p, w) }) &&
			!slices.ContainsFunc(denied, func(d string) bool { return within(p, d) }) {
			rw = append(rw, p)
		}
	}
	var ro []string
	for _, d := range denied {
		if slices.ContainsFunc(rw, func(w string) bool { return within(d, w) }) {
			ro = append(ro, d)
		}
	}
	// Each becomes a mount of its own, parents before what lies inside
	// them, so its flags can differ from those of the mount it is in.
	for _, p := range slices.Concat(rw, ro) {
		if err := unix.Mount(p, p, "", unix.MS_BIND|unix.MS_REC, ""); err != nil {
			return fmt.Errorf("bind %s: %w", p, err)
		}
	}
	if err := setattr("/", unix.MOUNT_ATTR_RDONLY, 0); err != nil {
		return fmt.Errorf("make / read-only: %w", err)
	}
	// From here a failure puts the flags back as they were, so the
	// session keeps the writable paths it was promised (and its status
	// says that metadata changes are not refused).
	undo := func(err error) error {
		setattr("/", 0, unix.MOUNT_ATTR_RDONLY)
		for _, m := range wasRO {
			unix.MountSetattr(unix.AT_FDCWD, m, 0, &unix.MountAttr{Attr_set: unix.MOUNT_ATTR_RDONLY})
		}
		return err
	}
	for _, p := range rw {
		if err := setattr(p, 0, unix.MOUNT_ATTR_RDONLY); err != nil {
			return undo(fmt.Errorf("keep %s writable: %w", p, err))
		}
	}
	// A mount inside a writable path that was read-only stays so.
	for _, m := range wasRO {
		if slices.ContainsFunc(rw, func(w string) bool { return within(m, w) }) {
			ro = append(ro, m)
		}
	}
	for _, p := range ro {
		if err := setattr(p, unix.MOUNT_ATTR_RDONLY, 0); err != nil {
			return undo(fmt.Errorf("make %s read-only: %w", p, err))
		}
	}
	return nil
}

// readOnlyNow lists the mount points that are read-only now, from
// /proc/self/mountinfo.
func readOnlyNow() ([]string, error) {
	b, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		return nil, err
	}
	var out []string
	for line := range strings.Lines(string(b)) {
		// id parent major:minor root mount-point options ...
		f := strings.Fields(line)
		if len(f) < 6 || !slices.Contains(strings.Split(f[5], ","), "ro") {
			continue
		}
		out = append(out, unescapeMountinfo(f[4]))
	}
	return out, nil
}

// unescapeMountinfo undoes mountinfo's octal escapes (\040 for a space).
func unescapeMountinfo(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+3 < len(s) {
			if n, err := strconv.ParseUint(s[i+1:i+4], 8, 8); err == nil {
				b.WriteByte(byte(n))
				i += 3
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

// mountPaths resolves paths to what a mount names (links followed) and
// drops missing and relative ones, and with skipSpecial device files,
// pipes and sockets too (a read-only mount does not stop writing to
// those). Sorted by depth, parents first, without duplicates.
func mountPaths(paths []string, skipSpecial bool) []string {
	var out []string
	for _, p := range paths {
		if p == "" || !filepath.IsAbs(p) {
			continue
		}
		real, err := filepath.EvalSymlinks(p)
		if err != nil {
			continue
		}
		fi, err := os.Stat(real)
		if err != nil || (skipSpecial && !fi.IsDir() && !fi.Mode().IsRegular()) {
			continue
		}
		out = append(out, real)
	}
	slices.SortFunc(out, func(a, b string) int {
		if c := strings.Count(a, "/") - strings.Count(b, "/"); c != 0 {
			return c
		}
		return strings.Compare(a, b)
	})
	return slices.Compact(out)
}

func setattr(path string, set, clr uint64) error {
	return unix.MountSetattr(unix.AT_FDCWD, path, atRecursive, &unix.MountAttr{Attr_set: set, Attr_clr: clr})
}
