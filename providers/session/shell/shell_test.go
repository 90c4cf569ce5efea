package shell

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"mvdan.cc/sh/v3/interp"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/shoal-sh/shoal/core/value"
)

// newTestEvaluator returns an evaluator in a fresh directory holding the
// given files, closed (and checked to leave no process) at test end.
func newTestEvaluator(t testing.TB, files map[string]string, opts Options) (*Evaluator, string) {
	t.Helper()
	dir := t.TempDir()
	for name, body := range files {
		p := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		mode := os.FileMode(0o644)
		if strings.HasPrefix(body, "#!") {
			mode = 0o755
		}
		if err := os.WriteFile(p, []byte(body), mode); err != nil {
			t.Fatal(err)
		}
	}
	if opts.Dir == "" {
		opts.Dir = dir
	}
	e, err := New(opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		procs := e.Processes()
		if err := e.Close(); err != nil {
			t.Errorf("close: %v", err)
		}
		for _, p := range procs {
			if alive(p.PGID) {
				t.Errorf("process %d (%v) still alive after Close", p.PGID, p.Args)
			}
		}
	})
	return e, dir
}

// alive reports whether pid is a live (not zombie) process.
func alive(pid int) bool {
	if err := syscall.Kill(pid, 0); errors.Is(err, syscall.ESRCH) {
		return false
	}
	stat, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return false
	}
	// The state follows the parenthesised command name.
	i := bytes.LastIndexByte(stat, ')')
	return i < 0 || i+2 >= len(stat) || stat[i+2] != 'Z'
}

func runSrc(t testing.TB, e *Evaluator, src string) *Result {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	res, err := e.Run(ctx, src)
	if err != nil {
		t.Fatalf("run %q: %v", src, err)
	}
	return res
}

func mustValue(t testing.TB, typed string) value.Value {
	t.Helper()
	v, err := value.Unmarshal([]byte(typed))
	if err != nil {
		t.Fatalf("bad want %s: %v", typed, err)
	}
	return v
}

func typedJSON(v value.Value) string {
	b, err := value.Marshal(v)
	if err != nil {
		return "<" + err.Error() + ">"
	}
	return string(b)
}

var testFiles = map[string]string{
	"a.txt":     "alpha\n",
	"b.json":    `{"x":1,"name":"shoal","f":2.0,"tags":["a","b"]}`,
	"c.csv":     "name,zip,n,score\nann,01234,1,1.5\nbob,99999,2,\n",
	"d.tsv":     "k\tv\nx\ttrue\n",
	"notes.md":  "# notes\nline two\n",
	"bin.dat":   "\x00\x01\xff",
	"many.json": "{\"a\":1}\n{\"a\":2}\n",
	".hidden":   "h",
	".env":      "export TOKEN=abc123\nNAME='x y' # c\nQ=\"a\\nb\"\n",
	"sub/x.txt": "x",
}

