package loop

import (
	"bytes"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/factory-harness/factory/internal/loop/tree"
	"github.com/factory-harness/factory/internal/proc"
)

func TestParseConfig(t *testing.T) {
	for _, tc := range []struct {
		name, in string
		want     []string
	}{
		{"template", configTemplate + "command = [\"agent\"]\n", nil},
		{"full", `max_attempts_default = 2
max_iterations = 7
iteration_timeout_secs = 60
executor_output_limit_bytes = 10
guard_output_limit_bytes = 20
[guard]
command = ["make", "test"]
pass_env = ["CI"]
[executor]
kind = "command"
command = ["agent", "--yes"]
pass_env = ["AGENT_TOKEN"]
`, nil},
		{"codex", "[executor]\nkind = \"codex\"\nmodel = \"gpt-5\"\n", nil},
		{"claude with a gateway", "[guard]\nsandbox = \"required\"\n[executor]\nkind = \"claude\"\nmodel = \"m\"\nbase_url = \"https://gw.example.com\"\napi_key_env = \"GW_KEY\"\n", nil},
		{"agent without a model", "[executor]\nkind = \"claude\"\n", []string{`executor.model: required when executor.kind is "claude": the model name the CLI is given`}},
		{"agent settings", "[executor]\nkind = \"codex\"\nmodel = \"m\"\nbase_url = \"ftp://h/v1\"\n", []string{`executor: codex invocation: base URL "ftp://h/v1" is not an absolute http or https URL`}},
		{"agent key variable", "[executor]\nkind = \"claude\"\nmodel = \"m\"\napi_key_env = \"MY-KEY\"\n", []string{`executor: claude invocation: API key variable "MY-KEY" is not a valid environment variable name`}},
		{"a key for a command", "[executor]\ncommand = [\"a\"]\nbase_url = \"http://h\"\napi_key_env = \"K\"\nsandbox = \"required\"\n", nil},
		{"a model for a command", "[executor]\ncommand = [\"a\"]\nmodel = \"m\"\n", []string{`executor.model: only for executor.kind "codex" or "claude"`}},
		{"a key without an endpoint", "[executor]\ncommand = [\"a\"]\napi_key_env = \"K\"\n", []string{`executor: kind "command" takes base_url and api_key_env together: the key reaches the command only through the runner's proxy to base_url`}},
		{"a bad endpoint", "[executor]\ncommand = [\"a\"]\napi_key_env = \"K\"\nbase_url = \"h:80\"\n", []string{`executor: base_url: key proxy: upstream "h:80" is not an absolute http or https URL without credentials`}},
		{"the key passed on", "[executor]\nkind = \"codex\"\nmodel = \"m\"\npass_env = [\"OPENAI_API_KEY\"]\n", []string{`executor.pass_env: OPENAI_API_KEY is the API key variable: the agent gets a stand-in key, never the key itself`}},
		{"bad executor sandbox", "[executor]\ncommand = [\"a\"]\nsandbox = \"yes\"\n", []string{`executor.sandbox: unknown sandbox mode "yes": want "auto" (confine when the machine can, else warn), "required" (refuse to run unconfined) or "off" (no confinement)`}},
		{"bad sandbox", "[guard]\nsandbox = \"maybe\"\n[executor]\ncommand = [\"a\"]\n", []string{`guard.sandbox: unknown sandbox mode "maybe": want "auto" (confine when the machine can, else warn), "required" (refuse to run unconfined) or "off" (no confinement)`}},
		{"unknown keys", "max_iteration = 3\n[guard]\ncmd = [\"x\"]\n[executor]\ncommand = [\"a\"]\n", []string{"guard.cmd: unknown key", "max_iteration: unknown key"}},
		{"a key in another case that breaks decoding", "Guard = 5\n[executor]\ncommand = [\"a\"]\n", []string{"Guard: unknown key"}},
		{"a key in another case", "[executor]\ncommand = [\"a\"]\nCommand = []\nmax_iterations = 0\n", []string{"executor.Command: unknown key", "executor.max_iterations: unknown key"}},
		{"out of range", "max_iterations = 0\n[executor]\ncommand = [\"a\"]\n", []string{"max_iterations: 0 is out of range [1, 100000]"}},
		{"missing command", "", []string{`executor.command: required when executor.kind is "command": the argv of the agent program (the prompt arrives on stdin)`}},
		{"bad kind", "[executor]\nkind = \"aider\"\n", []string{`executor.kind: "aider" is not one of "command", "codex", "claude"`}},
		{"empty guard", "[guard]\ncommand = []\n[executor]\ncommand = [\"a\"]\n", []string{`guard.command: must be a non-empty argv such as ["just", "ci"]`}},
		{"wrong type", "max_iterations = \"ten\"\n", []string{"toml: line 1 (last key \"max_iterations\"): incompatible types: TOML value has type string; destination has type integer"}},
		{"syntax", "max_iterations = \n", []string{"line 1: expected value but found '\\n' instead"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, got := ParseConfig([]byte(tc.in))
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("problems (-want +got):\n%s", diff)
			}
		})
	}
	c, _ := ParseConfig(nil)
	if c.MaxAttemptsDefault != 3 || c.MaxIterations != 50 || c.IterationTimeoutSecs != 1800 || c.ExecutorOutputLimitBytes != 100000 ||
		c.GuardOutputLimitBytes != 100000 || !slicesEqual(c.Guard.Command, []string{"just", "ci"}) || c.Guard.Sandbox != "auto" || c.Executor.Kind != KindCommand || c.Executor.Sandbox != "auto" {
		t.Errorf("defaults = %+v", c)
	}
}

