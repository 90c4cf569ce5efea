// Package attacks holds the attack table test (issue 11): more than a
// hundred ways an agent has tried to get around Shoal's governance, each
// run through a real kernel, each judged by what it did to the disk and to
// the kernel, never by what the kernel answered. See attacks_test.go and
// docs/security.md.
package attacks
