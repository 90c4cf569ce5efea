//go:build linux

package sandbox

import (
	"fmt"
	"syscall"
	"unsafe"

	"golang.org/x/sys/unix"
	"kernel.org/pub/linux/libs/security/libcap/psx"
)

// Capabilities
//
// A kernel run as root gives its sessions root's capabilities, and
// several of those act on the whole machine in ways no file rule covers:
// rebooting it, loading kernel modules, changing its clock or its
// firewall, loading BPF programs. Landlock confines files, sockets and
// signals, not these, and the analyzer asks for `reboot` or `iptables`
// only when it sees them (a python one-liner calling reboot(2) it does
// not). So a worker drops them from every thread and from the bounding
// set before it starts anything: no process in the domain can regain
// them, by exec of a setuid program or otherwise. An approved plan with
// a whole-machine effect runs in a worker of its own that keeps them
// (Rules.HostCaps); CAP_SYS_ADMIN goes whenever the worker has read-only
// mounts, which it would let a process undo.
//
// Root keeps what ordinary work needs: reading and writing any file the
// rules allow (DAC_OVERRIDE), chown and chmod there, su and setpriv
// (SETUID, SETGID), binding ports below 1024, ping (NET_RAW).

const capSysAdmin = unix.CAP_SYS_ADMIN

// HostCapabilities are the capabilities a domain's processes lose (when
// the kernel has them at all), by number and name.
var HostCapabilities = []struct {
	Num  int
	Name string
}{
	{unix.CAP_DAC_READ_SEARCH, "dac_read_search"}, // open_by_handle_at: opening a file by handle, past any path rule
	{unix.CAP_LINUX_IMMUTABLE, "linux_immutable"},
	{unix.CAP_NET_ADMIN, "net_admin"},
	{unix.CAP_SYS_MODULE, "sys_module"},
	{unix.CAP_SYS_RAWIO, "sys_rawio"},
	{unix.CAP_SYS_PACCT, "sys_pacct"},
	{unix.CAP_SYS_BOOT, "sys_boot"},
	{unix.CAP_SYS_NICE, "sys_nice"},         // real-time scheduling can starve the machine
	{unix.CAP_SYS_RESOURCE, "sys_resource"}, // the disk's reserved blocks, a lower oom_score_adj
	{unix.CAP_SYS_TIME, "sys_time"},
	{unix.CAP_SYS_TTY_CONFIG, "sys_tty_config"},
	{unix.CAP_AUDIT_CONTROL, "audit_control"},
	{unix.CAP_MAC_OVERRIDE, "mac_override"},
	{unix.CAP_MAC_ADMIN, "mac_admin"},
	{unix.CAP_SYSLOG, "syslog"},
	{unix.CAP_WAKE_ALARM, "wake_alarm"},
	{unix.CAP_BLOCK_SUSPEND, "block_suspend"},
	{unix.CAP_PERFMON, "perfmon"},
	{unix.CAP_BPF, "bpf"},
	{unix.CAP_CHECKPOINT_RESTORE, "checkpoint_restore"},
}

// capsToDrop is what a worker for r drops: the host capabilities unless
// r keeps them, and CAP_SYS_ADMIN with read-only mounts (or when r does
// not keep the host's: it is the widest of them all).
func capsToDrop(r Rules, mounts bool) []int {
	var caps []int
	if !r.HostCaps {
		for _, c := range HostCapabilities {
			caps = append(caps, c.Num)
		}
	}
	if mounts || !r.HostCaps {
		caps = append(caps, capSysAdmin)
	}
	return caps
}

// dropCaps removes caps from every thread of the worker (psx makes each
// call on all of them, with or without cgo), from its bounding set and
// from its ambient set, so that nothing it starts holds them.
func dropCaps(caps []int) error {
	if len(caps) == 0 {
		return nil
	}
	if _, _, e := psx.Syscall6(syscall.SYS_PRCTL, unix.PR_CAP_AMBIENT, unix.PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0, 0); e != 0 {
		return fmt.Errorf("clear ambient capabilities: %w", e)
	}
	var data [2]unix.CapUserData
	hdr := unix.CapUserHeader{Version: unix.LINUX_CAPABILITY_VERSION_3}
	if err := unix.Capget(&hdr, &data[0]); err != nil {
		return fmt.Errorf("read capabilities: %w", err)
	}
	for _, c := range caps {
		// Dropping from the bounding set needs CAP_SETPCAP; a kernel
		// without it cannot hand the capability on anyway unless it holds
		// it, so EPERM there is only an error when it does.
		if _, _, e := psx.Syscall6(syscall.SYS_PRCTL, unix.PR_CAPBSET_DROP, uintptr(c), 0, 0, 0, 0); e != 0 && (e != syscall.EPERM || has(data, c)) {
			return fmt.Errorf("drop capability %d from the bounding set: %w", c, e)
		}
		i, bit := c/32, uint32(1)<<(c%32)
		data[i].Effective &^= bit
		data[i].Permitted &^= bit
		data[i].Inheritable &^= bit
	}
	if _, _, e := psx.Syscall3(syscall.SYS_CAPSET, uintptr(unsafe.Pointer(&hdr)), uintptr(unsafe.Pointer(&data[0])), 0); e != 0 {
		return fmt.Errorf("drop capabilities: %w", e)
	}
	return nil
}

// has reports whether capability c is in the permitted set.
func has(data [2]unix.CapUserData, c int) bool {
	return data[c/32].Permitted&(1<<(c%32)) != 0
}
