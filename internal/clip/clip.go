// Package clip shortens text for error messages and display without
// cutting a UTF-8 character in two.
package clip

import "unicode/utf8"

// Ellipsis is what [String] appends when it cuts.
const Ellipsis = "…"

// Prefix returns the longest prefix of s of at most n bytes that ends on
// a character boundary. Invalid UTF-8 is cut like any other byte.
func Prefix(s string, n int) string {
	if n <= 0 {
		return ""
	}
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n]
}

// String returns s when it has at most n bytes, else its [Prefix] of n
// bytes followed by [Ellipsis].
func String(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return Prefix(s, n) + Ellipsis
}