// TestValues is the X2 table: the value of a run whose last command is a
// builtin is that builtin's typed value, otherwise {exit, stdout, stderr}.
func TestValues(t *testing.T) {
	tests := []struct {
		src  string
		want string // typed wire JSON
	}{
		{`echo hi`, `{"$":"record","v":{"exit":{"$":"int","v":0},"stdout":{"$":"str","v":"hi\n"},"stderr":{"$":"str","v":""}}}`},
		{`echo oops >&2; false`, `{"$":"record","v":{"exit":{"$":"int","v":1},"stdout":{"$":"str","v":""},"stderr":{"$":"str","v":"oops\n"}}}`},
		{`cat bin.dat`, `{"$":"record","v":{"exit":{"$":"int","v":0},"stdout":{"$":"bytes","b64":"AAH/"},"stderr":{"$":"str","v":""}}}`},
		{`printf 'a,b\n1,2\n' | from csv`, `{"$":"table","cols":["a","b"],"rows":[[{"$":"int","v":1},{"$":"int","v":2}]]}`},
		{`printf '{"x":1}' | from json`, `{"$":"record","v":{"x":{"$":"int","v":1}}}`},
		{`printf '1\n2\n' | from json`, `{"$":"list","v":[{"$":"int","v":1},{"$":"int","v":2}]}`},
		{`true | from json`, `{"$":"null"}`},
		{`printf 'a\nb\r\n' | from lines`, `{"$":"list","v":[{"$":"str","v":"a"},{"$":"str","v":"b"}]}`},
		{`cat d.tsv | from tsv`, `{"$":"table","cols":["k","v"],"rows":[[{"$":"str","v":"x"},{"$":"bool","v":true}]]}`},
		{`open b.json | jq .x`, `{"$":"int","v":1}`},
		{`open b.json | jq -r .name`, `{"$":"str","v":"shoal"}`},
		{`open b.json | jq '.tags[]'`, `{"$":"list","v":[{"$":"str","v":"a"},{"$":"str","v":"b"}]}`},
		{`open b.json | jq '.tags[] | select(. == "z")'`, `{"$":"list","v":[]}`},
		{`open c.csv`, `{"$":"table","cols":["name","zip","n","score"],"rows":[[{"$":"str","v":"ann"},{"$":"str","v":"01234"},{"$":"int","v":1},{"$":"float","v":1.5}],[{"$":"str","v":"bob"},{"$":"str","v":"99999"},{"$":"int","v":2},{"$":"null"}]]}`},
		{`open c.csv | jq '.[1].name'`, `{"$":"str","v":"bob"}`},
		{`open notes.md`, `{"$":"str","v":"# notes\nline two\n"}`},
		{`open bin.dat`, `{"$":"bytes","b64":"AAH/"}`},
		{`open -r b.json`, `{"$":"str","v":"{\"x\":1,\"name\":\"shoal\",\"f\":2.0,\"tags\":[\"a\",\"b\"]}"}`},
		{`open many.json`, `{"$":"table","cols":["a"],"rows":[[{"$":"int","v":1}],[{"$":"int","v":2}]]}`},
		{`open .env`, `{"$":"record","v":{"TOKEN":{"$":"str","v":"abc123"},"NAME":{"$":"str","v":"x y"},"Q":{"$":"str","v":"a\nb"}}}`},
		{`cat b.json | from json | jq .f`, `{"$":"float","v":2}`},
		// Between two builtins the typed value passes as is: 2.0 stays a
		// float and bytes stay bytes, which JSON text would not keep.
		{`open b.json | from json | jq -n '1' >/dev/null; open b.json | from json`, `{"$":"record","v":{"x":{"$":"int","v":1},"name":{"$":"str","v":"shoal"},"f":{"$":"float","v":2},"tags":{"$":"list","v":[{"$":"str","v":"a"},{"$":"str","v":"b"}]}}}`},
		{`open bin.dat | from json`, `{"$":"bytes","b64":"AAH/"}`},
		{`open bin.dat | wc -c`, `{"$":"record","v":{"exit":{"$":"int","v":0},"stdout":{"$":"str","v":"3\n"},"stderr":{"$":"str","v":""}}}`},
		{`ls | jq '.[0].name'`, `{"$":"str","v":"a.txt"}`},
		{`ls | jq 'map(.name)'`, `{"$":"list","v":[{"$":"str","v":"a.txt"},{"$":"str","v":"b.json"},{"$":"str","v":"bin.dat"},{"$":"str","v":"c.csv"},{"$":"str","v":"d.tsv"},{"$":"str","v":"many.json"},{"$":"str","v":"notes.md"},{"$":"str","v":"sub"}]}`},
		{`ls -a | jq 'map(.name) | index(".hidden") != null'`, `{"$":"bool","v":true}`},
		{`ls sub a.txt | jq 'map([.name, .type, .size])'`, `{"$":"list","v":[{"$":"list","v":[{"$":"str","v":"sub/x.txt"},{"$":"str","v":"file"},{"$":"int","v":1}]},{"$":"list","v":[{"$":"str","v":"a.txt"},{"$":"str","v":"file"},{"$":"int","v":6}]}]}`},
		{`ls sub | head -c 44`, `{"$":"record","v":{"exit":{"$":"int","v":0},"stdout":{"$":"str","v":"x.txt\n"},"stderr":{"$":"str","v":""}}}`},
		{`jq -n '1, 2'`, `{"$":"list","v":[{"$":"int","v":1},{"$":"int","v":2}]}`},
		{`jq -n --arg a x --argjson b '{"k":3}' '[$a, $b.k]'`, `{"$":"list","v":[{"$":"str","v":"x"},{"$":"int","v":3}]}`},
		{`jq .x b.json`, `{"$":"int","v":1}`},
		{`cat many.json | jq -s 'map(.a) | add'`, `{"$":"int","v":3}`},
		{`x=$(open b.json | jq .x); echo "x=$x"`, `{"$":"record","v":{"exit":{"$":"int","v":0},"stdout":{"$":"str","v":"x=1\n"},"stderr":{"$":"str","v":""}}}`},
		{`open b.json | jq -r .name | tr a-z A-Z`, `{"$":"record","v":{"exit":{"$":"int","v":0},"stdout":{"$":"str","v":"SHOAL\n"},"stderr":{"$":"str","v":""}}}`},
		{`ls | jq -r '.[].name' | head -2`, `{"$":"record","v":{"exit":{"$":"int","v":0},"stdout":{"$":"str","v":"a.txt\nb.json\n"},"stderr":{"$":"str","v":""}}}`},
		{`open b.json | jq .tags; echo done`, `{"$":"record","v":{"exit":{"$":"int","v":0},"stdout":{"$":"str","v":"[\n  \"a\",\n  \"b\"\n]\ndone\n"},"stderr":{"$":"str","v":""}}}`},
		{`echo start; open b.json | jq .tags`, `{"$":"list","v":[{"$":"str","v":"a"},{"$":"str","v":"b"}]}`},
		{`f() { open b.json | jq .x; }; f`, `{"$":"int","v":1}`},
		// The first stage may start after the builtin at the end of its
		// pipeline: it still is the last command.
		{`sh -c 'exec >&-; sleep 0.01' | open b.json | jq .name`, `{"$":"str","v":"shoal"}`},
		{`echo ignored | ls sub | jq length`, `{"$":"int","v":1}`},
		{`for i in 1 2; do echo $i | jq .; done`, `{"$":"int","v":2}`},
		{`for i in 1 2; do echo $i | jq .; done; true`, `{"$":"record","v":{"exit":{"$":"int","v":0},"stdout":{"$":"str","v":"1\n2\n"},"stderr":{"$":"str","v":""}}}`},
		{`open b.json | jq -c .tags > t.json; cat t.json`, `{"$":"record","v":{"exit":{"$":"int","v":0},"stdout":{"$":"str","v":"[\"a\",\"b\"]\n"},"stderr":{"$":"str","v":""}}}`},
		{`trap 'echo bye' EXIT; echo hi`, `{"$":"record","v":{"exit":{"$":"int","v":0},"stdout":{"$":"str","v":"hi\nbye\n"},"stderr":{"$":"str","v":""}}}`},
	}
	e, _ := newTestEvaluator(t, testFiles, Options{})
	for _, tt := range tests {
		t.Run(tt.src, func(t *testing.T) {
			res := runSrc(t, e, tt.src)
			want := mustValue(t, tt.want)
			if !value.Equal(res.Value, want) {
				t.Errorf("value\n got %s\nwant %s\nstderr %q", typedJSON(res.Value), tt.want, res.Stderr)
			}
			_, isRecord := want.(*value.Record)
			if res.Builtin == (isRecord && strings.Contains(tt.want, `"exit"`)) {
				t.Errorf("Builtin = %v for value %s", res.Builtin, tt.want)
			}
		})
	}
}

