package policy

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

var ctx = DecideContext{Cwd: "/work/proj", Home: "/home/u"}

func TestDefaultDecide(t *testing.T) {
	p := Default()
	tests := []struct {
		name     string
		e        Effect
		want     string
		confined bool
	}{
		{"read anywhere", Effect{Kind: FSRead, Target: "/etc/passwd", Head: "cat"}, Allow, false},
		{"dynamic read", Effect{Kind: FSRead, Target: `"$F"`, Head: "cat", Dynamic: true}, Allow, false},
		{"write in work tree", Effect{Kind: FSWrite, Target: "/work/proj/out.txt"}, Allow, false},
		{"overwrite in home", Effect{Kind: FSWrite, Target: "/home/u/notes", Overwrite: true}, Allow, false},
		{"write in tmp", Effect{Kind: FSWrite, Target: "/tmp/x"}, Allow, false},
		{"write outside", Effect{Kind: FSWrite, Target: "/etc/hosts"}, Ask, false},
		{"write prefix trick", Effect{Kind: FSWrite, Target: "/home/uu/x"}, Ask, false},
		{"delete single file", Effect{Kind: FSDelete, Target: "/work/proj/a.o", Head: "rm"}, Allow, false},
		{"delete glob in tree", Effect{Kind: FSDelete, Target: "/work/proj/*.o", Head: "rm", Glob: true}, Allow, false},
		{"delete outside", Effect{Kind: FSDelete, Target: "/var/log/x", Head: "rm"}, Ask, false},
		{"recursive delete", Effect{Kind: FSDelete, Target: "/work/proj/build", Head: "rm", Recursive: true}, Ask, false},
		{"forced delete", Effect{Kind: FSDelete, Target: "/work/proj/a", Head: "rm", Force: true}, Ask, false},
		{"rm -rf /", Effect{Kind: FSDelete, Target: "/", Head: "rm", Recursive: true, Force: true}, Deny, false},
		{"rm -rf ~", Effect{Kind: FSDelete, Target: "/home/u", Head: "rm", Recursive: true, Force: true}, Deny, false},
		{"rm -rf /*", Effect{Kind: FSDelete, Target: "/*", Head: "rm", Recursive: true, Glob: true}, Deny, false},
		{"rm -rf ~/*", Effect{Kind: FSDelete, Target: "/home/u/*", Head: "rm", Recursive: true, Glob: true}, Deny, false},
		{"dynamic delete", Effect{Kind: FSDelete, Target: `"$DIR"`, Head: "rm", Recursive: true, Dynamic: true}, Ask, false},
		{"dynamic head", Effect{Kind: ProcSpawn, Target: "$(echo rm)", Dynamic: true}, Ask, false},
		{"spawn tool", Effect{Kind: ProcSpawn, Target: "make", Head: "make"}, Allow, false},
		{"sudo", Effect{Kind: ProcSpawn, Target: "sudo", Head: "sudo"}, Ask, false},
		{"npm install", Effect{Kind: ProcSpawn, Target: "npm", Head: "npm", Sub: "install"}, Ask, false},
		{"npm test", Effect{Kind: ProcSpawn, Target: "npm", Head: "npm", Sub: "test"}, Allow, false},
		{"docker ps", Effect{Kind: ProcSpawn, Target: "docker", Head: "docker", Sub: "ps"}, Allow, false},
		{"docker rm", Effect{Kind: ProcSpawn, Target: "docker", Head: "docker", Sub: "rm"}, Ask, false},
		{"kubectl apply", Effect{Kind: ProcSpawn, Target: "kubectl", Head: "kubectl", Sub: "apply"}, Ask, false},
		{"dd", Effect{Kind: ProcSpawn, Target: "dd", Head: "dd"}, Allow, false},
		{"dd of=/dev", Effect{Kind: ProcSpawn, Target: "dd", Head: "dd", Machine: true}, Ask, false},
		{"dd to disk", Effect{Kind: FSWrite, Target: "/dev/sda", Head: "dd", Overwrite: true}, Deny, false},
		{"mkfs on device", Effect{Kind: FSWrite, Target: "/dev/loop0", Head: "mkfs.ext4"}, Deny, false},
		{"mkfs on image", Effect{Kind: ProcSpawn, Target: "mkfs.ext4", Head: "mkfs.ext4", Machine: true}, Ask, false},
		{"fork bomb", Effect{Kind: ProcSpawn, Target: ":", Head: ":", Unbounded: true}, Deny, false},
		{"net read", Effect{Kind: Net, Target: "example.com", Head: "curl"}, Allow, false},
		{"push", Effect{Kind: Net, Target: "origin", Head: "git", Sub: "push"}, Allow, false},
		{"force push", Effect{Kind: Net, Target: "origin", Head: "git", Sub: "push", Force: true}, Ask, false},
		{"reset --hard", Effect{Kind: FSWrite, Target: "/work/proj", Head: "git", Sub: "reset", Force: true, Recursive: true}, Ask, false},
		{"chmod -R in tree", Effect{Kind: FSWrite, Target: "/work/proj/x", Head: "chmod", Recursive: true}, Ask, false},
		{"chmod -R ~", Effect{Kind: FSWrite, Target: "/home/u", Head: "chmod", Recursive: true}, Deny, false},
		{"chmod file", Effect{Kind: FSWrite, Target: "/work/proj/x", Head: "chmod"}, Allow, false},
		{"chown file", Effect{Kind: FSWrite, Target: "/work/proj/x", Head: "chown"}, Ask, false},
		{"ssh key", Effect{Kind: FSWrite, Target: "/home/u/.ssh/authorized_keys"}, Ask, false},
		{"bashrc", Effect{Kind: FSWrite, Target: "/home/u/.bashrc"}, Ask, false},
		{"env", Effect{Kind: EnvWrite, Target: "X"}, Allow, false},
		{"emit", Effect{Kind: EventPublish, Target: "user.x"}, Allow, false},
		{"pty", Effect{Kind: PTY, Target: "bash"}, Allow, false},
		{"unknown kind", Effect{Kind: "gpu.melt", Target: "x"}, Ask, false},
		{"npmrc", Effect{Kind: FSWrite, Target: "/home/u/.npmrc"}, Ask, false},
		{"gh hosts", Effect{Kind: FSWrite, Target: "/home/u/.config/gh/hosts.yml"}, Ask, false},
		{"reboot", Effect{Kind: ProcSpawn, Target: "reboot", Head: "reboot", Machine: true}, Ask, false},

		// Confined: the OS holds the line, so only what it does not
		// contain is asked.
		{"confined recursive delete in tree", Effect{Kind: FSDelete, Target: "/work/proj/build", Head: "rm", Recursive: true, Force: true}, Allow, true},
		{"confined delete of the tree itself", Effect{Kind: FSDelete, Target: "/work/proj", Head: "rm", Recursive: true}, Ask, true},
		{"confined dynamic delete", Effect{Kind: FSDelete, Target: `"$DIR"`, Head: "rm", Recursive: true, Dynamic: true}, Allow, true},
		{"confined dynamic head", Effect{Kind: ProcSpawn, Target: "$(echo rm)", Dynamic: true}, Allow, true},
		{"confined npm install", Effect{Kind: ProcSpawn, Target: "npm", Head: "npm", Sub: "install"}, Allow, true},
		{"confined reset --hard", Effect{Kind: FSWrite, Target: "/work/proj", Head: "git", Sub: "reset", Force: true, Recursive: true}, Allow, true},
		{"confined npmrc", Effect{Kind: FSWrite, Target: "/home/u/.npmrc"}, Ask, true},
		{"confined pypirc", Effect{Kind: FSWrite, Target: "/home/u/.pypirc"}, Ask, true},
		{"confined kill -1", Effect{Kind: ProcSpawn, Target: "kill", Head: "kill", Machine: true}, Ask, true},
		{"confined force push", Effect{Kind: Net, Target: "origin", Head: "git", Sub: "push", Force: true}, Ask, true},
		{"confined dynamic force push", Effect{Kind: Net, Target: "$R", Head: "git", Sub: "push", Force: true, Dynamic: true}, Ask, true},
		{"confined remote command", Effect{Kind: ProcSpawn, Target: "h: rm -rf /", Head: "ssh", Dynamic: true}, Ask, true},
		{"confined dynamic docker", Effect{Kind: ProcSpawn, Target: "docker $X", Head: "docker", Dynamic: true}, Ask, true},
		{"confined sudo", Effect{Kind: ProcSpawn, Target: "sudo", Head: "sudo"}, Ask, true},
		{"confined rm -rf /", Effect{Kind: FSDelete, Target: "/", Head: "rm", Recursive: true, Force: true}, Deny, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := ctx
			c.Confined = tt.confined
			d := p.Decide("agent:x", []Effect{tt.e}, c)
			if d.Verdict != tt.want {
				t.Fatalf("verdict %s, want %s (reasons %+v)", d.Verdict, tt.want, d.Reasons)
			}
			if len(d.Reasons) != 1 || d.Reasons[0].Rule == "" {
				t.Fatalf("want one reason naming its rule, got %+v", d.Reasons)
			}
		})
	}
}

