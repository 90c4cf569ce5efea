package shell

import (
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"

	"mvdan.cc/sh/v3/syntax"

	"github.com/shoal-sh/shoal/providers/plan/analyze"
)

// modelLines are command lines of every program the command model knows,
// as a plan sees them (source) and as a run sees them (the words the
// evaluator hands its process handler).
var modelLines = []string{
	"rm -rf build", "rm --recu --forc build", "unlink existing.txt", "rmdir empty", "shred -u existing.txt",
	"mv existing.txt moved.txt", "mv -t build existing.txt", "cp existing.txt copy.txt", "cp -r build out",
	"install -m 755 existing.txt bin/x", "ln -s existing.txt l", "link existing.txt hard",
	"chmod 644 existing.txt", "chown -R me build", "touch new.txt", "mkdir -p -m 755 a/b", "tee out.txt",
	"dd if=existing.txt of=copy.bin", "truncate -s 0 existing.txt", "sed -i s/a/b/ existing.txt", "sed -n 1p existing.txt",
	"sort -o sorted.txt existing.txt", "tar xf a.tar -C build", "tar czf out.tgz build", "unzip a.zip -d build",
	"find . -name x -delete", "find build -delete", "find . -exec rm {} +", "find . -fprint list.txt",
	"xargs rm -f", "cat existing.txt", "grep -r x build", "head -n 3 existing.txt", "awk -F: '{print $1}' existing.txt",
	"jq . f.json", "git status", "git push origin main", "git push --force", "git clone https://github.com/x/y.git",
	"git -C build commit -m x", "git reset --hard", "git clean -fdx", "git checkout -- existing.txt", "git rm existing.txt",
	"curl -o page.html https://example.com/p", "curl -d @existing.txt https://api.example.com/x", "wget https://example.com/f.tgz",
	"ssh -B eth0 example.com", "ssh -P tag example.com", "ssh -p 22 deploy@build.example.org uptime",
	"scp existing.txt host:/tmp/", "rsync -a --delete build/ /tmp/backup/", "nc -z example.com 80", "ping -c 1 example.com",
	"sudo -u root rm -rf /tmp/x", "env FOO=1 rm -f nope", "env -S 'rm -rf build'", "timeout 5 rm -f nope", "nice -n 5 make",
	"nohup make", "flock /tmp/lock rm x", "sh -c 'rm -rf build; echo y > z.txt'", "bash -c 'curl https://example.com'",
	"python3 -c 'print(1)'", "npm install", "pip install x", "go test ./...", "docker ps", "kubectl delete pod x", "make test",
	"kill -9 -1", "kill 123", "reboot", "systemctl status sshd", "iptables -F", "passwd", "crontab -l", "vim existing.txt",
}

// Every line through both sides of the command model: the plan of it as
// source, and the observer given its words as the evaluator runs them.
// Both must name the same effects (a dynamic one by its kind alone).
func TestPlanAndRunAgree(t *testing.T) {
	dir := t.TempDir()
	for name, body := range map[string]string{"existing.txt": "x", "build/a.o": "a", "f.json": "{}",
		".git/config": "[remote \"origin\"]\n\turl = git@github.com:x/y.git\n"} {
		if err := os.MkdirAll(filepath.Dir(filepath.Join(dir, name)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	env := analyze.Env{Cwd: dir, Home: filepath.Join(dir, "home"), Lookup: func(n string) (string, bool) {
		if n == "PATH" {
			return "/usr/bin:/bin", true
		}
		return "", false
	}}
	for _, src := range modelLines {
		argv := words(t, src)
		an, err := analyze.Analyze(src, env)
		if err != nil {
			t.Fatal(err)
		}
		var planned []string
		self := true
		for _, e := range an.Effects {
			if !slices.Contains(observedKinds, e.Kind) {
				continue
			}
			if e.Kind == EffectProcSpawn && self && e.Head == filepath.Base(argv[0]) {
				self = false
				continue
			}
			target := e.Target
			if e.Dynamic {
				target = ""
			}
			planned = append(planned, e.Kind+" "+target)
		}
		ru := &run{effectSet: map[Effect]struct{}{}, headSet: map[string]int{}, marks: map[string]struct{}{}}
		observeCommand(ru, dir, argv, 0, 0)
		var observed []string
		for _, e := range ru.effects {
			observed = append(observed, e.Kind+" "+e.Target)
		}
		if p, o := set(planned), set(observed); !slices.Equal(p, o) {
			t.Errorf("%s:\nplanned  %q\nobserved %q", src, p, o)
		}
	}
	// The case issue 16 names: a host rule for example.com sees it.
	ru := &run{effectSet: map[Effect]struct{}{}, headSet: map[string]int{}, marks: map[string]struct{}{}}
	observeCommand(ru, dir, []string{"ssh", "-B", "eth0", "example.com"}, 0, 0)
	if !slices.Contains(ru.effects, Effect{EffectNet, "example.com"}) {
		t.Fatalf("ssh -B eth0 example.com observed as %v", ru.effects)
	}
}

// words is the argv the evaluator would run for a line of literal words.
func words(t *testing.T, src string) []string {
	t.Helper()
	f, err := syntax.NewParser().Parse(strings.NewReader(src), "")
	if err != nil || len(f.Stmts) != 1 {
		t.Fatalf("%q: %v", src, err)
	}
	call, ok := f.Stmts[0].Cmd.(*syntax.CallExpr)
	if !ok {
		t.Fatalf("%q is not a simple command", src)
	}
	var argv []string
	for _, w := range call.Args {
		lit, ok := plainText(w)
		if !ok {
			t.Fatalf("%q: word %d is not literal", src, len(argv))
		}
		argv = append(argv, lit)
	}
	return argv
}

func set(list []string) []string {
	sort.Strings(list)
	return slices.Compact(list)
}

// BenchmarkObserve is what reading a command line's effects costs a run,
// beside BenchmarkRun's external /bin/true (a process start).
func BenchmarkObserve(b *testing.B) {
	dir := b.TempDir()
	for _, line := range [][]string{{"/bin/true"}, {"rm", "-rf", "build"}, {"git", "push", "origin", "main"},
		{"sh", "-c", "rm -rf x; echo y > z"}, {"curl", "-o", "f", "https://example.com/x"}} {
		b.Run(line[0], func(b *testing.B) {
			for b.Loop() {
				ru := &run{effectSet: map[Effect]struct{}{}, headSet: map[string]int{}, marks: map[string]struct{}{}}
				observeCommand(ru, dir, line, 0, 0)
			}
		})
	}
}
