package agentcli

import (
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// environ is a caller's environment with the variables an agent needs, credentials it must not see,
// and provider settings that must not leak into it.
var environ = []string{
	"PATH=/usr/local/bin:/usr/bin:/bin",
	"HOME=/home/user",
	"LANG=C.UTF-8",
	"LC_ALL=C.UTF-8",
	"TERM=xterm",
	"GH_TOKEN=ghp_secret",
	"AWS_SECRET_ACCESS_KEY=aws_secret",
	"OPENAI_API_KEY=sk-openai",
	"OPENAI_BASE_URL=http://evil.invalid/v1",
	"ANTHROPIC_API_KEY=sk-ant-inherited",
	"ANTHROPIC_BASE_URL=http://evil.invalid",
	"CODEX_HOME=/home/user/.codex",
	"MY_KEY=sk-mine",
	"EMPTY_KEY=",
}

// coreEnv is what every invocation passes of environ, with home as HOME: proc's core variables and
// the variables proc forces for every command.
func coreEnv(home string) []string {
	return []string{
		"HOME=" + home, "LANG=C.UTF-8", "LC_ALL=C.UTF-8", "PATH=/usr/local/bin:/usr/bin:/bin",
		"PYTEST_ADDOPTS=-p no:cacheprovider", "PYTHONDONTWRITEBYTECODE=1", "TERM=xterm",
	}
}

// with returns env plus more, sorted as an Invocation's Env is.
func with(env []string, more ...string) []string {
	out := append(slices.Clone(env), more...)
	slices.Sort(out)
	return out
}

const home = "/var/lib/factory/agent-home"

func TestCodex(t *testing.T) {
	prompt := []byte("Do the task.\n")
	base := CodexConfig{Model: "gpt-5.1-codex", Home: home, Prompt: prompt, Environ: environ}
	execArgv := []string{"codex", "exec", "--sandbox", "workspace-write", "--skip-git-repo-check", "-m", "gpt-5.1-codex"}
	tests := []struct {
		name string
		edit func(*CodexConfig)
		argv []string
		env  []string
	}{
		{"default provider with a stored login", func(c *CodexConfig) {}, execArgv,
			with(coreEnv(home), "CODEX_HOME="+home)},
		{"default provider with an API key", func(c *CodexConfig) { c.APIKeyEnv = "OPENAI_API_KEY" },
			append(execArgv, "-c", `shell_environment_policy.exclude=["CODEX_API_KEY"]`),
			with(coreEnv(home), "CODEX_HOME="+home, "CODEX_API_KEY=sk-openai")},
		{"confined by factory", func(c *CodexConfig) { c.Confined = true },
			[]string{"codex", "exec", "--sandbox", "danger-full-access", "--skip-git-repo-check", "-m", "gpt-5.1-codex"},
			with(coreEnv(home), "CODEX_HOME="+home)},
		{"explicit binary", func(c *CodexConfig) { c.Binary = "/opt/clis/node_modules/.bin/codex" },
			append([]string{"/opt/clis/node_modules/.bin/codex"}, execArgv[1:]...),
			with(coreEnv(home), "CODEX_HOME="+home)},
		{"custom provider", func(c *CodexConfig) { c.BaseURL, c.APIKeyEnv = "http://127.0.0.1:8080/v1", "MY_KEY" },
			append(execArgv, "-c", "model_provider=factory",
				"-c", `model_providers.factory={name="factory",base_url="http://127.0.0.1:8080/v1",env_key="MY_KEY",wire_api="responses"}`,
				"-c", `shell_environment_policy.exclude=["MY_KEY"]`),
			with(coreEnv(home), "CODEX_HOME="+home, "MY_KEY=sk-mine")},
		{"custom provider id", func(c *CodexConfig) {
			c.BaseURL, c.APIKeyEnv, c.ProviderID = "https://llm.example.com/openai/v1", "MY_KEY", "my-gateway_2"
		},
			append(execArgv, "-c", "model_provider=my-gateway_2",
				"-c", `model_providers.my-gateway_2={name="my-gateway_2",base_url="https://llm.example.com/openai/v1",env_key="MY_KEY",wire_api="responses"}`,
				"-c", `shell_environment_policy.exclude=["MY_KEY"]`),
			with(coreEnv(home), "CODEX_HOME="+home, "MY_KEY=sk-mine")},
		{"base URL quoted for TOML", func(c *CodexConfig) { c.BaseURL, c.APIKeyEnv = `http://h/v1?q="a"\b`, "MY_KEY" },
			append(execArgv, "-c", "model_provider=factory",
				"-c", `model_providers.factory={name="factory",base_url="http://h/v1?q=\"a\"\\b",env_key="MY_KEY",wire_api="responses"}`,
				"-c", `shell_environment_policy.exclude=["MY_KEY"]`),
			with(coreEnv(home), "CODEX_HOME="+home, "MY_KEY=sk-mine")},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := base
			tt.edit(&cfg)
			inv, err := Codex(cfg)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.argv, inv.Argv); diff != "" {
				t.Errorf("argv (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tt.env, inv.Env); diff != "" {
				t.Errorf("env (-want +got):\n%s", diff)
			}
			if string(inv.Stdin) != string(prompt) {
				t.Errorf("stdin = %q, want the prompt %q", inv.Stdin, prompt)
			}
		})
	}
}

