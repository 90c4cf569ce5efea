package shell

import (
	"bufio"
	"bytes"
	"context"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/rogpeppe/go-internal/txtar"
)

// The differential corpus (SPEC X2, issue 14): every snippet under
// testdata/bash runs under GNU bash and under the evaluator, each in a
// fresh copy of the same fixture tree, and the two must agree on stdout,
// stderr and exit status. Snippets are data: a txtar file per group, one
// section per snippet, the section name its id. Known differences live in
// testdata/bash/known.txt with the reason; the test fails when the pass
// rate drops below minPassRate, when a snippet outside that list fails,
// and when a listed snippet passes (so the list says what is true).

var bashdiffRun = flag.String("bashdiff.run", "", "run only corpus snippets whose group/name matches this regexp")

const (
	bashPath    = "/bin/bash"
	minPassRate = 0.99
	minSnippets = 300
)

type snippet struct {
	id, src string
}

func loadCorpus(t *testing.T) []snippet {
	t.Helper()
	files, err := filepath.Glob("testdata/bash/*.txtar")
	if err != nil {
		t.Fatal(err)
	}
	var out []snippet
	seen := map[string]bool{}
	for _, f := range files {
		ar, err := txtar.ParseFile(f)
		if err != nil {
			t.Fatal(err)
		}
		group := strings.TrimSuffix(filepath.Base(f), ".txtar")
		if missing := missingPrograms(ar.Comment); missing != "" {
			t.Logf("group %s skipped: no %s on this machine", group, missing)
			continue
		}
		for _, sec := range ar.Files {
			id := group + "/" + sec.Name
			if seen[id] {
				t.Fatalf("%s: snippet %q twice", f, sec.Name)
			}
			seen[id] = true
			out = append(out, snippet{id: id, src: string(sec.Data)})
		}
	}
	return out
}

// missingPrograms reads a group's "needs: PROG…" comment line and names
// the first program that is not installed: without it bash would only
// print "command not found", which measures nothing.
func missingPrograms(comment []byte) string {
	for line := range strings.SplitSeq(string(comment), "\n") {
		progs, ok := strings.CutPrefix(line, "needs:")
		if !ok {
			continue
		}
		for _, p := range strings.Fields(progs) {
			if _, err := exec.LookPath(p); err != nil {
				return p
			}
		}
	}
	return ""
}

// loadKnown reads known.txt: "group/name  reason" per line, # comments.
func loadKnown(t *testing.T) map[string]string {
	t.Helper()
	f, err := os.Open("testdata/bash/known.txt")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	known := map[string]string{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		id, reason, _ := strings.Cut(line, " ")
		known[id] = strings.TrimSpace(reason)
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return known
}

// fixtureTime is the modification time of every fixture entry, so that
// ls -l and find -newer see the same tree under both shells.
var fixtureTime = time.Date(2024, 1, 2, 3, 4, 5, 0, time.UTC)

// makeFixture writes the small tree each snippet starts in.
func makeFixture(t *testing.T, dir string) {
	t.Helper()
	files := map[string]string{
		"a.txt":             "alpha\nbeta\ngamma\n",
		"b.txt":             "one\ntwo\nthree\nfour\nfive\n",
		"notes.md":          "# Notes\n\nsome text\nmore text\n",
		"Makefile":          "all:\n\techo build\n",
		"with space.txt":    "spaced\n",
		".hidden":           "secret-ish\n",
		"data.json":         `{"name":"shoal","version":"1.2.0","n":3,"ratio":0.5,"tags":["a","b"],"nested":{"x":1,"y":[1,2,3]},"items":[{"id":1,"name":"x","ok":true},{"id":2,"name":"y","ok":false}],"none":null}` + "\n",
		"data.csv":          "name,n\nann,1\nbob,2\n",
		"lines.ndjson":      "{\"a\":1}\n{\"a\":2}\n",
		"src/main.go":       "package main\n\nfunc main() {}\n",
		"src/util.go":       "package main\n\n// TODO: more\nfunc util() {}\n",
		"src/lib/helper.go": "package lib\n",
		"docs/README.md":    "# Readme\n",
		"script.sh":         "#!/bin/sh\necho \"script $1\"\nexit 3\n",
		"nums.txt":          "10\n2\n33\n4\n2\n",
		"kv.txt":            "a=1\nb=2\nc=3\n",
		"empty/.keep":       "",
	}
	for name, data := range files {
		p := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		mode := os.FileMode(0o644)
		if strings.HasSuffix(name, ".sh") {
			mode = 0o755
		}
		if err := os.WriteFile(p, []byte(data), mode); err != nil {
			t.Fatal(err)
		}
	}
	_ = filepath.Walk(dir, func(p string, _ os.FileInfo, err error) error {
		if err == nil {
			err = os.Chtimes(p, fixtureTime, fixtureTime)
		}
		return err
	})
}

func corpusEnv(home string) []string {
	return []string{
		"PATH=/usr/local/bin:/usr/bin:/bin",
		"LC_ALL=C",
		"TZ=UTC",
		"HOME=" + home,
		"USER=shoal",
		"TERM=dumb",
	}
}

type outcome struct {
	stdout, stderr string
	exit           int
}

func runBash(t *testing.T, dir, src string) outcome {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, bashPath, "-c", src)
	cmd.Args[0] = "bash" // $0 and the prefix of messages, as a host's bash -c
	cmd.Dir = dir
	cmd.Env = corpusEnv(dir)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	exit := 0
	if ee, ok := err.(*exec.ExitError); ok {
		exit = ee.ExitCode()
	} else if err != nil {
		t.Fatalf("bash: %v", err)
	}
	return outcome{out.String(), errb.String(), exit}
}

