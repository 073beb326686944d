package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/factory-harness/factory/internal/gitws"
	"github.com/factory-harness/factory/internal/proc/sandbox"
)

// The factory loop end-to-end tests drive the real binary with a scripted
// executor (internal/loop/testdata/scriptexec) whose actions per iteration
// come from a script file, and with failGuard as the guard.

// failGuard fails when a file outside .git and .runner contains FAIL. It is
// a shell command, not a program the test builds, because the guard runs
// confined ([guard] sandbox = "auto"), where the host's /tmp is hidden.
var failGuard = []string{"sh", "-c", `st=0; for f in $(grep -rl FAIL --exclude-dir=.git --exclude-dir=.runner .); do echo "$f contains FAIL"; st=1; done; exit $st`}

// tomlArray renders argv as a TOML array of strings.
func tomlArray(argv []string) string {
	quoted := make([]string, len(argv))
	for i, a := range argv {
		b, _ := json.Marshal(a) // a JSON string of printable ASCII is a TOML basic string
		quoted[i] = string(b)
	}
	return "[" + strings.Join(quoted, ", ") + "]"
}

var (
	scriptexecOnce sync.Once
	scriptexecPath string
	scriptexecErr  error
)

func scriptexec(t *testing.T) string {
	t.Helper()
	scriptexecOnce.Do(func() {
		dir, err := os.MkdirTemp("", "factory-loop-scriptexec-")
		if err != nil {
			scriptexecErr = err
			return
		}
		scriptexecPath = filepath.Join(dir, "scriptexec")
		out, err := exec.Command("go", "build", "-o", scriptexecPath, "../loop/testdata/scriptexec").CombinedOutput()
		if err != nil {
			scriptexecErr = fmt.Errorf("build scriptexec: %v\n%s", err, out)
		}
	})
	if scriptexecErr != nil {
		t.Fatal(scriptexecErr)
	}
	return scriptexecPath
}

type act = map[string]any

// loopFixture is a repository on main with calc.py, initialised and started
// as run t1 with the scripted executor. The script and goal live in dir,
// outside the repository, at paths that do not depend on the repository.
type loopFixture struct {
	dir, repo string
	env       []string
}

func newLoopFixture(t *testing.T, dir string, script map[int][]act, extraConfig string) loopFixture {
	t.Helper()
	return newLoopFixtureGuard(t, dir, script, extraConfig, failGuard, "")
}

// newLoopFixtureGuard is newLoopFixture with guard as [guard] command and
// guardConfig as more lines of [guard].
func newLoopFixtureGuard(t *testing.T, dir string, script map[int][]act, extraConfig string, guard []string, guardConfig string) loopFixture {
	t.Helper()
	repo := newRepo(t, map[string]string{"calc.py": "def add(a, b):\n    return a + b\n"})
	f := loopFixture{dir: dir, repo: repo, env: gitEnv(t.TempDir())[len(os.Environ()):]}
	byIter := map[string][]act{}
	for n, as := range script {
		byIter[fmt.Sprint(n)] = as
	}
	data, _ := json.Marshal(byIter)
	writeFiles(t, dir, map[string]string{"script.json": string(data), "GOAL.md": "# Build calc\n\nA calculator with add and mul.\n"})
	f.mustRun(t, 0, "loop", "init", "--goal-file", filepath.Join(dir, "GOAL.md"))
	bin := scriptexec(t)
	// The scripted executor and its script live under the host's /tmp,
	// which the executor sandbox replaces with a private one: these tests
	// are about the runner, so the executor runs unconfined
	// (TestLoopExecutorSandbox confines one).
	cfg := fmt.Sprintf("%s\n[guard]\ncommand = %s\n%s\n[executor]\nkind = \"command\"\nsandbox = \"off\"\ncommand = [%q, %q]\n",
		extraConfig, tomlArray(guard), guardConfig, bin, filepath.Join(dir, "script.json"))
	writeFiles(t, repo, map[string]string{".runner/config.toml": cfg})
	f.mustRun(t, 0, "loop", "start", "--run-id", "t1")
	return f
}

func (f loopFixture) run(t *testing.T, args ...string) runOut {
	t.Helper()
	return runFactory(t, f.env, append(args, "--repo", f.repo)...)
}

func (f loopFixture) mustRun(t *testing.T, code int, args ...string) runOut {
	t.Helper()
	out := f.run(t, args...)
	if out.code != code {
		t.Fatalf("factory %s: exit %d, want %d\nstdout:\n%s\nstderr:\n%s", strings.Join(args, " "), out.code, code, out.stdout, out.stderr)
	}
	return out
}

// subjects lists the commit subjects after the start commit, oldest first.
func (f loopFixture) subjects(t *testing.T) []string {
	t.Helper()
	out := git(t, f.repo, "log", "--reverse", "--format=%s", "main..HEAD")
	lines := strings.Split(out, "\n")
	return lines[1:] // the start commit
}

type treeNode struct {
	ID          string      `json:"id"`
	Title       string      `json:"title"`
	Passes      bool        `json:"passes"`
	Attempts    int         `json:"attempts"`
	MaxAttempts int         `json:"max_attempts"`
	Children    []*treeNode `json:"children"`
}

func (f loopFixture) tree(t *testing.T) *treeNode {
	t.Helper()
	var n treeNode
	readJSON(t, filepath.Join(f.repo, ".runner/tree.json"), &n)
	return &n
}