func TestCodexRefuses(t *testing.T) {
	base := CodexConfig{Model: "m", Home: home, Prompt: []byte("p"), Environ: environ}
	custom := func(c *CodexConfig) { c.BaseURL, c.APIKeyEnv = "http://127.0.0.1:1/v1", "MY_KEY" }
	tests := []struct {
		name    string
		edit    func(*CodexConfig)
		wantErr string
	}{
		{"no model", func(c *CodexConfig) { c.Model = "" }, "the model is empty"},
		{"model read as an option", func(c *CodexConfig) { c.Model = "--yolo" }, "starts with '-'"},
		{"model with a space", func(c *CodexConfig) { c.Model = "gpt 5" }, "white space"},
		{"no home", func(c *CodexConfig) { c.Home = "" }, "home directory is empty"},
		{"relative home", func(c *CodexConfig) { c.Home = "tmp/home" }, "not an absolute path"},
		{"no prompt", func(c *CodexConfig) { c.Prompt = nil }, "the prompt is empty"},
		{"bad key variable name", func(c *CodexConfig) { c.APIKeyEnv = "MY-KEY" }, "not a valid environment variable name"},
		{"key variable unset", func(c *CodexConfig) { c.APIKeyEnv = "NO_SUCH_KEY" }, "NO_SUCH_KEY is not set or empty"},
		{"key variable empty", func(c *CodexConfig) { custom(c); c.APIKeyEnv = "EMPTY_KEY" }, "EMPTY_KEY is not set or empty"},
		{"base URL without a scheme", func(c *CodexConfig) { custom(c); c.BaseURL = "127.0.0.1:8080/v1" }, "does not parse"},
		{"base URL relative", func(c *CodexConfig) { custom(c); c.BaseURL = "/v1" }, "not an absolute http or https URL"},
		{"base URL of another scheme", func(c *CodexConfig) { custom(c); c.BaseURL = "ftp://h/v1" }, "not an absolute http or https URL"},
		{"base URL without a host", func(c *CodexConfig) { custom(c); c.BaseURL = "http:///v1" }, "not an absolute http or https URL"},
		{"base URL with a control character", func(c *CodexConfig) { custom(c); c.BaseURL = "http://h/\n" }, "does not parse"},
		{"base URL without a key variable", func(c *CodexConfig) { custom(c); c.APIKeyEnv = "" }, "needs the name of the API key variable"},
		{"key variable the CLI needs", func(c *CodexConfig) { custom(c); c.APIKeyEnv = "PATH" }, "one the CLI needs for itself"},
		{"key variable CODEX_HOME", func(c *CodexConfig) { custom(c); c.APIKeyEnv = "CODEX_HOME" }, "one the CLI needs for itself"},
		{"provider id with a dot", func(c *CodexConfig) { custom(c); c.ProviderID = "a.b" }, "provider id \"a.b\""},
		{"provider id with a quote", func(c *CodexConfig) { custom(c); c.ProviderID = `a"b` }, "provider id"},
		{"provider id in upper case", func(c *CodexConfig) { custom(c); c.ProviderID = "Factory" }, "provider id"},
		{"provider id without a base URL", func(c *CodexConfig) { c.ProviderID = "factory" }, "without a base URL"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := base
			tt.edit(&cfg)
			inv, err := Codex(cfg)
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) || !strings.HasPrefix(err.Error(), "codex invocation: ") {
				t.Fatalf("Codex() = %+v, %v; want an error containing %q", inv, err, tt.wantErr)
			}
		})
	}
}

