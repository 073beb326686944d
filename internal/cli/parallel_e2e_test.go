package cli

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/creack/pty"

	"github.com/factory-harness/factory/internal/llmtest"
)

// The parallel build's plan: WO-01 sets up the test suite, then three
// chains of two orders (alpha, beta, gamma), interleaved in plan order:
// WO-02 alpha1, WO-03 beta1, WO-04 gamma1, WO-05 alpha2, WO-06 beta2,
// WO-07 gamma2. Each chain's second order extends its module.
var chains = []string{"alpha", "beta", "gamma"}

const pVerify = "set -e\npython3 -m unittest discover -s tests -q\n"

func chainModule(name string, step int) string {
	s := fmt.Sprintf("def %s1():\n    return 1\n", name)
	if step == 2 {
		s += fmt.Sprintf("\n\ndef %s2():\n    return 2\n", name)
	}
	return s
}

func chainTest(name string, step int) string {
	return fmt.Sprintf("import unittest\n\nimport %s\n\n\nclass T(unittest.TestCase):\n    def test_%d(self):\n        self.assertEqual(%s.%s%d(), %d)\n",
		name, step, name, name, step, step)
}

// chainPlan is the plan; wait, when set, is an absolute file beta1's
// acceptance command waits for (the kill test).
func chainPlan(wait string) map[string]any {
	wos := []any{map[string]any{
		"id": "WO-01", "title": "Test suite", "intent": "Create scripts/verify.sh and tests/__init__.py.",
		"preconditions":       []any{cond("file_absent", "scripts/verify.sh")},
		"postconditions":      []any{cond("file_exists", "scripts/verify.sh"), cond("file_exists", "tests/__init__.py")},
		"allowed_files":       []string{"scripts/verify.sh", "tests/__init__.py"},
		"forbidden":           []string{},
		"acceptance_commands": []string{"test -f tests/__init__.py"},
		"context_files":       []string{"scripts/verify.sh"},
	}}
	for step := 1; step <= 2; step++ {
		for c, name := range chains {
			test := fmt.Sprintf("tests/test_%s%d.py", name, step)
			accept := []string{fmt.Sprintf("python3 -m unittest tests.test_%s%d -q", name, step)}
			if wait != "" && name == "beta" && step == 1 {
				accept = append([]string{`python3 -c "import os, time; open('` + startedFile + `', 'w').close(); [time.sleep(0.05) for _ in iter(lambda: os.path.exists('` + wait + `'), True)]"`}, accept...)
			}
			wos = append(wos, map[string]any{
				"id": fmt.Sprintf("WO-%02d", 2+3*(step-1)+c), "title": fmt.Sprintf("%s step %d", name, step), "intent": "Add " + name + fmt.Sprint(step) + " with a test.",
				"preconditions":       []any{cond("file_exists", "tests/__init__.py")},
				"postconditions":      []any{cond("file_exists", name+".py"), cond("file_exists", test)},
				"allowed_files":       []string{name + ".py", test},
				"forbidden":           []string{"scripts/verify.sh"},
				"acceptance_commands": accept,
				"context_files":       []string{name + ".py"},
			})
		}
	}
	return map[string]any{
		"verify_contract": map[string]any{"command": "bash scripts/verify.sh", "requires": []any{cond("file_exists", "scripts/verify.sh"), cond("file_exists", "tests/__init__.py")}},
		"work_orders":     wos,
	}
}

// chainReplies are the passing replies of chainPlan, by work order.
func chainReplies() map[string][]llmtest.Reply {
	r := map[string][]llmtest.Reply{"WO-01": {{Content: llmtest.Proposal("suite",
		llmtest.Write{Path: "scripts/verify.sh", BaseSHA256: sha(""), Content: pVerify},
		llmtest.Write{Path: "tests/__init__.py", BaseSHA256: sha(""), Content: ""})}}}
	for step := 1; step <= 2; step++ {
		for c, name := range chains {
			base := ""
			if step == 2 {
				base = chainModule(name, 1)
			}
			r[fmt.Sprintf("WO-%02d", 2+3*(step-1)+c)] = []llmtest.Reply{{Content: llmtest.Proposal(name,
				llmtest.Write{Path: name + ".py", BaseSHA256: sha(base), Content: chainModule(name, step)},
				llmtest.Write{Path: fmt.Sprintf("tests/test_%s%d.py", name, step), BaseSHA256: sha(""), Content: chainTest(name, step)})}}
		}
	}
	return r
}

