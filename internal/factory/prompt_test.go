package factory

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/factory-harness/factory/internal/gitws"
	"github.com/factory-harness/factory/internal/workorder"
)

// promptOf preflights wo in a repository of files and builds its SE prompt
// after the failure brief previous (nil: the first attempt).
func promptOf(t *testing.T, files map[string]string, wo *workorder.WorkOrder, opts Options, previous *FailureBrief) prompt {
	t.Helper()
	opts.Repo, opts.WorkOrder, opts.Out = gitRepo(t, files), wo, t.TempDir()
	opts.MaxAttempts, opts.CommandTimeout, opts.Python = 3, time.Second, "py"
	r, err := Preflight(context.Background(), opts)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	p, err := r.buildPrompt(previous)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func orderWith(t *testing.T, id string, context ...string) *workorder.WorkOrder {
	t.Helper()
	wo := testOrder()
	wo.ID, wo.Title, wo.ContextFiles = id, "title of "+id, context
	return wo
}

var promptRepo = map[string]string{
	"docs/guide.md": strings.Repeat("guide line\n", 400),
	"lib/util.py":   strings.Repeat("def f(): pass\n", 100),
	"a.py":          "print(1)\n",
	"own.py":        "x = 1\n",
}

// Everything before the failure brief is the same bytes in every attempt:
// the brief and whatever else changes between attempts is in the last
// segment only, and neither the run id nor the cache key is in the prompt.
func TestSEPromptPrefixStable(t *testing.T) {
	wo := orderWith(t, "WO-02", "own.py", "docs/guide.md", "lib/util.py", "a.py")
	const repoMap = "Repository map: 1 of 1 definitions\n\nlib/util.py\n    1: def f():\n"
	opts := Options{SharedContext: []string{"docs/guide.md", "lib/util.py"}, StableContext: []string{"docs/guide.md"}, CacheKey: "factory-key",
		RepoMap: func(context.Context, *gitws.Repo, string) (string, error) { return repoMap, nil }}
	files := promptRepo
	cmd, code := "python3 -m pytest -q", 1
	first := promptOf(t, files, wo, opts, nil)
	retry := promptOf(t, files, wo, opts, &FailureBrief{Stage: StageAcceptanceFailed, Command: &cmd, ExitCode: &code,
		PrimaryErrorExcerpt: "AssertionError: 3 != 4", ConstraintsReminder: constraintsReminder})
	if first.system != retry.system || first.system != systemPrompt {
		t.Error("the system prompt changed between attempts")
	}
	if len(first.user) != 4 || len(retry.user) != 4 {
		t.Fatalf("segments: %d and %d, want 4 (stable shared, shared, own, tail)", len(first.user), len(retry.user))
	}
	for i := range 3 {
		if first.user[i] != retry.user[i] {
			t.Errorf("segment %d differs between attempts:\n%q\n%q", i, first.user[i], retry.user[i])
		}
	}
	tail := retry.user[3]
	for _, volatile := range []string{"AssertionError", "python3 -m pytest", "exit code: 1", StageAcceptanceFailed} {
		if !strings.Contains(tail, volatile) {
			t.Errorf("the tail lacks %q", volatile)
		}
		if strings.Contains(strings.Join(retry.user[:3], ""), volatile) {
			t.Errorf("%q moved into the prefix", volatile)
		}
	}
	all := first.system + strings.Join(first.user, "")
	for _, id := range []string{"factory-key", "factory-run-"} {
		if strings.Contains(all, id) {
			t.Errorf("the prompt contains the volatile %q", id)
		}
	}
	// Layout: stable shared, other shared (each sorted), then the order's
	// own context files in the work order's order, and its text.
	if !strings.Contains(first.user[0], "### docs/guide.md") || strings.Contains(first.user[0], "lib/util.py") {
		t.Errorf("stable shared segment:\n%s", first.user[0])
	}
	if !strings.Contains(first.user[1], "### lib/util.py") {
		t.Errorf("shared segment:\n%s", first.user[1])
	}
	own := first.user[2]
	if !strings.Contains(own, "### a.py") || !strings.Contains(own, "### own.py") || strings.Index(own, "### own.py") > strings.Index(own, "### a.py") ||
		strings.Index(own, "### a.py") > strings.Index(own, "# Work order WO-02") {
		t.Errorf("own segment: context files in the work order's order, then the work order:\n%s", own)
	}
	// The map is ranked for this order, so it differs between the orders of
	// a build: it belongs to the order's own segment, after its context files.
	if strings.Contains(first.user[0]+first.user[1], "Repository map") {
		t.Error("the repository map moved into a shared segment")
	}
	if i := strings.Index(own, repoMap); i < strings.Index(own, "### a.py") || i > strings.Index(own, "# Work order WO-02") {
		t.Errorf("own segment: the map is not between the context files and the work order:\n%s", own)
	}
}

// Two orders of a build that read the same shared files repeat the shared
// segments byte for byte, whatever the order lists them in and whatever
// else each reads.
func TestSEPromptSharedSectionAcrossOrders(t *testing.T) {
	opts := Options{SharedContext: []string{"docs/guide.md", "lib/util.py"}, StableContext: []string{"docs/guide.md"}}
	one := promptOf(t, promptRepo, orderWith(t, "WO-01", "lib/util.py", "docs/guide.md", "a.py"), opts, nil)
	two := promptOf(t, promptRepo, orderWith(t, "WO-02", "own.py", "docs/guide.md", "lib/util.py"), opts, nil)
	if one.user[0] != two.user[0] || one.user[1] != two.user[1] {
		t.Errorf("shared segments differ:\n%q\n%q", one.user[:2], two.user[:2])
	}
	if one.user[2] == two.user[2] {
		t.Error("the orders' own segments are the same")
	}
	// Without a build, every context file is the order's own: one segment
	// before the tail.
	alone := promptOf(t, promptRepo, orderWith(t, "WO-01", "lib/util.py", "docs/guide.md"), Options{}, nil)
	if len(alone.user) != 2 || !strings.HasPrefix(alone.user[0], "# Context files\n") {
		t.Errorf("standalone layout: %d segments, starting %q", len(alone.user), alone.user[0][:min(40, len(alone.user[0]))])
	}
	none := promptOf(t, promptRepo, orderWith(t, "WO-01"), Options{}, nil)
	if !strings.HasPrefix(none.user[0], "# Context files\n(none)\n") {
		t.Errorf("no context files: %q", none.user[0][:40])
	}
}
