package cli

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/factory-harness/factory/internal/agentcli"
	"github.com/factory-harness/factory/internal/agentcli/agentclitest"
	"github.com/factory-harness/factory/internal/proc"
)

// These tests drive `factory loop` with the REAL Codex CLI and Claude Code as
// executors: a scripted model server on 127.0.0.1 (agentclitest) decides
// what the agent does, the real CLI does it in the repository, and the real
// factory binary runs the iterations, the guard and the commits.

// Test API key: the scripted servers accept any key.
const (
	loopTestKey      = "FACTORY_LOOP_TEST_KEY"
	loopTestKeyValue = "loop-test-key-value-7d2e"
)

// agentCLIDir returns the directory scripts/install-agent-clis.sh installed
// the CLIs into, or skips the test saying why they cannot run.
func agentCLIDir(t *testing.T, name string) string {
	t.Helper()
	if !proc.Found("node") {
		t.Skip("node is not on PATH: the agent CLIs are npm packages (see scripts/install-agent-clis.sh)")
	}
	dir := agentcli.InstallDir(os.Getenv)
	if _, err := os.Stat(agentcli.InstalledBinary(dir, name)); err != nil {
		t.Skipf("%s is not installed in %s (run scripts/install-agent-clis.sh, or set FACTORY_AGENT_CLIS): %v", name, dir, err)
	}
	return dir
}

// loopAgent is one real CLI as a loop executor.
type loopAgent struct {
	kind   string // [executor] kind and the binary's name
	server func(tb testing.TB, script ...agentclitest.Turn) *agentclitest.Server
}

var loopAgents = []loopAgent{
	{kind: "codex", server: agentclitest.NewCodex},
	{kind: "claude", server: agentclitest.NewClaude},
}

// agentFixture is a started run t1 whose executor is the real CLI a, talking
// to a scripted server. script gets the tree `loop init` wrote, so that the
// model can decompose it.
func newAgentFixture(t *testing.T, a loopAgent, script func(initTree []byte) []agentclitest.Turn) (loopFixture, *agentclitest.Server) {
	t.Helper()
	cliDir := agentCLIDir(t, a.kind)
	dir := t.TempDir()
	repo := newRepo(t, map[string]string{"calc.py": "def add(a, b):\n    return a + b\n"})
	tmp := t.TempDir()
	f := loopFixture{dir: dir, repo: repo, env: append(gitEnv(t.TempDir())[len(os.Environ()):],
		"FACTORY_AGENT_CLIS="+cliDir, loopTestKey+"="+loopTestKeyValue, "TMPDIR="+tmp)}
	writeFiles(t, dir, map[string]string{"GOAL.md": "# Build calc\n\nA calculator with add, mul and sub.\n"})
	f.mustRun(t, 0, "loop", "init", "--goal-file", filepath.Join(dir, "GOAL.md"))
	initTree, err := os.ReadFile(filepath.Join(repo, ".runner/tree.json"))
	if err != nil {
		t.Fatal(err)
	}
	srv := a.server(t, script(initTree)...)
	cfg := "[guard]\ncommand = " + tomlArray(failGuard) + "\n\n[executor]\nkind = \"" + a.kind + "\"\nmodel = \"scripted-model\"\n" +
		"base_url = \"" + srv.BaseURL + "\"\napi_key_env = \"" + loopTestKey + "\"\n"
	writeFiles(t, repo, map[string]string{".runner/config.toml": cfg})
	f.mustRun(t, 0, "loop", "start", "--run-id", "t1")
	t.Cleanup(func() {
		// Each iteration's private home lives in TMPDIR and is removed after it.
		if homes, _ := filepath.Glob(filepath.Join(tmp, "factory-loop-home-*")); len(homes) > 0 {
			t.Errorf("private homes left behind: %q", homes)
		}
	})
	return f, srv
}

// ancestorsScript prints the environment and command line of every process
// above the shell that runs it (its markers split so that only its output,
// not the command, holds them).
const ancestorsScript = `p=$PPID; while [ "$p" -gt 0 ] 2>/dev/null; do echo "=""= process $p"; tr '\0' '\n' < /proc/$p/environ; tr '\0' ' ' < /proc/$p/cmdline; echo; p=$(awk '/^PPid:/ {print $2}' /proc/$p/status); done`

