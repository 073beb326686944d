package agentcli_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/factory-harness/factory/internal/agentcli"
	"github.com/factory-harness/factory/internal/agentcli/agentclitest"
	"github.com/factory-harness/factory/internal/llm/keyproxy"
	"github.com/factory-harness/factory/internal/proc"
	"github.com/factory-harness/factory/internal/proc/sandbox"
)

// TestMain puts the real API key in the test process's own environment, as it is in factory's when
// the runner starts an agent: the test binary is then an ancestor of every agent holding the key in /proc/<pid>/environ, which the agent must
// not be able to read. (os.Setenv would not show there: the binary re-executes itself with it.)
func TestMain(m *testing.M) {
	if os.Getenv(testKey) != testKeyValue {
		err := syscall.Exec("/proc/self/exe", os.Args, append(os.Environ(), testKey+"="+testKeyValue))
		fmt.Fprintf(os.Stderr, "re-execute the test binary with %s: %v\n", testKey, err)
		os.Exit(2)
	}
	os.Exit(m.Run())
}

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

// confine returns the policy the loop runner uses for an agent in repo with home, talking to the key
// proxy on port, skipping the test where the machine cannot confine it.
func confine(t *testing.T, repo, home string, port uint16) *sandbox.Policy {
	t.Helper()
	box, err := sandbox.Prepare(agentcli.Confinement(sandbox.ModeRequired, repo, []string{filepath.Join(repo, ".git")}, home, port))
	var unavailable *sandbox.UnavailableError
	if errors.As(err, &unavailable) {
		t.Skipf("the agent sandbox needs user namespaces and Landlock: %v", err)
	}
	if err != nil {
		t.Fatal(err)
	}
	return box
}

// runInvocation runs inv in dir through proc under box, as a loop executor would, and returns the
// result and the combined output.
func runInvocation(t *testing.T, inv agentcli.Invocation, dir string, box *sandbox.Policy) (proc.Result, string) {
	t.Helper()
	work := t.TempDir()
	prompt := filepath.Join(work, "prompt.md")
	if err := os.WriteFile(prompt, inv.Stdin, 0o644); err != nil {
		t.Fatal(err)
	}
	logPath := filepath.Join(work, "executor.log")
	res := proc.Run(context.Background(), proc.Spec{
		Argv: inv.Argv, Dir: dir, Env: inv.Env, StdinFile: prompt, Timeout: agentTimeout,
		Stdout: logPath, Stderr: logPath, MaxOutputBytes: proc.DefaultMaxOutputBytes, Sandbox: box,
	})
	out, err := os.ReadFile(logPath)
	if err != nil {
		t.Fatal(err)
	}
	return res, string(out)
}

// promptMarker is in every test prompt, to check that the prompt reached the model.
const promptMarker = "factory-prompt-marker-4f1c"

// agent is one real CLI, set up against a scripted model server behind the key proxy.
type agent struct {
	name   string // the installed binary: "codex" or "claude"
	server func(tb testing.TB, script ...agentclitest.Turn) *agentclitest.Server
	// build returns the invocation talking to the proxy at url with the stand-in key in environ,
	// with home as its private home.
	build func(t *testing.T, bin, url, home string, environ []string) agentcli.Invocation
	// keyHeader is the header that carries the key to the model server.
	keyHeader, keyPrefix string
}

// The test API key: in the test binary's own environment (see TestMain) and given to the key proxy,
// never to a CLI. The agents' commands search for keySearch, a prefix of it, so that the commands
// themselves do not carry it.
const (
	testKey      = "FACTORY_AGENTCLI_TEST_KEY"
	testKeyValue = "sk-test-real-key-2b7f9c41e6d0"
	keySearch    = "sk-test-real-key"
)

// decoys are credentials in the caller's environment that must reach neither CLI.
var decoys = []string{"GH_TOKEN=ghp_decoy_secret", "OPENAI_API_KEY=sk-decoy-openai", "ANTHROPIC_API_KEY=sk-decoy-anthropic"}

// testEnviron is the caller's environment the tests give the builders: the decoys, and the key
// variable holding the proxy's stand-in key.
func testEnviron(standIn string) []string {
	return append(append(os.Environ(), decoys...), testKey+"="+standIn)
}

