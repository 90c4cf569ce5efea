package shell

import (
	"bytes"
	"cmp"
	"context"
	"io"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"sync/atomic"

	"mvdan.cc/sh/v3/syntax"

	"github.com/shoal-sh/shoal/core/value"
	"github.com/shoal-sh/shoal/providers/session/sandbox"
	"github.com/shoal-sh/shoal/providers/val/spill"
)

// Caps that keep one run's bookkeeping bounded whatever the script does
// (a loop over a million files must not grow the journal row).
const (
	maxEffects = 256
	maxHeads   = 64
)

// runKey finds the current run in a handler's context. Handlers are shared
// by every copy of the session runner, so the run they act for travels in
// the context interp passes them.
type runKey struct{}

func runOf(ctx context.Context) *run {
	ru, _ := ctx.Value(runKey{}).(*run)
	return ru
}

// run is the bookkeeping of one Run: capture, observed effects and heads,
// marks, the pending builtin value, and its foreground state.
type run struct {
	e              *Evaluator
	ctx            context.Context
	stdout, stderr *capture
	mayBackground  bool // the source has &, coproc or process substitution
	oneShot        bool // the source is one simple command, which bash -c would exec
	pipes          []pipeSpan
	declHeads      []headAt        // declaration commands in the source, which interp runs without hooks
	funcNames      map[string]bool // functions the source defines
	unsetChecked   []string        // parameters the source expands with ${x?msg} or ${x:?msg}
	need           bashNeeds       // whether the source must run under bash
	bash           *bashRun        // set when it does

	// rewords counts the entries of reword, which the interpreter's
	// messages are checked against only while there are any; sawUnset
	// says the interpreter reported an unset parameter (set -u,
	// ${x?msg}), which bash makes a fatal error of status 127.
	rewords    atomic.Int32
	sawUnset   atomic.Bool
	errMidLine atomic.Bool // the last write to stderr did not end a line

	mu             sync.Mutex
	reword         map[string]string // a message the interpreter is about to print → bash's words
	effects        []Effect
	effectSet      map[Effect]struct{}
	effectsDropped int
	heads          []headAt
	headSet        map[string]int // index into heads
	marks          map[string]struct{}
	traps          map[string]string // EXIT and ERR actions set, for trap -p
	pending        *pendingValue
	handoffs       []pipeKey
	domain         *sandbox.Domain // a wider confinement for this run (an applied plan)
	deniedPaths    []string        // what the confinement refused this run
	fgHeld         bool            // holds the evaluator's foreground token
	detached       bool
	finished       bool
}

// pendingValue is a builtin's value written to the run's own stdout. It
// becomes the run's value if nothing runs after it; otherwise it is
// written out as JSON before the next command, keeping output order.
type pendingValue struct {
	v     value.Value
	write func(w io.Writer) error
	// offset is where the builtin is in the source; commands from
	// siblingsFrom up to it are the earlier stages of its own pipeline,
	// which run concurrently and may start after it: they do not make it
	// "not last".
	offset, siblingsFrom uint
}

// pipeSpan is one pipeline in the source: where it starts and where its
// last stage starts.
type pipeSpan struct{ start, last, end uint }

// inEarlierStage reports whether offset is in a stage of a pipeline
// other than its last.
func (ru *run) inEarlierStage(offset uint) bool {
	for _, p := range ru.pipes {
		if offset >= p.start && offset < p.last {
			return true
		}
	}
	return false
}

// pipelineStart returns where the pipeline whose last stage holds offset
// starts, or offset itself when it is in no pipeline's last stage.
func (ru *run) pipelineStart(offset uint) uint {
	start := offset
	for _, p := range ru.pipes {
		if offset >= p.last && offset < p.end && p.start < start {
			start = p.start
		}
	}
	return start
}

func (e *Evaluator) newRun(file *syntax.File) *run {
	ru := &run{
		e:         e,
		stdout:    newCapture(e.opts.MaxCapture),
		stderr:    newCapture(e.opts.MaxCapture),
		effectSet: make(map[Effect]struct{}),
		headSet:   make(map[string]int),
		marks:     make(map[string]struct{}),
	}
	ru.stdout.filter, ru.stderr.filter = ru.filterMessage, ru.filterErr
	ru.stdout.sumAfter = stdoutAfter()
	ru.scan(file)
	if len(file.Stmts) == 1 {
		st := file.Stmts[0]
		_, simple := st.Cmd.(*syntax.CallExpr)
		ru.oneShot = simple && !st.Negated && !st.Background && !st.Coprocess
	}
	return ru
}

