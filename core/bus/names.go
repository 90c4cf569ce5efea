package bus

import (
	"strings"

	"github.com/shoal-sh/shoal/core/rpc"
)

// The kernel's static channels, advertised by session.attach (SPEC K3).
const (
	ChannelJournal    = "journal"
	ChannelApproval   = "approval"
	ChannelRender     = "render"
	ChannelTranscript = "session.transcript"
)

// StaticChannels lists the static channels in the order session.attach
// advertises them.
func StaticChannels() []string {
	return []string{ChannelJournal, ChannelApproval, ChannelRender, ChannelTranscript}
}

// UserPrefix starts every channel a client may publish on.
const UserPrefix = "user."

// TaskPrefix starts the per-task channels (task.{id}) the kernel publishes
// task state changes on.
const TaskPrefix = "task."

// Limits on channel names. They keep names usable as URI segments, file
// names and log fields without quoting.
const (
	MaxNameLen    = 128 // bytes in a whole channel name
	MaxSegmentLen = 64  // bytes in one dot-separated segment
)

// ValidateName checks the syntax every channel name shares: one or more
// segments separated by '.', each 1 to 64 characters from [A-Za-z0-9_-],
// at most 128 bytes in all. It says nothing about who may publish there.
// The error is an *rpc.Error with code rpc.InvalidParams.
func ValidateName(channel string) error {
	if channel == "" {
		return rpc.Errorf(rpc.InvalidParams, "channel name is empty: give a name such as user.build or task.7")
	}
	if len(channel) > MaxNameLen {
		return rpc.Errorf(rpc.InvalidParams, "channel name %.40q… is %d bytes long; the limit is %d", channel, len(channel), MaxNameLen)
	}
	seg := 0
	for i := 0; i < len(channel); i++ {
		ch := channel[i]
		switch {
		case ch == '.':
			if seg == 0 {
				return rpc.Errorf(rpc.InvalidParams, "channel name %q has an empty segment: segments are separated by single dots and may not be empty (e.g. user.ci.build)", channel)
			}
			seg = 0
		case isNameChar(ch):
			seg++
			if seg > MaxSegmentLen {
				return rpc.Errorf(rpc.InvalidParams, "channel name %q has a segment longer than %d characters", channel, MaxSegmentLen)
			}
		default:
			return rpc.Errorf(rpc.InvalidParams, "channel name %q contains %q: use only letters, digits, '_' and '-' in dot-separated segments (e.g. user.ci.build)", channel, rune(ch))
		}
	}
	if seg == 0 {
		return rpc.Errorf(rpc.InvalidParams, "channel name %q ends with a dot: segments may not be empty (e.g. user.ci.build)", channel)
	}
	return nil
}

func isNameChar(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '-'
}

// IsKernelChannel reports whether channel is owned by the kernel: one of
// the static channels or a task.* channel.
func IsKernelChannel(channel string) bool {
	switch channel {
	case ChannelJournal, ChannelApproval, ChannelRender, ChannelTranscript:
		return true
	}
	return channel == "task" || strings.HasPrefix(channel, TaskPrefix)
}

// CheckClientChannel applies the rule for client publishes (SPEC E5):
// only user.* channels with a well-formed, non-empty suffix. Kernel
// channels are named as such in the refusal. The error is an *rpc.Error
// with code rpc.InvalidParams.
func CheckClientChannel(channel string) error {
	if IsKernelChannel(channel) {
		return rpc.Errorf(rpc.InvalidParams, "channel %q belongs to the kernel (journal, approval, render, session.transcript and task.* are kernel channels); clients may publish only on user.* channels, e.g. user.myapp.build", channel)
	}
	if !strings.HasPrefix(channel, UserPrefix) {
		return rpc.Errorf(rpc.InvalidParams, "channel %q is not publishable: clients may publish only on channels named user.<name>, e.g. user.myapp.build", channel)
	}
	if len(channel) == len(UserPrefix) {
		return rpc.Errorf(rpc.InvalidParams, "channel %q has nothing after user.: name the channel, e.g. user.myapp.build", channel)
	}
	return ValidateName(channel)
}
