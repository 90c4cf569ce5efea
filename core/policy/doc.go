// Package policy decides what a principal may do without asking.
//
// A policy is a TOML file ($STATE/policy.toml) of ordered rules and
// grants. Each rule matches a principal pattern, an effect kind, and
// optionally a target pattern, a command head, a subcommand and flags
// (recursive, force, dynamic, …), and gives a verdict: allow, ask or deny.
// For each effect the first matching rule wins; a source's verdict is the
// strictest over its effects. The built-in default (see [DefaultTOML])
// follows a file's own rules unless the file opts out.
//
// The package knows nothing about shells: it decides over [Effect] values
// that an analyzer (providers/plan/analyze) or a run-time hook produces.
// docs/policy.md documents the format and the default in full.
package policy
