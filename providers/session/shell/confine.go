package shell

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"slices"
	"strings"
	"syscall"
	"time"

	"mvdan.cc/sh/v3/interp"

	"github.com/shoal-sh/shoal/providers/session/sandbox"
)

// MarkConfined marks a run that hit the confinement: the OS refused it a
// file the rules do not grant.
const MarkConfined = "confined"

// domainOf is the confinement a run's file operations and processes go
// through: the run's own (an applied plan's wider one), else the
// session's; nil runs unconfined.
func (e *Evaluator) domainOf(ru *run) *sandbox.Domain {
	if ru != nil && ru.domain != nil {
		return ru.domain
	}
	return e.opts.Domain
}

// refused reports whether err is the OS confinement saying no: EACCES or
// EPERM from Landlock, or EROFS from the worker's read-only mounts, which
// answer first for a write outside the writable paths.
func refused(err error) bool {
	return errors.Is(err, syscall.EACCES) || errors.Is(err, syscall.EPERM) || errors.Is(err, syscall.EROFS)
}

// openFile opens path for the interpreter: through the domain when there
// is one, so the OS decides, else directly.
func (e *Evaluator) openFile(ru *run, path string, flag int, perm os.FileMode) (*os.File, error) {
	d := e.domainOf(ru)
	if d == nil {
		return os.OpenFile(path, flag, perm)
	}
	f, err := d.Open(path, flag, perm)
	if err != nil && ru != nil && refused(err) {
		ru.mark(MarkConfined)
		ru.denied(path)
	}
	return f, err
}

// readFile reads a whole file as the session may.
func (c *call) readFile(abs string) ([]byte, error) {
	f, err := c.e.openFile(c.ru, abs, os.O_RDONLY, 0)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return io.ReadAll(f)
}

// readDir lists a directory as the session may.
func (e *Evaluator) readDir(ru *run, abs string) ([]fs.DirEntry, error) {
	if e.domainOf(ru) == nil {
		return os.ReadDir(abs)
	}
	f, err := e.openFile(ru, abs, os.O_RDONLY|syscall.O_DIRECTORY, 0)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	ents, err := f.ReadDir(-1)
	// In name order, as os.ReadDir returns them.
	slices.SortFunc(ents, func(a, b fs.DirEntry) int { return strings.Compare(a.Name(), b.Name()) })
	return ents, err
}

// readDirHandler serves the interpreter's globbing.
func (e *Evaluator) readDirHandler(ctx context.Context, path string) ([]fs.DirEntry, error) {
	return e.readDir(runOf(ctx), path)
}

// writeNull is /dev/null open for writing, for a process whose output
// goes nowhere.
func (e *Evaluator) writeNull() (*os.File, error) {
	return os.OpenFile(os.DevNull, os.O_WRONLY, 0)
}

// readerFile and writerFile return a file a confined process can use for
// r or w: the file itself, or a pipe fed (or drained) by a goroutine, as
// os/exec does for readers and writers that are not files. readerFile's
// done closes the parent's read end once the process has it (the feeding
// goroutine ends with the pipe); writerFile's waits for the copy, up to
// ioGrace.
func readerFile(r io.Reader) (f *os.File, done func(), err error) {
	if f, ok := r.(*os.File); ok {
		return f, func() {}, nil
	}
	pr, pw, err := os.Pipe()
	if err != nil {
		return nil, nil, err
	}
	go func() {
		io.Copy(pw, r)
		pw.Close()
	}()
	return pr, func() { pr.Close() }, nil
}

func writerFile(w io.Writer) (f *os.File, done func(), err error) {
	if f, ok := w.(*os.File); ok {
		return f, func() {}, nil
	}
	pr, pw, err := os.Pipe()
	if err != nil {
		return nil, nil, err
	}
	ch := make(chan struct{})
	go func() {
		defer close(ch)
		io.Copy(w, pr)
		pr.Close()
	}()
	return pw, func() {
		pw.Close()
		select {
		case <-ch:
		case <-time.After(ioGrace):
			pr.Close()
			<-ch
		}
	}, nil
}

