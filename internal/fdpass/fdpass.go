//go:build unix

// Package fdpass reads the descriptors handed over on a unix socket.
package fdpass

import "syscall"

// Rights returns the descriptors of the SCM_RIGHTS messages in oob, each
// marked close-on-exec (the kernel runs children that must not inherit
// them). A message that does not parse gives none.
func Rights(oob []byte) []int {
	msgs, err := syscall.ParseSocketControlMessage(oob)
	if err != nil {
		return nil
	}
	var fds []int
	for i := range msgs {
		if got, err := syscall.ParseUnixRights(&msgs[i]); err == nil {
			fds = append(fds, got...)
		}
	}
	for _, fd := range fds {
		syscall.CloseOnExec(fd)
	}
	return fds
}

// Close closes every descriptor of fds.
func Close(fds []int) {
	for _, fd := range fds {
		_ = syscall.Close(fd)
	}
}