func slicesEqual(a, b []string) bool { return strings.Join(a, "\x00") == strings.Join(b, "\x00") }

func TestNewExecutor(t *testing.T) {
	e, err := NewExecutor(ExecutorConfig{Kind: KindCommand, Command: []string{"agent", "-y"}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	cmd, err := e.Command(Invocation{PromptFile: "/p/prompt.md"})
	if err != nil || !slicesEqual(cmd.Argv, []string{"agent", "-y"}) || cmd.Stdin != "/p/prompt.md" {
		t.Errorf("command executor = %+v, %v", cmd, err)
	}

	// The agent CLIs, "installed" as empty files where scripts/install-agent-clis.sh puts them.
	dir := t.TempDir()
	for _, name := range []string{"codex", "claude"} {
		bin := filepath.Join(dir, "node_modules", ".bin", name)
		if err := os.MkdirAll(filepath.Dir(bin), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(bin, nil, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	environ := []string{"PATH=/usr/bin:/bin", "HOME=/home/user", "FACTORY_AGENT_CLIS=" + dir, "MY_KEY=sk-mine", "GH_TOKEN=ghp_secret"}
	inv := Invocation{PromptFile: "/p/prompt.md", Prompt: []byte("Do it.\n"), Home: "/tmp/agent-home", Model: "m1"}
	for _, tc := range []struct {
		cfg     ExecutorConfig
		argv    []string
		env     []string // entries the environment must hold
		wantErr string
	}{
		{cfg: ExecutorConfig{Kind: KindCodex, Model: "m1", BaseURL: "http://127.0.0.1:9/v1", APIKeyEnv: "MY_KEY"},
			argv: []string{filepath.Join(dir, "node_modules/.bin/codex"), "exec", "--sandbox", "workspace-write", "--skip-git-repo-check", "-m", "m1",
				"-c", "model_provider=factory", "-c", `model_providers.factory={name="factory",base_url="http://127.0.0.1:9/v1",env_key="MY_KEY",wire_api="responses"}`,
				"-c", `shell_environment_policy.exclude=["MY_KEY"]`},
			env: []string{"CODEX_HOME=/tmp/agent-home", "HOME=/tmp/agent-home", "MY_KEY=sk-mine"}},
		{cfg: ExecutorConfig{Kind: KindClaude, Model: "m1", APIKeyEnv: "MY_KEY"},
			argv: []string{filepath.Join(dir, "node_modules/.bin/claude"), "-p", "--dangerously-skip-permissions", "--model", "m1"},
			env:  []string{"ANTHROPIC_API_KEY=sk-mine", "HOME=/tmp/agent-home", "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1"}},
		{cfg: ExecutorConfig{Kind: KindCodex, Model: "m1"}, wantErr: "codex invocation: API key variable OPENAI_API_KEY is not set or empty"},
		{cfg: ExecutorConfig{Kind: KindClaude, Model: "m1"}, wantErr: "claude invocation: API key variable ANTHROPIC_API_KEY is not set or empty"},
	} {
		t.Run(tc.cfg.Kind+" "+tc.cfg.APIKeyEnv, func(t *testing.T) {
			e, err := NewExecutor(tc.cfg, environ)
			if tc.wantErr != "" {
				if err == nil || err.Error() != tc.wantErr {
					t.Fatalf("NewExecutor = %v, want %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			cmd, err := e.Command(inv)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.argv, cmd.Argv); diff != "" {
				t.Errorf("argv (-want +got):\n%s", diff)
			}
			for _, kv := range tc.env {
				if !slices.Contains(cmd.Env, kv) {
					t.Errorf("env lacks %s: %q", kv, cmd.Env)
				}
			}
			if strings.Contains(strings.Join(cmd.Env, "\n"), "ghp_secret") || cmd.Stdin != "/p/prompt.md" {
				t.Errorf("env %q, stdin %q: want no GH_TOKEN and the prompt file", cmd.Env, cmd.Stdin)
			}
		})
	}
	if !proc.Found("codex") {
		_, err := NewExecutor(ExecutorConfig{Kind: KindCodex, Model: "m1"}, []string{"FACTORY_AGENT_CLIS=" + t.TempDir()})
		if err == nil || !strings.Contains(err.Error(), "codex is neither in the install directory") {
			t.Errorf("NewExecutor without codex = %v", err)
		}
	}
}

func TestGoalSummary(t *testing.T) {
	for _, tc := range []struct{ in, title, goal string }{
		{"# Build calc\n\nA calculator\nwith add.\n\nMore.\n", "Build calc", "A calculator with add."},
		{"Plain first line\nsecond line\n", "Plain first line", "second line"},
		{"\n\n## Title\n## Sub\ntext\n# Next\n", "Title", "text"},
		{"# Only a title\n", "Only a title", ""},
	} {
		title, goal := goalSummary(tc.in)
		if title != tc.title || goal != tc.goal {
			t.Errorf("goalSummary(%q) = %q, %q; want %q, %q", tc.in, title, goal, tc.title, tc.goal)
		}
	}
}

func promptFixture() promptInput {
	root := &tree.Node{ID: "root", Title: "Root", Goal: "g", MaxAttempts: 3, Children: []*tree.Node{
		{ID: "b", Order: 1, Title: "B", Goal: "g", MaxAttempts: 3},
		{ID: "a", Order: 0, Title: "A", Goal: "g", MaxAttempts: 3, Passes: true},
	}}
	return promptInput{
		RunID: "r", Iteration: 2, Guard: []string{"just", "ci"}, Goal: "# G\n\ngoal\n",
		Memory: map[string]string{AssumptionPath: strings.Repeat("é", memoryMax)},
		Tree:   root, Selection: tree.Select(root),
	}
}

func TestPromptPackStableAndBounded(t *testing.T) {
	a, b := buildPrompt(promptFixture()), buildPrompt(promptFixture())
	if !bytes.Equal(a, b) {
		t.Fatal("identical inputs gave different prompt packs")
	}
	s := string(a)
	order := []string{"## 1. Runner contract", "## 2. Goal (.runner/GOAL.md)", "## 3. Selected leaf: root/b (attempts 0/3)",
		"## 4. The rest of the tree", "- [pass] a: A", "- [open] b: B (attempts 0/3)  <- selected", "## 5. Memory",
		"### .runner/ASSUMPTIONS.md", "[... truncated by factory loop: 16384 of 32768 bytes shown]", "### .runner/IMPROVEMENTS.md",
		"## 6. Guard contract", `["just", "ci"]`}
	at := 0
	for _, part := range order {
		i := strings.Index(s[at:], part)
		if i < 0 {
			t.Fatalf("prompt lacks %q after byte %d:\n%s", part, at, s)
		}
		at += i
	}
	if !strings.Contains(s, strings.Repeat("é", memoryMax/2)+"\n[") {
		t.Error("the memory file was not cut at a character boundary")
	}

	in := promptFixture()
	in.Repair, in.Problems, in.Invalid = true, []string{"/: invalid JSON"}, []byte("{broken")
	r := string(buildPrompt(in))
	for _, part := range []string{"REPAIR TREE", "- /: invalid JSON", "{broken", "No guard runs"} {
		if !strings.Contains(r, part) {
			t.Errorf("repair prompt lacks %q", part)
		}
	}
	if strings.Contains(r, "Selected leaf") {
		t.Error("repair prompt selects a leaf")
	}
}

func TestEnsureIgnored(t *testing.T) {
	long := strings.Repeat("x", 100<<10) + "\n"
	for _, tc := range []struct {
		name, before, after string
	}{
		{"no .gitignore", "", "# factory loop: local iteration logs\n" + gitignoreEntry + "\n"},
		{"already named", "*.pyc\n" + gitignoreEntry + "\n", ""},
		{"named another way", IterationsDir + "\n", ""},
		{"named after a line over 64 KiB", long + gitignoreEntry + "\n", ""},
		{"no final newline", "*.pyc", "*.pyc\n# factory loop: local iteration logs\n" + gitignoreEntry + "\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			root := t.TempDir()
			p := filepath.Join(root, ".gitignore")
			if tc.before != "" {
				if err := os.WriteFile(p, []byte(tc.before), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			added, err := ensureIgnored(root)
			if err != nil {
				t.Fatal(err)
			}
			if added != (tc.after != "") {
				t.Errorf("ensureIgnored = %v, want %v", added, tc.after != "")
			}
			got, _ := os.ReadFile(p)
			want := tc.after
			if want == "" {
				want = tc.before
			}
			if string(got) != want {
				t.Errorf(".gitignore = %.80q, want %.80q", got, want)
			}
		})
	}
}
