package shell

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"mvdan.cc/sh/v3/interp"
)

// callHandler sees every simple command, builtins and functions included,
// before it runs: it records the head, writes out a pending builtin value
// (the builtin was not last after all) and notices `set` dumping
// variables.
func (e *Evaluator) callHandler(ctx context.Context, args []string) ([]string, error) {
	ru := runOf(ctx)
	if ru == nil {
		return args, nil
	}
	offset := interp.HandlerCtx(ctx).Pos.Offset()
	ru.flushPending(offset)
	ru.head(args[0], offset)
	if args[0] == "set" && len(args) == 1 {
		ru.mark(MarkSecretSource)
	}
	return args, nil
}

// openHandler records the files the shell itself opens (redirections,
// $(<file)) as fs.read or fs.write by their open flags.
func (e *Evaluator) openHandler(ctx context.Context, path string, flag int, perm os.FileMode) (io.ReadWriteCloser, error) {
	if ru := runOf(ctx); ru != nil {
		abs := path
		if !filepath.IsAbs(abs) {
			abs = filepath.Join(interp.HandlerCtx(ctx).Dir, abs)
		}
		if !quietPath(abs) {
			if flag&(os.O_WRONLY|os.O_RDWR|os.O_CREATE|os.O_TRUNC|os.O_APPEND) != 0 {
				ru.effect(EffectFSWrite, abs)
			} else {
				ru.effect(EffectFSRead, abs)
				if isDotEnv(abs) {
					ru.mark(MarkSecretSource)
				}
			}
		}
	}
	written := path
	if path != "" && !filepath.IsAbs(path) {
		path = filepath.Join(interp.HandlerCtx(ctx).Dir, path)
	}
	f, err := e.openFile(runOf(ctx), path, flag, perm)
	if err != nil {
		if ru := runOf(ctx); ru != nil {
			ru.rewordOpenError(written, err)
		}
		return nil, err
	}
	return f, nil
}

// quietPath is a device that is not a file effect (/dev/null, the standard
// streams).
func quietPath(p string) bool {
	switch p {
	case "/dev/null", "/dev/stdin", "/dev/stdout", "/dev/stderr", "/dev/tty", "/dev/zero", "/dev/urandom", "/dev/random":
		return true
	}
	return strings.HasPrefix(p, "/dev/fd/") || strings.HasPrefix(p, "/proc/self/fd/")
}

// isDotEnv reports whether a path names a dotenv file (.env, .env.local,
// prod.env, .envrc).
func isDotEnv(p string) bool {
	b := filepath.Base(p)
	return b == ".env" || b == ".envrc" || strings.HasPrefix(b, ".env.") || strings.HasSuffix(b, ".env")
}

// builtinMiddleware runs Shoal's builtins. A command given by path
// (/bin/ls) is never a builtin, which is how a script reaches the external
// program of the same name.
func (e *Evaluator) builtinMiddleware(next interp.ExecHandlerFunc) interp.ExecHandlerFunc {
	return func(ctx context.Context, args []string) error {
		b, ok := builtins[args[0]]
		ru := runOf(ctx)
		if !ok || ru == nil {
			return next(ctx, args)
		}
		c := &call{e: e, ctx: ctx, hc: interp.HandlerCtx(ctx), ru: ru, args: args, next: next}
		return b(c)
	}
}

// recoverMiddleware turns a panic in a builtin or in starting a process
// into a failed command with the reason on stderr, exit 70. The
// interpreter runs pipeline stages and background jobs on goroutines of
// its own, where a panic would otherwise end the kernel.
func recoverMiddleware(next interp.ExecHandlerFunc) interp.ExecHandlerFunc {
	return func(ctx context.Context, args []string) (err error) {
		defer func() {
			if p := recover(); p != nil {
				fmt.Fprintf(interp.HandlerCtx(ctx).Stderr, "%s: internal error (please report it): %v\n", args[0], p)
				err = interp.ExitStatus(70)
			}
		}()
		return next(ctx, args)
	}
}

// recoverCall and recoverOpen do for the call and open handlers what
// recoverMiddleware does for commands: a panic becomes an error (which
// ends the run, or fails the redirection) instead of ending the kernel
// from one of the interpreter's goroutines.
func recoverCall(h interp.CallHandlerFunc) interp.CallHandlerFunc {
	return func(ctx context.Context, args []string) (out []string, err error) {
		defer recoverInto(&err)
		return h(ctx, args)
	}
}

func recoverOpen(h interp.OpenHandlerFunc) interp.OpenHandlerFunc {
	return func(ctx context.Context, path string, flag int, perm os.FileMode) (f io.ReadWriteCloser, err error) {
		defer recoverInto(&err)
		return h(ctx, path, flag, perm)
	}
}

// recoverInto, deferred, turns a panic into *err.
func recoverInto(err *error) {
	if p := recover(); p != nil {
		*err = fmt.Errorf("internal error (please report it): %v", p)
	}
}

// processMiddleware runs external commands as processes in their own
// process group. It is the last handler: it never calls next, because the
// default handler would start processes this evaluator cannot track.
func (e *Evaluator) processMiddleware(next interp.ExecHandlerFunc) interp.ExecHandlerFunc {
	return func(ctx context.Context, args []string) error {
		hc := interp.HandlerCtx(ctx)
		ru := runOf(ctx)
		path, err := interp.LookPathDir(hc.Dir, hc.Env, args[0])
		if err != nil {
			if strings.Contains(args[0], "/") {
				fmt.Fprintf(hc.Stderr, "%s: %s\n", args[0], strerror(err))
				if _, serr := os.Stat(absIn(hc.Dir, args[0])); serr == nil {
					return interp.ExitStatus(126)
				}
				return interp.ExitStatus(127)
			}
			fmt.Fprintf(hc.Stderr, "%s: command not found\n", args[0])
			return interp.ExitStatus(127)
		}
		if ru != nil {
			ru.effect(EffectProcSpawn, path)
			observeCommand(ru, hc.Dir, args, hc.Pos.Offset(), 0)
		}
		return e.spawn(ctx, ru, hc, path, args)
	}
}

func unwrapPathError(err error) error {
	if pe, ok := err.(*os.PathError); ok {
		return pe.Err
	}
	return err
}

func absIn(dir, p string) string {
	if filepath.IsAbs(p) {
		return filepath.Clean(p)
	}
	return filepath.Join(dir, p)
}
