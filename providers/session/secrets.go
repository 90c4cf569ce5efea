package session

import (
	"encoding/json"
	"sort"
	"strings"

	"github.com/shoal-sh/shoal/providers/session/shell"
)

// secretParts are the pieces of an environment variable name (compared
// lower-cased) that mark it as holding a credential; a name ending in
// "_key" counts too.
var secretParts = []string{"secret", "token", "passw", "pwd", "credential", "apikey", "api_key",
	"accesskey", "access_key", "privatekey", "private_key", "auth", "cookie", "sessionkey", "session_key"}

// isSecretName reports whether an environment variable name looks like it
// holds a credential.
func isSecretName(name string) bool {
	lower := strings.ToLower(name)
	secret := strings.HasSuffix(lower, "_key")
	for _, part := range secretParts {
		if secret {
			break
		}
		secret = strings.Contains(lower, part)
	}
	return secret
}

// minSecretLen keeps short values ("1", "true") from being scrubbed
// everywhere they happen to appear.
const minSecretLen = 8

type secret struct{ name, value string }

// secretValues returns the values of the session's exported variables
// whose names look like credentials, longest first.
func secretValues(env []shell.EnvVar) []secret {
	var out []secret
	for _, e := range env {
		if len(e.Value) >= minSecretLen && isSecretName(e.Name) {
			out = append(out, secret{e.Name, e.Value})
		}
	}
	sort.Slice(out, func(i, j int) bool { return len(out[i].value) > len(out[j].value) })
	return out
}

// scrub replaces every occurrence of a secret value with a marker naming
// its variable: previews and events never carry environment values, while
// the transcript keeps the real output for a reader who asks for it.
func scrub(s string, secrets []secret) string {
	for _, sec := range secrets {
		if strings.Contains(s, sec.value) {
			s = strings.ReplaceAll(s, sec.value, "«redacted:$"+sec.name+"»")
		}
	}
	return s
}

// scrubJSON scrubs the string content of a JSON document. Secret values
// containing characters JSON escapes are matched in their escaped form.
func scrubJSON(raw json.RawMessage, secrets []secret) json.RawMessage {
	if raw == nil {
		return nil
	}
	s := string(raw)
	for _, sec := range secrets {
		esc, _ := json.Marshal(sec.value)
		needle := string(esc[1 : len(esc)-1])
		if strings.Contains(s, needle) {
			s = strings.ReplaceAll(s, needle, "«redacted:$"+sec.name+"»")
		}
	}
	return json.RawMessage(s)
}
