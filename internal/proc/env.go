package proc

import (
	"fmt"
	"maps"
	"slices"
	"strings"
)

// The modes of an EnvPolicy.
const (
	// EnvCore passes only the variables that programs need to run and find their toolchains.
	EnvCore = "core"
	// EnvAll passes every variable except those that look like credentials.
	EnvAll = "all"
)

// ParseEnvMode checks an environment mode given by a user (say, --env-mode) and returns it.
func ParseEnvMode(s string) (string, error) {
	switch s {
	case EnvCore, EnvAll:
		return s, nil
	}
	return "", fmt.Errorf("unknown environment mode %q: want %q (only the variables programs need) or %q (all but those that look like credentials)", s, EnvCore, EnvAll)
}

// EnvPolicy decides which of this process's environment variables a command sees. Commands run code
// the model wrote, so they must not receive secrets.
type EnvPolicy struct {
	// Mode is EnvCore or EnvAll; "" (or anything else) means EnvCore.
	Mode string
	// Pass names variables passed whatever the mode (--pass-env), compared exactly.
	Pass []string
	// Withhold are values no variable may carry, whatever its name, Pass
	// included: the secrets factory itself holds (a forge's token).
	Withhold []string
}

// coreNames are the variables EnvCore passes, none of which should hold a secret.
var coreNames = []string{
	// Where programs are and who and where the user is.
	"PATH", "HOME", "USER", "LOGNAME", "SHELL", "TMPDIR",
	// Text and time: LANG, TZ and every LC_* (by prefix, below); TERM for programs that color output.
	"LANG", "TZ", "TERM",
	// The Python environment that "python" should mean; PYTHONPATH is left out, as it changes what a
	// project imports from outside it (pass it to rely on it).
	"VIRTUAL_ENV",
	// Where Go finds its toolchain, module and build caches, and its flags (GOTOOLCHAIN=local stops
	// toolchain downloads). GOPROXY is left out: it may carry credentials.
	"GOROOT", "GOPATH", "GOCACHE", "GOMODCACHE", "GOFLAGS", "GOTOOLCHAIN",
	// Where Rust's and pyenv's toolchains and caches are.
	"CARGO_HOME", "RUSTUP_HOME", "PYENV_ROOT",
}

// SetEnv returns env with the NAME=value entries kvs set, replacing earlier values of their names;
// env itself is not changed.
func SetEnv(env []string, kvs ...string) []string {
	out := make([]string, 0, len(env)+len(kvs))
	for _, kv := range env {
		name, _, _ := strings.Cut(kv, "=")
		if !slices.ContainsFunc(kvs, func(set string) bool { return strings.HasPrefix(set, name+"=") }) {
			out = append(out, kv)
		}
	}
	return append(out, kvs...)
}

// forcedEnv is set for every command, replacing inherited values, so that verification leaves no
// __pycache__ or .pytest_cache behind in the repository.
var forcedEnv = []string{"PYTHONDONTWRITEBYTECODE=1", "PYTEST_ADDOPTS=-p no:cacheprovider"}

// Environ returns the environment for a command, from environ (os.Environ(), say): the variables the
// policy passes and forcedEnv, sorted by name, each name once (the last entry wins), never nil (a nil
// environment makes os/exec inherit everything). passed lists the names taken from environ, sorted, for
// a record of what commands saw; it holds no values.
//
// EnvCore passes coreNames, every LC_* and the names in Pass. EnvAll passes everything except what
// sensitiveName refuses, unless it is named in Pass.
func (p EnvPolicy) Environ(environ []string) (env []string, passed []string) {
	vars := map[string]string{}
	for _, kv := range environ {
		name, value, ok := strings.Cut(kv, "=")
		if ok && name != "" && (slices.Contains(p.Pass, name) || p.admits(name)) && !p.withholds(value) {
			vars[name] = value
		}
	}
	for _, kv := range forcedEnv {
		name, _, _ := strings.Cut(kv, "=")
		delete(vars, name)
	}
	passed = slices.AppendSeq(make([]string, 0, len(vars)), maps.Keys(vars))
	slices.Sort(passed)
	for _, kv := range forcedEnv {
		name, value, _ := strings.Cut(kv, "=")
		vars[name] = value
	}
	env = make([]string, 0, len(vars))
	for _, name := range slices.Sorted(maps.Keys(vars)) {
		env = append(env, name+"="+vars[name])
	}
	return env, passed
}

// withholds reports whether value holds one of the withheld secrets.
func (p EnvPolicy) withholds(value string) bool {
	return slices.ContainsFunc(p.Withhold, func(secret string) bool { return secret != "" && strings.Contains(value, secret) })
}

// admits applies the mode to a name not named in Pass.
func (p EnvPolicy) admits(name string) bool {
	if p.Mode == EnvAll {
		return !sensitiveName(name)
	}
	return slices.Contains(coreNames, name) || strings.HasPrefix(name, "LC_")
}

// Name rules of EnvAll, on upper-cased names.
var (
	// secretWords are parts of a name, split at '_', that mark a credential: GH_TOKEN, GH_PAT, STRIPE_KEY,
	// NPM_CONFIG__AUTH, SMTP_PASS, SENTRY_DSN. Whole parts only, so that TOKENIZERS_PARALLELISM, KEYBOARD,
	// PATH and PASSTHROUGH stay. URL and URI: connection strings (DATABASE_URL, REDIS_URL, MONGODB_URI)
	// commonly carry a password. ASKPASS: SSH_ASKPASS and GIT_ASKPASS are programs that hand out
	// passwords.
	secretWords = []string{
		"KEY", "KEYS", "TOKEN", "TOKENS", "PASS", "AUTH", "PAT", "DSN", "JWT", "CREDS", "COOKIE", "COOKIES",
		"URL", "URI", "ASKPASS",
	}
	// secretInfixes mark a credential anywhere in a name, even run together as in PGPASSWORD.
	secretInfixes = []string{"SECRET", "PASSWORD", "PASSWD", "PASSPHRASE", "CREDENTIAL", "APIKEY"}
	// providerPrefixes are the configuration of LLM providers: the harness's, not the project's.
	providerPrefixes = []string{
		"OPENAI_", "AZURE_OPENAI_", "ANTHROPIC_", "GEMINI_", "GOOGLE_GENAI_", "MISTRAL_", "COHERE_", "GROQ_",
		"DEEPSEEK_", "XAI_", "OPENROUTER_", "TOGETHER_",
	}
	// agentNames lead to agents and caches that sign or authenticate on request: the ssh and gpg agents,
	// the session bus (which reaches the desktop keyring) and the Kerberos ticket cache.
	agentNames = []string{"SSH_AUTH_SOCK", "GPG_AGENT_INFO", "DBUS_SESSION_BUS_ADDRESS", "KRB5CCNAME"}
)

// sensitiveName reports whether EnvAll withholds the variable name, compared case-insensitively.
func sensitiveName(name string) bool {
	upper := strings.ToUpper(name)
	if slices.Contains(agentNames, upper) {
		return true
	}
	for _, part := range strings.Split(upper, "_") {
		if slices.Contains(secretWords, part) {
			return true
		}
	}
	for _, infix := range secretInfixes {
		if strings.Contains(upper, infix) {
			return true
		}
	}
	for _, prefix := range providerPrefixes {
		if strings.HasPrefix(upper, prefix) {
			return true
		}
	}
	return false
}