func TestExitCodes(t *testing.T) {
	tests := []struct {
		src        string
		exit       int
		stderrPart string
	}{
		{`true`, 0, ""},
		{`false`, 1, ""},
		{`exit 3`, 3, ""},
		{`echo a; exit 4; echo b`, 4, ""},
		{`true | false`, 1, ""},
		{`false | true`, 0, ""},
		{`set -o pipefail; false | true`, 1, ""},
		{`sh -c 'exit 7'`, 7, ""},
		{`no-such-command-xyz`, 127, "no-such-command-xyz: command not found"},
		{`./a.txt`, 126, "Permission denied"},
		{`open missing.json`, 1, "open: missing.json: no such file or directory"},
		{`open sub`, 1, "use ls"},
		{`from yaml`, 2, "unknown format"},
		{`from json`, 2, "no input"},
		{`printf 'nope' | from json`, 1, "not JSON"},
		{`jq`, 2, "usage: jq"},
		{`jq .x`, 2, "no input"},
		{`jq '.[' b.json`, 3, "compile error"},
		{`jq -n '1 | error("boom")'`, 5, "boom"},
		{`ls missing-dir`, 2, "cannot access"},
		{`if then`, 2, "must be followed by"},
		{`echo 'unterminated`, 2, "without closing quote"},
		{`sh -c 'kill -TERM $$'`, 128 + 15, ""},
		{`recv user.x`, 1, "not connected"},
		{`emit user.x 1`, 1, "not connected"},
	}
	e, _ := newTestEvaluator(t, testFiles, Options{})
	for _, tt := range tests {
		t.Run(tt.src, func(t *testing.T) {
			res := runSrc(t, e, tt.src)
			if res.Exit != tt.exit {
				t.Errorf("exit = %d, want %d (stderr %q)", res.Exit, tt.exit, res.Stderr)
			}
			if !strings.Contains(res.Stderr, tt.stderrPart) {
				t.Errorf("stderr %q does not contain %q", res.Stderr, tt.stderrPart)
			}
			if rec, ok := res.Value.(*value.Record); ok && !res.Builtin {
				if got, _ := rec.Get("exit"); !value.Equal(got, value.Int(tt.exit)) {
					t.Errorf("value exit = %v", got)
				}
			}
		})
	}
	// The session outlives exit and failures.
	if res := runSrc(t, e, `echo alive`); res.Stdout != "alive\n" || res.Exit != 0 {
		t.Errorf("after exits: %+v", res)
	}
}

// TestStatePersists: cwd, exported and plain variables, and functions live
// on between runs (X1).
func TestStatePersists(t *testing.T) {
	e, dir := newTestEvaluator(t, testFiles, Options{})
	steps := []struct {
		src, stdout string
	}{
		{`cd sub`, ""},
		{`pwd`, filepath.Join(dir, "sub") + "\n"},
		{`export A=1; x=2; greet() { echo "hello $1"; }`, ""},
		{`echo "$A $x"; greet you; sh -c 'echo "child sees A=$A x=$x"'`, "1 2\nhello you\nchild sees A=1 x=\n"},
		{`cd ..; unset A`, ""},
		{`echo "${A-unset}"; ls | jq -r '.[0].name' | cat`, "unset\na.txt\n"},
		{`false`, ""},
		{`echo $?`, "1\n"},
	}
	for _, s := range steps {
		res := runSrc(t, e, s.src)
		if res.Stdout != s.stdout {
			t.Errorf("%s: stdout %q, want %q (stderr %q)", s.src, res.Stdout, s.stdout, res.Stderr)
		}
	}
	if got := e.Cwd(); got != dir {
		t.Errorf("Cwd = %q, want %q", got, dir)
	}
	runSrc(t, e, `export SHOAL_TEST_VAR=v; unexported=1`)
	env := e.Env()
	if !slices.Contains(env, EnvVar{"SHOAL_TEST_VAR", "v"}) {
		t.Errorf("Env lacks SHOAL_TEST_VAR")
	}
	for _, v := range env {
		if v.Name == "unexported" || v.Name == "A" {
			t.Errorf("Env has %s", v.Name)
		}
	}
}