func (n *treeNode) find(id string) *treeNode {
	if n.ID == id {
		return n
	}
	for _, c := range n.Children {
		if f := c.find(id); f != nil {
			return f
		}
	}
	return nil
}

func (f loopFixture) iterFile(n int, name string) string {
	return filepath.Join(f.repo, ".runner/iterations/t1", fmt.Sprint(n), name)
}

func (f loopFixture) events(t *testing.T) string {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(f.repo, ".runner/iterations/t1/events.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	return string(data)
}

func (f loopFixture) clean(t *testing.T) {
	t.Helper()
	if st := git(t, f.repo, "status", "--porcelain", "--untracked-files=all"); st != "" {
		t.Fatalf("work tree not clean:\n%s", st)
	}
}

func child(id string, order int, title string) act {
	return act{"id": id, "order": order, "title": title, "goal": "Do " + title, "acceptance": []string{title + " works"}}
}

// twoLevelScript decomposes root into a and b, a into a1 and a2, then
// implements the three leaves.
var twoLevelScript = map[int][]act{
	1: {{"op": "decompose", "children": []act{child("a", 0, "arithmetic"), child("b", 1, "docs")}}},
	2: {{"op": "decompose", "children": []act{child("a1", 0, "mul"), child("a2", 1, "sub")}}},
	3: {{"op": "write", "path": "mul.py", "content": "def mul(a, b):\n    return a * b\n"}},
	4: {{"op": "write", "path": "sub.py", "content": "def sub(a, b):\n    return a - b\n"}},
	5: {{"op": "write", "path": "README.md", "content": "calc\n"}},
}

func TestLoopDrivesTwoLevelTreeToPass(t *testing.T) {
	shared := t.TempDir()
	f := newLoopFixture(t, shared, twoLevelScript, "")
	out := f.mustRun(t, 0, "loop", "run")
	want := []string{
		"chore(loop): run t1 iter 1 node root decompose guard=skipped",
		"chore(loop): run t1 iter 2 node a decompose guard=skipped",
		"chore(loop): run t1 iter 3 node a1 execute guard=pass",
		"chore(loop): run t1 iter 4 node a2 execute guard=pass",
		"chore(loop): run t1 iter 5 node b execute guard=pass",
	}
	if diff := cmp.Diff(want, f.subjects(t)); diff != "" {
		t.Fatalf("commits (-want +got):\n%s", diff)
	}
	if !strings.HasSuffix(out.stdout, "status=complete iterations=5\n") || !strings.Contains(out.stdout, want[4]+"\n") {
		t.Errorf("stdout:\n%s", out.stdout)
	}
	tr := f.tree(t)
	for _, id := range []string{"root", "a", "a1", "a2", "b"} {
		if n := tr.find(id); n == nil || !n.Passes || n.Attempts != 0 || n.MaxAttempts != 3 {
			t.Errorf("node %s = %+v, want passed with 0/3 attempts", id, n)
		}
	}
	if who := git(t, f.repo, "log", "-1", "--format=%an <%ae>|%cn <%ce>"); who != "factory-loop <loop@factory.invalid>|factory-loop <loop@factory.invalid>" {
		t.Errorf("identity = %s", who)
	}
	f.clean(t)
	for _, name := range []string{"meta.json", "prompt.md", "executor.log", "guard.log", "tree.before.json", "tree.after.json", "diff.patch"} {
		if _, err := os.Stat(f.iterFile(3, name)); err != nil {
			t.Errorf("iteration 3 log: %v", err)
		}
	}
	if _, err := os.Stat(f.iterFile(1, "guard.log")); err == nil {
		t.Error("a DECOMPOSE iteration has a guard.log")
	}
	prompt, _ := os.ReadFile(f.iterFile(3, "prompt.md"))
	for _, s := range []string{"## 1. Runner contract", "## 2. Goal", "## 3. Selected leaf: root/a/a1 (attempts 0/3)", "## 4. The rest of the tree", "## 5. Memory", "## 6. Guard contract"} {
		if !strings.Contains(string(prompt), s) {
			t.Errorf("prompt.md lacks %q", s)
		}
	}
	if log, _ := os.ReadFile(f.iterFile(3, "executor.log")); !strings.Contains(string(log), "mode=execute node=a1 iteration=3 run=t1 prompt=true") {
		t.Errorf("executor environment: %s", log)
	}
	f.mustRun(t, 0, "loop", "select")
	if out := f.mustRun(t, 0, "loop", "select"); out.stdout != "status=complete\n" {
		t.Errorf("select = %q", out.stdout)
	}
	if out := f.mustRun(t, 0, "loop", "run"); out.stdout != "status=complete iterations=0\n" || len(f.subjects(t)) != 5 {
		t.Errorf("a complete run made commits or said %q", out.stdout)
	}
	status := f.mustRun(t, 0, "loop", "status").stdout
	for _, s := range []string{"run t1 on loop/t1, 5 iterations", "✓     a1  mul  (0/3)"} {
		if !strings.Contains(status, s) {
			t.Errorf("status lacks %q:\n%s", s, status)
		}
	}

	// Identical inputs (pinned dates, same script and binary paths) give identical commits.
	g := newLoopFixture(t, shared, twoLevelScript, "")
	g.mustRun(t, 0, "loop", "run")
	if a, b := git(t, f.repo, "rev-parse", "HEAD"), git(t, g.repo, "rev-parse", "HEAD"); a != b {
		t.Errorf("identical runs gave different commits: %s and %s", a, b)
	}
}

func TestLoopFailingGuardChargesAttempt(t *testing.T) {
	f := newLoopFixture(t, t.TempDir(), map[int][]act{1: {{"op": "write", "path": "mul.py", "content": "FAIL\n"}}}, "")
	out := f.mustRun(t, 0, "loop", "step")
	if out.stdout != "chore(loop): run t1 iter 1 node root execute guard=fail\n" {
		t.Errorf("stdout = %q", out.stdout)
	}
	if root := f.tree(t); root.Passes || root.Attempts != 1 {
		t.Errorf("root = %+v, want open with 1 attempt", root)
	}
	if data, _ := os.ReadFile(f.iterFile(1, "guard.log")); !strings.Contains(string(data), "mul.py contains FAIL") {
		t.Errorf("guard.log = %q", data)
	}
	if got := git(t, f.repo, "show", "HEAD:mul.py"); got != "FAIL" {
		t.Errorf("the failed work is not committed: %q", got)
	}
	if out := f.mustRun(t, 0, "loop", "select"); out.stdout != "status=open id=root path=root attempts=1/3\n" {
		t.Errorf("select = %q", out.stdout)
	}
	// Iteration 2 does nothing: a no-change DECOMPOSE, charged; the limit ends the run.
	out = f.mustRun(t, 5, "loop", "run", "--max-iterations", "1")
	if out.stdout != "chore(loop): run t1 iter 2 node root decompose guard=skipped\n" || !strings.Contains(out.stderr, "stopped after 1 iterations") {
		t.Errorf("run --max-iterations 1: %q %q", out.stdout, out.stderr)
	}
	var meta struct{ Reason string }
	readJSON(t, f.iterFile(2, "meta.json"), &meta)
	if root := f.tree(t); root.Attempts != 2 || meta.Reason != "the iteration changed nothing" {
		t.Errorf("root = %+v, reason %q", root, meta.Reason)
	}
}

func TestLoopStuckLeafStopsWithQuestion(t *testing.T) {
	fail := []act{{"op": "write", "path": "mul.py", "content": "FAIL\n"}}
	f := newLoopFixture(t, t.TempDir(), map[int][]act{1: fail, 2: fail, 3: fail}, "")
	out := f.mustRun(t, 4, "loop", "run")
	if !strings.Contains(out.stdout, "status=stuck id=root path=root attempts=3/3") {
		t.Errorf("stdout:\n%s", out.stdout)
	}
	subjects := f.subjects(t)
	if len(subjects) != 4 || subjects[3] != "chore(loop): run t1 stuck node root" {
		t.Errorf("commits: %q", subjects)
	}
	q, _ := os.ReadFile(filepath.Join(f.repo, ".runner/HUMAN_QUESTIONS.md"))
	if !strings.Contains(string(q), "## Stuck: root (run t1)") || !strings.Contains(string(q), "mul.py contains FAIL") {
		t.Errorf("HUMAN_QUESTIONS.md:\n%s", q)
	}
	if out := f.mustRun(t, 4, "loop", "step"); len(f.subjects(t)) != 4 || !strings.Contains(out.stdout, "status=stuck") {
		t.Errorf("a second stuck step committed again or said %q", out.stdout)
	}
	if out := f.mustRun(t, 0, "loop", "select"); out.stdout != "status=stuck id=root path=root attempts=3/3\n" {
		t.Errorf("select = %q", out.stdout)
	}
	f.clean(t)
}

func TestLoopIllegalPassesEditOverwritten(t *testing.T) {
	f := newLoopFixture(t, t.TempDir(), map[int][]act{1: {
		{"op": "set", "node": "root", "field": "passes", "value": true},
		{"op": "set", "node": "root", "field": "max_attempts", "value": 9},
	}}, "")
	out := f.mustRun(t, 0, "loop", "step")
	if out.stdout != "chore(loop): run t1 iter 1 node root decompose guard=skipped\n" {
		t.Errorf("stdout = %q", out.stdout)
	}
	if root := f.tree(t); root.Passes || root.Attempts != 1 || root.MaxAttempts != 3 {
		t.Errorf("root = %+v, want passes=false attempts=1 max_attempts=3", root)
	}
	ev := f.events(t)
	for _, s := range []string{`"event":"runner_owned_field_overwritten","node":"root","detail":{"node":"root","field":"passes","agent":true,"runner":false}`, `"field":"max_attempts","agent":9,"runner":3`} {
		if !strings.Contains(ev, s) {
			t.Errorf("events.jsonl lacks %s:\n%s", s, ev)
		}
	}
}

func TestLoopPassedNodeMutationEntersRepair(t *testing.T) {
	f := newLoopFixture(t, t.TempDir(), map[int][]act{
		1: {{"op": "decompose", "children": []act{child("a", 0, "mul"), child("b", 1, "sub")}}},
		2: {{"op": "write", "path": "mul.py", "content": "ok\n"}},
		3: {{"op": "set", "node": "a", "field": "title", "value": "rewritten"}, {"op": "write", "path": "sub.py", "content": "ok\n"}},
		4: {{"op": "restore"}},
	}, "")
	for range 3 {
		f.mustRun(t, 0, "loop", "step")
	}
	if out := f.mustRun(t, 0, "loop", "select"); !strings.HasPrefix(out.stdout, "status=repair") {
		t.Errorf("select after a mutation = %q", out.stdout)
	}
	if out := f.mustRun(t, 1, "loop", "validate"); !strings.Contains(out.stdout, `.runner/tree.json#/children/0: node "a" passed and is immutable, but it was changed`) {
		t.Errorf("validate: %s", out.stdout)
	}
	f.mustRun(t, 0, "loop", "step")
	want := []string{
		"chore(loop): run t1 iter 1 node root decompose guard=skipped",
		"chore(loop): run t1 iter 2 node a execute guard=pass",
		"chore(loop): run t1 iter 3 node b execute guard=skipped",
		"chore(loop): run t1 iter 4 node - repair guard=skipped",
	}
	if diff := cmp.Diff(want, f.subjects(t)); diff != "" {
		t.Fatalf("commits (-want +got):\n%s", diff)
	}
	if log, _ := os.ReadFile(f.iterFile(4, "executor.log")); !strings.Contains(string(log), "mode=repair node= iteration=4") {
		t.Errorf("repair environment: %s", log)
	}
	if prompt, _ := os.ReadFile(f.iterFile(4, "prompt.md")); !strings.Contains(string(prompt), "REPAIR TREE") || !strings.Contains(string(prompt), `node "a" passed and is immutable`) {
		t.Errorf("repair prompt:\n%s", prompt)
	}
	tr := f.tree(t)
	if a := tr.find("a"); a.Title != "mul" || !a.Passes {
		t.Errorf("a = %+v", a)
	}
	if b := tr.find("b"); b.Attempts != 1 || b.Passes {
		t.Errorf("b = %+v, want charged once for the invalid tree", b)
	}
	f.mustRun(t, 0, "loop", "validate")
}

func TestLoopBrokenTree(t *testing.T) {
	t.Run("repaired", func(t *testing.T) {
		f := newLoopFixture(t, t.TempDir(), map[int][]act{1: {{"op": "break"}}, 2: {{"op": "restore"}}}, "")
		f.mustRun(t, 0, "loop", "step")
		if got := git(t, f.repo, "show", "HEAD:.runner/tree.json"); !strings.Contains(got, "broken") {
			t.Errorf("the broken tree was not committed as it was: %q", got)
		}
		f.mustRun(t, 0, "loop", "step")
		if root := f.tree(t); root.Attempts != 1 {
			t.Errorf("root = %+v, want charged once", root)
		}
		if s := f.subjects(t); s[1] != "chore(loop): run t1 iter 2 node - repair guard=skipped" {
			t.Errorf("commits: %q", s)
		}
	})
	t.Run("three failed repairs stop the run", func(t *testing.T) {
		f := newLoopFixture(t, t.TempDir(), map[int][]act{1: {{"op": "break"}}}, "")
		out := f.mustRun(t, 1, "loop", "run")
		if n := len(f.subjects(t)); n != 4 || !strings.Contains(out.stderr, "still invalid") {
			t.Errorf("%d commits; stderr:\n%s", n, out.stderr)
		}
		f.mustRun(t, 1, "loop", "step")
		if len(f.subjects(t)) != 4 {
			t.Error("a step ran after the repairs were exhausted")
		}
	})
}

func TestLoopAgentCommitUndone(t *testing.T) {
	f := newLoopFixture(t, t.TempDir(), map[int][]act{1: {{"op": "write", "path": "mul.py", "content": "x\n"}, {"op": "commit"}}}, "")
	start := git(t, f.repo, "rev-parse", "HEAD")
	out := f.mustRun(t, 0, "loop", "step")
	if out.stdout != "chore(loop): run t1 iter 1 node root execute guard=skipped\n" {
		t.Errorf("stdout = %q", out.stdout)
	}
	if parent := git(t, f.repo, "rev-parse", "HEAD^"); parent != start {
		t.Errorf("the agent's commit is in the history (parent %s, start %s)", parent, start)
	}
	if _, err := os.Stat(filepath.Join(f.repo, "mul.py")); !os.IsNotExist(err) {
		t.Errorf("the agent's file survived: %v", err)
	}
	if root := f.tree(t); root.Attempts != 1 {
		t.Errorf("root = %+v, want charged once", root)
	}
	var meta struct{ Reason string }
	readJSON(t, f.iterFile(1, "meta.json"), &meta)
	if !strings.Contains(meta.Reason, "moved HEAD") {
		t.Errorf("reason = %q", meta.Reason)
	}
	f.clean(t)
}

func TestLoopRefusals(t *testing.T) {
	f := newLoopFixture(t, t.TempDir(), map[int][]act{}, "")
	git(t, f.repo, "checkout", "-q", "main")
	git(t, f.repo, "merge", "-q", "--ff-only", "loop/t1")
	before := treeSnapshot(t, f.repo)
	out := f.mustRun(t, 2, "loop", "step")
	if !strings.Contains(out.stderr, "refusing to run on main") {
		t.Errorf("stderr = %q", out.stderr)
	}
	sameTree(t, before, treeSnapshot(t, f.repo))

	git(t, f.repo, "checkout", "-q", "loop/t1")
	writeFiles(t, f.repo, map[string]string{"stray.txt": "x"})
	before = treeSnapshot(t, f.repo)
	if out := f.mustRun(t, 2, "loop", "step"); !strings.Contains(out.stderr, "not clean") {
		t.Errorf("stderr = %q", out.stderr)
	}
	sameTree(t, before, treeSnapshot(t, f.repo))
}

func alive(pid int) bool {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	fields := strings.Fields(string(data))
	return len(fields) > 2 && fields[2] != "Z"
}

func waitFile(t *testing.T, p string) int {
	t.Helper()
	for deadline := time.Now().Add(20 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		if data, err := os.ReadFile(p); err == nil && len(data) > 0 {
			var pid int
			fmt.Sscan(string(data), &pid)
			return pid
		}
	}
	t.Fatalf("%s never appeared", p)
	return 0
}

func TestLoopHangingExecutorKilledAtBudget(t *testing.T) {
	dir := t.TempDir()
	pidfile := filepath.Join(dir, "child.pid")
	f := newLoopFixture(t, dir, map[int][]act{1: {{"op": "write", "path": "mul.py", "content": "x\n"}, {"op": "hang", "pidfile": pidfile}}}, "iteration_timeout_secs = 2")
	start := time.Now()
	out := f.mustRun(t, 0, "loop", "step")
	if out.stdout != "chore(loop): run t1 iter 1 node root execute guard=skipped\n" {
		t.Errorf("stdout = %q", out.stdout)
	}
	if d := time.Since(start); d > 15*time.Second {
		t.Errorf("step took %v with a 2 s budget", d)
	}
	if pid := waitFile(t, pidfile); alive(pid) {
		t.Errorf("the executor's child %d outlived the budget", pid)
	}
	if _, err := os.Stat(filepath.Join(f.repo, "mul.py")); !os.IsNotExist(err) {
		t.Errorf("the timed-out edits survived: %v", err)
	}
	if root := f.tree(t); root.Attempts != 1 {
		t.Errorf("root = %+v, want charged once", root)
	}
	f.clean(t)
}

// startStep starts `factory loop step` and waits for the executor's child.
func startStep(t *testing.T, f loopFixture, pidfile string) (*exec.Cmd, int) {
	t.Helper()
	cmd := factoryCmd(t, f.env, "loop", "step", "--repo", f.repo)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	return cmd, waitFile(t, pidfile)
}

func TestLoopSIGKILLThenRecover(t *testing.T) {
	dir := t.TempDir()
	pidfile := filepath.Join(dir, "child.pid")
	f := newLoopFixture(t, dir, map[int][]act{1: {{"op": "write", "path": "mul.py", "content": "x\n"}, {"op": "commit"}, {"op": "hang", "pidfile": pidfile}}}, "")
	start := git(t, f.repo, "rev-parse", "HEAD")
	cmd, child := startStep(t, f, pidfile)
	cmd.Process.Signal(syscall.SIGKILL)
	cmd.Wait()
	out := f.mustRun(t, 2, "loop", "step")
	if !strings.Contains(out.stderr, "factory loop recover") {
		t.Errorf("step after a SIGKILL: %q", out.stderr)
	}
	out = f.mustRun(t, 0, "loop", "recover")
	if !strings.Contains(out.stdout, "recovered: iteration 1 of run t1 reset to") {
		t.Errorf("recover: %q", out.stdout)
	}
	for deadline := time.Now().Add(5 * time.Second); alive(child) && time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
	}
	if alive(child) {
		t.Errorf("the executor's child %d survived recover", child)
	}
	if head := git(t, f.repo, "rev-parse", "HEAD"); head != start {
		t.Errorf("HEAD = %s, want the last iteration commit %s", head, start)
	}
	if b := git(t, f.repo, "branch", "--show-current"); b != "loop/t1" {
		t.Errorf("branch = %s", b)
	}
	f.clean(t)
	if out := f.mustRun(t, 0, "loop", "recover"); !strings.Contains(out.stdout, "nothing to recover") {
		t.Errorf("second recover: %q", out.stdout)
	}
	if out := f.mustRun(t, 0, "loop", "select"); out.stdout != "status=open id=root path=root attempts=0/3\n" {
		t.Errorf("select = %q", out.stdout)
	}
}

