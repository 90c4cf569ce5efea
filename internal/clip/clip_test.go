package clip

import (
	"strings"
	"testing"
	"unicode/utf8"
)

func TestString(t *testing.T) {
	for _, tc := range []struct {
		s    string
		n    int
		want string
	}{
		{"", 3, ""},
		{"abc", 3, "abc"},
		{"abcd", 3, "abc…"},
		{"héllo", 2, "h…"}, // é is 2 bytes at 1..2: cutting at 2 would split it
		{"héllo", 3, "hé…"},
		{"😀😀", 5, "😀…"},
		{"😀", 3, "…"},
		{"abc", 0, "…"},
		{"a\xffb", 2, "a\xff…"}, // invalid bytes are cut like any other
	} {
		if got := String(tc.s, tc.n); got != tc.want {
			t.Errorf("String(%q, %d) = %q, want %q", tc.s, tc.n, got, tc.want)
		}
	}
}

// TestPrefixNeverSplits cuts a mixed-width text at every length: each
// prefix is valid UTF-8, fits, and is the longest that does.
func TestPrefixNeverSplits(t *testing.T) {
	s := strings.Repeat("aé€😀", 4)
	for n := 0; n <= len(s)+1; n++ {
		p := Prefix(s, n)
		if !utf8.ValidString(p) || len(p) > n || !strings.HasPrefix(s, p) {
			t.Fatalf("Prefix(%q, %d) = %q", s, n, p)
		}
		if len(p) < len(s) {
			_, size := utf8.DecodeRuneInString(s[len(p):])
			if len(p)+size <= n {
				t.Fatalf("Prefix(%q, %d) = %q: the next character fits too", s, n, p)
			}
		}
	}
}