func TestClaude(t *testing.T) {
	prompt := []byte("Do the task.\n")
	base := ClaudeConfig{Model: "claude-sonnet-4-5", APIKeyEnv: "MY_KEY", Home: home, Prompt: prompt, Environ: environ}
	argv := []string{"claude", "-p", "--dangerously-skip-permissions", "--model", "claude-sonnet-4-5"}
	env := with(coreEnv(home), "ANTHROPIC_API_KEY=sk-mine", "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1")
	tests := []struct {
		name string
		edit func(*ClaudeConfig)
		argv []string
		env  []string
	}{
		// The inherited ANTHROPIC_BASE_URL and ANTHROPIC_API_KEY must not reach it.
		{"Anthropic's API", func(c *ClaudeConfig) {}, argv, env},
		{"base URL", func(c *ClaudeConfig) { c.BaseURL = "http://127.0.0.1:8080" }, argv,
			with(env, "ANTHROPIC_BASE_URL=http://127.0.0.1:8080")},
		{"as root", func(c *ClaudeConfig) { c.AsRoot = true }, argv, with(env, "IS_SANDBOX=1")},
		{"explicit binary", func(c *ClaudeConfig) { c.Binary = "/opt/clis/node_modules/.bin/claude" },
			append([]string{"/opt/clis/node_modules/.bin/claude"}, argv[1:]...), env},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := base
			tt.edit(&cfg)
			inv, err := Claude(cfg)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.argv, inv.Argv); diff != "" {
				t.Errorf("argv (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tt.env, inv.Env); diff != "" {
				t.Errorf("env (-want +got):\n%s", diff)
			}
			if string(inv.Stdin) != string(prompt) {
				t.Errorf("stdin = %q, want the prompt %q", inv.Stdin, prompt)
			}
		})
	}
}

func TestClaudeRefuses(t *testing.T) {
	base := ClaudeConfig{Model: "m", APIKeyEnv: "MY_KEY", Home: home, Prompt: []byte("p"), Environ: environ}
	tests := []struct {
		name    string
		edit    func(*ClaudeConfig)
		wantErr string
	}{
		{"no model", func(c *ClaudeConfig) { c.Model = "" }, "the model is empty"},
		{"model read as an option", func(c *ClaudeConfig) { c.Model = "-p" }, "starts with '-'"},
		{"relative home", func(c *ClaudeConfig) { c.Home = "home" }, "not an absolute path"},
		{"no prompt", func(c *ClaudeConfig) { c.Prompt = []byte{} }, "the prompt is empty"},
		{"no key variable", func(c *ClaudeConfig) { c.APIKeyEnv = "" }, "no stored login"},
		{"key variable unset", func(c *ClaudeConfig) { c.APIKeyEnv = "NO_SUCH_KEY" }, "NO_SUCH_KEY is not set or empty"},
		{"bad base URL", func(c *ClaudeConfig) { c.BaseURL = "localhost:8080" }, "not an absolute http or https URL"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := base
			tt.edit(&cfg)
			inv, err := Claude(cfg)
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) || !strings.HasPrefix(err.Error(), "claude invocation: ") {
				t.Fatalf("Claude() = %+v, %v; want an error containing %q", inv, err, tt.wantErr)
			}
		})
	}
}

func TestTOMLString(t *testing.T) {
	tests := []struct{ in, want string }{
		{"plain", `"plain"`},
		{`a"b\c`, `"a\"b\\c"`},
		{"tab\tnl\ndel\x7f", `"tab\u0009nl\u000Adel\u007F"`},
		{"ünïcode ✓", `"ünïcode ✓"`},
		{"", `""`},
	}
	for _, tt := range tests {
		got, err := tomlString(tt.in)
		if err != nil || got != tt.want {
			t.Errorf("tomlString(%q) = %s, %v; want %s", tt.in, got, err, tt.want)
		}
	}
	if got, err := tomlString("bad \xff utf-8"); err == nil {
		t.Errorf("tomlString(invalid UTF-8) = %s, want an error", got)
	}
}

func TestInstallDir(t *testing.T) {
	env := func(vars map[string]string) func(string) string { return func(k string) string { return vars[k] } }
	tests := []struct {
		name string
		vars map[string]string
		want string
	}{
		{"explicit", map[string]string{"FACTORY_AGENT_CLIS": "/opt/clis", "HOME": "/home/u"}, "/opt/clis"},
		{"under HOME", map[string]string{"HOME": "/home/u"}, "/home/u/.cache/factory/agent-clis"},
		{"neither", map[string]string{}, ""},
	}
	for _, tt := range tests {
		if got := InstallDir(env(tt.vars)); got != tt.want {
			t.Errorf("%s: InstallDir = %q, want %q", tt.name, got, tt.want)
		}
	}
	if got, want := InstalledBinary("/opt/clis", "codex"), "/opt/clis/node_modules/.bin/codex"; got != want {
		t.Errorf("InstalledBinary = %q, want %q", got, want)
	}
}
