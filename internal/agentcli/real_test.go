package agentcli_test

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/factory-harness/factory/internal/agentcli"
	"github.com/factory-harness/factory/internal/agentcli/agentclitest"
	"github.com/factory-harness/factory/internal/proc"
)

// agentTimeout bounds one CLI run; a scripted session takes seconds.
const agentTimeout = 2 * time.Minute

// installedCLI returns the installed binary name ("codex" or "claude"), or skips the test saying why.
func installedCLI(t *testing.T, name string) string {
	t.Helper()
	if !proc.Found("node") {
		t.Skip("node is not on PATH: the agent CLIs are npm packages (see scripts/install-agent-clis.sh)")
	}
	dir := agentcli.InstallDir(os.Getenv)
	bin := agentcli.InstalledBinary(dir, name)
	if _, err := os.Stat(bin); err != nil {
		t.Skipf("%s is not installed in %s (run scripts/install-agent-clis.sh, or set FACTORY_AGENT_CLIS): %v", name, dir, err)
	}
	return bin
}

// git runs git in dir and returns its trimmed output.
func git(t *testing.T, dir string, args ...string) string {
	t.Helper()
	out, err := proc.Output(context.Background(), dir, append([]string{"git"}, args...), gitEnv())
	if err != nil {
		t.Fatal(err)
	}
	return strings.TrimSpace(string(out))
}

// gitEnv pins identity and dates, and keeps the user's git config out.
func gitEnv() []string {
	env, _ := proc.EnvPolicy{}.Environ(os.Environ())
	return append(env, "GIT_CONFIG_GLOBAL=/dev/null", "GIT_CONFIG_NOSYSTEM=1",
		"GIT_AUTHOR_DATE=2024-01-01T00:00:00Z", "GIT_COMMITTER_DATE=2024-01-01T00:00:00Z")
}

