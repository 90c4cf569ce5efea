// Package version is the Shoal release, in a package of its own (standard
// library only) so the command line client can say it without linking the
// kernel.
package version

// Version is the Shoal release: the kernel's, the facade's and the CLI's.
const Version = "0.1.0"