var agents = []agent{
	{name: "codex", server: agentclitest.NewCodex, keyHeader: "Authorization", keyPrefix: "Bearer ",
		build: func(t *testing.T, bin, url, home string, environ []string) agentcli.Invocation {
			inv, err := agentcli.Codex(agentcli.CodexConfig{
				Binary: bin, Model: "scripted-model", BaseURL: url, APIKeyEnv: testKey, Home: home,
				Prompt: []byte("Do the task. " + promptMarker + "\n"), Environ: environ, Confined: true,
			})
			if err != nil {
				t.Fatal(err)
			}
			return inv
		}},
	{name: "claude", server: agentclitest.NewClaude, keyHeader: "X-Api-Key",
		build: func(t *testing.T, bin, url, home string, environ []string) agentcli.Invocation {
			inv, err := agentcli.Claude(agentcli.ClaudeConfig{
				Binary: bin, Model: "scripted-model", BaseURL: url, APIKeyEnv: testKey, Home: home,
				Prompt: []byte("Do the task. " + promptMarker + "\n"), Environ: environ, AsRoot: os.Geteuid() == 0,
			})
			if err != nil {
				t.Fatal(err)
			}
			return inv
		}},
}

// session is one finished run of a real CLI in a fresh repository.
type session struct {
	repo  string
	home  string
	srv   *agentclitest.Server
	proxy *keyproxy.Proxy
	inv   agentcli.Invocation
	res   proc.Result
	out   string // stdout and stderr
}

