package builder

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/factory-harness/factory/internal/gitws"
	"github.com/factory-harness/factory/internal/llm"
	"github.com/factory-harness/factory/internal/planner"
	"github.com/factory-harness/factory/internal/workorder"
)

func TestVerdictOf(t *testing.T) {
	tests := []struct {
		err  error
		want string
	}{
		{errWorkOrderFailed, VerdictFail},
		{fmt.Errorf("plan: %w", &PlanInvalidError{}), VerdictPlanInvalid},
		{fmt.Errorf("node se: %w", &llm.BudgetError{Limit: llm.LimitTokens}), VerdictBudget},
		{&planner.ModelError{Err: &llm.BudgetError{}}, VerdictBudget},
		{errors.New("interrupted"), VerdictError},
	}
	for _, tt := range tests {
		if got := verdictOf(tt.err); got != tt.want {
			t.Errorf("verdictOf(%v) = %s, want %s", tt.err, got, tt.want)
		}
	}
}

func TestDelta(t *testing.T) {
	one, three := 1.0, 3.5
	if tok, cost := delta(Spend{Tokens: 10, CostUSD: &one}, Spend{Tokens: 25, CostUSD: &three}); tok != 15 || cost == nil || *cost != 2.5 {
		t.Errorf("delta = %d, %v", tok, cost)
	}
	if _, cost := delta(Spend{Tokens: 10}, Spend{Tokens: 25, CostUSD: &three}); cost != nil {
		t.Errorf("an unknown cost before makes the difference unknown, got %v", *cost)
	}
}

// git runs git for test setup with a pinned identity and no user config.
func git(t testing.TB, dir string, args ...string) string {
	t.Helper()
	cmd := exec.Command("git", args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GIT_CONFIG_NOSYSTEM=1", "GIT_CONFIG_GLOBAL=/dev/null",
		"GIT_AUTHOR_NAME=t", "GIT_AUTHOR_EMAIL=t@x", "GIT_COMMITTER_NAME=t", "GIT_COMMITTER_EMAIL=t@x")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("git %v: %v\n%s", args, err, out)
	}
	return string(out[:len(out)-min(1, len(out))])
}

// Progress and the base commit come from the trailers: commits of another
// plan, and the user's own commits, do not count.
func TestPassedAndBase(t *testing.T) {
	dir := t.TempDir()
	git(t, dir, "init", "-q", "-b", "main")
	git(t, dir, "commit", "-q", "--allow-empty", "-m", "start")
	start := git(t, dir, "rev-parse", "HEAD")
	git(t, dir, "checkout", "-q", "-b", "factory/p1")
	commit := func(msg string) string {
		git(t, dir, "commit", "-q", "--allow-empty", "-m", msg)
		return git(t, dir, "rev-parse", "HEAD")
	}
	wo1 := commit("factory: WO-01 a\n\nFactory-Work-Order: WO-01\nFactory-Plan: p1\n")
	commit("a user's fix")
	commit("factory: WO-02 other plan\n\nFactory-Work-Order: WO-02\nFactory-Plan: p2\n")
	wo2 := commit("factory: WO-02 b\n\nFactory-Work-Order: WO-02\nFactory-Plan: p1\n")
	repo, err := gitws.Open(context.Background(), dir)
	if err != nil {
		t.Fatal(err)
	}
	base, err := baseCommit(context.Background(), repo, "factory/p1", "p1")
	if err != nil || base != start {
		t.Fatalf("base = %s, %v; want %s", base, err, start)
	}
	passed, err := Passed(context.Background(), repo, "HEAD", "p1", base)
	if err != nil || len(passed) != 2 || passed["WO-01"] != wo1 || passed["WO-02"] != wo2 {
		t.Errorf("passed = %v, %v", passed, err)
	}
	// A branch without commits of the plan starts at its tip.
	if base, _ := baseCommit(context.Background(), repo, "main", "p1"); base != start {
		t.Errorf("base of main = %s, want %s", base, start)
	}
	if base, _ := baseCommit(context.Background(), repo, "factory/new", "p1"); base != wo2 {
		t.Errorf("base of a new branch = %s, want HEAD %s", base, wo2)
	}
}

// A build's cache layout comes from its whole plan: the context files two
// or more orders read, those no order writes, and the long cache from
// work orders × attempts.
func TestPlanCacheLayout(t *testing.T) {
	wo := func(id string, context []string, allowed ...string) workorder.WorkOrder {
		return workorder.WorkOrder{ID: id, ContextFiles: context, AllowedFiles: allowed}
	}
	for _, tt := range []struct {
		name        string
		orders      []workorder.WorkOrder
		maxAttempts int
		want        CacheLayout
	}{
		{"one order", []workorder.WorkOrder{wo("WO-01", []string{"a", "b"}, "c")}, 2, CacheLayout{}},
		{"shared and stable", []workorder.WorkOrder{wo("WO-01", []string{"b", "a", "a"}, "b"), wo("WO-02", []string{"a", "b"}, "d")}, 2,
			CacheLayout{Shared: []string{"a", "b"}, Stable: []string{"a"}}},
		{"just short", []workorder.WorkOrder{wo("WO-01", nil), wo("WO-02", nil), wo("WO-03", nil)}, 3, CacheLayout{}},
		{"long", []workorder.WorkOrder{wo("WO-01", nil), wo("WO-02", nil), wo("WO-03", nil), wo("WO-04", nil), wo("WO-05", nil)}, 2,
			CacheLayout{Long: true}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			got := PlanCacheLayout(&workorder.Manifest{WorkOrders: tt.orders}, tt.maxAttempts)
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("layout (-want +got):\n%s", diff)
			}
		})
	}
}
