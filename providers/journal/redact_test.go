package journal

import (
	"strings"
	"testing"
	"unicode/utf8"
)

const R = Marker

var redactTests = []struct {
	in, want string
}{
	// Nothing secret: unchanged.
	{"ls -la /tmp", "ls -la /tmp"},
	{"git commit -m 'tokenizer: fix keyboard handling'", "git commit -m 'tokenizer: fix keyboard handling'"},
	{"echo monkey=banana", "echo monkey=banana"},
	{"sort --key 2 file", "sort --key 2 file"},
	{"cat /etc/passwd", "cat /etc/passwd"},
	// A program's message about a file named like a secret is not one.
	{"cat: /run/app/token: Permission denied", "cat: /run/app/token: Permission denied"},
	{"cat: token: No such file or directory", "cat: token: No such file or directory"},
	{"open /home/u/.ssh/api_key: not a secret", "open /home/u/.ssh/api_key: not a secret"},
	{"bash: api_key: command not found", "bash: api_key: command not found"},
	{"token: Permission-less", "token: " + R},
	{"config/token: hunter2", "config/token: hunter2"},
	{"", ""},

	// Assignments and exports.
	{"export GITHUB_TOKEN=abc123", "export GITHUB_TOKEN=" + R},
	{"GITHUB_TOKEN=abc123 gh pr list", "GITHUB_TOKEN=" + R + " gh pr list"},
	{"DB_PASSWORD='hunter2 two' ./run", "DB_PASSWORD='" + R + "' ./run"},
	{`MY_SECRET="a \"quoted\" one"; next`, `MY_SECRET="` + R + `"; next`},
	{"export STRIPE_API_KEY=sk_live_xyz", "export STRIPE_API_KEY=" + R},
	{"AWS_SECRET_ACCESS_KEY=wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY", "AWS_SECRET_ACCESS_KEY=" + R},
	{"aws_secret_access_key = wJalrXUtnFEMI/K7MDENG", "aws_secret_access_key = " + R},
	{"SSH_KEY=~/.ssh/id && x", "SSH_KEY=" + R + " && x"},
	{"password: hunter2", "password: " + R},
	{`{"token":"abc","user":"me"}`, `{"token":"` + R + `","user":"me"}`},
	{"curl 'https://api.example/x?access_token=abcdef&x=1'", "curl 'https://api.example/x?access_token=" + R + "&x=1'"},
	{"-H 'X-Api-Key: 0123456789'", "-H 'X-Api-Key: " + R + "'"},
	// References to secrets are not secrets.
	{"export GITHUB_TOKEN=$(cat ~/.token)", "export GITHUB_TOKEN=$(cat ~/.token)"},
	{"TOKEN=$OTHER_TOKEN cmd", "TOKEN=$OTHER_TOKEN cmd"},
	{`API_KEY="$KEY" cmd`, `API_KEY="$KEY" cmd`},

	// Flags.
	{"mysql --password hunter2 db", "mysql --password " + R + " db"},
	{"tool --api-key=abc123 run", "tool --api-key=" + R + " run"},
	{"gh auth login --with-token tok_123", "gh auth login --with-token " + R},
	{"curl -u alice:s3cret https://x", "curl -u alice:" + R + " https://x"},
	{"curl --user=alice:s3cret https://x", "curl --user=alice:" + R + " https://x"},

	// Headers.
	{"curl -H 'Authorization: Bearer eyJhbGciOi.x.y' u", "curl -H 'Authorization: Bearer " + R + "' u"},
	{"curl -H \"authorization: basic dXNlcjpwYXNz\" u", "curl -H \"authorization: basic " + R + "\" u"},
	{"send bearer abcdefghijklmnopqrstu now", "send bearer " + R + " now"},

	// URLs with credentials.
	{"git clone https://bob:pa55w0rd@github.com/o/r", "git clone https://bob:" + R + "@github.com/o/r"},
	{"psql postgres://app:s3cr3t@db:5432/x", "psql postgres://app:" + R + "@db:5432/x"},
	{"curl https://example.com:8443/path", "curl https://example.com:8443/path"},

	// Token shapes anywhere.
	{"echo AKIAIOSFODNN7EXAMPLE", "echo " + R},
	{"gh --token ghp_0123456789abcdefghijklmnopqrstuvwxyzAB", "gh --token " + R},
	{"echo ghp_0123456789abcdefghijklmnopqrstuvwxyzAB", "echo " + R},
	{"x github_pat_11ABCDEFG0123456789_abcdefghijklmnopqrstuvwxyz", "x " + R},
	{"slack xoxb-123456789012-abcdefghijkl", "slack " + R},
	{"llm sk-ant-api03-abcdefghijklmnopqrstuvwxyz", "llm " + R},
	{"maps AIzaSyA-0123456789abcdefghijklmnopqrstu", "maps " + R},

	// Private keys, whole blocks, also unterminated.
	{"cat > k <<EOF\n-----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNzaC1rZXk\nAAAA\n-----END OPENSSH PRIVATE KEY-----\nEOF",
		"cat > k <<EOF\n" + R + "\nEOF"},
	{"printf '-----BEGIN RSA PRIVATE KEY-----\nMIIE", "printf '" + R},
	{"-----BEGIN PUBLIC KEY-----\nMIIB", "-----BEGIN PUBLIC KEY-----\nMIIB"},
}

func TestRedact(t *testing.T) {
	for _, tt := range redactTests {
		if got := Redact(tt.in); got != tt.want {
			t.Errorf("Redact(%q)\n got %q\nwant %q", tt.in, got, tt.want)
		}
	}
}

func FuzzRedact(f *testing.F) {
	for _, tt := range redactTests {
		f.Add(tt.in)
	}
	f.Fuzz(func(t *testing.T, s string) {
		once := Redact(s)
		if twice := Redact(once); twice != once {
			t.Fatalf("not idempotent:\n once %q\ntwice %q", once, twice)
		}
		if utf8.ValidString(s) && !utf8.ValidString(once) {
			t.Fatalf("redaction broke UTF-8: %q", once)
		}
		if !strings.Contains(s, Marker) && once != s && !strings.Contains(once, Marker) {
			t.Fatalf("changed without a marker: %q → %q", s, once)
		}
	})
}