func TestLoopCtrlCResets(t *testing.T) {
	dir := t.TempDir()
	pidfile := filepath.Join(dir, "child.pid")
	f := newLoopFixture(t, dir, map[int][]act{1: {{"op": "write", "path": "mul.py", "content": "x\n"}, {"op": "hang", "pidfile": pidfile}}}, "")
	start := git(t, f.repo, "rev-parse", "HEAD")
	cmd, child := startStep(t, f, pidfile)
	cmd.Process.Signal(os.Interrupt)
	err := cmd.Wait()
	if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 3 {
		t.Fatalf("step after Ctrl-C: %v, want exit 3", err)
	}
	if alive(child) {
		t.Errorf("the executor's child %d survived Ctrl-C", child)
	}
	if head := git(t, f.repo, "rev-parse", "HEAD"); head != start {
		t.Errorf("HEAD moved to %s", head)
	}
	f.clean(t)
	f.mustRun(t, 0, "loop", "recover")
}

// TestLoopGuardSandbox: under [guard] sandbox = "auto" the guard runs as
// `factory run` runs verification: it writes the work tree, but not .git or
// the iteration logs, and cannot connect to the host's 127.0.0.1; meta.json
// says how it was confined; its rewrite of config.toml is put back. Under
// "off" the same writes succeed, as stated.
func TestLoopGuardSandbox(t *testing.T) {
	if s := sandbox.Detect(); !s.UserNamespaces {
		t.Skipf("this machine cannot confine with namespaces: %s", s.UserNamespacesError)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	var connections atomic.Int32
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			connections.Add(1)
			c.Close()
		}
	}()
	port := fmt.Sprint(ln.Addr().(*net.TCPAddr).Port)
	// The guard passes only when every escape fails.
	guard := []string{"bash", "-c", `echo built > guard-output.txt || exit 2
echo 'guard.command = ["true"]' >> .runner/config.toml
if printf '[evil]\n' >> .git/config; then echo "wrote .git/config"; exit 1; fi
if echo x > .runner/iterations/t1/1/evil; then echo "wrote the iteration logs"; exit 1; fi
if (echo x > /dev/tcp/127.0.0.1/` + port + `); then echo "connected out"; exit 1; fi
echo "every escape denied"`}
	write := map[int][]act{1: {{"op": "write", "path": "mul.py", "content": "x\n"}}}

	type guardMeta struct {
		Guard        string
		GuardSandbox struct {
			Mode      string
			Mechanism string
			Network   string
			Caches    []string
		} `json:"guard_sandbox"`
	}
	t.Run("auto", func(t *testing.T) {
		f := newLoopFixtureGuard(t, t.TempDir(), write, "", guard, "")
		config, _ := os.ReadFile(filepath.Join(f.repo, ".git/config"))
		modcache := t.TempDir() // go env names it: the guard sees it copy-on-write
		f.env = append(f.env, "GOMODCACHE="+modcache)
		out := f.mustRun(t, 0, "loop", "step")
		if out.stdout != "chore(loop): run t1 iter 1 node root execute guard=pass\n" || !strings.Contains(out.stderr, "guard sandbox auto: namespaces+landlock") {
			log, _ := os.ReadFile(f.iterFile(1, "guard.log"))
			t.Fatalf("stdout %q\nstderr:\n%s\nguard.log:\n%s", out.stdout, out.stderr, log)
		}
		if after, _ := os.ReadFile(filepath.Join(f.repo, ".git/config")); string(after) != string(config) {
			t.Errorf(".git/config changed:\n%s", after)
		}
		if _, err := os.Stat(f.iterFile(1, "evil")); !os.IsNotExist(err) {
			t.Errorf("the guard wrote in the iteration logs: %v", err)
		}
		if n := connections.Load(); n != 0 {
			t.Errorf("the guard connected to the host's 127.0.0.1 %d times", n)
		}
		if cfg := git(t, f.repo, "show", "HEAD:.runner/config.toml"); strings.Contains(cfg, `guard.command = ["true"]`) {
			t.Errorf("the guard's rewrite of its own config was committed:\n%s", cfg)
		}
		if ev := f.events(t); !strings.Contains(ev, `"event":"protected_file_restored","node":"root","detail":{"path":".runner/config.toml"}`) {
			t.Errorf("events.jsonl lacks the restore:\n%s", ev)
		}
		if got := git(t, f.repo, "show", "HEAD:guard-output.txt"); got != "built" {
			t.Errorf("the guard's file in the work tree = %q, want it written and committed", got)
		}
		log, _ := os.ReadFile(f.iterFile(1, "guard.log"))
		if !strings.Contains(string(log), "Read-only file system") || !strings.Contains(string(log), "every escape denied") {
			t.Errorf("guard.log:\n%s", log)
		}
		var m guardMeta
		readJSON(t, f.iterFile(1, "meta.json"), &m)
		if m.GuardSandbox.Mode != "auto" || m.GuardSandbox.Mechanism != "namespaces+landlock" || m.GuardSandbox.Network != "loopback only" ||
			!slices.Contains(m.GuardSandbox.Caches, modcache+" (GOMODCACHE, copy-on-write)") {
			t.Errorf("meta.json guard_sandbox = %+v, want the module cache among the caches", m.GuardSandbox)
		}
	})
	t.Run("off", func(t *testing.T) {
		f := newLoopFixtureGuard(t, t.TempDir(), write, "", guard, `sandbox = "off"`)
		out := f.mustRun(t, 0, "loop", "step")
		if out.stdout != "chore(loop): run t1 iter 1 node root execute guard=fail\n" || !strings.Contains(out.stderr, `warning: [guard] sandbox = "off": the guard runs with your full privileges`) {
			t.Errorf("stdout %q\nstderr:\n%s", out.stdout, out.stderr)
		}
		if log, _ := os.ReadFile(f.iterFile(1, "guard.log")); !strings.Contains(string(log), "wrote .git/config") {
			t.Errorf("guard.log:\n%s", log)
		}
		var m guardMeta
		readJSON(t, f.iterFile(1, "meta.json"), &m)
		if m.Guard != "fail" || m.GuardSandbox.Mode != "off" || m.GuardSandbox.Mechanism != "none" || m.GuardSandbox.Network != "unrestricted" {
			t.Errorf("meta.json = %+v", m)
		}
	})
}

