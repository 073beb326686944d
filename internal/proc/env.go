package proc

import "strings"

// SafeEnv returns environ without variables that hold credentials, so commands the model influences
// never see them: names ending in _API_KEY, _TOKEN, _SECRET or _PASSWORD and names starting with
// OPENAI_ or ANTHROPIC_, all case-insensitive. Order is preserved.
//
// The result is never nil, because a nil environment makes os/exec inherit the unfiltered one.
func SafeEnv(environ []string) []string {
	safe := make([]string, 0, len(environ))
	for _, kv := range environ {
		name, _, _ := strings.Cut(kv, "=")
		if !isSecretName(strings.ToUpper(name)) {
			safe = append(safe, kv)
		}
	}
	return safe
}

func isSecretName(upper string) bool {
	for _, suffix := range []string{"_API_KEY", "_TOKEN", "_SECRET", "_PASSWORD"} {
		if strings.HasSuffix(upper, suffix) {
			return true
		}
	}
	return strings.HasPrefix(upper, "OPENAI_") || strings.HasPrefix(upper, "ANTHROPIC_")
}