// firstParentTrees lists, oldest first, the subject and tree of each
// commit on HEAD's first-parent line since base.
func firstParentTrees(t *testing.T, repo, base string) []string {
	t.Helper()
	return strings.Split(git(t, repo, "log", "--first-parent", "--reverse", "--format=%s %T", base+"..HEAD"), "\n")
}

// checkNoWorktree checks a build left no worktree, no branch but its own
// and the user's, and nothing of its worktrees in the git directory.
func checkNoWorktree(t *testing.T, repo string) {
	t.Helper()
	if list := git(t, repo, "worktree", "list", "--porcelain"); strings.Count(list, "worktree ") != 1 {
		t.Errorf("worktrees left:\n%s", list)
	}
	for _, p := range []string{".git/worktrees", ".git/factory/worktrees"} {
		if entries, err := os.ReadDir(filepath.Join(repo, p)); err == nil && len(entries) > 0 {
			t.Errorf("%s holds %d entries", p, len(entries))
		}
	}
	if branches := strings.Fields(git(t, repo, "for-each-ref", "--format=%(refname:short)", "refs/heads")); len(branches) != 2 {
		t.Errorf("branches: %v", branches)
	}
}

// TestBuildParallelSameTrees: -j 3 leaves the first-parent history of -j 1
// — the same work orders in the same order, each commit with the same
// tree — and no worktree.
func TestBuildParallelSameTrees(t *testing.T) {
	var trees [][]string
	for _, jobs := range []string{"1", "3"} {
		f := newBuildFixture(t, chainPlan(""))
		routes := newRoutes(chainReplies())
		base := git(t, f.repo, "rev-parse", "HEAD")
		res := f.build(t, llmtest.StartRouted(t, routes.route).URL, "-j", jobs)
		if res.code != ExitPass {
			t.Fatalf("-j %s: exit %d\n%s", jobs, res.code, res.stderr)
		}
		for id := range chainReplies() {
			if n := routes.count(id); n != 1 {
				t.Errorf("-j %s: %s asked %d times", jobs, id, n)
			}
		}
		checkClean(t, f.repo)
		checkNoWorktree(t, f.repo)
		trees = append(trees, firstParentTrees(t, f.repo, base))
		if jobs == "3" && !strings.Contains(res.stderr, "up to 3 work orders at a time") {
			t.Errorf("-j 3 did not run in parallel:\n%s", res.stderr)
		}
		// status shows the dependency graph: alpha2 needs the test suite
		// and alpha1, nothing of beta or gamma.
		if st := f.status(t); !slices.Equal(st.WorkOrders[4].DependsOn, []string{"WO-01", "WO-02"}) || len(st.WorkOrders[0].DependsOn) != 0 {
			t.Errorf("status: WO-05 depends on %v, WO-01 on %v", st.WorkOrders[4].DependsOn, st.WorkOrders[0].DependsOn)
		}
	}
	if len(trees[0]) != 7 || !slices.Equal(trees[0], trees[1]) {
		t.Errorf("histories differ:\n-j 1: %q\n-j 3: %q", trees[0], trees[1])
	}
}

// TestBuildParallelFailureThenResume: beta1 fails; beta2, which depends
// on it, is never sent to the model; the other chains are integrated;
// the build exits 1 naming WO-03; the same command resumes and asks only
// for beta's orders.
func TestBuildParallelFailureThenResume(t *testing.T) {
	f := newBuildFixture(t, chainPlan(""))
	replies := chainReplies()
	good := replies["WO-03"]
	bad := llmtest.Reply{Content: llmtest.Proposal("beta",
		llmtest.Write{Path: "beta.py", BaseSHA256: sha(""), Content: "def beta1():\n    return 0\n"},
		llmtest.Write{Path: "tests/test_beta1.py", BaseSHA256: sha(""), Content: chainTest("beta", 1)})}
	replies["WO-03"] = []llmtest.Reply{bad}
	routes := newRoutes(replies)
	base := git(t, f.repo, "rev-parse", "HEAD")
	res := f.build(t, llmtest.StartRouted(t, routes.route).URL, "-j", "3", "--repair", "off")
	if res.code != ExitFail || !strings.Contains(res.stdout, "WO-03 failed") && !strings.Contains(res.stdout, "WO-03  failed") {
		t.Fatalf("exit %d, want %d naming WO-03\n%s%s", res.code, ExitFail, res.stdout, res.stderr)
	}
	if n := routes.count("WO-06"); n != 0 {
		t.Errorf("WO-06 (depends on the failed WO-03) asked %d times", n)
	}
	var subjects []string
	for _, l := range firstParentTrees(t, f.repo, base) {
		subjects = append(subjects, strings.Fields(l)[1])
	}
	// WO-02 and WO-04 ran beside WO-03 from the start; whether WO-05 and
	// WO-07 started before WO-03 failed is a matter of timing.
	if !slices.IsSorted(subjects) || len(subjects) < 3 || !slices.Equal(subjects[:3], []string{"WO-01", "WO-02", "WO-04"}) ||
		slices.Contains(subjects, "WO-03") || slices.Contains(subjects, "WO-06") {
		t.Errorf("integrated %v, want WO-01, WO-02, WO-04 and perhaps WO-05 and WO-07", subjects)
	}
	checkClean(t, f.repo)
	checkNoWorktree(t, f.repo)

	replies["WO-03"] = good
	again := newRoutes(replies)
	res = f.build(t, llmtest.StartRouted(t, again.route).URL, "-j", "3")
	if res.code != ExitPass {
		t.Fatalf("resume: exit %d\n%s", res.code, res.stderr)
	}
	for id := range replies {
		want := 1
		if slices.Contains(subjects, id) {
			want = 0
		}
		if n := again.count(id); n != want {
			t.Errorf("resume asked %s %d times, want %d", id, n, want)
		}
	}
	if got := git(t, f.repo, "show", "HEAD:beta.py"); got+"\n" != chainModule("beta", 2) {
		t.Errorf("beta.py = %q", got)
	}
	checkClean(t, f.repo)
	checkNoWorktree(t, f.repo)
}