// TestLoopRecoverGitLockAndHomes: factory is killed while its iteration
// runs, and a git killed mid-commit left .git/index.lock. recover refuses a
// lock young enough to belong to a git at work, removes it once it is
// stale, resets, and removes the killed iteration's private home from
// TMPDIR, and no one else's.
func TestLoopRecoverGitLockAndHomes(t *testing.T) {
	dir, tmp := t.TempDir(), t.TempDir()
	pidfile := filepath.Join(dir, "child.pid")
	f := newLoopFixture(t, dir, map[int][]act{1: {{"op": "write", "path": "mul.py", "content": "x\n"}, {"op": "hang", "pidfile": pidfile}}}, "")
	f.env = append(f.env, "TMPDIR="+tmp)
	other := filepath.Join(tmp, "factory-loop-home-000000000000-t1-1-123")
	if err := os.Mkdir(other, 0o700); err != nil {
		t.Fatal(err)
	}
	start := git(t, f.repo, "rev-parse", "HEAD")
	cmd, _ := startStep(t, f, pidfile)
	cmd.Process.Signal(syscall.SIGKILL)
	cmd.Wait()
	homes, _ := filepath.Glob(filepath.Join(tmp, "factory-loop-home-*-t1-1-*"))
	if len(homes) != 2 {
		t.Fatalf("homes in TMPDIR after the kill: %q, want the iteration's and the other repository's", homes)
	}
	lock := filepath.Join(f.repo, ".git", "index.lock")
	writeFiles(t, f.repo, map[string]string{".git/index.lock": ""})
	out := f.run(t, "loop", "recover")
	if out.code == 0 || !strings.Contains(out.stderr, "index.lock is") || !strings.Contains(out.stderr, "a git process may still hold it") {
		t.Fatalf("recover with a fresh index.lock: exit %d\nstdout:\n%s\nstderr:\n%s", out.code, out.stdout, out.stderr)
	}
	if _, err := os.Stat(lock); err != nil {
		t.Fatalf("the fresh lock was removed: %v", err)
	}
	old := time.Now().Add(-time.Minute)
	if err := os.Chtimes(lock, old, old); err != nil {
		t.Fatal(err)
	}
	out = f.mustRun(t, 0, "loop", "recover")
	if !strings.Contains(out.stdout, "removed the stale git lock "+lock) || !strings.Contains(out.stdout, "recovered: iteration 1 of run t1 reset to") {
		t.Errorf("recover: %q", out.stdout)
	}
	if _, err := os.Stat(lock); !os.IsNotExist(err) {
		t.Errorf("index.lock survived: %v", err)
	}
	if left, _ := filepath.Glob(filepath.Join(tmp, "factory-loop-home-*")); len(left) != 1 || left[0] != other {
		t.Errorf("homes left in TMPDIR: %q, want only the other repository's %s", left, other)
	}
	if head := git(t, f.repo, "rev-parse", "HEAD"); head != start {
		t.Errorf("HEAD = %s, want %s", head, start)
	}
	f.clean(t)
}

