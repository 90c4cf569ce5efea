package shell

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

func needBash(t *testing.T) {
	t.Helper()
	if findBash("") == "" {
		t.Skip("no GNU bash on this machine")
	}
}

// run runs src and checks its stdout, exit status and whether it ran
// under bash.
func runExpect(t *testing.T, e *Evaluator, src, stdout string, underBash bool) *Result {
	t.Helper()
	res, err := e.Run(context.Background(), src)
	if err != nil {
		t.Fatalf("%q: %v", src, err)
	}
	if res.Stdout != stdout || res.Exit != 0 {
		t.Errorf("%q: stdout %q exit %d stderr %q, want %q", src, res.Stdout, res.Exit, res.Stderr, stdout)
	}
	if got := slices.Contains(res.Marks, MarkBash); got != underBash {
		t.Errorf("%q: ran under bash %v, want %v (marks %v)", src, got, underBash, res.Marks)
	}
	return res
}

// The session's state crosses into a bash run and back: functions,
// variables of every kind, exports, the directory and options.
func TestBashFallbackStateRoundTrip(t *testing.T) {
	needBash(t)
	e, dir := newTestEvaluator(t, map[string]string{"sub/f.txt": "x\n"}, Options{})
	runExpect(t, e, `greet() { echo "hi $1"; }; name=ann; list=(a "b c"); declare -A m=([k]=v); export EXP=1; set -o pipefail; cd sub`, "", false)

	// PIPESTATUS needs bash; everything above is visible there.
	runExpect(t, e, `true | false; echo "${PIPESTATUS[@]}"; greet "$name"; echo "${list[1]}" "${m[k]}" "$EXP" "$PWD"; set -o | grep -c 'pipefail.*on'`,
		"0 1\nhi ann\nb c v 1 "+filepath.Join(dir, "sub")+"\n1\n", true)

	// What a bash run defines is the session's afterwards.
	res := runExpect(t, e, `exec 3>out.txt; echo via3 >&3; exec 3>&-; bye() { echo "bye $1"; }; count=3; arr=(x y); declare -A h=([a]=1); export NEW=2; unset name; cd ..; set +o pipefail`, "", true)
	if !slices.Contains(res.Effects, Effect{Kind: EffectEnvWrite, Target: "NEW"}) {
		t.Errorf("the export in bash is not an effect: %v", res.Effects)
	}
	if !slices.Contains(res.Effects, Effect{Kind: EffectProcSpawn, Target: e.bash}) {
		t.Errorf("the bash process is not an effect: %v", res.Effects)
	}
	if b, err := os.ReadFile(filepath.Join(dir, "sub", "out.txt")); err != nil || string(b) != "via3\n" {
		t.Fatalf("fd 3 wrote %q, %v", b, err)
	}
	runExpect(t, e, `bye "$count"; echo "${arr[1]}" "${h[a]}" "$NEW" "${name-unset}" "$PWD"; greet again; env | grep -c '^NEW=2$'; [[ -o pipefail ]] && echo on || echo off`,
		"bye 3\ny 1 2 unset "+dir+"\nhi again\n1\noff\n", false)
	if e.Cwd() != dir {
		t.Errorf("cwd %s, want %s", e.Cwd(), dir)
	}
	if v, ok := e.Var("count"); !ok || v != "3" {
		t.Errorf("count = %q %v", v, ok)
	}
}

// $? and the exit status come through; a source that ends by exit still
// carries its state (the saving trap runs), and positional parameters
// cross.
func TestBashFallbackStatus(t *testing.T) {
	needBash(t)
	e, _ := newTestEvaluator(t, nil, Options{})
	runExpect(t, e, `set -- one two`, "", false)
	res, err := e.Run(context.Background(), `echo "$# $2" $BASHPID >/dev/null; echo "$# $2"; v=kept; exit 3`)
	if err != nil || res.Exit != 3 || res.Stdout != "2 two\n" {
		t.Fatalf("exit %d stdout %q err %v", res.Exit, res.Stdout, err)
	}
	runExpect(t, e, `echo $? $v`, "3 kept\n", false)
	// The source's own trap: the state is saved after the source instead.
	runExpect(t, e, `trap 'echo trapped' EXIT; w=$BASHPID; t=2`, "trapped\n", true)
	runExpect(t, e, `echo $t`, "2\n", false)
}