// run runs one scripted session of a in a fresh repository and checks what every session must do:
// exit 0 in time, serve every turn, make no unexpected request, and send the prompt.
func (a agent) run(t *testing.T, script ...agentclitest.Turn) session {
	t.Helper()
	bin := installedCLI(t, a.name)
	s := session{repo: newRepo(t), home: t.TempDir()}
	s.srv = a.server(t, script...)
	var err error
	if s.proxy, err = keyproxy.Start(s.srv.BaseURL, testKeyValue, nil); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.proxy.Close() })
	s.inv = a.build(t, bin, s.proxy.URL, s.home, testEnviron(s.proxy.Key))
	s.res, s.out = runInvocation(t, s.inv, s.repo, confine(t, s.repo, s.home, s.proxy.Port))
	t.Logf("%s took %v for %d model requests", a.name, s.res.Duration.Round(time.Millisecond), len(s.srv.Requests()))
	if s.res.ExitCode != 0 || s.res.Err != "" {
		t.Fatalf("%s: %+v\noutput:\n%s\nrequests:\n%s", a.name, s.res, s.out, s.srv.Summary())
	}
	if s.srv.Served() != len(script) || len(s.srv.Unexpected()) > 0 {
		t.Errorf("%s: served %d of %d turns, %d unexpected requests:\n%s\noutput:\n%s", a.name, s.srv.Served(), len(script), len(s.srv.Unexpected()), s.srv.Summary(), s.out)
	}
	if turns := s.srv.Turns(); len(turns) == 0 || !bytes.Contains(turns[0].Body, []byte(promptMarker)) {
		t.Errorf("%s: the first model request does not carry the prompt\nrequests:\n%s", a.name, s.srv.Summary())
	}
	// Every request reached the model through the proxy, which put the real key in.
	for _, r := range s.srv.Requests() {
		if got := r.Header.Get(a.keyHeader); got != a.keyPrefix+testKeyValue {
			t.Errorf("%s: %s %s reached the model with %s %q, want the real key from the proxy", a.name, r.Method, r.Path, a.keyHeader, got)
		}
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

// around returns up to 1500 bytes of s on either side of the first needle, for a failure message
// about a 50 KB request body.
func around(s, needle string) string {
	i := strings.Index(s, needle)
	if i < 0 {
		return fmt.Sprintf("(no %q in %d bytes)", needle, len(s))
	}
	return "…" + s[max(0, i-1500):min(len(s), i+len(needle)+1500)] + "…"
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

// TestRealCLIGitCommit: the scripted model makes the agent commit. Factory's sandbox mounts .git
// read-only for both CLIs, so the commit fails, the failure goes back to the model and only the runner
// commits.
func TestRealCLIGitCommit(t *testing.T) {
	for _, a := range agents {
		t.Run(a.name, func(t *testing.T) {
			s := a.run(t,
				agentclitest.Turn{agentclitest.WriteFile("a.txt", "a\n")},
				agentclitest.Turn{agentclitest.Shell("git add -A && git commit -q -m 'agent commit'")},
				agentclitest.Turn{agentclitest.Say("done")},
			)
			repo, toolResult := s.repo, s.afterTurn(t, 1)
			if n := git(t, repo, "rev-list", "--count", "HEAD"); n != "1" {
				t.Errorf("%s commits on HEAD, want 1: the sandbox should have denied the commit", n)
			}
			if got, want := git(t, repo, "status", "--porcelain"), "?? a.txt"; got != want {
				t.Errorf("git status = %q, want %q (nothing staged)", got, want)
			}
			if !strings.Contains(toolResult, "Read-only file system") {
				t.Errorf("the model was not told that .git is read-only; request after the commit:\n%s", toolResult)
			}
		})
	}
}

// ancestors is a shell script that prints the environment and command line of every process above
// the shell, up to the top of what it can see.
const ancestors = `p=$PPID; while [ "$p" -gt 0 ] 2>/dev/null; do echo "=""= process $p"; tr '\0' '\n' < /proc/$p/environ; tr '\0' ' ' < /proc/$p/cmdline; echo; p=$(awk '/^PPid:/ {print $2}' /proc/$p/status); done`

// The scripts below split their markers ("=""= end") so that the request carrying their output, which
// also carries the command itself, contains a marker only when the command printed it.

// TestRealCLICommandEnvironment: a command the agent runs prints its environment, the environment and
// command line of every process above it, and whatever in its home looks like the key; the real API
// key appears nowhere (the CLI holds only the proxy's stand-in key, and the processes above the CLI,
// this test binary among them, are out of sight), none of the caller's other credentials either, and
// the model still answers through the proxy.
func TestRealCLICommandEnvironment(t *testing.T) {
	for _, a := range agents {
		t.Run(a.name, func(t *testing.T) {
			s := a.run(t,
				agentclitest.Turn{agentclitest.Shell("echo '=''= env'; env; " + ancestors + "; echo '=''= home'; grep -rao '" + keySearch + "[-a-z0-9]*' \"$HOME\"; echo '=''= end'")},
				agentclitest.Turn{agentclitest.Say("done")},
			)
			out := s.afterTurn(t, 0)
			for _, want := range []string{"== env", "== process", "== home", "== end", `HOME=` + s.home, "=" + s.proxy.Key} {
				if !strings.Contains(out, want) {
					t.Errorf("the command's output lacks %q: %s", want, around(out, "== env"))
				}
			}
			if strings.Contains(out, testKeyValue) {
				t.Errorf("the agent's command found the real API key: %s", around(out, testKeyValue))
			}
			for _, kv := range decoys {
				if _, value, _ := strings.Cut(kv, "="); strings.Contains(out, value) {
					t.Errorf("the agent's command saw the caller's credential %s", kv)
				}
			}
			// And from outside: nothing the CLI left in its home holds the key.
			err := filepath.WalkDir(s.home, func(path string, d fs.DirEntry, err error) error {
				if err != nil || d.IsDir() {
					return err
				}
				if data, err := os.ReadFile(path); err == nil && bytes.Contains(data, []byte(testKeyValue)) {
					t.Errorf("%s in the private home holds the real API key", path)
				}
				return nil
			})
			if err != nil {
				t.Error(err)
			}
		})
	}
}

// TestRealCLIConfinement: the agent's commands cannot write outside the work tree, its home and a
// private tmp (not beside its home, not beside the repository, not into .git), nor connect to
// anything but the key proxy, such as a server on the host's loopback (Landlock denies the connect);
// a write in the work tree works.
func TestRealCLIConfinement(t *testing.T) {
	for _, a := range agents {
		t.Run(a.name, func(t *testing.T) {
			outside := httptest.NewServer(http.NotFoundHandler())
			defer outside.Close()
			script := fmt.Sprintf(`for f in "$HOME/../x" ../sibling.txt .git/config; do if echo pwned >> "$f"; then echo "WR""OTE $f"; fi; done; `+
				`echo inside > inside.txt && echo "wrote"" inside"; `+
				`if (exec 3<>/dev/tcp/127.0.0.1/%s); then echo "REA""CHED the outside server"; fi; echo '=''= end'`,
				outside.URL[strings.LastIndex(outside.URL, ":")+1:])
			s := a.run(t, agentclitest.Turn{agentclitest.Shell(script)}, agentclitest.Turn{agentclitest.Say("done")})
			out := s.afterTurn(t, 0)
			if strings.Contains(out, "WROTE") || strings.Contains(out, "REACHED") || !strings.Contains(out, "wrote inside") ||
				!strings.Contains(out, "connect: Permission denied") || !strings.Contains(out, "== end") {
				t.Errorf("the command's output: %s", around(out, "wrote inside"))
			}
			if n := strings.Count(out, "Read-only file system"); n != 3 {
				t.Errorf("%d writes denied as Read-only file system, want 3: %s", n, around(out, "wrote inside"))
			}
			for _, p := range []string{filepath.Join(filepath.Dir(s.home), "x"), filepath.Join(filepath.Dir(s.repo), "sibling.txt")} {
				if _, err := os.Stat(p); !os.IsNotExist(err) {
					t.Errorf("%s exists on the host: %v", p, err)
				}
			}
			if cfg := readFile(t, filepath.Join(s.repo, ".git", "config")); strings.Contains(cfg, "pwned") {
				t.Errorf(".git/config was written:\n%s", cfg)
			}
			if got := readFile(t, filepath.Join(s.repo, "inside.txt")); got != "inside\n" {
				t.Errorf("inside.txt = %q", got)
			}
		})
	}
}