// scan looks at the source for what the interpreter's hooks cannot see:
// declaration builtins (export, declare, local, readonly, typeset), which
// may dump the environment, and constructs that leave work running after
// the run returns.
func (ru *run) scan(file *syntax.File) {
	syntax.Walk(file, func(n syntax.Node) bool {
		ru.need.see(n)
		switch n := n.(type) {
		case *syntax.Stmt:
			if n.Background || n.Coprocess || n.Disown {
				ru.mayBackground = true
			}
		case *syntax.ProcSubst, *syntax.CoprocClause:
			ru.mayBackground = true
		case *syntax.BinaryCmd:
			if n.Op == syntax.Pipe || n.Op == syntax.PipeAll {
				ru.pipes = append(ru.pipes, pipeSpan{start: n.Pos().Offset(), last: n.Y.Pos().Offset(), end: n.End().Offset()})
			}
		case *syntax.ParamExp:
			if n.Exp != nil && (n.Exp.Op == syntax.ErrorUnset || n.Exp.Op == syntax.ErrorUnsetOrNull) && n.Param != nil &&
				!slices.Contains(ru.unsetChecked, n.Param.Value) && len(ru.unsetChecked) < 16 {
				ru.unsetChecked = append(ru.unsetChecked, n.Param.Value)
			}
		case *syntax.FuncDecl:
			if n.Name == nil {
				break // "() { …; }" parses, as zsh's anonymous function
			}
			if ru.funcNames == nil {
				ru.funcNames = make(map[string]bool)
			}
			ru.funcNames[n.Name.Value] = true
		case *syntax.DeclClause:
			ru.declHeads = append(ru.declHeads, headAt{name: n.Variant.Value, offset: n.Pos().Offset(), seq: -1})
			if declDumps(n) {
				ru.mark(MarkSecretSource)
			}
		}
		return true
	})
	ru.need.finish()
}

// declDumps reports whether a declaration prints variables: export,
// declare, readonly or typeset with no names, or with -p.
func declDumps(d *syntax.DeclClause) bool {
	names := 0
	for _, as := range d.Args {
		if as.Naked && as.Name == nil && as.Value != nil {
			if lit := as.Value.Lit(); strings.HasPrefix(lit, "-") {
				if strings.Contains(lit, "p") {
					return true
				}
				continue
			}
		}
		names++
	}
	return names == 0
}

// rewordOpenError makes the interpreter's report of a failed
// redirection, "open /abs/path: no such file or directory", read as
// bash's, "path: No such file or directory" with the path as written:
// the open handler must return the *os.PathError the interpreter prints,
// so the words are changed on their way to the run's output instead.
func (ru *run) rewordOpenError(written string, err error) {
	ru.mu.Lock()
	defer ru.mu.Unlock()
	if len(ru.reword) >= 16 {
		return
	}
	if ru.reword == nil {
		ru.reword = make(map[string]string)
	}
	ru.reword[err.Error()+"\n"] = written + ": " + strerror(err) + "\n"
	ru.rewords.Store(int32(len(ru.reword)))
}

var unboundSuffix = []byte(": unbound variable\n")

// filterMessage is the run's output captures' filter: it rewords the
// interpreter's messages registered with rewordOpenError, and notices its
// report of an unset parameter.
func (ru *run) filterMessage(p []byte) []byte {
	if bytes.HasSuffix(p, unboundSuffix) && syntax.ValidName(string(p[:len(p)-len(unboundSuffix)])) {
		ru.sawUnset.Store(true)
	} else if len(ru.unsetChecked) > 0 {
		for _, name := range ru.unsetChecked {
			if len(p) > len(name)+2 && string(p[:len(name)]) == name && p[len(name)] == ':' && p[len(p)-1] == '\n' {
				ru.sawUnset.Store(true)
			}
		}
	}
	if ru.rewords.Load() == 0 {
		return p
	}
	ru.mu.Lock()
	defer ru.mu.Unlock()
	if w, ok := ru.reword[string(p)]; ok {
		delete(ru.reword, string(p))
		ru.rewords.Store(int32(len(ru.reword)))
		return []byte(w)
	}
	return p
}