// newSlowChainFixture is chainPlan's fixture whose beta1 waits for the
// file .git/test-release (release it with writeFiles). Confined commands
// see the host's /tmp only in their work tree, and the git directory.
func newSlowChainFixture(t *testing.T) *buildFixture {
	f := newBuildFixture(t, chainPlan(""))
	plan := chainPlan(filepath.Join(f.repo, ".git", "test-release"))
	for _, wo := range plan["work_orders"].([]any) {
		m := wo.(map[string]any)
		data, _ := json.MarshalIndent(m, "", "  ")
		writeFiles(t, f.plan, map[string]string{m["id"].(string) + ".json": string(data)})
	}
	manifest, _ := json.MarshalIndent(plan, "", "  ")
	writeFiles(t, f.plan, map[string]string{"WORK_ORDERS_MANIFEST.json": string(manifest)})
	return f
}

// waitForBeta1 waits until beta1's slow command runs in its worktree.
func waitForBeta1(t *testing.T, f *buildFixture) {
	t.Helper()
	// Three worktrees, maps and commands before it: long on a loaded machine.
	waitUntil(t, 120*time.Second, "beta1's slow command", func() bool {
		m, _ := filepath.Glob(filepath.Join(f.repo, ".git", "factory", "worktrees", "*", "WO-03", startedFile))
		return len(m) == 1
	})
}

// Ctrl-C in the middle of a parallel build: every running order rolls
// back, the integrated ones stay, no worktree is left, exit 3; the same
// command then finishes with the serial history.
func TestBuildParallelInterrupted(t *testing.T) {
	ref := newBuildFixture(t, chainPlan(""))
	refBase := git(t, ref.repo, "rev-parse", "HEAD")
	if res := ref.build(t, llmtest.StartRouted(t, newRoutes(chainReplies()).route).URL); res.code != ExitPass {
		t.Fatalf("reference: exit %d\n%s", res.code, res.stderr)
	}
	f := newSlowChainFixture(t)
	base := git(t, f.repo, "rev-parse", "HEAD")
	url := llmtest.StartRouted(t, newRoutes(chainReplies()).route).URL
	cmd := factoryCmd(t, append(gitEnv(t.TempDir()), "OPENAI_API_KEY=k"), f.args(url, "-j", "3")...)
	var stderr syncBuffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	waitForBeta1(t, f)
	cmd.Process.Signal(os.Interrupt)
	cmd.Wait()
	if code := cmd.ProcessState.ExitCode(); code != ExitInternal {
		t.Fatalf("exit %d, want %d\n%s", code, ExitInternal, stderr.String())
	}
	checkClean(t, f.repo)
	checkNoWorktree(t, f.repo)
	if got := git(t, f.repo, "branch", "--show-current"); !strings.HasPrefix(got, "factory/") {
		t.Errorf("on branch %q after the interrupt, want the build's", got)
	}
	writeFiles(t, f.repo, map[string]string{".git/test-release": ""})
	if res := f.build(t, url, "-j", "3"); res.code != ExitPass {
		t.Fatalf("resume: exit %d\n%s", res.code, res.stderr)
	}
	if got, want := firstParentTrees(t, f.repo, base), firstParentTrees(t, ref.repo, refBase); !slices.Equal(got, want) {
		t.Errorf("history after the interrupt:\n%q\nwant\n%q", got, want)
	}
	checkClean(t, f.repo)
	checkNoWorktree(t, f.repo)
}

