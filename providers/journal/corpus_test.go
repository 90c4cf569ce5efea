package journal

import (
	"encoding/json"
	"strings"
	"testing"
)

// CredentialCorpus is a set of credential shapes, each in the command
// line or output it typically appears in. Secret is what must never be
// left. The values are made up, in the real formats. Other packages'
// tests (the kernel-wide leak test) use it too.
var CredentialCorpus = []struct{ Name, Line, Secret string }{
	{"mysql -p", "mysql -uroot -pS3cretPass99 app", "S3cretPass99"},
	{"mysqldump -p", "mysqldump -h db -pTopSecret42 --all-databases", "TopSecret42"},
	{"sshpass -p", "sshpass -p 'Hunter2Pass!' ssh admin@host", "Hunter2Pass!"},
	{"sshpass -p bare", "sshpass -p Hunter3Pass ssh admin@host", "Hunter3Pass"},
	{"DB_PASS", "DB_PASS=Passw0rdForDb ./migrate", "Passw0rdForDb"},
	{"DB_PWD", "export DB_PWD=AnotherPwd123", "AnotherPwd123"},
	{"JWT", "curl -d token=eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9.eyJzdWIiOiIxMjM0NTY3ODkwIiwibmFtZSI6IkpvaG4ifQ.SflKxwRJSMeKKF2QT4fwpMeJf36POk6yJV_adQssw5c https://x", "SflKxwRJSMeKKF2QT4fwpMeJf36POk6yJV_adQssw5c"},
	{"JWT bare", "echo eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9.eyJzdWIiOiI5ODc2NTQzMjEwIiwiYWRtaW4iOnRydWV9.dGhpc2lzYXNpZ25hdHVyZXZhbHVlMTIzNDU2Nzg", "dGhpc2lzYXNpZ25hdHVyZXZhbHVlMTIzNDU2Nzg"},
	{"Stripe live", "curl https://api.stripe.com -u sk_live_51HxAbCdEfGhIjKlMnOpQrStUv:", "sk_live_51HxAbCdEfGhIjKlMnOpQrStUv"},
	{"Stripe restricted", "echo rk_live_51HxZyXwVuTsRqPoNmLkJiHg", "rk_live_51HxZyXwVuTsRqPoNmLkJiHg"},
	{"GitLab PAT", "git clone https://oauth2:glpat-Ab3dEf6hIj9kLmN0pQrS@gitlab.com/g/r", "glpat-Ab3dEf6hIj9kLmN0pQrS"},
	{"GitLab PAT bare", "echo glpat-Zy9xWv8uTs7rQp6oNm5L", "glpat-Zy9xWv8uTs7rQp6oNm5L"},
	{"npm token", "npm config set //registry.npmjs.org/:_authToken npm_a1B2c3D4e5F6g7H8i9J0k1L2m3N4o5P6q7R8", "npm_a1B2c3D4e5F6g7H8i9J0k1L2m3N4o5P6q7R8"},
	{"npm token bare", "echo npm_Z9y8X7w6V5u4T3s2R1q0P9o8N7m6L5k4J3i2", "npm_Z9y8X7w6V5u4T3s2R1q0P9o8N7m6L5k4J3i2"},
	{"AWS secret bare", "echo wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY", "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY"},
	{"AWS secret in config", "aws configure set aws_secret_access_key Zx9vLm3Qw8Er5Ty2Ui7Op4As1Df6Gh0Jk3Lz8Xc5", "Zx9vLm3Qw8Er5Ty2Ui7Op4As1Df6Gh0Jk3Lz8Xc5"},
	{"AWS access key id", "export AWS_ACCESS_KEY_ID=AKIAQWERTYUIOPASDFGH", "AKIAQWERTYUIOPASDFGH"},
	{"AWS id bare", "echo AKIAZXCVBNMASDFGHJKL", "AKIAZXCVBNMASDFGHJKL"},
	{"GitHub PAT", "gh auth login --with-token ghp_R4nd0mT0k3nV4lu3F0rT3st1ngPurp0s3s0", "ghp_R4nd0mT0k3nV4lu3F0rT3st1ngPurp0s3s0"},
	{"GitHub fine-grained", "echo github_pat_11ABCDEFG0abcdefghijkl_mnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789abcdefg", "github_pat_11ABCDEFG0abcdefghijkl_mnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789abcdefg"},
	{"GitHub OAuth", "echo gho_16C7e42F292c6912E7710c838347Ae178B4a", "gho_16C7e42F292c6912E7710c838347Ae178B4a"},
	{"Slack bot", "curl -H 'x: xoxb-123456789012-1234567890123-AbCdEfGhIjKlMnOpQrStUvWx' u", "xoxb-123456789012-1234567890123-AbCdEfGhIjKlMnOpQrStUvWx"},
	{"Slack webhook", "curl -X POST https://hooks.slack.com/services/T01ABCDEF/B01ABCDEF/AbCdEfGhIjKlMnOpQrStUvWx", "AbCdEfGhIjKlMnOpQrStUvWx"},
	{"OpenAI key", "export OPENAI_API_KEY=sk-proj-Ab1Cd2Ef3Gh4Ij5Kl6Mn7Op8Qr9St0UvWxYz", "sk-proj-Ab1Cd2Ef3Gh4Ij5Kl6Mn7Op8Qr9St0UvWxYz"},
	{"OpenAI bare", "echo sk-Ab1Cd2Ef3Gh4Ij5Kl6Mn7T3BlbkFJOp8Qr9St0UvWxYzAb1Cd2", "sk-Ab1Cd2Ef3Gh4Ij5Kl6Mn7T3BlbkFJOp8Qr9St0UvWxYzAb1Cd2"},
	{"Anthropic key", "echo sk-ant-api03-Ab1Cd2Ef3Gh4Ij5Kl6Mn7Op8Qr9St0UvWxYzAb1Cd2Ef3Gh4Ij5Kl6Mn7Op8Qr9St0UvWxYzAb1Cd2Ef3Gh4Ij5Kl6AAAA", "sk-ant-api03-Ab1Cd2Ef3Gh4Ij5Kl6Mn7Op8Qr9St0UvWxYzAb1Cd2Ef3Gh4Ij5Kl6Mn7Op8Qr9St0UvWxYzAb1Cd2Ef3Gh4Ij5Kl6AAAA"},
	{"Google API key", "curl 'https://maps.googleapis.com/x?key=AIzaSyA1b2C3d4E5f6G7h8I9j0K1l2M3n4O5p6Q'", "AIzaSyA1b2C3d4E5f6G7h8I9j0K1l2M3n4O5p6Q"},
	{"bearer header", "curl -H 'Authorization: Bearer Zm9vYmFyYmF6cXV4MTIzNDU2Nzg5' https://api", "Zm9vYmFyYmF6cXV4MTIzNDU2Nzg5"},
	{"basic header", "curl -H 'Authorization: Basic YWxpY2U6d29uZGVybGFuZDEyMw==' https://api", "YWxpY2U6d29uZGVybGFuZDEyMw=="},
	{"curl -u", "curl -u deploy:Sup3rS3cretDeploy https://ci", "Sup3rS3cretDeploy"},
	{"URL password", "git clone https://bob:Pa55w0rdInUrl@github.com/o/r", "Pa55w0rdInUrl"},
	{"postgres URL", "psql postgres://app:DbPassInUrl9@db:5432/app", "DbPassInUrl9"},
	{"redis URL", "redis-cli -u redis://:RedisPass77@cache:6379", "RedisPass77"},
	{"--password flag", "mysql --password Flag-Pass-123 db", "Flag-Pass-123"},
	{"--token flag", "vault login --token=hvs.CAESIAbCdEfGhIjKlMnOpQrStUvWxYz0123456789", "hvs.CAESIAbCdEfGhIjKlMnOpQrStUvWxYz0123456789"},
	{"env assignment", "API_SECRET=ApiSecretValue99 ./run", "ApiSecretValue99"},
	{"JSON token", `{"access_token":"JsonAccessTok3nValue","user":"me"}`, "JsonAccessTok3nValue"},
	{"YAML password", "password: YamlPassw0rdValue", "YamlPassw0rdValue"},
	{"private key", "-----BEGIN RSA PRIVATE KEY-----\nMIIEowIBAAKCAQEA7bq98Kj2Lq0u\n-----END RSA PRIVATE KEY-----", "MIIEowIBAAKCAQEA7bq98Kj2Lq0u"},
	{"OpenSSH key", "-----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNzaC1rZXktdjEAAAAABG5vbmUAAAAEbm9uZQ\n-----END OPENSSH PRIVATE KEY-----", "b3BlbnNzaC1rZXktdjEAAAAABG5vbmUAAAAEbm9uZQ"},
	{"SendGrid", "echo 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", "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"},
	{"Twilio", "echo SK0123456789abcdef0123456789abcdef", "SK0123456789abcdef0123456789abcdef"},
	{"Shopify", "echo shpat_0123456789abcdef0123456789abcdef", "shpat_0123456789abcdef0123456789abcdef"},
	{"PyPI token", "twine upload -p pypi-AgEIcHlwaS5vcmcCJGE4ZjM0ZDY4LTk0OTMtNDE0Yy04YWE4LTg4MjM2ZmM5YzU4NQACKlszLCI5ZjQ1ZDQ4Ni0yYzE0LTQ1MWUtOTc3Mi1jNmY0N2M3NjI5MzMiXQAABiA dist/*", "pypi-AgEIcHlwaS5vcmcCJGE4ZjM0ZDY4LTk0OTMtNDE0Yy04YWE4LTg4MjM2ZmM5YzU4NQACKlszLCI5ZjQ1ZDQ4Ni0yYzE0LTQ1MWUtOTc3Mi1jNmY0N2M3NjI5MzMiXQAABiA"},
	{"DigitalOcean", "doctl auth init -t dop_v1_0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef", "dop_v1_0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"},
	{"Heroku", "export HEROKU_API_KEY=01234567-89ab-cdef-0123-456789abcdef", "01234567-89ab-cdef-0123-456789abcdef"},
	{"docker login -p", "docker login -u me -p DockerHubPass123 registry", "DockerHubPass123"},
}