// TestLoopRecoverGitLockNoted: the loop is killed inside a git step it
// noted (a commit or a reset runs under gitws.DuringGitStep), and git left
// .git/index.lock: recover removes that lock at once, however young, since
// the note says whose it is, and resets.
func TestLoopRecoverGitLockNoted(t *testing.T) {
	dir := t.TempDir()
	pidfile := filepath.Join(dir, "child.pid")
	f := newLoopFixture(t, dir, map[int][]act{1: {{"op": "write", "path": "mul.py", "content": "x\n"}, {"op": "hang", "pidfile": pidfile}}}, "")
	start := git(t, f.repo, "rev-parse", "HEAD")
	cmd, _ := startStep(t, f, pidfile)
	cmd.Process.Signal(syscall.SIGKILL)
	cmd.Wait()
	repo, err := gitws.Open(context.Background(), f.repo)
	if err != nil {
		t.Fatal(err)
	}
	if err := repo.RecordGitStep(gitws.GitStep{Step: "commit"}); err != nil {
		t.Fatal(err)
	}
	lock := filepath.Join(f.repo, ".git", "index.lock")
	writeFiles(t, f.repo, map[string]string{".git/index.lock": ""})
	out := f.mustRun(t, 0, "loop", "recover")
	if !strings.Contains(out.stdout, lock) || !strings.Contains(out.stdout, "recovered: iteration 1 of run t1 reset to") {
		t.Errorf("recover: %q", out.stdout)
	}
	if _, err := os.Stat(lock); !os.IsNotExist(err) {
		t.Errorf("index.lock survived: %v", err)
	}
	if _, noted, _ := repo.RecordedGitStep(); noted {
		t.Errorf("the git-step note survived recover")
	}
	if head := git(t, f.repo, "rev-parse", "HEAD"); head != start {
		t.Errorf("HEAD = %s, want %s", head, start)
	}
	f.clean(t)
}

