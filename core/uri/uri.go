// Package uri parses shoal:// URIs and short refs.
//
// A URI is shoal://{family}/{seg}/{seg}?{key}={value}&… . Segments and query
// values are percent-decoded (a '+' stays a '+', as RFC 3986 says). Typed
// query parameters are read through accessors: the lenient ones (Int, Bool)
// drop a value that does not parse, as the protocol asks, and nothing in a
// URI is ever evaluated.
package uri

import (
	"net/url"
	"strconv"
	"strings"

	"github.com/shoal-sh/shoal/core/rpc"
	"github.com/shoal-sh/shoal/internal/clip"
)

// Scheme is the URI scheme prefix.
const Scheme = "shoal://"

// MaxLen bounds the length of a URI or ref accepted by Parse.
const MaxLen = 64 << 10

// URI is a parsed shoal:// URI.
type URI struct {
	// Raw is the text the URI was parsed from.
	Raw string
	// Family is the first component after shoal:// ("out", "events", …).
	Family string
	// Segments are the decoded path segments after the family.
	Segments []string
	// Query holds the decoded query parameters in order of appearance.
	Query []Param
}

// Param is one decoded query parameter.
type Param struct {
	Key, Value string
}

func badURI(raw, format string, args ...any) *rpc.Error {
	e := rpc.Errorf(rpc.BadURI, format, args...)
	e.Message = "bad URI " + strconv.Quote(clip.String(raw, 200)) + ": " + e.Message +
		"; URIs look like shoal://out/17?path=.rows[0].name&slice=0..20"
	return e
}

// Parse parses a shoal:// URI. Errors are *rpc.Error with code BadURI.
func Parse(s string) (*URI, error) {
	if len(s) > MaxLen {
		return nil, badURI(s, "longer than %d bytes", MaxLen)
	}
	if !strings.HasPrefix(s, Scheme) {
		return nil, badURI(s, "does not start with %s", Scheme)
	}
	if strings.ContainsAny(s, "#\x00\n\r") {
		return nil, badURI(s, "fragments and control characters are not allowed")
	}
	u := &URI{Raw: s}
	rest := s[len(Scheme):]
	query := ""
	if i := strings.IndexByte(rest, '?'); i >= 0 {
		rest, query = rest[:i], rest[i+1:]
	}
	parts := strings.Split(rest, "/")
	fam, err := url.PathUnescape(parts[0])
	if err != nil {
		return nil, badURI(s, "family: %v", err)
	}
	if !validFamily(fam) {
		return nil, badURI(s, "family %q must be lowercase letters, digits, '-' or '_'", fam)
	}
	u.Family = fam
	parts = parts[1:]
	if n := len(parts); n > 0 && parts[n-1] == "" {
		parts = parts[:n-1] // a trailing slash names the same resource
	}
	for _, p := range parts {
		if p == "" {
			return nil, badURI(s, "empty path segment")
		}
		seg, err := url.PathUnescape(p)
		if err != nil {
			return nil, badURI(s, "segment %q: bad percent-encoding", p)
		}
		u.Segments = append(u.Segments, seg)
	}
	if query != "" {
		for _, kv := range strings.Split(query, "&") {
			if kv == "" {
				continue
			}
			k, v, _ := strings.Cut(kv, "=")
			dk, err := url.PathUnescape(k)
			if err != nil {
				return nil, badURI(s, "query key %q: bad percent-encoding", k)
			}
			dv, err := url.PathUnescape(v)
			if err != nil {
				return nil, badURI(s, "query value of %q: bad percent-encoding", dk)
			}
			u.Query = append(u.Query, Param{Key: dk, Value: dv})
		}
	}
	return u, nil
}

func validFamily(f string) bool {
	if f == "" || len(f) > 64 {
		return false
	}
	for i := 0; i < len(f); i++ {
		c := f[i]
		if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-' || c == '_') {
			return false
		}
	}
	return true
}

// Get returns the first value of key and whether it was present.
func (u *URI) Get(key string) (string, bool) {
	for _, p := range u.Query {
		if p.Key == key {
			return p.Value, true
		}
	}
	return "", false
}

// Has reports whether the query names key.
func (u *URI) Has(key string) bool {
	_, ok := u.Get(key)
	return ok
}

// Int returns key as an integer; ok is false when it is missing or does not
// parse (the caller then uses its default).
func (u *URI) Int(key string) (n int64, ok bool) {
	s, present := u.Get(key)
	if !present {
		return 0, false
	}
	n, err := strconv.ParseInt(strings.TrimSpace(s), 10, 64)
	if err != nil {
		return 0, false
	}
	return n, true
}