// newRepo creates a git repository with one commit and a fixed identity in its own config, which the
// agent's git also reads.
func newRepo(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	git(t, dir, "init", "-q", "-b", "work")
	git(t, dir, "config", "user.name", "Test Agent")
	git(t, dir, "config", "user.email", "agent@test.invalid")
	if err := os.WriteFile(filepath.Join(dir, "README.md"), []byte("demo\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	git(t, dir, "add", "README.md")
	git(t, dir, "commit", "-q", "-m", "initial")
	return dir
}

// runInvocation runs inv in dir through proc, as a loop executor would, and returns the result and
// the combined output.
func runInvocation(t *testing.T, inv agentcli.Invocation, dir string) (proc.Result, string) {
	t.Helper()
	work := t.TempDir()
	prompt := filepath.Join(work, "prompt.md")
	if err := os.WriteFile(prompt, inv.Stdin, 0o644); err != nil {
		t.Fatal(err)
	}
	logPath := filepath.Join(work, "executor.log")
	res := proc.Run(context.Background(), proc.Spec{
		Argv: inv.Argv, Dir: dir, Env: inv.Env, StdinFile: prompt, Timeout: agentTimeout,
		Stdout: logPath, Stderr: logPath, MaxOutputBytes: proc.DefaultMaxOutputBytes,
	})
	out, err := os.ReadFile(logPath)
	if err != nil {
		t.Fatal(err)
	}
	return res, string(out)
}

// promptMarker is in every test prompt, to check that the prompt reached the model.
const promptMarker = "factory-prompt-marker-4f1c"

// agent is one real CLI, set up against a scripted model server.
type agent struct {
	name  string // the installed binary: "codex" or "claude"
	start func(t *testing.T, bin string, script []agentclitest.Turn) (*agentclitest.Server, agentcli.Invocation)
	// commits says whether the agent can commit: Codex's sandbox keeps .git read-only, Claude Code
	// has no sandbox.
	commits bool
	// keyVisible says whether the commands the agent runs see the CLI's own API key. Codex is told not
	// to pass it on; Claude Code passes it (a known gap, see docs/agent-clis.md). The test pins both
	// down so a change is noticed.
	keyVisible bool
}

// testKey is the API key variable the tests set; the scripted servers accept any key.
const (
	testKey      = "FACTORY_AGENTCLI_TEST_KEY"
	testKeyValue = "test-key-value"
)

// decoys are credentials in the caller's environment that must reach neither CLI.
var decoys = []string{"GH_TOKEN=ghp_decoy_secret", "OPENAI_API_KEY=sk-decoy-openai", "ANTHROPIC_API_KEY=sk-decoy-anthropic"}

// testEnviron is the caller's environment the tests give the builders.
func testEnviron() []string {
	return append(append(os.Environ(), decoys...), testKey+"="+testKeyValue)
}

var agents = []agent{
	{name: "codex", start: func(t *testing.T, bin string, script []agentclitest.Turn) (*agentclitest.Server, agentcli.Invocation) {
		srv := agentclitest.NewCodex(t, script...)
		inv, err := agentcli.Codex(agentcli.CodexConfig{
			Binary: bin, Model: "scripted-model", BaseURL: srv.BaseURL, APIKeyEnv: testKey, Home: t.TempDir(),
			Prompt: []byte("Do the task. " + promptMarker + "\n"), Environ: testEnviron(),
		})
		if err != nil {
			t.Fatal(err)
		}
		return srv, inv
	}},
	{name: "claude", commits: true, keyVisible: true, start: func(t *testing.T, bin string, script []agentclitest.Turn) (*agentclitest.Server, agentcli.Invocation) {
		srv := agentclitest.NewClaude(t, script...)
		inv, err := agentcli.Claude(agentcli.ClaudeConfig{
			Binary: bin, Model: "scripted-model", BaseURL: srv.BaseURL, APIKeyEnv: testKey, Home: t.TempDir(),
			Prompt: []byte("Do the task. " + promptMarker + "\n"), Environ: testEnviron(), AsRoot: os.Geteuid() == 0,
		})
		if err != nil {
			t.Fatal(err)
		}
		return srv, inv
	}},
}

// session is one finished run of a real CLI in a fresh repository.
type session struct {
	repo string
	srv  *agentclitest.Server
	inv  agentcli.Invocation
	res  proc.Result
	out  string // stdout and stderr
}

// run runs one scripted session of a in a fresh repository and checks what every session must do:
// exit 0 in time, serve every turn, make no unexpected request, and send the prompt.
func (a agent) run(t *testing.T, script ...agentclitest.Turn) session {
	t.Helper()
	bin := installedCLI(t, a.name)
	s := session{repo: newRepo(t)}
	s.srv, s.inv = a.start(t, bin, script)
	s.res, s.out = runInvocation(t, s.inv, s.repo)
	t.Logf("%s took %v for %d model requests", a.name, s.res.Duration.Round(time.Millisecond), len(s.srv.Requests()))
	if s.res.ExitCode != 0 || s.res.Err != "" {
		t.Fatalf("%s: %+v\noutput:\n%s\nrequests:\n%s", a.name, s.res, s.out, s.srv.Summary())
	}
	if s.srv.Served() != len(script) || len(s.srv.Unexpected()) > 0 {
		t.Errorf("%s: served %d of %d turns, %d unexpected requests:\n%s", a.name, s.srv.Served(), len(script), len(s.srv.Unexpected()), s.srv.Summary())
	}
	if turns := s.srv.Turns(); len(turns) == 0 || !bytes.Contains(turns[0].Body, []byte(promptMarker)) {
		t.Errorf("%s: the first model request does not carry the prompt\nrequests:\n%s", a.name, s.srv.Summary())
	}
	return s
}

// afterTurn returns the body of the request that followed turn i: it carries the results of that
// turn's tool calls.
func (s session) afterTurn(t *testing.T, i int) string {
	t.Helper()
	turns := s.srv.Turns()
	if len(turns) <= i+1 {
		t.Fatalf("no request after turn %d:\n%s", i, s.srv.Summary())
	}
	return string(turns[i+1].Body)
}

func readFile(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// TestRealCLIOneTurn times a session whose only reply is the final answer: the CLI's own overhead.
func TestRealCLIOneTurn(t *testing.T) {
	const answer = "scripted final answer"
	for _, a := range agents {
		t.Run(a.name, func(t *testing.T) {
			s := a.run(t, agentclitest.Turn{agentclitest.Say(answer)})
			if !strings.Contains(s.out, answer) {
				t.Errorf("%s did not print the final answer %q:\n%s", a.name, answer, s.out)
			}
		})
	}
}

// TestRealCLIEditsFiles: the scripted model creates a file in a new directory and appends to a tracked
// one; the real CLI does both in the repository, and commits nothing.
func TestRealCLIEditsFiles(t *testing.T) {
	for _, a := range agents {
		t.Run(a.name, func(t *testing.T) {
			repo := a.run(t,
				agentclitest.Turn{agentclitest.WriteFile("src/new.txt", "created by the agent\nline 2\n")},
				agentclitest.Turn{agentclitest.Shell("printf 'edited by the agent\\n' >> README.md")},
				agentclitest.Turn{agentclitest.Say("done")},
			).repo
			if got, want := readFile(t, filepath.Join(repo, "src", "new.txt")), "created by the agent\nline 2\n"; got != want {
				t.Errorf("src/new.txt = %q, want %q", got, want)
			}
			if got, want := readFile(t, filepath.Join(repo, "README.md")), "demo\nedited by the agent\n"; got != want {
				t.Errorf("README.md = %q, want %q", got, want)
			}
			if got, want := git(t, repo, "status", "--porcelain"), "M README.md\n?? src/"; got != want {
				t.Errorf("git status = %q, want %q", got, want)
			}
			if n := git(t, repo, "rev-list", "--count", "HEAD"); n != "1" {
				t.Errorf("%s commits on HEAD, want 1 (the agent must not commit)", n)
			}
		})
	}
}

// TestRealCLIGitCommit: the scripted model makes the agent commit. Codex's workspace-write sandbox
// mounts .git read-only, so the commit fails and the failure goes back to the model; Claude Code has no
// sandbox and commits, which the loop runner must detect and undo.
func TestRealCLIGitCommit(t *testing.T) {
	for _, a := range agents {
		t.Run(a.name, func(t *testing.T) {
			s := a.run(t,
				agentclitest.Turn{agentclitest.WriteFile("a.txt", "a\n")},
				agentclitest.Turn{agentclitest.Shell("git add -A && git commit -q -m 'agent commit'")},
				agentclitest.Turn{agentclitest.Say("done")},
			)
			repo, toolResult := s.repo, s.afterTurn(t, 1)
			if !a.commits {
				if n := git(t, repo, "rev-list", "--count", "HEAD"); n != "1" {
					t.Errorf("%s commits on HEAD, want 1: the sandbox should have denied the commit", n)
				}
				if got, want := git(t, repo, "status", "--porcelain"), "?? a.txt"; got != want {
					t.Errorf("git status = %q, want %q (nothing staged)", got, want)
				}
				if !strings.Contains(toolResult, "Read-only file system") {
					t.Errorf("the model was not told that .git is read-only; request after the commit:\n%s", toolResult)
				}
				return
			}
			if got, want := git(t, repo, "log", "-1", "--format=%s|%an|%P"), "agent commit|Test Agent|"+git(t, repo, "rev-parse", "HEAD~1"); got != want {
				t.Errorf("HEAD = %q, want %q (the agent's commit on top of the initial one)", got, want)
			}
			if got := git(t, repo, "status", "--porcelain"); got != "" {
				t.Errorf("git status = %q, want clean (a.txt committed)", got)
			}
			if !strings.Contains(toolResult, "agent commit") {
				t.Errorf("the model was not told about the commit; request after the commit:\n%s", toolResult)
			}
		})
	}
}

// TestRealCLICommandEnvironment: the commands the agent runs see the private home, and none of the
// caller's credentials; Codex keeps its own key from them too (shell_environment_policy.exclude),
// Claude Code passes it on.
func TestRealCLICommandEnvironment(t *testing.T) {
	for _, a := range agents {
		t.Run(a.name, func(t *testing.T) {
			s := a.run(t,
				agentclitest.Turn{agentclitest.Shell("env")},
				agentclitest.Turn{agentclitest.Say("done")},
			)
			env := s.afterTurn(t, 0)
			home := ""
			for _, kv := range s.inv.Env {
				if strings.HasPrefix(kv, "HOME=") {
					home = kv
				}
			}
			if home == "" || !strings.Contains(env, home+`\n`) {
				t.Errorf("the agent's command did not see %s; it saw:\n%s", home, env)
			}
			for _, kv := range decoys {
				if _, value, _ := strings.Cut(kv, "="); strings.Contains(env, value) {
					t.Errorf("the agent's command saw the caller's credential %s", kv)
				}
			}
			if got := strings.Contains(env, testKeyValue); got != a.keyVisible {
				t.Errorf("the agent's command sees the CLI's API key: %v, want %v (update keyVisible and docs/agent-clis.md)", got, a.keyVisible)
			}
		})
	}
}
