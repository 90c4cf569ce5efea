//go:build unix

package client

import "syscall"

// unixRights is the control message that hands descriptor fd over.
func unixRights(fd int) []byte { return syscall.UnixRights(fd) }
