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
		name string
		e    Effect
		want string
	}{
		{"read anywhere", Effect{Kind: FSRead, Target: "/etc/passwd", Head: "cat"}, Allow},
		{"dynamic read", Effect{Kind: FSRead, Target: `"$F"`, Head: "cat", Dynamic: true}, Allow},
		{"write in work tree", Effect{Kind: FSWrite, Target: "/work/proj/out.txt"}, Allow},
		{"overwrite in home", Effect{Kind: FSWrite, Target: "/home/u/notes", Overwrite: true}, Allow},
		{"write in tmp", Effect{Kind: FSWrite, Target: "/tmp/x"}, Allow},
		{"write outside", Effect{Kind: FSWrite, Target: "/etc/hosts"}, Ask},
		{"write prefix trick", Effect{Kind: FSWrite, Target: "/home/uu/x"}, Ask},
		{"delete single file", Effect{Kind: FSDelete, Target: "/work/proj/a.o", Head: "rm"}, Allow},
		{"delete glob in tree", Effect{Kind: FSDelete, Target: "/work/proj/*.o", Head: "rm", Glob: true}, Allow},
		{"delete outside", Effect{Kind: FSDelete, Target: "/var/log/x", Head: "rm"}, Ask},
		{"recursive delete", Effect{Kind: FSDelete, Target: "/work/proj/build", Head: "rm", Recursive: true}, Ask},
		{"forced delete", Effect{Kind: FSDelete, Target: "/work/proj/a", Head: "rm", Force: true}, Ask},
		{"rm -rf /", Effect{Kind: FSDelete, Target: "/", Head: "rm", Recursive: true, Force: true}, Deny},
		{"rm -rf ~", Effect{Kind: FSDelete, Target: "/home/u", Head: "rm", Recursive: true, Force: true}, Deny},
		{"rm -rf /*", Effect{Kind: FSDelete, Target: "/*", Head: "rm", Recursive: true, Glob: true}, Deny},
		{"rm -rf ~/*", Effect{Kind: FSDelete, Target: "/home/u/*", Head: "rm", Recursive: true, Glob: true}, Deny},
		{"dynamic delete", Effect{Kind: FSDelete, Target: `"$DIR"`, Head: "rm", Recursive: true, Dynamic: true}, Ask},
		{"dynamic head", Effect{Kind: ProcSpawn, Target: "$(echo rm)", Dynamic: true}, Ask},
		{"spawn tool", Effect{Kind: ProcSpawn, Target: "make", Head: "make"}, Allow},
		{"sudo", Effect{Kind: ProcSpawn, Target: "sudo", Head: "sudo"}, Ask},
		{"npm install", Effect{Kind: ProcSpawn, Target: "npm", Head: "npm", Sub: "install"}, Ask},
		{"npm test", Effect{Kind: ProcSpawn, Target: "npm", Head: "npm", Sub: "test"}, Allow},
		{"docker ps", Effect{Kind: ProcSpawn, Target: "docker", Head: "docker", Sub: "ps"}, Allow},
		{"docker rm", Effect{Kind: ProcSpawn, Target: "docker", Head: "docker", Sub: "rm"}, Ask},
		{"kubectl apply", Effect{Kind: ProcSpawn, Target: "kubectl", Head: "kubectl", Sub: "apply"}, Ask},
		{"dd", Effect{Kind: ProcSpawn, Target: "dd", Head: "dd"}, Ask},
		{"dd to disk", Effect{Kind: FSWrite, Target: "/dev/sda", Head: "dd", Overwrite: true}, Deny},
		{"mkfs on device", Effect{Kind: FSWrite, Target: "/dev/loop0", Head: "mkfs.ext4"}, Deny},
		{"mkfs on image", Effect{Kind: ProcSpawn, Target: "mkfs.ext4", Head: "mkfs.ext4"}, Ask},
		{"fork bomb", Effect{Kind: ProcSpawn, Target: ":", Head: ":", Unbounded: true}, Deny},
		{"net read", Effect{Kind: Net, Target: "example.com", Head: "curl"}, Allow},
		{"push", Effect{Kind: Net, Target: "origin", Head: "git", Sub: "push"}, Allow},
		{"force push", Effect{Kind: Net, Target: "origin", Head: "git", Sub: "push", Force: true}, Ask},
		{"reset --hard", Effect{Kind: FSWrite, Target: "/work/proj", Head: "git", Sub: "reset", Force: true, Recursive: true}, Ask},
		{"chmod -R in tree", Effect{Kind: FSWrite, Target: "/work/proj/x", Head: "chmod", Recursive: true}, Ask},
		{"chmod -R ~", Effect{Kind: FSWrite, Target: "/home/u", Head: "chmod", Recursive: true}, Deny},
		{"chmod file", Effect{Kind: FSWrite, Target: "/work/proj/x", Head: "chmod"}, Allow},
		{"chown file", Effect{Kind: FSWrite, Target: "/work/proj/x", Head: "chown"}, Ask},
		{"ssh key", Effect{Kind: FSWrite, Target: "/home/u/.ssh/authorized_keys"}, Ask},
		{"bashrc", Effect{Kind: FSWrite, Target: "/home/u/.bashrc"}, Ask},
		{"env", Effect{Kind: EnvWrite, Target: "X"}, Allow},
		{"emit", Effect{Kind: EventPublish, Target: "user.x"}, Allow},
		{"pty", Effect{Kind: PTY, Target: "bash"}, Allow},
		{"unknown kind", Effect{Kind: "gpu.melt", Target: "x"}, Ask},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d := p.Decide("agent:x", []Effect{tt.e}, ctx)
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
	if g := p.Grants("agent:x"); len(g) != 0 {
		t.Fatalf("agent grants %v", g)
	}
	f, err := Parse(`
[grants]
"agent:lead" = ["Approve"]
`, "policy.toml")
	if err != nil {
		t.Fatal(err)
	}
	if g := f.Grants("agent:lead"); strings.Join(g, ",") != "Approve" {
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
