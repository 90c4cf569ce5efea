//go:build race

package main

// raceEnabled builds the facade under test with the race detector too.
const raceEnabled = true
