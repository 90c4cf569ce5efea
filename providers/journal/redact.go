package journal

import (
	"regexp"
	"strings"
)

// Marker replaces every redacted secret.
const Marker = "«redacted»"

// A redaction rule's expression has three groups: what to keep before the
// secret, the secret, what to keep after it (either may be empty).
type redaction struct {
	name string
	// hints are lowercase substrings one of which any match contains;
	// checking them first spares the expression on most sources.
	hints []string
	re    *regexp.Regexp
}

// secretValue is the value of an assignment or flag: a quoted string or a
// shell word.
const secretValue = `("(?:[^"\\\n]|\\.)*"|'[^'\n]*'|[^\s'";&|()<>]+)`

// The rules, in the order they run; docs/journal.md lists them.
var redactions = []redaction{
	{"private key block", []string{"private key"}, regexp.MustCompile(
		`()(-----BEGIN[A-Z0-9 ]*PRIVATE KEY-----(?s:.*?)(?:-----END[A-Z0-9 ]*PRIVATE KEY-----|\z))()`)},
	{"URL credentials", []string{"://"}, regexp.MustCompile(
		`(\b[a-zA-Z][a-zA-Z0-9+.-]*://[^\s/:@'"]*:)([^\s/@'"]+)(@)`)},
	{"authorization header", []string{"authorization"}, regexp.MustCompile(
		`(?i)(\b(?:proxy-)?authorization[ \t]*:[ \t]*(?:bearer|basic|token|digest)[ \t]+)([^\s'"]+)()`)},
	{"bearer token", []string{"bearer"}, regexp.MustCompile(
		`(?i)(\bbearer[ \t]+)([A-Za-z0-9\-._~+/]{12,}=*)()`)},
	{"curl user", []string{"-u"}, regexp.MustCompile(
		`((?:^|[ \t])(?:-u|--user|--proxy-user)(?:[ \t]+|=)['"]?[^\s:'"]+:)([^\s'"]+)()`)},
	{"secret flag", []string{"pass", "token", "secret", "key"}, regexp.MustCompile(
		`(?i)((?:^|[ \t])--?(?:[a-z0-9]+-)*(?:password|passwd|passphrase|token|secret|api-?key|access-key|secret-key|private-key)[ \t]+)` + secretValue + `()`)},
	{"secret assignment", []string{"pass", "token", "secret", "credential", "key"}, regexp.MustCompile(
		`(?i)(\b(?:[A-Za-z0-9_.-]*(?:token|secret|passw(?:or)?d|passphrase|credentials?)|(?:[A-Za-z0-9_.-]*[_.-])?(?:api[_-]?|access[_-]?|private[_-]?)?key)["']?[ \t]*[:=][ \t]*)` + secretValue + `()`)},
	{"AWS access key id", []string{"akia", "asia", "agpa", "aida", "aroa", "anpa", "anva", "aipa"}, regexp.MustCompile(
		`()(\b(?:AKIA|ASIA|AGPA|AIDA|AROA|ANPA|ANVA|AIPA)[A-Z0-9]{16}\b)()`)},
	{"GitHub token", []string{"gh", "github_pat_"}, regexp.MustCompile(
		`()(\b(?:gh[pousr]_[A-Za-z0-9]{30,}|github_pat_[A-Za-z0-9_]{22,}))()`)},
	{"Slack token", []string{"xox"}, regexp.MustCompile(
		`()(\bxox[abposre]-[A-Za-z0-9-]{10,})()`)},
	{"API key (sk-…)", []string{"sk-"}, regexp.MustCompile(
		`()(\bsk-[A-Za-z0-9_-]{20,})()`)},
	{"Google API key", []string{"aiza"}, regexp.MustCompile(
		`()(\bAIza[0-9A-Za-z_-]{35})()`)},
}

// Redact replaces credential-shaped parts of s with [Marker] and keeps the
// rest, so a journaled command still reads as what it did. It is
// idempotent. Values that only name a variable or a command substitution
// ($TOKEN, $(cat file)) are not secrets themselves and are kept.
func Redact(s string) string {
	lower := strings.ToLower(s)
	for _, r := range redactions {
		if r.hinted(lower) {
			s = r.apply(s)
		}
	}
	return s
}

func (r redaction) hinted(lower string) bool {
	for _, h := range r.hints {
		if strings.Contains(lower, h) {
			return true
		}
	}
	return false
}

func (r redaction) apply(s string) string {
	matches := r.re.FindAllStringSubmatchIndex(s, -1)
	if matches == nil {
		return s
	}
	var b strings.Builder
	last := 0
	for _, m := range matches {
		start, end := m[4], m[5]
		// A quoted secret keeps its quotes, so JSON and shell quoting
		// still read right.
		if end-start >= 2 && (s[start] == '"' || s[start] == '\'') && s[end-1] == s[start] {
			start, end = start+1, end-1
		}
		secret := s[start:end]
		if strings.HasPrefix(secret, "$") || strings.HasPrefix(secret, Marker) {
			continue
		}
		b.WriteString(s[last:start])
		b.WriteString(Marker)
		last = end
	}
	if last == 0 {
		return s
	}
	b.WriteString(s[last:])
	return b.String()
}
