package proc

import "strings"

// SafeEnv returns environ without variables that may hold credentials, so commands the model influences
// never see them. A variable is dropped when its name, compared case-insensitively:
//
//   - ends in _KEY, _KEY_ID, _TOKEN, _PASS or _PASSWD (AWS_SECRET_ACCESS_KEY, AWS_ACCESS_KEY_ID,
//     GH_TOKEN, NPM_TOKEN, DB_PASS);
//   - contains SECRET, PASSWORD or CREDENTIAL (PGPASSWORD, GOOGLE_APPLICATION_CREDENTIALS);
//   - starts with OPENAI_ or ANTHROPIC_.
//
// Names that merely contain KEY or TOKEN elsewhere (KEYBOARD, TOKENIZERS_PARALLELISM) are kept, as are
// PATH, HOME, LANG and the like. Order is preserved.
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

// isSecretName applies SafeEnv's rule to an upper-cased variable name.
func isSecretName(upper string) bool {
	for _, suffix := range []string{"_KEY", "_KEY_ID", "_TOKEN", "_PASS", "_PASSWD"} {
		if strings.HasSuffix(upper, suffix) {
			return true
		}
	}
	for _, part := range []string{"SECRET", "PASSWORD", "CREDENTIAL"} {
		if strings.Contains(upper, part) {
			return true
		}
	}
	return strings.HasPrefix(upper, "OPENAI_") || strings.HasPrefix(upper, "ANTHROPIC_")
}
