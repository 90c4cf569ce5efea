//go:build !unix

package cas

import "os"

// writeBuffers writes the slices one after the other.
func writeBuffers(f *os.File, bs [][]byte) error {
	for _, b := range bs {
		if _, err := f.Write(b); err != nil {
			return err
		}
	}
	return nil
}