// newScriptAgentFixture is a started run t1 whose executor is agent, a
// shell script committed in the repository (the executor sandbox hides
// the host's /tmp, where the test's own files live), with executorConfig
// as more lines of [executor] and a guard that passes.
func newScriptAgentFixture(t *testing.T, agent, executorConfig string) loopFixture {
	t.Helper()
	dir := t.TempDir()
	repo := newRepo(t, map[string]string{"calc.py": "def add(a, b):\n    return a + b\n"})
	f := loopFixture{dir: dir, repo: repo, env: gitEnv(t.TempDir())[len(os.Environ()):]}
	writeFiles(t, dir, map[string]string{"GOAL.md": "# Build calc\n\nA calculator with add and mul.\n"})
	f.mustRun(t, 0, "loop", "init", "--goal-file", filepath.Join(dir, "GOAL.md"))
	writeFiles(t, repo, map[string]string{".runner/agent.sh": agent,
		".runner/config.toml": "[guard]\ncommand = [\"true\"]\n\n[executor]\nkind = \"command\"\ncommand = [\".runner/agent.sh\"]\n" + executorConfig})
	if err := os.Chmod(filepath.Join(repo, ".runner/agent.sh"), 0o755); err != nil {
		t.Fatal(err)
	}
	git(t, repo, "add", "-A")
	git(t, repo, "commit", "-q", "-m", "agent")
	f.mustRun(t, 0, "loop", "start", "--run-id", "t1")
	return f
}

