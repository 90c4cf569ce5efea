// Package pty serves the "pty" resource family (SPEC S4): interactive
// programs on pseudo-terminals that an agent drives by writing text and
// named keys and reading back the rendered screen.
//
// Each PTY is a program started by creack/pty in its own session and
// process group, and a charmbracelet/x/vt terminal emulator that renders
// everything the program writes. A goroutine reads the program's output
// into the emulator continuously, so a chatty program never stalls on a
// full PTY buffer; the emulator's replies to terminal queries (cursor
// position, device attributes) go back to the program in order with the
// agent's own input.
//
// # Ids and ownership
//
// Ids count per kernel (pty:1, pty:2, …), so a journal row's ref names one
// PTY; each PTY belongs to the session that opened it, and for any other
// session it does not exist (UNKNOWN_PTY, -32022). Methods accept "pty:3",
// "3" or 3.
//
// # Waiting without polling
//
// Every change of a PTY's screen bumps its change counter and wakes
// waiters through a channel that is closed and replaced, so
// [Manager.WaitScreen] and [Manager.WaitExit] (and the pty.wait method
// behind shoal_wait) sleep until something happened rather than re-reading
// on a timer.
//
// # Cleanup
//
// Closing a PTY signals its whole process group (SIGHUP, SIGCONT,
// SIGTERM, then SIGKILL after [Manager.Grace]), reaps the program, closes
// the master and ends every goroutine. On Linux the exited program stays
// a zombie until then, so its pid — the group id — cannot be reused and the
// group signal can reach nothing else. SessionClosed and Close do the same
// for a session's PTYs and for all of them.
//
// docs/pty.md describes the methods and the screen for agents and client
// authors.
package pty
