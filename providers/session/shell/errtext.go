package shell

import (
	"errors"
	"io/fs"
	"syscall"
)

// strerror is an error as the C library words it, the text GNU tools and
// bash print: "No such file or directory", not Go's lowercase form. The
// interpreter's own path errors ("is a directory") are strerror texts in
// lower case too, and get the same capital.
func strerror(err error) string {
	var errno syscall.Errno
	var pe *fs.PathError
	s := err.Error()
	switch {
	case errors.As(err, &errno):
		s = errno.Error()
	case errors.As(err, &pe):
		s = pe.Err.Error()
	}
	if s != "" && s[0] >= 'a' && s[0] <= 'z' {
		s = string(s[0]-'a'+'A') + s[1:]
	}
	return s
}