// TestBuildParallelKilled: SIGKILL while beta1's command runs in its
// worktree and other orders run or wait; the same command (or factory
// recover first) then removes the worktrees, finishes, and leaves the
// history of a build that was never killed.
func TestBuildParallelKilled(t *testing.T) {
	ref := newBuildFixture(t, chainPlan(""))
	refBase := git(t, ref.repo, "rev-parse", "HEAD")
	if res := ref.build(t, llmtest.StartRouted(t, newRoutes(chainReplies()).route).URL); res.code != ExitPass {
		t.Fatalf("reference: exit %d\n%s", res.code, res.stderr)
	}
	want := firstParentTrees(t, ref.repo, refBase)
	for _, via := range []string{"build", "recover"} {
		t.Run(via, func(t *testing.T) {
			f := newSlowChainFixture(t)
			base := git(t, f.repo, "rev-parse", "HEAD")
			url := llmtest.StartRouted(t, newRoutes(chainReplies()).route).URL
			b := &startedBuild{cmd: factoryCmd(t, append(gitEnv(t.TempDir()), "OPENAI_API_KEY=k"), f.args(url, "-j", "3")...), done: make(chan struct{})}
			if err := b.cmd.Start(); err != nil {
				t.Fatal(err)
			}
			go func() { b.cmd.Wait(); close(b.done) }()
			t.Cleanup(func() { b.cmd.Process.Kill(); <-b.done })
			waitForBeta1(t, f)
			b.cmd.Process.Kill()
			<-b.done
			// At once: a child the build was starting at that moment may still
			// hold the lock until it execs, and the next factory waits for it.
			if via == "recover" {
				rec := runFactory(t, nil, "recover", "--repo", f.repo)
				if rec.code != ExitPass || !strings.Contains(rec.stderr, "removing the worktree") {
					t.Fatalf("recover: exit %d\n%s%s", rec.code, rec.stdout, rec.stderr)
				}
				checkNoWorktree(t, f.repo)
			}
			writeFiles(t, f.repo, map[string]string{".git/test-release": ""})
			res := f.build(t, url, "-j", "3")
			if res.code != ExitPass || via == "build" && !strings.Contains(res.stderr, "removing the worktree") {
				t.Fatalf("build after the kill: exit %d\n%s", res.code, res.stderr)
			}
			if got := firstParentTrees(t, f.repo, base); !slices.Equal(got, want) {
				t.Errorf("history after the kill:\n%q\nwant\n%q", got, want)
			}
			checkClean(t, f.repo)
			checkNoWorktree(t, f.repo)
		})
	}
}

// terminalRows is what a terminal shows of out, for the sequences the
// live view writes: text, "\n", "\r", erase line and cursor up.
func terminalRows(out string) []string {
	out = strings.ReplaceAll(out, "\r\n", "\n")
	rows, row := []string{""}, 0
	for len(out) > 0 {
		switch {
		case strings.HasPrefix(out, clearLine):
			rows[row], out = "", out[len(clearLine):]
		case strings.HasPrefix(out, cursorUp):
			row, out = max(row-1, 0), out[len(cursorUp):]
		case out[0] == '\n':
			if row++; row == len(rows) {
				rows = append(rows, "")
			}
			out = out[1:]
		default:
			i := strings.IndexAny(out[1:], "\r\n\x1b") + 1
			if i == 0 {
				i = len(out)
			}
			rows[row], out = rows[row]+out[:i], out[i:]
		}
	}
	return rows
}