// stepConfined runs one step that must pass, skipping where the machine
// cannot confine the executor.
func (f loopFixture) stepConfined(t *testing.T) {
	t.Helper()
	out := f.run(t, "loop", "step")
	if out.code != 0 && strings.Contains(out.stderr, "cannot confine") {
		t.Skipf("no sandbox here: %s", out.stderr)
	}
	if out.code != 0 || out.stdout != "chore(loop): run t1 iter 1 node root execute guard=pass\n" {
		t.Fatalf("step: exit %d\nstdout:\n%s\nstderr:\n%s", out.code, out.stdout, out.stderr)
	}
}

// TestLoopExecutorSandbox: with [executor] sandbox = "required" the
// command executor runs confined: its writes beside its home, beside the
// repository and to .git/config are denied, its write in the work tree is
// committed, and meta.json records how it was confined.
func TestLoopExecutorSandbox(t *testing.T) {
	agent := "#!/bin/sh\nfor f in ../sibling.txt .git/config \"$HOME/../x\"; do echo pwned >> \"$f\" && echo \"WROTE $f\"; done\n" +
		"printf 'def mul(a, b):\\n    return a * b\\n' > mul.py\n"
	f := newScriptAgentFixture(t, agent, "sandbox = \"required\"\n")
	f.stepConfined(t)
	log, _ := os.ReadFile(f.iterFile(1, "executor.log"))
	if strings.Contains(string(log), "WROTE") || strings.Count(string(log), "Read-only file system") != 3 {
		t.Errorf("executor.log:\n%s", log)
	}
	if _, err := os.Stat(filepath.Join(filepath.Dir(f.repo), "sibling.txt")); !os.IsNotExist(err) {
		t.Errorf("the agent wrote beside the repository: %v", err)
	}
	if got := git(t, f.repo, "show", "HEAD:mul.py"); !strings.Contains(got, "return a * b") {
		t.Errorf("mul.py = %q", got)
	}
	var meta struct {
		ExecutorSandbox struct {
			Mode, Mechanism, Network, Processes string
		} `json:"executor_sandbox"`
	}
	readJSON(t, f.iterFile(1, "meta.json"), &meta)
	if s := meta.ExecutorSandbox; s.Mode != "required" || s.Mechanism == "none" || s.Processes != "private" || !strings.HasPrefix(s.Network, "host, ") {
		t.Errorf("meta.json executor_sandbox = %+v", s)
	}
}