// bashPrefix is how bash -c starts its own messages.
var bashPrefix = regexp.MustCompile(`(?m)^(/bin/)?bash: (line \d+: )?`)

// filterErr is filterMessage for the run's stderr. Under the bash
// fallback it also drops the "bash: line N: " in front of bash's own
// messages: the interpreter has no script name or line to give, and a run
// reads alike whichever ran it.
func (ru *run) filterErr(p []byte) []byte {
	p = ru.filterMessage(p)
	if ru.bash == nil || len(p) == 0 {
		return p
	}
	midLine := ru.errMidLine.Swap(p[len(p)-1] != '\n')
	if !bytes.Contains(p, []byte("bash: ")) {
		return p
	}
	if midLine {
		// The first line continues one already written.
		i := bytes.IndexByte(p, '\n')
		if i < 0 {
			return p
		}
		return append(p[:i+1:i+1], bashPrefix.ReplaceAll(p[i+1:], nil)...)
	}
	return bashPrefix.ReplaceAll(p, nil)
}

func (ru *run) effect(kind, target string) {
	if ru == nil {
		return
	}
	ef := Effect{Kind: kind, Target: target}
	ru.mu.Lock()
	defer ru.mu.Unlock()
	if _, ok := ru.effectSet[ef]; ok {
		return
	}
	if len(ru.effects) >= maxEffects {
		ru.effectsDropped++
		return
	}
	ru.effectSet[ef] = struct{}{}
	ru.effects = append(ru.effects, ef)
}

// headAt is a command name and where it first ran in the source. Heads
// are reported in source order, not in the order the interpreter reached
// them: the two sides of a pipeline run concurrently, and `ls | jq` must
// have the head ls every time.
type headAt struct {
	name   string
	offset uint
	seq    int
}

func (ru *run) head(name string, offset uint) {
	if ru == nil || name == "" {
		return
	}
	name = filepath.Base(name)
	ru.mu.Lock()
	defer ru.mu.Unlock()
	if i, ok := ru.headSet[name]; ok {
		if offset < ru.heads[i].offset {
			ru.heads[i].offset = offset
		}
		return
	}
	if len(ru.heads) >= maxHeads {
		return
	}
	ru.headSet[name] = len(ru.heads)
	ru.heads = append(ru.heads, headAt{name: name, offset: offset, seq: len(ru.heads)})
}

// denied records a path the confinement refused (the first few).
func (ru *run) denied(path string) {
	ru.mu.Lock()
	defer ru.mu.Unlock()
	if len(ru.deniedPaths) < 8 && !slices.Contains(ru.deniedPaths, path) {
		ru.deniedPaths = append(ru.deniedPaths, path)
	}
}

func (ru *run) mark(m string) {
	if ru == nil {
		return
	}
	ru.mu.Lock()
	ru.marks[m] = struct{}{}
	ru.mu.Unlock()
}

// setPending makes v the candidate value of the run, writing out the
// previous candidate first.
func (ru *run) setPending(p *pendingValue) {
	ru.mu.Lock()
	prev := ru.pending
	ru.pending = p
	ru.mu.Unlock()
	if prev != nil {
		_ = prev.write(ru.stdout)
	}
}

// flushPending writes out the candidate value: the command at offset is
// about to run, so the builtin was not the last command — unless that
// command is an earlier stage of the builtin's own pipeline.
func (ru *run) flushPending(offset uint) {
	ru.mu.Lock()
	p := ru.pending
	if p != nil && offset >= p.siblingsFrom && offset < p.offset {
		ru.mu.Unlock()
		return
	}
	ru.pending = nil
	ru.mu.Unlock()
	if p != nil {
		_ = p.write(ru.stdout)
	}
}

func (ru *run) takePending() *pendingValue {
	ru.mu.Lock()
	defer ru.mu.Unlock()
	p := ru.pending
	ru.pending = nil
	return p
}

