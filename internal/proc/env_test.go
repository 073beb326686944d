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
