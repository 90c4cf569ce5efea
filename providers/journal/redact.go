package journal

import (
	"bytes"
	"encoding/json"
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

// notSecret holds, by rule name, a test that tells a match which only
// looks like a secret (m is the match's submatch indexes into s).
var notSecret = map[string]func(s string, m []int) bool{
	"secret assignment": fileMessage,
}

// fileMessage tells a program's message about a file whose name looks
// like a secret's (`cat: /run/app/token: Permission denied`, `token: No
// such file or directory`) from a key/value pair: the name is the last
// part of a path, or what follows the colon is the C library's wording
// of an error.
func fileMessage(s string, m []int) bool {
	if m[2] > 0 && s[m[2]-1] == '/' {
		return true
	}
	if sep := strings.TrimRight(s[m[2]:m[3]], " \t"); !strings.HasSuffix(sep, ":") {
		return false
	}
	rest := s[m[4]:]
	for _, msg := range errnoWords {
		if strings.HasPrefix(rest, msg) {
			return true
		}
	}
	return false
}

// errnoWords begin the messages programs print after "NAME: " when an
// operation on NAME failed.
var errnoWords = []string{
	"Permission denied", "No such file or directory", "Is a directory",
	"Not a directory", "Operation not permitted", "File exists",
	"Directory not empty", "Read-only file system", "No space left on device",
	"Too many levels of symbolic links", "File name too long",
	"command not found", "cannot open", "cannot access", "not found",
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
	{"secret assignment", []string{"pass", "pwd", "token", "secret", "credential", "key"}, regexp.MustCompile(
		`(?i)(\b(?:[A-Za-z0-9_.-]*(?:token|secret|passw(?:or)?d|passphrase|credentials?)|(?:[A-Za-z0-9_.-]*[_.-])?(?:pass|pwd)|(?:[A-Za-z0-9_.-]*[_.-])?(?:api[_-]?|access[_-]?|private[_-]?)?key)["']?[ \t]*[:=][ \t]*)` + secretValue + `()`)},
	{"MySQL password flag", []string{"mysql", "mariadb"}, regexp.MustCompile(
		`(\b(?:mysql|mysqldump|mysqladmin|mysqlimport|mysqlshow|mysqlcheck|mariadb[a-z-]*)\b[^;&|\n]*?[ \t]-p)([^\s'";&|()<>-][^\s'";&|()<>]*)()`)},
	{"password flag -p", []string{"sshpass", "login"}, regexp.MustCompile(
		`(\b(?:sshpass|(?:docker|podman|buildah|helm|oras|skopeo)[ \t]+(?:registry[ \t]+)?login)\b[^;&|\n]*?[ \t]-p[ \t]*)` + secretValue + `()`)},
	{"AWS access key id", []string{"akia", "asia", "agpa", "aida", "aroa", "anpa", "anva", "aipa"}, regexp.MustCompile(
		`()(\b(?:AKIA|ASIA|AGPA|AIDA|AROA|ANPA|ANVA|AIPA)[A-Z0-9]{16}\b)()`)},
	{"GitHub token", []string{"gh", "github_pat_"}, regexp.MustCompile(
		`()(\b(?:gh[pousr]_[A-Za-z0-9]{30,}|github_pat_[A-Za-z0-9_]{22,}))()`)},
	{"Slack token", []string{"xox"}, regexp.MustCompile(
		`()(\bxox[abposre]-[A-Za-z0-9-]{10,})()`)},
	{"Stripe key", []string{"k_live_", "k_test_", "k_prod_"}, regexp.MustCompile(
		`()(\b[rs]k_(?:live|test|prod)_[A-Za-z0-9]{10,})()`)},
	{"API key (sk-…)", []string{"sk-"}, regexp.MustCompile(
		`()(\bsk-[A-Za-z0-9_-]{20,})()`)},
	{"Google API key", []string{"aiza"}, regexp.MustCompile(
		`()(\bAIza[0-9A-Za-z_-]{35})()`)},
}

// bareSecrets finds AWS secret access keys standing alone: a run of
// exactly 40 base64 characters (not followed by '=') with upper and lower
// case letters and digits and high entropy. Git and SHA-1 hashes, lower
// case hex, do not qualify. No keyword announces this shape, so it is a
// scan of its own (a regular expression costs a millisecond on 9 KB).
func bareSecrets(s string) []span {
	var spans []span
	for i := 0; i < len(s); {
		if !base64Char(s[i]) {
			i++
			continue
		}
		j := i
		for j < len(s) && base64Char(s[j]) {
			j++
		}
		// A run that is part of a path or a file name (a '/' at its
		// ends, a '.', '-' or '_' next to it) is not taken for a key.
		pathy := s[i] == '/' || s[j-1] == '/' || strings.Contains(s[i:j], "//") ||
			i > 0 && strings.IndexByte("./-_\\", s[i-1]) >= 0 || j < len(s) && strings.IndexByte("=./-_", s[j]) >= 0
		if j-i == 40 && !pathy {
			v := s[i:j]
			if strings.ContainsAny(v, "ABCDEFGHIJKLMNOPQRSTUVWXYZ") && strings.ContainsAny(v, "abcdefghijklmnopqrstuvwxyz") &&
				strings.ContainsAny(v, "0123456789") && shannon(v) >= 4 {
				spans = append(spans, span{i, j})
			}
		}
		i = j
	}
	return spans
}

func base64Char(c byte) bool {
	return c >= 'A' && c <= 'Z' || c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '/' || c == '+'
}

// Redact replaces credential-shaped parts of s with [Marker] and keeps the
// rest, so a journaled command still reads as what it did. It is
// idempotent. Values that only name a variable or a command substitution
// ($TOKEN, $(cat file)) are not secrets themselves and are kept.
//
// Two rule sets run: the shell-aware ones above (assignments, flags,
// URLs, headers: they keep the name and redact the value), then
// gitleaks' maintained catalogue of credential formats (rules.go).
func Redact(s string) string {
	lower := strings.ToLower(s)
	for _, r := range redactions {
		if r.hinted(lower) {
			s = r.apply(s)
		}
	}
	spans := bareSecrets(s)
	if c, err := rulesOnce(); err == nil {
		spans = append(spans, c.find(s)...)
	}
	return replaceSpans(s, mergeSpans(spans))
}

// RedactJSON redacts the string values of a JSON document (keys,
// structure and member order stay as they are). It returns raw itself
// when nothing needed redacting, and when raw is not JSON.
func RedactJSON(raw json.RawMessage) json.RawMessage {
	// Escaped strings must be decoded to be seen as they are.
	if s := string(raw); !strings.Contains(s, `\`) && Redact(s) == s {
		return raw
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var out bytes.Buffer
	changed := false
	if err := redactValue(dec, &out, &changed); err != nil || !changed {
		return raw
	}
	return out.Bytes()
}

// redactValue copies one JSON value from dec to out, redacting strings.
func redactValue(dec *json.Decoder, out *bytes.Buffer, changed *bool) error {
	tok, err := dec.Token()
	if err != nil {
		return err
	}
	switch t := tok.(type) {
	case json.Delim:
		closing := byte('}')
		if t == '[' {
			closing = ']'
		}
		out.WriteByte(byte(t))
		for first := true; dec.More(); first = false {
			if !first {
				out.WriteByte(',')
			}
			if t == '{' {
				key, err := dec.Token()
				if err != nil {
					return err
				}
				writeJSONString(out, key.(string))
				out.WriteByte(':')
			}
			if err := redactValue(dec, out, changed); err != nil {
				return err
			}
		}
		if _, err := dec.Token(); err != nil {
			return err
		}
		out.WriteByte(closing)
	case string:
		r := Redact(t)
		*changed = *changed || r != t
		writeJSONString(out, r)
	case json.Number:
		out.WriteString(t.String())
	default:
		b, _ := json.Marshal(t)
		out.Write(b)
	}
	return nil
}

// writeJSONString writes s as a JSON string, without HTML escaping.
func writeJSONString(out *bytes.Buffer, s string) {
	enc := json.NewEncoder(out)
	enc.SetEscapeHTML(false)
	enc.Encode(s)
	out.Truncate(out.Len() - 1) // Encode's newline
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
		if f := notSecret[r.name]; f != nil && f(s, m) {
			continue
		}
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
