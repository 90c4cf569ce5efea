//go:build !unix

package client

// unixRights is nil where descriptors cannot be handed over; such a
// kernel does not offer to take a file (wire.StreamTicket.File).
func unixRights(int) []byte { return nil }
