// Package uri parses shoal:// URIs and short refs.
//
// A URI is shoal://{family}/{seg}/{seg}?{key}={value}&… . Segments and query
// values are percent-decoded (a '+' stays a '+'). Typed query parameters
// (path, slice, format, elide, since, limit, …) are read through accessor
// methods: a value that cannot be parsed into its type is reported by the
// strict accessors and dropped by the lenient ones, never evaluated.
package uri

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