// Without bash, or when the source calls a Shoal-only builtin, the
// interpreter runs it.
func TestBashFallbackNotTaken(t *testing.T) {
	needBash(t)
	e, _ := newTestEvaluator(t, nil, Options{Bash: "-"})
	runExpect(t, e, `true | false; echo "[${PIPESTATUS[*]}]"`, "[]\n", false)
	e2, _ := newTestEvaluator(t, nil, Options{})
	res, err := e2.Run(context.Background(), `true | false; echo "[${PIPESTATUS[*]}]"; emit user.x '{}'`)
	if err != nil || slices.Contains(res.Marks, MarkBash) {
		t.Fatalf("a source calling emit ran under bash: %v %v", res.Marks, err)
	}
	// A source too long for one argument of bash -c.
	runExpect(t, e2, `true | false; echo "[${PIPESTATUS[*]}]"`+"\n#"+strings.Repeat("x", maxBashSource), "[]\n", false)
	// What may print the environment is marked as it is when interpreted.
	for _, src := range []string{`: $BASHPID; env`, `: $BASHPID; sudo -n env`, `: $BASHPID; set`, `: $BASHPID; cat .env`, `: $BASHPID; . ./.env`} {
		res, err := e2.Run(context.Background(), src)
		if err != nil || !slices.Contains(res.Marks, MarkSecretSource) || !slices.Contains(res.Marks, MarkBash) {
			t.Errorf("%q: marks %v (%v)", src, res.Marks, err)
		}
	}
	// An ordinary source stays typed.
	res = runExpect(t, e2, "ls", "", false)
	if !res.Builtin {
		t.Error("ls lost its typed value")
	}
}

func TestBashNeeds(t *testing.T) {
	for src, want := range map[string]bool{
		"exec 3>f":                        true,
		"echo x 2>&1 >&2":                 false,
		`echo "${PIPESTATUS[0]}"`:         true,
		"declare -i n=1":                  true,
		"declare -a a=(1)":                false,
		"s=x; echo ${s/#x/y}":             true,
		"s=x; echo ${s//x/y}":             false,
		"echo ${s@Q}":                     true,
		"echo ${s@U}":                     false,
		"set -euo pipefail":               false,
		"set -C":                          true,
		"set -o noclobber":                true,
		"set -o":                          true,
		"shopt -s nullglob extglob":       false,
		"shopt -s failglob":               true,
		"shopt -q extglob":                false,
		"sleep 1 & kill $!":               true,
		"(trap 'echo x' EXIT)":            true,
		"trap 'echo x' EXIT":              false,
		"readonly r=1; r=2":               true,
		"readonly r=1; echo $r":           false,
		"declare -A m; declare -p m":      true,
		"declare -a m; declare -p m":      false,
		"echo !(x)":                       true,
		"f() { echo; }; export -f f":      true,
		`echo "${x:?no}"`:                 false,
		"cat <>f":                         true,
		"echo x >| f":                     true,
		"f() { local -n r=$1; }; f x":     false,
		"echo $FUNCNAME":                  true,
		"x=3+4; echo $((x))":              true,
		"x=7; echo $((x + 1))":            false,
		"x=-1; echo $((x))":               false,
		"echo $((5 / 0))":                 true,
		"n=0; echo $((5 / n))":            false,
		"sleep 1 & wait -n":               true,
		"sleep 1 & wait $!":               false,
		"read -rt 1 x":                    true,
		"read -r x":                       false,
		"select x in a b; do break; done": true,
		"time sleep 0":                    true,
		"f() { local -; set -e; }":        true,
		"trap 'echo r' RETURN":            true,
		"printf -v d '%(%Y)T' -1":         true,
		"printf -v d '%s' x":              false,
		"dirs":                            true,
		"export -p":                       true,
		"declare -F":                      true,
		"declare -F f":                    false,
		"declare -p x":                    false,
		"umask 077":                       true,
		"umask":                           false,
		"trap 'echo $BASH_COMMAND' ERR":   true,
		"trap 'echo $x' ERR":              false,
		"eval 'true | false; echo ${PIPESTATUS[1]}'": true,
		"eval echo hi": false,
		"trap":         false,
		"eval":         false,
	} {
		f, err := Parse(src)
		if err != nil {
			t.Fatal(err)
		}
		ru := (&Evaluator{opts: Options{MaxCapture: 64}}).newRun(f)
		if got := ru.need.why != ""; got != want {
			t.Errorf("%q: needs bash %v (%q), want %v", src, got, ru.need.why, want)
		}
	}
}

