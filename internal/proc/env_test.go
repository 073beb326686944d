package proc

import (
	"slices"
	"strings"
	"testing"
)

// TestEnvPolicyNames checks each mode name by name, alone in the environment.
func TestEnvPolicyNames(t *testing.T) {
	tests := []struct {
		name          string
		inCore, inAll bool
	}{
		// The core set.
		{"PATH", true, true},
		{"HOME", true, true},
		{"LANG", true, true},
		{"LC_ALL", true, true},
		{"LC_CTYPE", true, true},
		{"LC_WHATEVER", true, true},
		{"TERM", true, true},
		{"TMPDIR", true, true},
		{"USER", true, true},
		{"LOGNAME", true, true},
		{"SHELL", true, true},
		{"TZ", true, true},
		{"VIRTUAL_ENV", true, true},
		{"GOROOT", true, true},
		{"GOPATH", true, true},
		{"GOCACHE", true, true},
		{"GOMODCACHE", true, true},
		{"GOFLAGS", true, true},
		{"GOTOOLCHAIN", true, true},
		{"CARGO_HOME", true, true},
		{"RUSTUP_HOME", true, true},
		{"PYENV_ROOT", true, true},
		// Harmless, but not core.
		{"PWD", false, true},
		{"OLDPWD", false, true},
		{"PYTHONPATH", false, true},
		{"JAVA_HOME", false, true},
		{"EDITOR", false, true},
		{"path", false, true}, // names are case-sensitive; only EnvAll's refusals ignore case
		// Near misses: a secret word inside a longer part.
		{"TOKENIZERS_PARALLELISM", false, true},
		{"KEYBOARD", false, true},
		{"XKB_KEYMAP", false, true},
		{"PASSTHROUGH", false, true},
		{"BYPASS_CACHE", false, true},
		{"COMPASS", false, true},
		{"XAUTHORITY", false, true},
		{"PATTERN", false, true},
		{"MY_OPENAI_ORG", false, true},
		{"OPENAIX", false, true},
		{"XDG_SESSION_TYPE", false, true},
		// The leaks of the old name rule.
		{"DATABASE_URL", false, false},
		{"SENTRY_DSN", false, false},
		{"GH_PAT", false, false},
		{"NPM_CONFIG__AUTH", false, false},
		{"SSH_AUTH_SOCK", false, false},
		// Each refusal.
		{"AWS_SECRET_ACCESS_KEY", false, false},
		{"AWS_ACCESS_KEY_ID", false, false},
		{"AWS_SESSION_TOKEN", false, false},
		{"GITHUB_TOKEN", false, false},
		{"NPM_TOKEN", false, false},
		{"HF_TOKEN", false, false},
		{"SSH_KEYS", false, false},
		{"STRIPE_KEY", false, false},
		{"API_TOKENS", false, false},
		{"SMTP_PASS", false, false},
		{"NPM_CONFIG__AUTH_TOKEN", false, false},
		{"SESSION_JWT", false, false},
		{"REGISTRY_CREDS", false, false},
		{"BROWSER_COOKIES", false, false},
		{"REDIS_URL", false, false},
		{"TEST_DATABASE_URL", false, false},
		{"MONGODB_URI", false, false},
		{"PIP_INDEX_URL", false, false},
		{"GIT_ASKPASS", false, false},
		{"PGPASSWORD", false, false},
		{"MYSQL_ROOT_PASSWORD_FILE", false, false},
		{"FTP_PASSWD", false, false},
		{"GPG_PASSPHRASE", false, false},
		{"CLIENT_SECRET_VALUE", false, false},
		{"APPSECRET", false, false},
		{"GOOGLE_APPLICATION_CREDENTIALS", false, false},
		{"SENDGRID_APIKEY", false, false},
		{"OPENAI_BASE_URL", false, false},
		{"OPENAI_ORG_ID", false, false},
		{"AZURE_OPENAI_ENDPOINT", false, false},
		{"ANTHROPIC_MODEL", false, false},
		{"GEMINI_MODEL", false, false},
		{"GPG_AGENT_INFO", false, false},
		{"DBUS_SESSION_BUS_ADDRESS", false, false},
		{"KRB5CCNAME", false, false},
		// Case does not matter to the refusals.
		{"gh_pat", false, false},
		{"Database_Url", false, false},
		{"pgpassword", false, false},
		{"openai_api_base", false, false},
		{"ssh_auth_sock", false, false},
	}
	for _, tt := range tests {
		for _, mode := range []string{EnvCore, EnvAll} {
			want := tt.inCore
			if mode == EnvAll {
				want = tt.inAll
			}
			env, passed := EnvPolicy{Mode: mode}.Environ([]string{tt.name + "=v"})
			got := slices.Contains(env, tt.name+"=v")
			if got != want || slices.Contains(passed, tt.name) != want {
				t.Errorf("mode %s: %s passed = %v (env %q, passed %q), want %v", mode, tt.name, got, env, passed, want)
			}
		}
	}
}