func TestStrictestWins(t *testing.T) {
	d := Default().Decide("agent:x", []Effect{
		{Kind: FSRead, Target: "/x"},
		{Kind: FSDelete, Target: "/work/proj/b", Recursive: true},
		{Kind: FSDelete, Target: "/", Recursive: true},
	}, ctx)
	if d.Verdict != Deny || len(d.Reasons) != 3 {
		t.Fatalf("got %+v", d)
	}
	if got := Default().Decide("agent:x", nil, ctx); got.Verdict != Allow {
		t.Fatalf("no effects: %s", got.Verdict)
	}
	if s := d.Summary(); !strings.Contains(s, "deny fs.delete /") || strings.Contains(s, "fs.read") {
		t.Fatalf("summary %q", s)
	}
}

func TestRootAnchorsMatchNothing(t *testing.T) {
	// A session whose cwd is / must not make the whole disk "the work tree".
	d := Default().Decide("agent:x", []Effect{{Kind: FSWrite, Target: "/etc/passwd"}}, DecideContext{Cwd: "/", Home: "/"})
	if d.Verdict != Ask {
		t.Fatalf("got %s", d.Verdict)
	}
}

func TestGrants(t *testing.T) {
	p := Default()
	if g := p.Grants("human:owner"); strings.Join(g, ",") != "Approve,EnvRead" {
		t.Fatalf("human grants %v", g)
	}
	if g := p.Grants("agent:x"); strings.Join(g, ",") != "HostApproval" {
		t.Fatalf("agent grants %v; want HostApproval only", g)
	}
	f, err := Parse(`
[grants]
"agent:lead" = ["Approve"]
`, "policy.toml")
	if err != nil {
		t.Fatal(err)
	}
	if g := f.Grants("agent:lead"); strings.Join(g, ",") != "Approve,HostApproval" {
		t.Fatalf("lead grants %v", g)
	}
	if g := f.Grants("human:a"); strings.Join(g, ",") != "Approve,EnvRead" {
		t.Fatalf("defaults kept: %v", g)
	}
	off, err := Parse("defaults = false\n", "policy.toml")
	if err != nil {
		t.Fatal(err)
	}
	if g := off.Grants("human:a"); len(g) != 0 {
		t.Fatalf("defaults off still grants %v", g)
	}
}