// TestCorpusRedacted: every shape of the corpus is redacted, as text
// and inside JSON.
func TestCorpusRedacted(t *testing.T) {
	if len(CredentialCorpus) < 40 {
		t.Fatalf("the corpus has %d shapes; it must have at least 40", len(CredentialCorpus))
	}
	for _, c := range CredentialCorpus {
		if got := Redact(c.Line); strings.Contains(got, c.Secret) {
			t.Errorf("%s: %q redacted to %q", c.Name, c.Line, got)
		}
		raw, _ := json.Marshal(map[string]any{"preview": c.Line, "n": 1})
		got := RedactJSON(raw)
		if strings.Contains(string(got), c.Secret) || !json.Valid(got) {
			t.Errorf("%s in JSON: %s", c.Name, got)
		}
	}
}

// TestRedactKeepsOrdinaryText: text with no credential passes through.
func TestRedactKeepsOrdinaryText(t *testing.T) {
	for _, s := range []string{
		"git log --oneline 3600937d5e9f2c1b4a7e8d6c5b4a3f2e1d0c9b8a",
		"mkdir -p build && go test ./...",
		"ssh -p 2222 host",
		"sha256sum a.tar.gz  e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855",
		"BYPASS=1 make",
		"/tmp/TestSessionPerProject2143594235/001",
		"cd build/TestSessionPerProject2143594235x/001",
		"ls ./AbCdEfGhIjKlMnOpQrStUvWxYz0123456789AbCd.tar",
		`{"name":"shoal","version":"0.1.0","keywords":["mcp"]}`,
	} {
		if got := Redact(s); got != s {
			t.Errorf("%q redacted to %q", s, got)
		}
	}
}

func BenchmarkRedact(b *testing.B) {
	if _, err := rulesOnce(); err != nil {
		b.Fatal(err)
	}
	line := "cd ~/src/app && go test ./... -run TestServer -count=1 | tee out.txt"
	preview := strings.Repeat("ok  \tgithub.com/shoal-sh/shoal/core/rpc\t0.719s\n", 200)
	b.Run("command", func(b *testing.B) {
		for range b.N {
			Redact(line)
		}
	})
	b.Run("secret", func(b *testing.B) {
		for range b.N {
			Redact("export GITHUB_TOKEN=ghp_R4nd0mT0k3nV4lu3F0rT3st1ngPurp0s3s0 && gh pr list")
		}
	})
	b.Run("preview-9KB", func(b *testing.B) {
		for range b.N {
			Redact(preview)
		}
	})
}

// BenchmarkCatalogLoad is the one-time cost of reading and compiling
// gitleaks' rules (paid on the first redaction).
func BenchmarkCatalogLoad(b *testing.B) {
	for range b.N {
		if _, err := loadCatalog(); err != nil {
			b.Fatal(err)
		}
	}
}