// Values that need quoting survive both crossings unchanged.
func TestBashFallbackQuoting(t *testing.T) {
	needBash(t)
	e, _ := newTestEvaluator(t, nil, Options{})
	runExpect(t, e, `nl=$'a\nb'; q="it's \"x\" \$y \\ z"; arr=("" "two words" $'tab\there'); declare -A m=(["k e y"]="v'1" [x]=""); tricky() { printf '%s|' "$@"; echo; }`, "", false)
	want := "a\nb|it's \"x\" $y \\ z|\n|two words|tab\there|\nv'1||\n"
	check := `tricky "$nl" "$q"; tricky "${arr[@]}"; tricky "${m["k e y"]}" "${m[x]}"`
	runExpect(t, e, check+"; : $BASHPID", want, true)
	// Round trip through bash and back, then read in the interpreter.
	runExpect(t, e, `: $BASHPID; nl2=$nl; arr+=(four); m[new]=$'n\nl'`, "", true)
	runExpect(t, e, check+`; tricky "$nl2" "${#arr[@]}" "${m[new]}"`,
		strings.Replace(want, "here|", "here|four|", 1)+"a\nb|4|n\nl|\n", false)
}

// Cancelling a bash run ends bash and what it started, and carries no
// state back.
func TestBashFallbackCancel(t *testing.T) {
	needBash(t)
	e, _ := newTestEvaluator(t, nil, Options{KillGrace: 100 * time.Millisecond})
	ctx, cancel := context.WithCancel(context.Background())
	go func() {
		for len(e.Processes()) == 0 {
			time.Sleep(time.Millisecond)
		}
		cancel()
	}()
	res, err := e.RunWith(ctx, `v=set; exec 3>&1; sleep 60 >&3`, RunOptions{})
	if err == nil || res.Exit != 130 {
		t.Fatalf("exit %d err %v", res.Exit, err)
	}
	runExpect(t, e, `echo "[${v-}]"`, "[]\n", false)
	for len(e.Processes()) > 0 {
		time.Sleep(time.Millisecond)
	}
}

// BenchmarkBashFallback is the cost of a run under bash beside the same
// work interpreted (docs/shell.md quotes it).
func BenchmarkBashFallback(b *testing.B) {
	if findBash("") == "" {
		b.Skip("no GNU bash")
	}
	e, _ := newTestEvaluator(b, nil, Options{})
	ctx := context.Background()
	for _, bc := range []struct{ name, src string }{
		{"interpreted", "x=1; echo $x | cat"},
		{"bash", "x=1; echo $x | cat; : ${PIPESTATUS[0]}"},
	} {
		b.Run(bc.name, func(b *testing.B) {
			for b.Loop() {
				if res, err := e.Run(ctx, bc.src); err != nil || res.Exit != 0 {
					b.Fatal(err, res)
				}
			}
		})
	}
}

// FuzzBashNeeds: the detection never panics, whatever parses.
func FuzzBashNeeds(f *testing.F) {
	for _, s := range []string{"trap", "eval", "printf -v", "read -t", "exec 3>&-", "${x/#a}", "declare -p", "set -o", "shopt -s", `trap "$x" ERR`, "wait -n", "a=(1); declare -A m=([k]=v)"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, src string) {
		file, err := Parse(src)
		if err != nil {
			return
		}
		(&Evaluator{opts: Options{MaxCapture: 64}}).newRun(file)
	})
}