// detach turns the run into a task: it gives the foreground back so the
// next run can start, and its state will not be merged.
func (ru *run) detach() {
	ru.mu.Lock()
	defer ru.mu.Unlock()
	if ru.finished || ru.detached {
		return
	}
	ru.detached = true
	if ru.fgHeld {
		ru.fgHeld = false
		<-ru.e.fg
	}
}

// releaseForeground gives the token back without merging (error paths).
func (ru *run) releaseForeground() {
	ru.mu.Lock()
	defer ru.mu.Unlock()
	if ru.fgHeld {
		ru.fgHeld = false
		<-ru.e.fg
	}
}

// finish marks the run ended. It reports whether the run must merge its
// state and release the foreground token, which it still holds.
func (ru *run) finish() bool {
	ru.mu.Lock()
	defer ru.mu.Unlock()
	ru.finished = true
	merge := ru.fgHeld && !ru.detached
	ru.fgHeld = false
	return merge
}

// result assembles the Result once the interpreter returned.
func (ru *run) result(exit int, changedEnv []string, raw bool) *Result {
	for _, name := range changedEnv {
		ru.effect(EffectEnvWrite, name)
	}
	p := ru.takePending()
	if p != nil && exit != 0 {
		_ = p.write(ru.stdout)
		p = nil
	}
	res := &Result{Exit: exit}
	outB, outDropped, outAhead := ru.stdout.bytes()
	errB, errDropped, errAhead := ru.stderr.bytes()
	for _, a := range []*spill.Ahead{outAhead, errAhead} {
		if a != nil {
			res.Ahead = append(res.Ahead, a)
		}
	}
	out, outText := cleanOutput(outB, raw, ru.stdout.plain())
	errS, errText := cleanOutput(errB, raw, ru.stderr.plain())
	res.Stdout, res.Stderr = out, errS
	res.StdoutDropped, res.StderrDropped = outDropped, errDropped
	if p != nil {
		res.Value, res.Builtin = p.v, true
	} else {
		// stdoutAfter guesses how this record's encoding starts.
		res.Value = value.NewRecord(
			value.F("exit", value.Int(exit)),
			value.F("stdout", textValue(out, outText)),
			value.F("stderr", textValue(errS, errText)),
		)
	}

	ru.mu.Lock()
	defer ru.mu.Unlock()
	res.Effects = slices.Clone(ru.effects)
	res.EffectsDropped = ru.effectsDropped
	heads := slices.Clone(ru.heads)
	for _, h := range ru.declHeads {
		if i := slices.IndexFunc(heads, func(x headAt) bool { return x.name == h.name }); i >= 0 {
			heads[i].offset = min(heads[i].offset, h.offset)
		} else if len(heads) < maxHeads {
			heads = append(heads, h)
		}
	}
	slices.SortStableFunc(heads, func(a, b headAt) int {
		if a.offset != b.offset {
			return cmp.Compare(a.offset, b.offset)
		}
		return cmp.Compare(a.seq, b.seq)
	})
	for _, h := range heads {
		res.Heads = append(res.Heads, h.name)
	}
	if ru.bash != nil && ru.bash.analysis != nil {
		// bash ran the commands; the analysis of the source names them.
		res.Heads = slices.Clone(ru.bash.analysis.Heads)
	}
	res.Detached = ru.detached
	for m := range ru.marks {
		res.Marks = append(res.Marks, m)
	}
	slices.Sort(res.Marks)
	res.Denied = slices.Clone(ru.deniedPaths)
	return res
}

// stdoutAfter is how the encoding of a run's record (see result) starts
// when the run exits 0, up to its stdout's first character: the guess
// under which the stdout capture hashes the record's blob while the
// output arrives, so that little of a long output is left to hash once
// the run ends.
var stdoutAfter = sync.OnceValue(func() []byte {
	b, err := spill.StrFieldAfter(value.NewRecord(value.F("exit", value.Int(0))), "stdout")
	if err != nil {
		panic(err)
	}
	return b
})

func textValue(s string, text bool) value.Value {
	if text {
		return value.Str(s)
	}
	return value.Bytes(s)
}
