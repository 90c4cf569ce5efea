package plugins

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/tetratelabs/wazero/api"
	"github.com/tetratelabs/wazero/sys"

	"github.com/shoal-sh/shoal/core/rpc"
	"github.com/shoal-sh/shoal/plugins/internal/stopcheck"
)

// instance is one instantiated module. It serves one call at a time; the
// pool hands it to one caller at a time.
type instance struct {
	mod    api.Module
	mem    api.Memory
	stdout *output
	stderr *output

	// Export handles, looked up once: a lookup costs more than a call.
	alloc, free, describe, read, list, validate api.Function

	// req is a request buffer allocated in the guest and reused across
	// calls while requests fit.
	reqPtr, reqCap uint32
	stack          [2]uint64

	// stop is the instrumented module's stop flag (nil when the module
	// runs under wazero's own check); halt sets it when a call's context
	// ends and then signals halted. mu orders the host's writes to it
	// (halt, the reset after a call, kill); killed says the plugin is
	// closing and the flag stays set.
	stop   api.MutableGlobal
	halt   func()
	halted chan struct{}
	mu     sync.Mutex
	killed bool
}

// retainedRequest is the largest request buffer an instance keeps between
// calls; a larger one is freed after its call.
const retainedRequest = 64 << 10

// call writes req into the guest, calls fn(ptr, len) and returns a copy of
// the answer. Any error leaves the instance unfit for further calls.
func (in *instance) call(ctx context.Context, fn api.Function, req []byte) ([]byte, error) {
	n := uint32(len(req))
	if uint64(len(req)) > uint64(^uint32(0)) {
		return nil, errors.New("request too large for a 32-bit guest")
	}
	if n > in.reqCap {
		if in.reqCap > 0 {
			in.stack[0] = uint64(in.reqPtr)
			if err := in.run(ctx, in.free); err != nil {
				return nil, err
			}
			in.reqPtr, in.reqCap = 0, 0
		}
		size := max(n, 4<<10)
		in.stack[0] = uint64(size)
		if err := in.run(ctx, in.alloc); err != nil {
			return nil, err
		}
		ptr := uint32(in.stack[0])
		if ptr == 0 {
			return nil, errors.New("shoal_alloc returned a null pointer")
		}
		in.reqPtr, in.reqCap = ptr, size
	}
	if !in.mem.Write(in.reqPtr, req) {
		return nil, fmt.Errorf("shoal_alloc returned %#x, outside the guest's memory", in.reqPtr)
	}
	in.stack[0], in.stack[1] = uint64(in.reqPtr), uint64(n)
	if err := in.run(ctx, fn); err != nil {
		return nil, err
	}
	answer, err := in.answer(in.stack[0])
	if err == nil && in.reqCap > retainedRequest {
		in.stack[0] = uint64(in.reqPtr)
		err = in.run(ctx, in.free)
		in.reqPtr, in.reqCap = 0, 0
	}
	return answer, err
}

// call0 calls an export without a request (shoal_describe).
func (in *instance) call0(ctx context.Context, fn api.Function) ([]byte, error) {
	if err := in.run(ctx, fn); err != nil {
		return nil, err
	}
	return in.answer(in.stack[0])
}

// run calls fn on in.stack. A module that runs under wazero's
// WithCloseOnContextDone is simply called. For an instrumented one, run
// does what that option did, without its goroutine per call: a context
// already done fails the call before it starts, and one that ends during
// the call sets the stop flag, so that the guest traps within
// stopcheck.Turns loop turns; that trap is then reported as wazero reported a module it closed
// (a *sys.ExitError with the deadline or cancel exit code), and the
// caller discards the instance as it did then. A call that returned
// before it met the flag has succeeded: the flag is cleared for the next.
func (in *instance) run(ctx context.Context, fn api.Function) error {
	if in.stop == nil {
		return fn.CallWithStack(ctx, in.stack[:])
	}
	if ctx.Err() != nil {
		return ctxExit(ctx)
	}
	stop := context.AfterFunc(ctx, in.halt)
	err := fn.CallWithStack(ctx, in.stack[:])
	if stop() { // halt never ran
		if err != nil && in.wasKilled() {
			return errStopping
		}
		return err
	}
	<-in.halted // halt has set the flag, or is about to
	var exit *sys.ExitError
	if err != nil && !errors.As(err, &exit) {
		return ctxExit(ctx)
	}
	in.mu.Lock()
	if !in.killed {
		in.stop.Set(0)
	}
	in.mu.Unlock()
	return err
}

// errStopping fails a call that the plugin's close stopped.
var errStopping = errors.New("the call was stopped: the kernel is stopping")