// On a terminal, -j 3 draws one live line per running work order, at
// once, each ending as one final line.
func TestBuildParallelLiveTerminal(t *testing.T) {
	f := newBuildFixture(t, chainPlan(""))
	slow := chainReplies()
	for id, r := range slow {
		r[0].Delay = 300 * time.Millisecond // long enough to be seen running together
		slow[id] = r
	}
	cmd := factoryCmd(t, append(gitEnv(t.TempDir()), "OPENAI_API_KEY=k"), f.args(llmtest.StartRouted(t, newRoutes(slow).route).URL, "-j", "3")...)
	tty, err := pty.StartWithSize(cmd, &pty.Winsize{Cols: 160, Rows: 40})
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	if _, err = io.Copy(&out, tty); err != nil && !errors.Is(err, syscall.EIO) {
		t.Fatal(err)
	}
	tty.Close()
	if err := cmd.Wait(); err != nil {
		t.Fatalf("build: %v\n%q", err, out.String())
	}
	raw := out.String()
	together := regexp.MustCompile(`[⠋⠙⠹⠸⠼⠴⠦⠧⠇⠏] WO-0\d [^\n]*\n` + regexp.QuoteMeta(clearLine) + `[⠋⠙⠹⠸⠼⠴⠦⠧⠇⠏] WO-0\d `)
	if !together.MatchString(raw) {
		t.Errorf("never two live lines at once:\n%q", raw)
	}
	final := regexp.MustCompile(`^✓ (WO-0\d) \d/7 .+ · PASS · \d+\.\ds · 1 attempt · [0-9a-f]{12} · \d+ tokens$`)
	var done []string
	for _, l := range terminalRows(raw) {
		if m := final.FindStringSubmatch(l); m != nil {
			done = append(done, m[1])
		} else if strings.HasPrefix(l, "✓") || strings.HasPrefix(l, "✗") || strings.ContainsAny(l[:min(len(l), 3)], "⠋⠙⠹⠸⠼⠴⠦⠧⠇⠏") {
			t.Errorf("a live or final line left on screen: %q", l)
		}
	}
	if len(done) != 7 {
		t.Errorf("final lines for %v, want one per work order; screen:\n%s", done, strings.Join(terminalRows(raw), "\n"))
	}
}

// TestBuildParallelRecheck: beta1's first answer passes in its worktree,
// where alpha1's files are not, but its test fails once they are there:
// the serial build fails that attempt and takes the second answer; the
// parallel build's recheck on the branch fails, beta1 runs again from the
// branch's tip and takes the second answer too, and beta2, which started
// from the first, runs again. The histories are the same, tree by tree.
func TestBuildParallelRecheck(t *testing.T) {
	badTest := "import os\nimport unittest\n\n\nclass T(unittest.TestCase):\n    def test_alone(self):\n        self.assertFalse(os.path.exists('alpha.py'))\n"
	var trees [][]string
	for _, jobs := range []string{"1", "3"} {
		replies := chainReplies()
		bad := llmtest.Reply{Content: llmtest.Proposal("beta",
			llmtest.Write{Path: "beta.py", BaseSHA256: sha(""), Content: chainModule("beta", 1)},
			llmtest.Write{Path: "tests/test_beta1.py", BaseSHA256: sha(""), Content: badTest})}
		replies["WO-03"] = append([]llmtest.Reply{bad}, replies["WO-03"]...)
		f := newBuildFixture(t, chainPlan(""))
		base := git(t, f.repo, "rev-parse", "HEAD")
		routes := newRoutes(replies)
		res := f.build(t, llmtest.StartRouted(t, routes.route).URL, "-j", jobs, "--json")
		if res.code != ExitPass {
			t.Fatalf("-j %s: exit %d\n%s", jobs, res.code, res.stderr)
		}
		if n := routes.count("WO-03"); n != 2 {
			t.Errorf("-j %s: WO-03 asked %d times, want 2", jobs, n)
		}
		if jobs == "3" {
			// Whether beta2 had started from beta1's first commit by then
			// (and then runs again: "a work order it depends on ran
			// again") is a matter of timing; the history is not.
			if !strings.Contains(res.stderr, "WO-03: its checks fail (verify_failed) on the branch") {
				t.Errorf("no recheck and rerun:\n%s", res.stderr)
			}
		}
		checkClean(t, f.repo)
		checkNoWorktree(t, f.repo)
		trees = append(trees, firstParentTrees(t, f.repo, base))
	}
	if !slices.Equal(trees[0], trees[1]) {
		t.Errorf("histories differ:\n-j 1: %q\n-j 3: %q", trees[0], trees[1])
	}
}

// -j below 1 is a usage error, and so is -j above 1 with a transcript
// (replayed in the order its calls were made).
func TestBuildJobsFlag(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"build", "-j", "0", "--plan", "p", "--repo", "r", "--out", "o", "--llm-model", "m"}, "--jobs must be at least 1"},
		{[]string{"build", "-j", "3", "--replay", "t.jsonl", "--plan", "p", "--repo", "r", "--out", "o", "--llm-model", "m"}, "--jobs 3 with --record or --replay"},
	} {
		if res := runFactory(t, nil, tc.args...); res.code != ExitUsage || !strings.Contains(res.stderr, tc.want) {
			t.Errorf("%v: exit %d, want %d saying %q\n%s", tc.args, res.code, ExitUsage, tc.want, res.stderr)
		}
	}
}