func TestEffects(t *testing.T) {
	files := map[string]string{
		"in.txt":    "in\n",
		"gone.txt":  "x",
		"gone2.txt": "x",
		"m.txt":     "m",
		"c.txt":     "c",
		"bin/curl":  "#!/bin/sh\nexit 0\n",
		"bin/git":   "#!/bin/sh\nexit 0\n",
		"bin/ssh":   "#!/bin/sh\nexit 0\n",
		"f.json":    `{"a":1}`,
	}
	e, dir := newTestEvaluator(t, files, Options{Emit: newFakeBus().Emit})
	p := func(name string) string { return filepath.Join(dir, name) }
	runSrc(t, e, `export PATH="$PWD/bin:$PATH"`)
	tests := []struct {
		src   string
		want  []Effect
		heads []string
	}{
		{`echo hi > out.txt`, []Effect{{EffectFSWrite, p("out.txt")}}, []string{"echo"}},
		{`echo hi >> out.txt 2>/dev/null`, []Effect{{EffectFSWrite, p("out.txt")}}, nil},
		{`read -r line < in.txt`, []Effect{{EffectFSRead, p("in.txt")}}, []string{"read"}},
		{`cat in.txt`, []Effect{{EffectProcSpawn, "/usr/bin/cat"}}, []string{"cat"}},
		{`rm -f gone.txt`, []Effect{{EffectFSDelete, p("gone.txt")}}, []string{"rm"}},
		{`/bin/rm -f -- gone2.txt`, []Effect{{EffectFSDelete, p("gone2.txt")}}, []string{"rm"}},
		{`mv m.txt m2.txt`, []Effect{{EffectFSDelete, p("m.txt")}, {EffectFSWrite, p("m2.txt")}}, []string{"mv"}},
		{`cp c.txt c2.txt`, []Effect{{EffectFSRead, p("c.txt")}, {EffectFSWrite, p("c2.txt")}}, []string{"cp"}},
		{`mkdir -p -m 755 newdir`, []Effect{{EffectFSWrite, p("newdir")}}, []string{"mkdir"}},
		{`sh -c 'rm -rf nothing-here; echo y > z.txt'`, []Effect{{EffectFSDelete, p("nothing-here")}, {EffectFSWrite, p("z.txt")}}, []string{"sh", "rm", "echo"}},
		{`env FOO=1 rm -f nope`, []Effect{{EffectFSDelete, p("nope")}}, []string{"env", "rm"}},
		{`timeout 5 rm -f nope2`, []Effect{{EffectFSDelete, p("nope2")}}, []string{"timeout", "rm"}},
		{`find . -name '*.tmp' -delete`, []Effect{{EffectFSDelete, dir + "/**"}}, []string{"find"}},
		{`find sub-none -exec rm {} \; 2>/dev/null`, []Effect{{EffectFSDelete, p("sub-none") + "/**"}}, []string{"find", "rm"}},
		{`curl -s -o page.html https://example.com/path?token=secret`, []Effect{{EffectNet, "example.com"}, {EffectFSWrite, p("page.html")}}, []string{"curl"}},
		{`git push origin main`, []Effect{{EffectNet, "origin"}}, []string{"git"}},
		{`git clone git@github.com:x/y.git`, []Effect{{EffectNet, "github.com"}, {EffectFSWrite, p("y")}}, []string{"git"}},
		{`ssh -p 22 deploy@build.example.org uptime`, []Effect{{EffectNet, "build.example.org"}}, []string{"ssh"}},
		{`export NEWVAR=1`, []Effect{{EffectEnvWrite, "NEWVAR"}}, []string{"export"}},
		{`NEWVAR=2`, []Effect{{EffectEnvWrite, "NEWVAR"}}, nil},
		{`OTHER=3 true`, nil, []string{"true"}},
		{`emit user.done '{"ok":true}'`, []Effect{{EffectEventPublish, "user.done"}}, []string{"emit"}},
		{`ls sub-none 2>/dev/null; open f.json`, []Effect{{EffectFSRead, p("sub-none")}, {EffectFSRead, p("f.json")}}, []string{"ls", "open"}},
	}
	for _, tt := range tests {
		t.Run(tt.src, func(t *testing.T) {
			res := runSrc(t, e, tt.src)
			for _, w := range tt.want {
				if !slices.Contains(res.Effects, w) {
					t.Errorf("effects %v lack %v (stderr %q)", res.Effects, w, res.Stderr)
				}
			}
			if tt.want == nil {
				for _, ef := range res.Effects {
					if ef.Kind != EffectProcSpawn {
						t.Errorf("unexpected effect %v", ef)
					}
				}
			}
			if tt.heads != nil && !slices.Equal(res.Heads, tt.heads) {
				t.Errorf("heads %v, want %v", res.Heads, tt.heads)
			}
			for _, ef := range res.Effects {
				if strings.Contains(ef.Target, "secret") || strings.Contains(ef.Target, "=") {
					t.Errorf("effect target carries a value: %v", ef)
				}
			}
		})
	}
}

