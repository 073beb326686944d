package proc

import (
	"slices"
	"testing"
)

func TestSafeEnv(t *testing.T) {
	tests := []struct {
		name    string
		environ []string
		want    []string
	}{
		{"keeps ordinary variables in order", []string{"PATH=/bin", "HOME=/root", "LANG=C"}, []string{"PATH=/bin", "HOME=/root", "LANG=C"}},
		{"drops secret suffixes", []string{"A_API_KEY=1", "GITHUB_TOKEN=2", "APP_SECRET=3", "DB_PASSWORD=4", "KEEP=5"}, []string{"KEEP=5"}},
		{"suffixes ignore case", []string{"my_api_key=1", "Gh_Token=2", "x_secret=3", "y_Password=4"}, []string{}},
		{"drops provider prefixes", []string{"OPENAI_BASE_URL=u", "ANTHROPIC_MODEL=m", "openai_org=o", "OPENAIX=keep"}, []string{"OPENAIX=keep"}},
		{"matches the name only", []string{"NOTE=my_TOKEN", "TOKEN=bare", "TOKENS_USED=3"}, []string{"NOTE=my_TOKEN", "TOKEN=bare", "TOKENS_USED=3"}},
		{"entry without '='", []string{"WEIRD", "X_TOKEN"}, []string{"WEIRD"}},
		{"nil", nil, []string{}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := SafeEnv(tt.environ)
			if !slices.Equal(got, tt.want) {
				t.Errorf("SafeEnv(%q) = %q, want %q", tt.environ, got, tt.want)
			}
			// A nil result would make os/exec pass the unfiltered environment on.
			if got == nil {
				t.Errorf("SafeEnv(%q) = nil, want a non-nil slice", tt.environ)
			}
		})
	}
}

// TestSafeEnvNames checks the rule name by name, both ways.
func TestSafeEnvNames(t *testing.T) {
	dropped := []string{
		// Real credentials the first rule missed.
		"AWS_SECRET_ACCESS_KEY", "AWS_ACCESS_KEY_ID", "AWS_SESSION_TOKEN", "PGPASSWORD", "AZURE_OPENAI_KEY",
		"MY_SECRET_KEY", "DB_PASS", "GH_TOKEN", "GITHUB_TOKEN", "NPM_TOKEN", "GOOGLE_APPLICATION_CREDENTIALS",
		// Each part of the rule.
		"STRIPE_KEY", "SSH_PRIVATE_KEY", "OPENAI_API_KEY", "MINIO_KEY_ID", "HF_TOKEN", "SMTP_PASS", "FTP_PASSWD",
		"SECRET", "CLIENT_SECRET_VALUE", "PASSWORD", "MYSQL_ROOT_PASSWORD_FILE", "CREDENTIALS", "AWS_SHARED_CREDENTIALS_FILE",
		"OPENAI_BASE_URL", "OPENAI_ORG_ID", "ANTHROPIC_MODEL",
		// Case does not matter.
		"aws_secret_access_key", "Gh_Token", "pgpassword", "Db_Pass", "openai_base_url", "google_application_credentials",
	}
	kept := []string{
		"PATH", "HOME", "LANG", "LC_ALL", "TERM", "USER", "SHELL", "TMPDIR", "PWD",
		"PYTHONPATH", "VIRTUAL_ENV", "PYTHONHASHSEED", "GOPATH", "GOCACHE", "GOFLAGS", "NODE_PATH", "JAVA_HOME",
		// Near misses: KEY, TOKEN, PASS or a prefix elsewhere in the name.
		"KEYBOARD", "KEY", "KEYMAP", "XKB_KEYMAP", "KEY_FILE_DIR", "MONKEY_KEYS", "TOKEN", "TOKENS_USED",
		"TOKENIZERS_PARALLELISM", "PASS", "PASSTHROUGH", "BYPASS_CACHE", "COMPASS", "SSH_KEYS_DIR",
		"OPENAI", "OPENAIX", "ANTHROPIC", "MY_OPENAI_ORG",
	}
	for _, name := range dropped {
		if got := SafeEnv([]string{name + "=v"}); len(got) != 0 {
			t.Errorf("SafeEnv kept %s, want it dropped", name)
		}
	}
	for _, name := range kept {
		if got := SafeEnv([]string{name + "=v"}); len(got) != 1 {
			t.Errorf("SafeEnv dropped %s, want it kept", name)
		}
	}
}