func runShoal(t *testing.T, dir, src string) outcome {
	e, err := New(Options{Dir: dir, Env: corpusEnv(dir), RawOutput: true, KillGrace: 200 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	res, err := e.Run(ctx, src)
	if err != nil {
		return outcome{res.Stdout, res.Stderr + "run error: " + err.Error(), res.Exit}
	}
	return outcome{res.Stdout, res.Stderr, res.Exit}
}

// bashPrefix is how bash -c names itself in front of its own messages
// ("bash: line 3: foo: command not found"). The evaluator is not called
// bash and has no script lines to count, so the prefix is removed before
// comparing (with the evaluator's bashPrefix); what follows it must be
// equal.

func normalizeBashStderr(s string) string { return bashPrefix.ReplaceAllString(s, "") }

// defaultSignals undoes, for the processes the corpus starts, a signal
// disposition the test inherited as ignored (under nohup SIGHUP is; in a
// script's background job SIGINT and SIGQUIT are): bash would list such
// a signal in `trap -p` and a shell started normally does not. A signal
// Go catches is reset to its default in every child at exec.
func defaultSignals(t *testing.T) {
	var caught []os.Signal
	for _, sig := range []os.Signal{syscall.SIGHUP, syscall.SIGINT, syscall.SIGQUIT} {
		if signal.Ignored(sig) {
			caught = append(caught, sig)
		}
	}
	if len(caught) == 0 {
		return
	}
	c := make(chan os.Signal, 1)
	signal.Notify(c, caught...)
	t.Cleanup(func() { signal.Stop(c) })
}

func TestBashCorpus(t *testing.T) {
	if _, err := os.Stat(bashPath); err != nil {
		t.Skip("no GNU bash at " + bashPath)
	}
	defaultSignals(t)
	corpus := loadCorpus(t)
	known := loadKnown(t)
	var only *regexp.Regexp
	if *bashdiffRun != "" {
		only = regexp.MustCompile(*bashdiffRun)
	} else if len(corpus) < minSnippets {
		t.Errorf("corpus has %d snippets, want at least %d", len(corpus), minSnippets)
	}
	for id := range known {
		if !slices.ContainsFunc(corpus, func(s snippet) bool { return s.id == id }) {
			t.Errorf("known.txt lists %s, which is not in the corpus", id)
		}
	}
	root := t.TempDir()
	var failed []string
	ran := 0
	for i, s := range corpus {
		if only != nil && !only.MatchString(s.id) {
			continue
		}
		ran++
		bdir := filepath.Join(root, fmt.Sprintf("%d-bash", i))
		sdir := filepath.Join(root, fmt.Sprintf("%d-shoal", i))
		makeFixture(t, bdir)
		makeFixture(t, sdir)
		want := runBash(t, bdir, s.src)
		got := runShoal(t, sdir, s.src)
		// Paths of the two trees differ; neither side may show its own.
		want.stdout = strings.ReplaceAll(want.stdout, bdir, "$TMP")
		want.stderr = strings.ReplaceAll(normalizeBashStderr(want.stderr), bdir, "$TMP")
		got.stdout = strings.ReplaceAll(got.stdout, sdir, "$TMP")
		got.stderr = strings.ReplaceAll(got.stderr, sdir, "$TMP")
		reason, isKnown := known[s.id]
		if got == want {
			if isKnown {
				t.Errorf("%s passes but known.txt lists it (%s): remove it from the list", s.id, reason)
			}
			continue
		}
		failed = append(failed, s.id)
		report := t.Errorf
		if isKnown {
			report = t.Logf
		}
		report("%s differs%s\n--- source\n%s--- bash: exit %d\nstdout %q\nstderr %q\n--- shoal: exit %d\nstdout %q\nstderr %q",
			s.id, knownNote(reason, isKnown), s.src, want.exit, want.stdout, want.stderr, got.exit, got.stdout, got.stderr)
	}
	if ran == 0 {
		t.Fatal("no snippet ran")
	}
	rate := float64(ran-len(failed)) / float64(ran)
	t.Logf("bash corpus: %d of %d snippets equal (%.1f%%); differing: %s", ran-len(failed), ran, 100*rate, strings.Join(failed, ", "))
	if rate < minPassRate {
		t.Errorf("pass rate %.1f%% is below %.0f%%", 100*rate, 100*minPassRate)
	}
}

func knownNote(reason string, known bool) string {
	if !known {
		return ""
	}
	return " (known: " + reason + ")"
}