func TestFileRulesComeFirst(t *testing.T) {
	p, err := Parse(`
[[rule]]
name = "scratch is disposable"
principal = "agent:*"
effect = "fs.delete"
target = "~/scratch/**"
flags = ["recursive"]
verdict = "allow"

[[rule]]
principal = "agent:sandbox"
effect = "net"
verdict = "deny"
`, "/state/policy.toml")
	if err != nil {
		t.Fatal(err)
	}
	rmScratch := []Effect{{Kind: FSDelete, Target: "/home/u/scratch/tmp", Recursive: true, Head: "rm"}}
	if d := p.Decide("agent:a", rmScratch, ctx); d.Verdict != Allow || !strings.Contains(d.Reasons[0].Rule, "policy.toml rule 1: scratch") {
		t.Fatalf("scratch: %+v", d)
	}
	if d := p.Decide("human:a", rmScratch, ctx); d.Verdict != Ask {
		t.Fatalf("principal pattern ignored: %+v", d)
	}
	if d := p.Decide("agent:sandbox", []Effect{{Kind: Net, Target: "x.org"}}, ctx); d.Verdict != Deny {
		t.Fatalf("sandbox net: %+v", d)
	}
	if d := p.Decide("agent:other", []Effect{{Kind: Net, Target: "x.org"}}, ctx); d.Verdict != Allow {
		t.Fatalf("default net: %+v", d)
	}
	// With defaults off, nothing matches and everything asks.
	off, err := Parse("defaults = false\n", "policy.toml")
	if err != nil {
		t.Fatal(err)
	}
	if d := off.Decide("agent:a", []Effect{{Kind: FSRead, Target: "/x"}}, ctx); d.Verdict != Ask {
		t.Fatalf("empty policy: %+v", d)
	}
}

