package session

import (
	"regexp"
	"testing"

	"github.com/shoal-sh/shoal/providers/session/shell"
)

// The name test is plain string matching (it runs for every variable on
// every execution); it must agree with the pattern it replaced.
func TestIsSecretName(t *testing.T) {
	pattern := regexp.MustCompile(`(?i)(secret|token|passw|pwd|credential|api_?key|access_?key|private_?key|auth|cookie|session_?key|_key$)`)
	names := []string{
		"AWS_SECRET_ACCESS_KEY", "AWS_ACCESS_KEY_ID", "GITHUB_TOKEN", "DB_PASSWORD", "PGPASSWORD", "MYSQL_PWD",
		"GOOGLE_APPLICATION_CREDENTIALS", "OPENAI_API_KEY", "APIKEY", "Stripe_ApiKey", "PRIVATE_KEY", "SSH_PRIVATEKEY",
		"OAUTH_CLIENT", "AUTHOR", "COOKIE_JAR", "SESSION_KEY", "SESSIONKEY", "SIGNING_KEY", "key", "_KEY", "KEYBOARD",
		"PATH", "HOME", "PWD", "OLDPWD", "TERM", "LANG", "SESSION", "API_KEYS", "MONKEY", "TOKENIZER", "",
	}
	for _, n := range names {
		if got, want := isSecretName(n), pattern.MatchString(n); got != want {
			t.Errorf("isSecretName(%q) = %v, want %v", n, got, want)
		}
	}
}

func TestScrub(t *testing.T) {
	secrets := secretValues([]shell.EnvVar{{Name: "AWS_SECRET_ACCESS_KEY", Value: "wJalrXUtnFEMI/K7MDENG"}, {Name: "HOME", Value: "/home/user-long"}, {Name: "SHORT_TOKEN", Value: "abc"}})
	if len(secrets) != 1 || secrets[0].name != "AWS_SECRET_ACCESS_KEY" {
		t.Fatalf("secrets %+v", secrets)
	}
	if got := scrub("key=wJalrXUtnFEMI/K7MDENG home=/home/user-long", secrets); got != "key=«redacted:$AWS_SECRET_ACCESS_KEY» home=/home/user-long" {
		t.Fatalf("scrub: %q", got)
	}
}
