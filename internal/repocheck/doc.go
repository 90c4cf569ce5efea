// Package repocheck holds tests over the whole source tree: rules a
// maintainer would otherwise check by eye (function length, the
// extension checklists of docs/extending.md). It has no code of its own.
package repocheck