func TestDynamicNeedsExplicitRule(t *testing.T) {
	p, err := Parse(`
defaults = false
[[rule]]
effect = "*"
verdict = "allow"
`, "policy.toml")
	if err != nil {
		t.Fatal(err)
	}
	dyn := []Effect{{Kind: ProcSpawn, Target: "$CMD", Dynamic: true}}
	if d := p.Decide("agent:a", dyn, ctx); d.Verdict != Ask {
		t.Fatalf("allow-all allowed a dynamic spawn: %+v", d)
	}
	if d := p.Decide("agent:a", []Effect{{Kind: "weird"}}, ctx); d.Verdict != Ask {
		t.Fatalf("allow-all allowed an unknown kind: %+v", d)
	}
	q, err := Parse(`
defaults = false
[[rule]]
effect = "*"
flags = ["dynamic"]
verdict = "allow"
`, "policy.toml")
	if err != nil {
		t.Fatal(err)
	}
	if d := q.Decide("agent:a", dyn, ctx); d.Verdict != Allow {
		t.Fatalf("explicit dynamic rule: %+v", d)
	}
}

func TestParseErrors(t *testing.T) {
	tests := []struct {
		name, text, want string
	}{
		{"syntax", "[[rule]]\neffect = \n", "line 2"},
		{"unknown top key", "defaultz = true\n", `line 1: unknown key "defaultz"`},
		{"unknown rule key", "[[rule]]\neffect = \"net\"\nverdict = \"allow\"\n\n[[rule]]\neffect = \"net\"\nverdikt = \"deny\"\n", `line 7: unknown key "rule.verdikt"`},
		{"unknown verdict", "[[rule]]\neffect = \"net\"\nverdict = \"allow\"\n[[rule]]\neffect = \"net\"\nverdict = \"maybe\"\n", `line 6: rule 2: verdict: unknown verdict "maybe"`},
		{"missing verdict", "[[rule]]\neffect = \"net\"\n", "line 1: rule 1: verdict: missing"},
		{"unknown effect", "[[rule]]\neffect = [\"fs.read\", \"fs.rwite\"]\nverdict = \"allow\"\n", `line 2: rule 1: effect: unknown effect "fs.rwite"`},
		{"missing effect", "[[rule]]\nverdict = \"allow\"\n", "effect: missing"},
		{"unknown flag", "[[rule]]\neffect = \"fs.delete\"\nflags = [\"recursve\"]\nverdict = \"ask\"\n", `line 3: rule 1: flags: unknown flag "recursve"`},
		{"relative fs target", "[[rule]]\neffect = \"fs.write\"\ntarget = \"src/**\"\nverdict = \"allow\"\n", `line 3: rule 1: target: "src/**" is not a path pattern`},
		{"bad pattern type", "[[rule]]\neffect = \"net\"\nhead = 3\nverdict = \"allow\"\n", "line 3: rule 1: head: must be a string"},
		{"empty pattern", "[[rule]]\neffect = \"net\"\nhead = \"\"\nverdict = \"allow\"\n", "head: empty pattern"},
		{"unknown grant", "[grants]\n\"agent:*\" = [\"Approve\", \"Root\"]\n", `line 2: grants "agent:*": unknown grant "Root"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Parse(tt.text, "policy.toml")
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("err = %v, want it to contain %q", err, tt.want)
			}
		})
	}
}

func TestLoad(t *testing.T) {
	dir := t.TempDir()
	p, err := Load(filepath.Join(dir, "policy.toml"))
	if err != nil || p != Default() {
		t.Fatalf("missing file: %v %v", p, err)
	}
	bad := filepath.Join(dir, "bad.toml")
	if err := os.WriteFile(bad, []byte("[[rule]]\neffect = \"net\"\nverdict = \"alow\"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := Load(bad); err == nil || !strings.Contains(err.Error(), "line 3") {
		t.Fatalf("malformed file: %v", err)
	}
	if _, err := Load(dir); err == nil {
		t.Fatal("a directory loaded as a policy")
	}
}

func TestGlobs(t *testing.T) {
	names := []struct {
		pat, s string
		want   bool
	}{
		{"agent:*", "agent:reviewer", true},
		{"agent:*", "human:x", false},
		{"*", "", true},
		{"mkfs.*", "mkfs.ext4", true},
		{"mkfs.*", "mkfs", false},
		{"*.github.com", "api.github.com", true},
		{"a?c", "abc", true},
		{`a\*`, "a*", true},
		{`a\*`, "ab", false},
		{"*a*b*c", "xxaybzc", true},
		{"*a*b*c", "xxaybz", false},
	}
	for _, n := range names {
		if got := matchName(n.pat, n.s); got != n.want {
			t.Errorf("matchName(%q, %q) = %v", n.pat, n.s, got)
		}
	}
	paths := []struct {
		pat, p string
		want   bool
	}{
		{"/home/u/**", "/home/u", true},
		{"/home/u/**", "/home/u/a/b", true},
		{"/home/u/**", "/home/uu", false},
		{"/", "/", true},
		{"/", "/etc", false},
		{"/dev/sd*", "/dev/sda1", true},
		{"/dev/sd*", "/dev/sd/x", false},
		{"/a/**/c", "/a/c", true},
		{"/a/**/c", "/a/b/b/c", true},
		{"/a/*/c", "/a/b/b/c", false},
		{"/**/**/**/**/**/**/**/**/**/**/**/**/**/**/**/**/**/**/**/**/**/**/x", "/a/b/c/d/e/f/g/h/i/j/k/l/m/n/o/p", false},
		{"/**/b/**/d", "/a/b/c/d", true},
		{"/**", "/", true},
		{"/a/**", "/a", true},
	}
	for _, n := range paths {
		if got := matchPath(n.pat, n.p); got != n.want {
			t.Errorf("matchPath(%q, %q) = %v", n.pat, n.p, got)
		}
	}
	for glob, want := range map[string]string{"/*": "/", "/home/u/*.o": "/home/u", "/a/b": "/a/b", "/a/[bc]/d": "/a"} {
		if got := StaticPrefix(glob); got != want {
			t.Errorf("StaticPrefix(%q) = %q, want %q", glob, got, want)
		}
	}
}

// The docs show the default policy in full; this keeps them honest.
func TestDocsShowDefault(t *testing.T) {
	doc, err := os.ReadFile("../../docs/policy.md")
	if err != nil {
		t.Fatalf("docs/policy.md: %v", err)
	}
	if !strings.Contains(string(doc), DefaultTOML) {
		t.Fatal("docs/policy.md does not contain core/policy/default.toml verbatim; paste it into the default-policy section")
	}
}

func FuzzParse(f *testing.F) {
	f.Add(DefaultTOML)
	f.Add("[[rule]]\neffect = \"*\"\nflags=[\"!dynamic\"]\ntarget = \"~/**/x\"\nverdict = \"allow\"\n")
	f.Add("[grants]\n\"a*\" = [\"Approve\"]\n")
	f.Fuzz(func(t *testing.T, text string) {
		p, err := Parse(text, "policy.toml")
		if err != nil {
			return
		}
		d := p.Decide("agent:x", []Effect{
			{Kind: FSDelete, Target: "/home/u/*", Glob: true, Recursive: true},
			{Kind: ProcSpawn, Target: "$X", Dynamic: true},
		}, ctx)
		if d.Verdict == Allow {
			// Only a rule naming the dynamic flag may allow the dynamic spawn.
			if !strings.Contains(text, "dynamic") {
				t.Fatalf("dynamic effect allowed by %q", text)
			}
		}
		p.Grants("agent:x")
	})
}

// Resolve maps the anchors to real paths, and only when a `~` or `.`
// pattern is actually compared: a spawn-only decision never calls it.
func TestResolveAnchorsLazily(t *testing.T) {
	calls := 0
	rctx := DecideContext{Cwd: "/link/proj", Home: "/link/home", Resolve: func(d string) string {
		calls++
		return strings.Replace(d, "/link", "/real", 1)
	}}
	p := Default()
	if d := p.Decide("agent:x", []Effect{{Kind: ProcSpawn, Target: "make", Head: "make"}}, rctx); d.Verdict != Allow {
		t.Fatalf("spawn: %+v", d)
	}
	if calls != 0 {
		t.Fatalf("Resolve called %d times for a decision without path targets", calls)
	}
	if d := p.Decide("agent:x", []Effect{{Kind: FSWrite, Target: "/real/proj/out.txt"}}, rctx); d.Verdict != Allow {
		t.Fatalf("write under the resolved cwd: %+v", d)
	}
	if calls != 2 {
		t.Fatalf("Resolve called %d times, want once per anchor (2)", calls)
	}
	if d := p.Decide("agent:x", []Effect{{Kind: FSWrite, Target: "/link/proj/out.txt"}}, rctx); d.Verdict == Allow {
		t.Fatalf("the unresolved spelling of cwd must not count as the work tree: %+v", d)
	}
}
