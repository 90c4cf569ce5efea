package shell

import (
	"errors"
	"io/fs"
	"syscall"
)

// strerror is an error as the C library words it, the text GNU tools and
// bash print: "No such file or directory", not Go's lowercase form.
func strerror(err error) string {
	var errno syscall.Errno
	if errors.As(err, &errno) {
		s := errno.Error()
		if s != "" && s[0] >= 'a' && s[0] <= 'z' {
			s = string(s[0]-'a'+'A') + s[1:]
		}
		return s
	}
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return pe.Err.Error()
	}
	return err.Error()
}