// kill sets the stop flag for good: a call in progress stops at its next
// check, as under wazero's check a call stopped when its runtime closed.
func (in *instance) kill() {
	if in.stop == nil {
		return
	}
	in.mu.Lock()
	in.killed = true
	in.stop.Set(1)
	in.mu.Unlock()
}

func (in *instance) wasKilled() bool {
	in.mu.Lock()
	defer in.mu.Unlock()
	return in.killed
}

// ctxExit is the error wazero's WithCloseOnContextDone gives a call whose
// context ended.
func ctxExit(ctx context.Context) error {
	if errors.Is(ctx.Err(), context.DeadlineExceeded) {
		return sys.NewExitError(sys.ExitCodeDeadlineExceeded)
	}
	return sys.NewExitError(sys.ExitCodeContextCanceled)
}

// answer copies the packed answer out of the guest. The guest keeps it
// until the next call, so there is nothing to free and a read is one
// guest call.
func (in *instance) answer(packed uint64) ([]byte, error) {
	ptr, size := uint32(packed>>32), uint32(packed)
	if size > MaxAnswer {
		return nil, &answerError{fmt.Sprintf("answer of %d bytes passes the %d MiB cap; return less, or let readers page it with path and slice", size, MaxAnswer>>20)}
	}
	view, ok := in.mem.Read(ptr, size)
	if !ok {
		return nil, &answerError{fmt.Sprintf("answer at %#x+%d lies outside the guest's memory", ptr, size)}
	}
	return append([]byte(nil), view...), nil
}

func (in *instance) endCall() {
	in.stdout.endCall()
	in.stderr.endCall()
}

func (in *instance) close(ctx context.Context) {
	in.endCall()
	_ = in.mod.Close(ctx)
}

// answerError is an answer the host refuses (too large, out of bounds).
type answerError struct{ msg string }

func (e *answerError) Error() string { return e.msg }

// explain turns a failed guest call into a reason a person can act on.
// The instance is still open, so its memory and output can be inspected.
func (p *plugin) explain(in *instance, err error) string {
	var ae *answerError
	if errors.As(err, &ae) {
		return ae.msg
	}
	if errors.Is(err, errStopping) {
		return err.Error()
	}
	var exit *sys.ExitError
	if errors.As(err, &exit) {
		switch exit.ExitCode() {
		case sys.ExitCodeDeadlineExceeded:
			return fmt.Sprintf("deadline exceeded: the call ran past its %s limit and was stopped (an endless loop, or too much work: raise timeout_ms under [plugins.%s] in config.toml if it needs longer)", p.timeout, p.name)
		case sys.ExitCodeContextCanceled:
			return "the call was cancelled by its caller"
		}
		msg := fmt.Sprintf("the module exited with code %d", exit.ExitCode())
		if r := in.stderr.reason(); r != "" {
			msg += " (" + r + ")"
		}
		return msg
	}
	first, _, _ := strings.Cut(err.Error(), "\n")
	if p.outOfMemory(in) {
		return fmt.Sprintf("memory limit of %d MiB reached (%s); the instance was replaced (raise memory_mb under [plugins.%s] in config.toml if the plugin needs more)", p.limits.MemoryMB, first, p.name)
	}
	msg := "trap: " + first
	if r := in.stderr.reason(); r != "" {
		msg += " (" + r + ")"
	}
	return msg
}

// outOfMemory reports whether the instance failed for want of memory: the
// Go runtime says so on stderr, other guests simply sit at the limit.
func (p *plugin) outOfMemory(in *instance) bool {
	if in.stderr.mentions("out of memory") {
		return true
	}
	const page = 64 << 10
	return uint64(in.mem.Size())+4*page > uint64(p.limits.MemoryMB)<<20
}

// acquire takes an idle instance, or starts one while fewer than the
// limit exist, or waits for one, at most the plugin's deadline.
func (p *plugin) acquire(ctx context.Context) (*instance, error) {
	if p.closed.Load() {
		return nil, rpc.Errorf(rpc.Unavailable, "plugin %s is closed: the kernel is stopping", p.name)
	}
	select {
	case in := <-p.idle:
		return in, nil
	default:
	}
	ctx, cancel := context.WithTimeout(ctx, p.timeout) // only a call that waits pays for a timer
	defer cancel()
	select {
	case in := <-p.idle:
		return in, nil
	case p.slots <- struct{}{}:
		// The new instance joins the pool: the caller's cancellation
		// must not kill it half-started.
		in, err := p.instantiate(context.WithoutCancel(ctx))
		if err != nil {
			<-p.slots
			return nil, err
		}
		return in, nil
	case <-ctx.Done():
		return nil, pluginError(p.name, "all %d instances stayed busy until the %s deadline; the plugin is overloaded or stuck", p.limits.Instances, p.timeout)
	}
}