func TestEnvPolicyEnviron(t *testing.T) {
	forced := []string{"PYTHONDONTWRITEBYTECODE=1", "PYTEST_ADDOPTS=-p no:cacheprovider"}
	tests := []struct {
		name       string
		policy     EnvPolicy
		environ    []string
		wantEnv    []string
		wantPassed []string
	}{
		{"empty mode is core", EnvPolicy{}, []string{"PATH=/bin", "FOO=1"},
			[]string{"PATH=/bin", "PYTEST_ADDOPTS=-p no:cacheprovider", "PYTHONDONTWRITEBYTECODE=1"}, []string{"PATH"}},
		{"sorted by name", EnvPolicy{Mode: EnvAll}, []string{"ZED=1", "PATH=/bin", "A_B=2", "AB=3"},
			[]string{"AB=3", "A_B=2", "PATH=/bin", "PYTEST_ADDOPTS=-p no:cacheprovider", "PYTHONDONTWRITEBYTECODE=1", "ZED=1"},
			[]string{"AB", "A_B", "PATH", "ZED"}},
		{"pass in core", EnvPolicy{Pass: []string{"DATABASE_URL", "FOO", "ABSENT"}}, []string{"DATABASE_URL=postgres://u:p@h/db", "FOO=1", "BAR=2"},
			[]string{"DATABASE_URL=postgres://u:p@h/db", "FOO=1", "PYTEST_ADDOPTS=-p no:cacheprovider", "PYTHONDONTWRITEBYTECODE=1"},
			[]string{"DATABASE_URL", "FOO"}},
		{"pass in all overrides a refusal", EnvPolicy{Mode: EnvAll, Pass: []string{"GH_PAT"}}, []string{"GH_PAT=ghp_x", "GH_TOKEN=t"},
			[]string{"GH_PAT=ghp_x", "PYTEST_ADDOPTS=-p no:cacheprovider", "PYTHONDONTWRITEBYTECODE=1"}, []string{"GH_PAT"}},
		{"pass matches exactly", EnvPolicy{Pass: []string{"gh_pat"}}, []string{"GH_PAT=ghp_x"}, forcedSorted(forced), []string{}},
		{"forced values replace inherited ones", EnvPolicy{Mode: EnvAll, Pass: []string{"PYTEST_ADDOPTS"}},
			[]string{"PYTHONDONTWRITEBYTECODE=0", "PYTEST_ADDOPTS=-x", "HOME=/h"},
			[]string{"HOME=/h", "PYTEST_ADDOPTS=-p no:cacheprovider", "PYTHONDONTWRITEBYTECODE=1"}, []string{"HOME"}},
		{"the last of duplicates wins", EnvPolicy{}, []string{"PATH=/a", "PATH=/b"},
			[]string{"PATH=/b", "PYTEST_ADDOPTS=-p no:cacheprovider", "PYTHONDONTWRITEBYTECODE=1"}, []string{"PATH"}},
		{"entries without a name or '=' dropped", EnvPolicy{Mode: EnvAll}, []string{"WEIRD", "=C:=x", "A=x=y"},
			[]string{"A=x=y", "PYTEST_ADDOPTS=-p no:cacheprovider", "PYTHONDONTWRITEBYTECODE=1"}, []string{"A"}},
		{"refusals look at the name only", EnvPolicy{Mode: EnvAll}, []string{"NOTE=my_TOKEN"},
			[]string{"NOTE=my_TOKEN", "PYTEST_ADDOPTS=-p no:cacheprovider", "PYTHONDONTWRITEBYTECODE=1"}, []string{"NOTE"}},
		{"a withheld value under any name, passed or not", EnvPolicy{Mode: EnvAll, Pass: []string{"GH_TOKEN", "X"}, Withhold: []string{"ghp_secret"}},
			[]string{"GH_TOKEN=ghp_secret", "X=ghp_secret", "NOTE=prefix-ghp_secret-suffix", "KEEP=1"},
			[]string{"KEEP=1", "PYTEST_ADDOPTS=-p no:cacheprovider", "PYTHONDONTWRITEBYTECODE=1"}, []string{"KEEP"}},
		{"an empty withheld value withholds nothing", EnvPolicy{Mode: EnvAll, Withhold: []string{""}}, []string{"A=1"},
			[]string{"A=1", "PYTEST_ADDOPTS=-p no:cacheprovider", "PYTHONDONTWRITEBYTECODE=1"}, []string{"A"}},
		{"nil environ", EnvPolicy{}, nil, forcedSorted(forced), []string{}},
		{"unknown mode is core", EnvPolicy{Mode: "everything"}, []string{"FOO=1"}, forcedSorted(forced), []string{}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			env, passed := tt.policy.Environ(tt.environ)
			if !slices.Equal(env, tt.wantEnv) || !slices.Equal(passed, tt.wantPassed) {
				t.Errorf("%+v.Environ(%q) = %q, %q; want %q, %q", tt.policy, tt.environ, env, passed, tt.wantEnv, tt.wantPassed)
			}
			if env == nil {
				t.Errorf("%+v.Environ(%q) = nil: os/exec would pass the whole environment on", tt.policy, tt.environ)
			}
			// The same variables in another order give the same result.
			reversed := slices.Clone(tt.environ)
			slices.Reverse(reversed)
			if !hasDuplicateNames(tt.environ) {
				if again, _ := tt.policy.Environ(reversed); !slices.Equal(again, env) {
					t.Errorf("%+v.Environ(%q) = %q, but %q in the other order", tt.policy, reversed, again, env)
				}
			}
		})
	}
}