func TestSecretMarks(t *testing.T) {
	tests := []struct {
		src    string
		secret bool
	}{
		{`env`, true},
		{`printenv HOME`, true},
		{`env | grep -c PATH`, true},
		{`export -p`, true},
		{`declare -p`, true},
		{`set`, true},
		{`open .env`, true},
		{`open .env | jq -r .TOKEN`, true},
		{`cat .env`, true},
		{`x=$(< .env)`, true},
		{`jq -n env.HOME`, true},
		{`jq -n '$ENV.HOME'`, true},
		{`echo hi`, false},
		{`env FOO=1 true`, false},
		{`export A=1`, false},
		{`open b.json`, false},
		{`set -e`, false},
	}
	e, _ := newTestEvaluator(t, testFiles, Options{})
	for _, tt := range tests {
		t.Run(tt.src, func(t *testing.T) {
			res := runSrc(t, e, tt.src)
			if got := slices.Contains(res.Marks, MarkSecretSource); got != tt.secret {
				t.Errorf("secret mark = %v, want %v (marks %v)", got, tt.secret, res.Marks)
			}
		})
	}
}

// TestNoHang: commands that read standard input or start a pager finish
// on their own (a hang shows as the test timing out).
func TestNoHang(t *testing.T) {
	tests := []struct {
		src, stdout string
	}{
		{`cat`, ""},
		{`read x; echo "read=$?"`, "read=1\n"},
		{`wc -l`, "0\n"},
		{`sh -c 'read line; echo "got:$line"'`, "got:\n"},
		{`less a.txt`, "alpha\n"},
		{`git --no-pager --version >/dev/null; echo ok`, "ok\n"},
	}
	e, _ := newTestEvaluator(t, testFiles, Options{})
	for _, tt := range tests {
		t.Run(tt.src, func(t *testing.T) {
			if strings.HasPrefix(tt.src, "less") && !hasProgram("less") {
				t.Skip("no less")
			}
			res := runSrc(t, e, tt.src)
			if strings.TrimSpace(res.Stdout) != strings.TrimSpace(tt.stdout) {
				t.Errorf("stdout %q, want %q (stderr %q)", res.Stdout, tt.stdout, res.Stderr)
			}
		})
	}
}

func hasProgram(name string) bool {
	for _, d := range filepath.SplitList(os.Getenv("PATH")) {
		if fi, err := os.Stat(filepath.Join(d, name)); err == nil && fi.Mode()&0o111 != 0 {
			return true
		}
	}
	return false
}

// TestPager: git log of a long history would start less on a terminal; in
// the evaluator it prints everything and returns.
func TestPager(t *testing.T) {
	if !hasProgram("git") {
		t.Skip("no git")
	}
	e, _ := newTestEvaluator(t, nil, Options{})
	res := runSrc(t, e, `
		git init -q repo && cd repo &&
		for i in $(seq 1 80); do
			git -c user.email=t@example.com -c user.name=t commit -q --allow-empty -m "commit $i" || exit 1
		done
		git -p log --oneline | wc -l; git log --format=%s | tail -1; man -P less git 2>/dev/null | head -1 >/dev/null; true`)
	if res.Exit != 0 {
		t.Fatalf("exit %d: %s", res.Exit, res.Stderr)
	}
	if got := strings.Fields(res.Stdout); len(got) != 3 || got[0] != "80" || got[2] != "1" {
		t.Errorf("stdout %q, want 80 lines then 'commit 1'", res.Stdout)
	}
	if res := runSrc(t, e, `echo "$PAGER $GIT_PAGER $TERM $NO_COLOR"; export PAGER=less; sh -c 'echo child $PAGER'`); res.Stdout != "cat cat dumb 1\nchild cat\n" {
		t.Errorf("pager environment: %q", res.Stdout)
	}
}

// TestFastExitKeepsOutput: output of processes that exit at once is never
// lost, on either stream.
func TestFastExitKeepsOutput(t *testing.T) {
	e, _ := newTestEvaluator(t, nil, Options{})
	for i := range 30 {
		res := runSrc(t, e, `sh -c 'echo out; echo err >&2'; /bin/echo `+strconv.Itoa(i)+` >&2`)
		if res.Stdout != "out\n" || res.Stderr != "err\n"+strconv.Itoa(i)+"\n" {
			t.Fatalf("run %d: stdout %q stderr %q", i, res.Stdout, res.Stderr)
		}
	}
	res := runSrc(t, e, `for i in $(seq 1 200); do /bin/echo $i; done | wc -l`)
	if strings.TrimSpace(res.Stdout) != "200" {
		t.Errorf("wc -l = %q", res.Stdout)
	}
}