// writeTree makes the agent replace tree.json through its shell tool (Claude
// Code's Write tool refuses to overwrite a file it has not read).
func writeTree(t *testing.T, initTree []byte, children ...act) agentclitest.Action {
	t.Helper()
	var root map[string]any
	if err := json.Unmarshal(initTree, &root); err != nil {
		t.Fatal(err)
	}
	root["children"] = children
	data, err := json.MarshalIndent(root, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	return agentclitest.Shell("cat > .runner/tree.json <<'TREE_EOF'\n" + string(data) + "\nTREE_EOF")
}

// checkServed checks that the CLI asked for exactly the scripted turns.
func checkServed(t *testing.T, srv *agentclitest.Server, turns int) {
	t.Helper()
	if srv.Served() != turns || len(srv.Unexpected()) > 0 {
		t.Errorf("served %d of %d turns, %d unexpected requests:\n%s", srv.Served(), turns, len(srv.Unexpected()), srv.Summary())
	}
}

// TestLoopRealAgentTwoLeaves: the scripted model decomposes the root into two
// leaves by editing tree.json, then implements each; the real CLI performs
// the edits, the runner runs the guard, sets passes and commits, exactly as
// with the command executor.
func TestLoopRealAgentTwoLeaves(t *testing.T) {
	for _, a := range loopAgents {
		t.Run(a.kind, func(t *testing.T) {
			var script []agentclitest.Turn
			f, srv := newAgentFixture(t, a, func(initTree []byte) []agentclitest.Turn {
				script = []agentclitest.Turn{
					// Iteration 1: decompose the root.
					{writeTree(t, initTree, child("a", 0, "mul"), child("b", 1, "sub"))},
					{agentclitest.Say("decomposed into mul and sub")},
					// Iteration 2: leaf a, and a look at the environment.
					{agentclitest.WriteFile("mul.py", "def mul(a, b):\n    return a * b\n")},
					{agentclitest.Shell("env; " + ancestorsScript)},
					{agentclitest.Say("mul done")},
					// Iteration 3: leaf b.
					{agentclitest.WriteFile("sub.py", "def sub(a, b):\n    return a - b\n")},
					{agentclitest.Say("sub done")},
				}
				return script
			})
			out := f.mustRun(t, 0, "loop", "run")
			want := []string{
				"chore(loop): run t1 iter 1 node root decompose guard=skipped",
				"chore(loop): run t1 iter 2 node a execute guard=pass",
				"chore(loop): run t1 iter 3 node b execute guard=pass",
			}
			if diff := cmp.Diff(want, f.subjects(t)); diff != "" {
				t.Fatalf("commits (-want +got):\n%s\nstderr:\n%s\nrequests:\n%s", diff, out.stderr, srv.Summary())
			}
			if !strings.HasSuffix(out.stdout, "status=complete iterations=3\n") {
				t.Errorf("stdout:\n%s", out.stdout)
			}
			checkServed(t, srv, len(script))
			turns := srv.Turns()
			for i, leaf := range map[int]string{0: "root", 2: "root/a", 5: "root/b"} {
				if i < len(turns) && !strings.Contains(string(turns[i].Body), "Selected leaf: "+leaf+" (attempts 0/3)") {
					t.Errorf("the session's first request (turn %d) lacks the prompt pack for %s", i, leaf)
				}
			}
			if len(turns) > 4 {
				// factory holds the key in its environment; the agent sees neither it nor the processes above the CLI.
				if body := string(turns[4].Body); strings.Contains(body, loopTestKeyValue) || !strings.Contains(body, "== process") {
					t.Errorf("the agent's command saw the API key, or did not list its ancestors:\n%.3000s", body[max(0, strings.Index(body, "PATH=")-200):])
				}
			}
			for _, r := range srv.Requests() {
				if !strings.Contains(r.Header.Get("Authorization")+r.Header.Get("X-Api-Key"), loopTestKeyValue) {
					t.Errorf("%s %s reached the model without the real key: the runner's proxy puts it in", r.Method, r.Path)
				}
			}
			tr := f.tree(t)
			for _, id := range []string{"root", "a", "b"} {
				if n := tr.find(id); n == nil || !n.Passes || n.Attempts != 0 || n.MaxAttempts != 3 {
					t.Errorf("node %s = %+v, want passed with 0/3 attempts", id, n)
				}
			}
			if got := git(t, f.repo, "show", "HEAD~1:mul.py"); got != "def mul(a, b):\n    return a * b" {
				t.Errorf("iteration 2 committed mul.py = %q", got)
			}
			if who := git(t, f.repo, "log", "-3", "--format=%an <%ae>|%cn <%ce>"); who != strings.Repeat("factory-loop <loop@factory.invalid>|factory-loop <loop@factory.invalid>\n", 2)+"factory-loop <loop@factory.invalid>|factory-loop <loop@factory.invalid>" {
				t.Errorf("identities:\n%s", who)
			}
			f.clean(t)
			var meta struct {
				ExecutorArgv []string `json:"executor_argv"`
				ExecutorExit int      `json:"executor_exit_code"`
			}
			readJSON(t, f.iterFile(2, "meta.json"), &meta)
			if len(meta.ExecutorArgv) == 0 || meta.ExecutorArgv[0] != agentcli.InstalledBinary(agentcli.InstallDir(os.Getenv), a.kind) || meta.ExecutorExit != 0 {
				t.Errorf("meta.json: executor %q exit %d, want the installed %s and 0", meta.ExecutorArgv, meta.ExecutorExit, a.kind)
			}
			if log, _ := os.ReadFile(f.iterFile(3, "executor.log")); !strings.Contains(string(log), "sub done") {
				t.Errorf("executor.log of iteration 3 lacks the agent's answer:\n%s", log)
			}
		})
	}
}

// TestLoopRealAgentGitCommit: the scripted model makes the agent commit.
// The executor sandbox keeps .git read-only for both CLIs, so nothing is
// committed by the agent and the runner commits its work. (An agent that
// commits anyway, with [executor] sandbox = "off", is undone: see
// TestLoopAgentCommitUndone.)
func TestLoopRealAgentGitCommit(t *testing.T) {
	for _, a := range loopAgents {
		t.Run(a.kind, func(t *testing.T) {
			script := []agentclitest.Turn{
				{agentclitest.WriteFile("mul.py", "def mul(a, b):\n    return a * b\n")},
				{agentclitest.Shell("git add -A && git -c user.name=Agent -c user.email=agent@test.invalid commit -q -m 'agent commit'")},
				{agentclitest.Say("committed")},
			}
			f, srv := newAgentFixture(t, a, func([]byte) []agentclitest.Turn { return script })
			start := git(t, f.repo, "rev-parse", "HEAD")
			out := f.mustRun(t, 0, "loop", "step")
			checkServed(t, srv, len(script))
			if parent := git(t, f.repo, "rev-parse", "HEAD^"); parent != start {
				t.Errorf("HEAD^ = %s, want the start %s: the agent's commit is in the history", parent, start)
			}
			if log := git(t, f.repo, "log", "--format=%s|%an"); strings.Contains(log, "agent commit") || strings.Contains(log, "Agent") {
				t.Errorf("the agent's commit is on the branch:\n%s", log)
			}
			var meta struct{ Reason string }
			readJSON(t, f.iterFile(1, "meta.json"), &meta)
			root := f.tree(t)
			f.clean(t)
			if out.stdout != "chore(loop): run t1 iter 1 node root execute guard=pass\n" {
				t.Errorf("stdout = %q", out.stdout)
			}
			if turns := srv.Turns(); len(turns) < 3 || !strings.Contains(string(turns[2].Body), "Read-only file system") {
				t.Errorf("the model was not told that .git is read-only:\n%s", srv.Summary())
			}
			if got := git(t, f.repo, "show", "HEAD:mul.py"); !strings.Contains(got, "return a * b") || !root.Passes || root.Attempts != 0 {
				t.Errorf("mul.py = %q, root = %+v: want the agent's work committed by the runner and the root passed", got, root)
			}
			if meta.Reason != "" {
				t.Errorf("reason %q", meta.Reason)
			}
		})
	}
}