func forcedSorted(forced []string) []string {
	s := slices.Clone(forced)
	slices.Sort(s)
	return s
}

func hasDuplicateNames(environ []string) bool {
	seen := map[string]bool{}
	for _, kv := range environ {
		name, _, _ := strings.Cut(kv, "=")
		if seen[name] {
			return true
		}
		seen[name] = true
	}
	return false
}

func TestParseEnvMode(t *testing.T) {
	tests := []struct {
		in, want, wantErr string
	}{
		{"core", EnvCore, ""},
		{"all", EnvAll, ""},
		{"", "", `unknown environment mode "": want "core"`},
		{"ALL", "", `unknown environment mode "ALL"`},
		{"none", "", `unknown environment mode "none"`},
	}
	for _, tt := range tests {
		got, err := ParseEnvMode(tt.in)
		if got != tt.want || (err == nil) != (tt.wantErr == "") || err != nil && !strings.Contains(err.Error(), tt.wantErr) {
			t.Errorf("ParseEnvMode(%q) = %q, %v; want %q, %q", tt.in, got, err, tt.want, tt.wantErr)
		}
	}
}

func TestSetEnv(t *testing.T) {
	env := []string{"A=1", "B=2", "AB=3"}
	got := SetEnv(env, "A=x", "C=y")
	if want := []string{"B=2", "AB=3", "A=x", "C=y"}; !slices.Equal(got, want) {
		t.Errorf("SetEnv = %q, want %q", got, want)
	}
	if !slices.Equal(env, []string{"A=1", "B=2", "AB=3"}) {
		t.Errorf("SetEnv changed its argument: %q", env)
	}
}