// spawnConfined runs one external command inside the run's domain: the
// worker forks it there, the kernel reads its output and waits for the
// worker's report of its exit.
func (e *Evaluator) spawnConfined(ctx context.Context, ru *run, hc interp.HandlerContext, d *sandbox.Domain, path string, args, env []string) error {
	var stdin io.Reader = hc.Stdin
	if stdin == nil {
		stdin = e.devNull
	}
	// closeIn closes the parent's copy of a pipe made here once the
	// process has it (a no-op when stdin is a file of the run's own).
	in, closeIn, err := readerFile(stdin)
	if err != nil {
		fmt.Fprintf(hc.Stderr, "%s: %v\n", args[0], err)
		return interp.ExitStatus(126)
	}
	outs, err := newOutputs(hc.Stdout, hc.Stderr)
	if err != nil {
		closeIn()
		fmt.Fprintf(hc.Stderr, "%s: %v\n", args[0], err)
		return interp.ExitStatus(126)
	}
	var files [3]*os.File
	files[0] = in
	var finish []func()
	for i, w := range []io.Writer{hc.Stdout, hc.Stderr} {
		switch {
		case outs != nil && outs.child[i] != nil:
			files[i+1] = outs.child[i]
		case w == nil:
			nf, err := e.writeNull()
			if err != nil {
				closeIn()
				return interp.ExitStatus(126)
			}
			defer nf.Close()
			files[i+1] = nf
		default:
			f, done, err := writerFile(w)
			if err != nil {
				closeIn()
				fmt.Fprintf(hc.Stderr, "%s: %v\n", args[0], err)
				return interp.ExitStatus(126)
			}
			files[i+1] = f
			finish = append(finish, done)
		}
	}
	if outs != nil {
		defer outs.close()
	}
	spec := sandbox.Spec{Path: path, Argv: args, Env: env, Dir: hc.Dir, Files: files[:], Setpgid: true}
	p, g, err := e.startConfined(ctx, ru, d, spec)
	if isErrno(err, syscall.ENOEXEC) {
		// A script without a #! line: run it with sh, as shells do.
		spec.Path, spec.Argv = "/bin/sh", append([]string{"sh", path}, args[1:]...)
		p, g, err = e.startConfined(ctx, ru, d, spec)
	}
	closeIn()
	if err != nil {
		for _, f := range finish {
			f()
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if errors.Is(err, sandbox.ErrWorkerGone) || errors.Is(err, sandbox.ErrUnavailable) {
			return err // ends the run: the session's confinement is gone
		}
		if ru != nil && refused(err) {
			ru.mark(MarkConfined)
			ru.denied(path)
		}
		fmt.Fprintf(hc.Stderr, "%s: %v\n", args[0], unwrapPathError(err))
		if errors.Is(err, syscall.ENOENT) {
			return interp.ExitStatus(127)
		}
		return interp.ExitStatus(126)
	}
	defer p.Release()
	var drain func()
	if outs != nil {
		outs.started()
		drain = outs.copyFD(p.PidFD, p.Pid, ioGrace)
	}
	for _, f := range finish {
		f()
	}
	ws, werr := p.Wait()
	if drain != nil {
		drain()
	}
	close(g.leaderDone)
	if !g.alive() {
		e.mu.Lock()
		delete(e.groups, g.pgid)
		e.mu.Unlock()
	}
	e.wg.Done()
	switch {
	case werr != nil:
		return werr // the worker died under the command: the run ends
	case ws.Signaled():
		if ctx.Err() != nil {
			return ctx.Err()
		}
		return signalStatus(ru, hc, ws.Signal())
	case ws.ExitStatus() != 0:
		return interp.ExitStatus(ws.ExitStatus())
	}
	return nil
}

// startConfined starts spec in d and tracks its process group, as start
// does for unconfined processes.
func (e *Evaluator) startConfined(ctx context.Context, ru *run, d *sandbox.Domain, spec sandbox.Spec) (*sandbox.Proc, *group, error) {
	var p *sandbox.Proc
	g, err := e.track(ctx, ru, func() (int, []string, error) {
		var err error
		if p, err = d.Start(spec); err != nil {
			return 0, nil, err
		}
		return p.Pid, spec.Argv, nil
	})
	if err != nil {
		return nil, nil, err
	}
	return p, g, nil
}