// Uint returns key as a non-negative integer, leniently like Int.
func (u *URI) Uint(key string) (n uint64, ok bool) {
	s, present := u.Get(key)
	if !present {
		return 0, false
	}
	n, err := strconv.ParseUint(strings.TrimSpace(s), 10, 64)
	if err != nil {
		return 0, false
	}
	return n, true
}

// Bool returns key as a boolean (true/false/1/0), leniently like Int.
func (u *URI) Bool(key string) (b, ok bool) {
	s, present := u.Get(key)
	if !present {
		return false, false
	}
	b, err := strconv.ParseBool(strings.TrimSpace(s))
	if err != nil {
		return false, false
	}
	return b, true
}

// List returns key split on commas, empty items removed.
func (u *URI) List(key string) []string {
	s, ok := u.Get(key)
	if !ok {
		return nil
	}
	var out []string
	for _, item := range strings.Split(s, ",") {
		if item = strings.TrimSpace(item); item != "" {
			out = append(out, item)
		}
	}
	return out
}

// Without returns a copy of u without the named query keys.
func (u *URI) Without(keys ...string) *URI {
	c := *u
	c.Query = nil
	for _, p := range u.Query {
		drop := false
		for _, k := range keys {
			if p.Key == k {
				drop = true
			}
		}
		if !drop {
			c.Query = append(c.Query, p)
		}
	}
	c.Raw = c.String()
	return &c
}

// String is the canonical encoded form of u.
func (u *URI) String() string {
	var b strings.Builder
	b.WriteString(Scheme)
	b.WriteString(u.Family)
	for _, s := range u.Segments {
		b.WriteByte('/')
		b.WriteString(escapeSegment(s))
	}
	for i, p := range u.Query {
		if i == 0 {
			b.WriteByte('?')
		} else {
			b.WriteByte('&')
		}
		b.WriteString(escapeQuery(p.Key))
		b.WriteByte('=')
		b.WriteString(escapeQuery(p.Value))
	}
	return b.String()
}

// Path returns the URI without its query, e.g. shoal://out/17.
func (u *URI) Path() string {
	c := URI{Family: u.Family, Segments: u.Segments}
	return c.String()
}

// escapeSegment keeps the characters refs use (':' in val:blake3:…, '.' in
// channel names) readable and escapes the rest.
func escapeSegment(s string) string {
	return escape(s, func(c byte) bool { return c == ':' || c == '@' || c == '-' || c == '.' || c == '_' || c == '~' })
}

// escapeQuery keeps path-selector punctuation readable (.rows[0].name).
func escapeQuery(s string) string {
	return escape(s, func(c byte) bool {
		return strings.IndexByte("-._~:@[]$\"!*(),;/", c) >= 0
	})
}

func escape(s string, keep func(byte) bool) string {
	const hex = "0123456789ABCDEF"
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || keep(c) {
			b.WriteByte(c)
			continue
		}
		b.WriteByte('%')
		b.WriteByte(hex[c>>4])
		b.WriteByte(hex[c&15])
	}
	return b.String()
}

// New builds a URI from a family and decoded segments.
func New(family string, segments ...string) *URI {
	u := &URI{Family: family, Segments: segments}
	u.Raw = u.String()
	return u
}

// ParseTarget accepts either a shoal:// URI or a short ref (out:17,
// task:9, val:blake3:<hex>, plan:<hex>, pty:3), optionally followed by a
// query (out:17?path=.name), and returns the URI.
func ParseTarget(s string) (*URI, error) {
	s = strings.TrimSpace(s)
	if strings.HasPrefix(s, Scheme) {
		return Parse(s)
	}
	ref, query, hasQuery := strings.Cut(s, "?")
	if hasQuery {
		// out:17?path=.name reads like shoal://out/17?path=.name.
		u, err := ParseTarget(ref)
		if err != nil {
			return nil, err
		}
		return Parse(u.String() + "?" + query)
	}
	fam, rest, ok := strings.Cut(s, ":")
	if !ok || rest == "" {
		return nil, badURI(s, "not a shoal:// URI or a short ref like out:17, task:9, val:blake3:<hex>, plan:<hex>, pty:3")
	}
	if !validFamily(fam) {
		return nil, badURI(s, "ref family %q must be lowercase letters, digits, '-' or '_'", fam)
	}
	if strings.ContainsAny(rest, "/#\x00") {
		return nil, badURI(s, "a short ref has no '/' or '#'; use a shoal:// URI for nested resources")
	}
	return New(fam, rest), nil
}

// Ref returns the short ref of a one-segment URI (out:17, val:blake3:…),
// or "" when u has no short form.
func (u *URI) Ref() string {
	if len(u.Segments) != 1 {
		return ""
	}
	return u.Family + ":" + u.Segments[0]
}