// TestLoopCommandExecutorKeyProxy: a command executor given base_url and
// api_key_env gets a stand-in key and the runner's proxy, through which
// its request reaches the endpoint with the real key; the real key is in
// factory's environment and nowhere the agent can look.
func TestLoopCommandExecutorKeyProxy(t *testing.T) {
	if _, err := exec.LookPath("curl"); err != nil {
		t.Skip("curl is not installed (apt-get install curl): the test's agent script uses it")
	}
	const realKey = "sk-loop-command-real-3e9d51"
	var mu sync.Mutex
	var auth []string
	upstream := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		auth = append(auth, r.URL.Path+" "+r.Header.Get("Authorization"))
		mu.Unlock()
		io.WriteString(w, "the model says hi")
	}))
	defer upstream.Close()
	agent := "#!/bin/sh\ncurl -sS -H \"Authorization: Bearer $LOOP_CMD_KEY\" \"$FACTORY_LOOP_MODEL_URL/chat\" > answer.txt\n" +
		"{ env; " + ancestorsScript + "; } > seen.txt 2>&1\n" +
		"curl -sS " + upstream.URL + "/direct >> seen.txt 2>&1\n" +
		"printf 'def mul(a, b):\\n    return a * b\\n' > mul.py\n"
	f := newScriptAgentFixture(t, agent, "sandbox = \"required\"\nbase_url = \""+upstream.URL+"/v1\"\napi_key_env = \"LOOP_CMD_KEY\"\n")
	f.env = append(f.env, "LOOP_CMD_KEY="+realKey)
	f.stepConfined(t)
	if got := git(t, f.repo, "show", "HEAD:answer.txt"); got != "the model says hi" {
		t.Errorf("answer.txt = %q, want the upstream's answer through the proxy", got)
	}
	seen := git(t, f.repo, "show", "HEAD:seen.txt")
	if strings.Contains(seen, realKey) || !strings.Contains(seen, "LOOP_CMD_KEY=factory-proxy-") || !strings.Contains(seen, "FACTORY_LOOP_MODEL_URL=http://127.0.0.1:") {
		t.Errorf("what the agent saw:\n%s", seen)
	}
	if !strings.Contains(seen, "Failed to connect to 127.0.0.1") {
		t.Errorf("the agent reached the endpoint directly, around the proxy:\n%s", seen)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(auth) != 1 || auth[0] != "/v1/chat Bearer "+realKey {
		t.Errorf("the endpoint got %q, want one request to /v1/chat with the real key", auth)
	}
}