func TestOutputCleaning(t *testing.T) {
	src := `printf '\033[1;31mred\033[0m plain\n'; printf 'progress 10%%\rprogress 100%%\n'; printf 'N\bNA\bAM\bME\n'; printf '\033]0;title\007done\r\n'`
	e, _ := newTestEvaluator(t, nil, Options{})
	res := runSrc(t, e, src)
	if want := "red plain\nprogress 100%\nNAME\ndone\r\n"; res.Stdout != want {
		t.Errorf("cleaned %q, want %q", res.Stdout, want)
	}
	raw, _ := newTestEvaluator(t, nil, Options{RawOutput: true})
	res = runSrc(t, raw, src)
	if !strings.Contains(res.Stdout, "\x1b[1;31m") || !strings.Contains(res.Stdout, "\r") {
		t.Errorf("raw output lost escapes: %q", res.Stdout)
	}
}

func TestCaptureLimit(t *testing.T) {
	e, _ := newTestEvaluator(t, nil, Options{MaxCapture: 1000})
	res := runSrc(t, e, `seq 1 20000; seq 1 3 >&2`)
	if res.StdoutDropped == 0 || res.StderrDropped != 0 {
		t.Fatalf("dropped %d/%d", res.StdoutDropped, res.StderrDropped)
	}
	if !strings.HasPrefix(res.Stdout, "1\n2\n3\n") || !strings.HasSuffix(res.Stdout, "19999\n20000\n") {
		t.Errorf("head or tail lost: %q…%q", res.Stdout[:20], res.Stdout[len(res.Stdout)-20:])
	}
	if !strings.Contains(res.Stdout, "bytes elided") {
		t.Errorf("no elision marker")
	}
	total := len("") // the length of seq 1 20000
	for i := 1; i <= 20000; i++ {
		total += len(strconv.Itoa(i)) + 1
	}
	kept := len(res.Stdout) - len(res.Stdout[strings.Index(res.Stdout, "\n[shoal:"):strings.Index(res.Stdout, "kept]\n")+len("kept]\n")])
	if int64(kept)+res.StdoutDropped != int64(total) {
		t.Errorf("kept %d + dropped %d != %d", kept, res.StdoutDropped, total)
	}
}

// TestBackgroundJobNoOrphan: sleep 100 & outlives its run but not Close.
func TestBackgroundJobNoOrphan(t *testing.T) {
	e, dir := newTestEvaluator(t, nil, Options{KillGrace: 200 * time.Millisecond})
	runSrc(t, e, `sleep 100 &`)
	// The grandchild is left behind in the group of the sh that started it.
	runSrc(t, e, `sh -c 'sleep 100 & echo $! > grandchild.pid'`)
	procs := waitProcesses(t, e, 2)
	data, err := os.ReadFile(filepath.Join(dir, "grandchild.pid"))
	if err != nil {
		t.Fatal(err)
	}
	grandchild, _ := strconv.Atoi(strings.TrimSpace(string(data)))
	if !alive(grandchild) {
		t.Fatalf("grandchild %d not running before Close", grandchild)
	}
	if err := e.Close(); err != nil {
		t.Fatal(err)
	}
	for _, p := range procs {
		if alive(p.PGID) {
			t.Errorf("%v (pid %d) alive after Close", p.Args, p.PGID)
		}
	}
	if alive(grandchild) {
		t.Errorf("grandchild %d alive after Close", grandchild)
	}
	if _, err := e.Run(context.Background(), "echo hi"); !errors.Is(err, ErrClosed) {
		t.Errorf("run after close: %v", err)
	}
}

