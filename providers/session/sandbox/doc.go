// Package sandbox confines what a session runs, with the operating
// system's help rather than Shoal's own checks.
//
// Each session has a [Domain]: a small worker process (this same binary,
// re-executed) that applies Linux Landlock rules to itself before it
// serves anything, and then does, on the kernel's behalf, every contact
// the session's shell has with the file system and with processes:
//
//   - it opens the files the interpreter opens (redirections, `source`,
//     here-strings written to files, the builtins' reads) and hands the
//     descriptor back over a unix socket (SCM_RIGHTS), so a `> file` the
//     rules forbid fails with EACCES from the OS;
//   - it forks and executes every external command and PTY program, so
//     each process is born inside the Landlock domain and cannot leave it;
//   - it is the child subreaper of everything it started, so a `setsid`
//     or double-forked grandchild still ends up its child, and it kills
//     whatever is left when its session closes or the kernel goes away
//     (the socket reaches EOF, whatever killed the kernel).
//
// The kernel process itself stays unconfined and alone owns the journal,
// the content store, the tokens and the policy; the rules make the state
// directory unreadable from inside the domain.
//
// A worker that dies (say `kill -9 -1` run inside the session, which with
// signal scoping reaches only the domain) fails the requests in flight
// with [ErrWorkerGone]; the next request starts a new worker.
//
// Rules only ever narrow: an approved plan that needs to write somewhere
// the session may not gets a fresh Domain whose rules add its targets,
// for that run alone.
package sandbox