// release returns a healthy instance to the pool.
func (p *plugin) release(in *instance) {
	in.endCall()
	if p.closed.Load() {
		p.retire(in)
		return
	}
	p.idle <- in // cannot block: at most cap(idle) instances exist
}

// retire closes an instance that failed (or outlived its set) and frees
// its slot so a fresh one can start on demand. The failed instance is
// never reused: its memory may hold half-done state.
func (p *plugin) retire(in *instance) {
	p.forget(in)
	in.close(context.Background())
	<-p.slots
}

// forget drops in from the live instances.
func (p *plugin) forget(in *instance) {
	p.liveMu.Lock()
	delete(p.live, in)
	p.liveMu.Unlock()
}

// instantiate starts one instance: _initialize runs the Go runtime and the
// plugin's init functions, bounded by the init deadline and ctx.
func (p *plugin) instantiate(ctx context.Context) (*instance, error) {
	ctx, cancel := context.WithTimeout(ctx, p.initTimeout())
	defer cancel()
	stdout := newOutput(p.log, p.name, "stdout")
	stderr := newOutput(p.log, p.name, "stderr")
	cfg := p.modCfg.WithStdout(stdout).WithStderr(stderr)
	mod, err := p.runtime.InstantiateModule(ctx, p.compiled, cfg)
	var in *instance
	if err == nil {
		in = newInstance(mod, stdout, stderr)
		if p.stoppable {
			err = in.initialize(ctx, p.initFn)
		}
	}
	if err != nil {
		reason := firstLine(err)
		var exit *sys.ExitError
		if errors.As(err, &exit) && exit.ExitCode() == sys.ExitCodeDeadlineExceeded {
			reason = fmt.Sprintf("start-up (_initialize) ran past %s", p.initTimeout())
		}
		if r := stderr.reason(); r != "" {
			reason += " (" + r + ")"
		}
		stdout.endCall()
		stderr.endCall()
		return nil, pluginError(p.name, "cannot start an instance: %s", reason)
	}
	if in.mem == nil {
		in.close(ctx)
		return nil, pluginError(p.name, "the module exports no memory")
	}
	p.liveMu.Lock()
	p.live[in] = struct{}{}
	p.liveMu.Unlock()
	return in, nil
}

func newInstance(mod api.Module, stdout, stderr *output) *instance {
	return &instance{
		mod:      mod,
		mem:      mod.Memory(),
		stdout:   stdout,
		stderr:   stderr,
		alloc:    mod.ExportedFunction(exportAlloc),
		free:     mod.ExportedFunction(exportFree),
		describe: mod.ExportedFunction(exportDescribe),
		read:     mod.ExportedFunction(exportRead),
		list:     mod.ExportedFunction(exportList),
		validate: mod.ExportedFunction(exportValidate),
	}
}

// initialize readies an instrumented instance: it finds the stop flag
// and, when the module has one, calls _initialize under it, as wazero
// calls a start function (an exit with code 0 is no failure, and the
// error of any other is worded as wazero words it). On failure the module
// is closed.
func (in *instance) initialize(ctx context.Context, hasInit bool) error {
	g, ok := in.mod.ExportedGlobal(stopcheck.Export).(api.MutableGlobal)
	if !ok {
		_ = in.mod.Close(ctx)
		return fmt.Errorf("the instrumented module lacks its %s global", stopcheck.Export)
	}
	in.stop, in.halted = g, make(chan struct{}, 1)
	in.halt = func() {
		in.mu.Lock()
		g.Set(1)
		in.mu.Unlock()
		in.halted <- struct{}{}
	}
	if !hasInit {
		return nil
	}
	err := in.run(ctx, in.mod.ExportedFunction(exportInit))
	if err == nil {
		return nil
	}
	_ = in.mod.Close(ctx)
	if exit, ok := err.(*sys.ExitError); ok {
		if exit.ExitCode() == 0 {
			return nil
		}
		return err
	}
	return fmt.Errorf("module[%s] function[%s] failed: %w", in.mod.Name(), exportInit, err)
}

// initTimeout bounds _initialize: the Go runtime's start-up alone takes a
// few milliseconds, and a plugin may build its tables in init.
func (p *plugin) initTimeout() time.Duration {
	return max(p.timeout, 5*time.Second)
}

func firstLine(err error) string {
	first, _, _ := strings.Cut(err.Error(), "\n")
	return first
}