// waitProcesses polls until the evaluator reports n live process groups.
func waitProcesses(t *testing.T, e *Evaluator, n int) []Process {
	t.Helper()
	for {
		if ps := e.Processes(); len(ps) >= n {
			return ps
		}
		if t.Context().Err() != nil {
			t.Fatal("test ended before processes appeared")
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// TestCancelKillsGroup: cancelling a run's context ends every process it
// started, grandchildren included.
func TestCancelKillsGroup(t *testing.T) {
	e, dir := newTestEvaluator(t, nil, Options{KillGrace: 200 * time.Millisecond})
	ctx, cancel := context.WithCancel(context.Background())
	type out struct {
		res *Result
		err error
	}
	done := make(chan out, 1)
	go func() {
		res, err := e.Run(ctx, `sh -c 'sleep 100 & echo $! > gc.pid; wait'; echo never`)
		done <- out{res, err}
	}()
	procs := waitProcesses(t, e, 1)
	pidFile := filepath.Join(dir, "gc.pid")
	for {
		if b, err := os.ReadFile(pidFile); err == nil && len(bytes.TrimSpace(b)) > 0 {
			break
		}
		time.Sleep(5 * time.Millisecond)
	}
	b, _ := os.ReadFile(pidFile)
	grandchild, _ := strconv.Atoi(strings.TrimSpace(string(b)))
	cancel()
	o := <-done
	if !errors.Is(o.err, context.Canceled) {
		t.Errorf("err = %v, want context.Canceled", o.err)
	}
	if o.res == nil || o.res.Exit != 130 || strings.Contains(o.res.Stdout, "never") {
		t.Errorf("result %+v", o.res)
	}
	for _, p := range procs {
		if alive(p.PGID) {
			t.Errorf("%v alive after cancel", p.Args)
		}
	}
	for alive(grandchild) {
		// SIGTERM went to the whole group at cancel; allow the grace
		// period for the SIGKILL sweep without asserting on time.
		time.Sleep(10 * time.Millisecond)
		if t.Context().Err() != nil {
			t.Fatalf("grandchild %d survived", grandchild)
		}
	}
	if res := runSrc(t, e, `echo still here`); res.Stdout != "still here\n" {
		t.Errorf("after cancel: %q", res.Stdout)
	}
}

// TestTaskDoesNotMerge: a run detached into a task runs beside later
// foreground runs and keeps its cd to itself (X5).
func TestTaskDoesNotMerge(t *testing.T) {
	e, dir := newTestEvaluator(t, map[string]string{"sub/keep": ""}, Options{})
	fifo := filepath.Join(dir, "gate")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	detach := make(chan struct{})
	done := make(chan *Result, 1)
	go func() {
		res, err := e.RunWith(context.Background(), `cd sub; export TASKVAR=1; read -r line < ../gate; pwd; echo "line=$line"`, RunOptions{Detach: detach})
		if err != nil {
			t.Error(err)
		}
		done <- res
	}()
	close(detach) // the caller's timeout: it is a task now
	// A foreground run proceeds while the task is blocked on the gate.
	if res := runSrc(t, e, `pwd; echo "${TASKVAR-none}"`); res.Stdout != dir+"\n"+"none\n" {
		t.Errorf("foreground during task: %q", res.Stdout)
	}
	if err := os.WriteFile(fifo, []byte("go\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	res := <-done
	if !res.Detached || res.Stdout != filepath.Join(dir, "sub")+"\nline=go\n" {
		t.Errorf("task result: detached=%v stdout=%q stderr=%q", res.Detached, res.Stdout, res.Stderr)
	}
	if e.Cwd() != dir {
		t.Errorf("task cd merged: Cwd = %q", e.Cwd())
	}
	if res := runSrc(t, e, `pwd; echo "${TASKVAR-none}"`); res.Stdout != dir+"\nnone\n" {
		t.Errorf("after task: %q", res.Stdout)
	}
	// A task started detached never waits for the foreground.
	closed := make(chan struct{})
	close(closed)
	res, err := e.RunWith(context.Background(), `cd sub; pwd`, RunOptions{Detach: closed})
	if err != nil || !res.Detached || res.Stdout != filepath.Join(dir, "sub")+"\n" || e.Cwd() != dir {
		t.Errorf("background task: %+v %v cwd %q", res, err, e.Cwd())
	}
}

// TestConcurrentRuns hammers one evaluator with tasks and foreground runs
// at once (run with -race).
func TestConcurrentRuns(t *testing.T) {
	e, dir := newTestEvaluator(t, testFiles, Options{})
	closed := make(chan struct{})
	close(closed)
	errs := make(chan error, 64)
	var tasks []chan struct{}
	for i := range 6 {
		finished := make(chan struct{})
		tasks = append(tasks, finished)
		go func() {
			defer close(finished)
			res, err := e.RunWith(context.Background(), `cd sub; n=`+strconv.Itoa(i)+`; for j in 1 2 3; do echo $n$j; done | from lines`, RunOptions{Detach: closed})
			if err != nil {
				errs <- err
				return
			}
			if l, ok := res.Value.(value.List); !ok || len(l) != 3 {
				errs <- errors.New("task value: " + typedJSON(res.Value))
			}
		}()
	}
	for i := range 10 {
		res := runSrc(t, e, `x=`+strconv.Itoa(i)+`; pwd; ls | jq length`)
		if res.Exit != 0 || !strings.HasPrefix(res.Stdout, dir+"\n") {
			t.Errorf("foreground %d: %q %q", i, res.Stdout, res.Stderr)
		}
	}
	for _, f := range tasks {
		<-f
	}
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if e.Cwd() != dir {
		t.Errorf("cwd %q", e.Cwd())
	}
}

// TestOutputStreams: what the process writes reaches the captures whole
// and in order, however the streams are wired.
func TestOutputStreams(t *testing.T) {
	e, dir := newTestEvaluator(t, nil, Options{})
	// 2>&1 shares one pipe, so the interleaving is the order written.
	if res := runSrc(t, e, `sh -c 'echo a; echo b >&2; echo c; echo d >&2' 2>&1`); res.Stdout != "a\nb\nc\nd\n" || res.Stderr != "" {
		t.Errorf("2>&1: stdout %q stderr %q", res.Stdout, res.Stderr)
	}
	// Both streams past a pipe's buffer at once: neither blocks the other.
	res := runSrc(t, e, `sh -c 'seq 1 100000; seq 1 100000 >&2; echo end'`)
	if !strings.HasSuffix(res.Stdout, "\n100000\nend\n") || !strings.HasSuffix(res.Stderr, "\n99999\n100000\n") {
		t.Errorf("large output: stdout …%q stderr …%q", tail(res.Stdout), tail(res.Stderr))
	}
	// A file redirection goes to the process as it is.
	if res := runSrc(t, e, `/bin/echo to-file > out.txt; cat out.txt`); res.Stdout != "to-file\n" {
		t.Errorf("redirect: %q", res.Stdout)
	}
	// A grandchild that keeps the pipe open does not hold the run past
	// the grace period: the run returns with what the command wrote while
	// the grandchild still sleeps (it writes late.txt when it wakes).
	res = runSrc(t, e, `sh -c '(sleep 5; echo late; touch late.txt) & echo early'`)
	if res.Stdout != "early\n" {
		t.Errorf("daemonised grandchild: stdout %q", res.Stdout)
	}
	if _, err := os.Stat(filepath.Join(dir, "late.txt")); err == nil {
		t.Errorf("the run waited for the grandchild")
	}
}

func tail(s string) string { return s[max(0, len(s)-20):] }

// TestProcessEnvironment: a process sees the exported variables as the
// shell resolves them (prefix assignments, unset, a function's local over
// the global), and the forced settings over the session's.
func TestProcessEnvironment(t *testing.T) {
	e, _ := newTestEvaluator(t, nil, Options{})
	res := runSrc(t, e, `export A=1 B=2 PAGER=less; unset B; C=3 printenv A B C PAGER; f() { local A=inner; export A; printenv A; }; f; printenv A`)
	if want := "1\n3\ncat\ninner\n1\n"; res.Stdout != want || res.Exit != 0 {
		t.Errorf("stdout %q exit %d, want %q (stderr %q)", res.Stdout, res.Exit, want, res.Stderr)
	}
	if res := runSrc(t, e, `env | grep -c '^A='`); res.Stdout != "1\n" {
		t.Errorf("A appears %q times in the environment", res.Stdout)
	}
}

// TestPanicInBuiltin: a panic in a builtin fails that command (exit 70,
// the reason on stderr), wherever the interpreter runs it, and the session
// goes on.
func TestPanicInBuiltin(t *testing.T) {
	e, _ := newTestEvaluator(t, nil, Options{Emit: func(context.Context, string, json.RawMessage) (uint64, error) {
		panic("boom in a handler")
	}})
	res := runSrc(t, e, `export A=1; emit user.a '{}'; echo "after $?"`)
	if res.Stdout != "after 70\n" || !strings.Contains(res.Stderr, "internal error") || !strings.Contains(res.Stderr, "boom in a handler") {
		t.Fatalf("stdout %q stderr %q", res.Stdout, res.Stderr)
	}
	// In a pipeline stage and in a background job, which run on the
	// interpreter's own goroutines.
	if res := runSrc(t, e, `emit user.a '{}' | cat; yes | { sleep 0.1; emit user.a '{}'; }; echo "exit $?"`); res.Stdout != "exit 70\n" {
		t.Errorf("pipeline: stdout %q stderr %q", res.Stdout, res.Stderr)
	}
	runSrc(t, e, `emit user.a '{}' & wait`)
	if res := runSrc(t, e, `echo "A=$A"`); res.Stdout != "A=1\n" {
		t.Errorf("the session did not go on: %q", res.Stdout)
	}
}

// TestRunRecovering: a panic inside the interpreter's run becomes an
// error that says so.
func TestRunRecovering(t *testing.T) {
	r, err := interp.New(interp.CallHandler(func(context.Context, []string) ([]string, error) { panic("inside the interpreter") }))
	if err != nil {
		t.Fatal(err)
	}
	f, err := Parse("true")
	if err != nil {
		t.Fatal(err)
	}
	panicked, err := runRecovering(context.Background(), r, f)
	if !panicked || err == nil || !strings.Contains(err.Error(), "inside the interpreter") {
		t.Fatalf("panicked %v, err %v", panicked, err)
	}
}

// TestRecoverHandlers: the call and open handlers' panics come back as
// errors.
func TestRecoverHandlers(t *testing.T) {
	_, err := recoverCall(func(context.Context, []string) ([]string, error) { panic("call boom") })(context.Background(), []string{"x"})
	if err == nil || !strings.Contains(err.Error(), "internal error") || !strings.Contains(err.Error(), "call boom") {
		t.Errorf("call handler: %v", err)
	}
	_, err = recoverOpen(func(context.Context, string, int, os.FileMode) (io.ReadWriteCloser, error) { panic("open boom") })(context.Background(), "f", 0, 0)
	if err == nil || !strings.Contains(err.Error(), "open boom") {
		t.Errorf("open handler: %v", err)
	}
}
