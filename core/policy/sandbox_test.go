package policy

import (
	"strings"
	"testing"
)

func TestSandboxSection(t *testing.T) {
	for _, tc := range []struct {
		text, err string
		check     func(*Sandbox) bool
	}{
		{"", "", func(s *Sandbox) bool { return s.Required() && len(s.DenyRead) == len(DefaultDenyRead) }},
		{`sandbox = "best-effort"`, "", func(s *Sandbox) bool { return !s.Required() && len(s.Caches) == len(DefaultCaches) }},
		{"[sandbox]\nmode = \"required\"\nwritable = [\"~/shared\", \"/srv/x\"]\nnet_connect = [443]\n", "", func(s *Sandbox) bool {
			return s.Required() && len(s.ExtraWritable) == 2 && len(s.NetConnect) == 1 && s.NetBind == nil
		}},
		{"[sandbox]\nnet_bind = []\n", "", func(s *Sandbox) bool { return s.NetBind != nil && len(s.NetBind) == 0 }},
		{`sandbox = "off"`, "sandbox mode", nil},
		{"[sandbox]\nwritabel = []\n", "unknown key", nil},
		{"[sandbox]\nwritable = [\"rel/dir\"]\n", "not an absolute", nil},
		{"[sandbox]\nnet_connect = [70000]\n", "not a TCP port", nil},
	} {
		p, err := Parse(tc.text, "test.toml")
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("%q: err %v, want %q", tc.text, err, tc.err)
			}
			continue
		}
		if err != nil {
			t.Errorf("%q: %v", tc.text, err)
			continue
		}
		if !tc.check(p.Sandbox()) {
			t.Errorf("%q: sandbox %+v", tc.text, *p.Sandbox())
		}
	}
}

func TestSandboxPaths(t *testing.T) {
	s := DefaultSandbox()
	ws := Workspace{Dir: "/home/u/proj", Tmp: "/tmp/shoal-1/s", Home: "/home/u", State: "/home/u/.local/state/shoal"}
	for p, want := range map[string]bool{
		"/home/u/proj/a.go": true, "/tmp/shoal-1/s/x": true, "/home/u/.cache/go-build/x": true,
		"/home/u/.bashrc": false, "/etc/passwd": false, "/home/u/.local/state/shoal/policy.toml": false,
		"/home/u/projx": false, "/dev/null": true,
	} {
		if got := s.Writable(p, ws); got != want {
			t.Errorf("Writable(%s) = %v", p, got)
		}
	}
	if s.Readable("/home/u/.ssh/id_ed25519", ws) || s.Readable("/home/u/.local/state/shoal/token", ws) || !s.Readable("/etc/passwd", ws) {
		t.Error("Readable")
	}
	for _, dir := range []string{"/", "/home/u", "/home"} {
		if WorkspaceWritable(Workspace{Dir: dir, Home: "/home/u", State: "/home/u/.local/state/shoal"}) {
			t.Errorf("workspace %s must not be writable", dir)
		}
	}
}
