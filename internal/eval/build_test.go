package eval

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/factory-harness/factory/internal/builder"
	"github.com/factory-harness/factory/internal/gitws"
	"github.com/factory-harness/factory/internal/proc/sandbox"
)

// Options.Build replaces the local build: it gets each run's repository
// with the start files committed and its own output directory; its
// summary decides the run as a local build's does (PASS: the checks run
// on what it checked out; FAIL: unsolved; an error without a verdict: a
// run error, not unsolved, done again by the next invocation).
func TestRunWithBuildFunc(t *testing.T) {
	suiteDir := t.TempDir()
	check := "[[checks]]\ncommand = [\"test\", \"-f\", \"built.txt\"]\n[[checks]]\ncommand = [\"test\", \"-f\", \"secret.txt\"]\n"
	writeTree(t, suiteDir, map[string]string{
		"a/case.toml": "spec = \"spec.md\"\nstart = \"start\"\nhidden = \"hidden\"\n" + check, "a/spec.md": "x",
		"a/start/stub.txt": "stub", "a/hidden/secret.txt": "hidden",
	})
	suite, err := Load(suiteDir)
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	calls, keys := map[string]int{}, map[string]string{}
	build := func(ctx context.Context, b BuildRun) (*builder.Summary, error) {
		mu.Lock()
		calls[b.Key.String()]++
		keys[b.CacheKey] = b.Key.String()
		mu.Unlock()
		if want := (&eval{id: b.EvalID}).cacheKey(b.Key); b.CacheKey != want {
			return nil, fmt.Errorf("cache key %q, want the run's own %q", b.CacheKey, want)
		}
		if b.EvalID == "" || b.Case.Name != "a" || b.Log == nil {
			return nil, errors.New("bad BuildRun")
		}
		if info, err := os.Stat(b.Out); err != nil || !info.IsDir() {
			return nil, errors.New("no output directory")
		}
		if data, err := os.ReadFile(filepath.Join(b.Repo, "stub.txt")); err != nil || string(data) != "stub" {
			return nil, errors.New("the start files are not in the repository")
		}
		wo := []builder.WorkOrder{{ID: "WO-01", Outcome: builder.OutcomePassed, Attempts: 1}}
		switch b.Key.Model {
		case "down":
			return nil, errors.New("workflow lost: the server is unreachable")
		case "fails":
			wo[0].Outcome, wo[0].Attempts = builder.OutcomeFailed, 2
			repairs := []builder.RepairRecord{{Repair: 1, Failed: "WO-01", Outcome: builder.RepairApplied}, {Repair: 2, Failed: "WO-01r1", Outcome: builder.RepairGaveUp}}
			return &builder.Summary{Verdict: builder.VerdictFail, Tokens: 7, WorkOrders: wo, BuildDir: b.Out, Repairs: repairs}, nil
		}
		repo, err := gitws.Open(ctx, b.Repo)
		if err != nil {
			return nil, err
		}
		if err := os.WriteFile(filepath.Join(b.Repo, "built.txt"), []byte("ok"), 0o644); err != nil {
			return nil, err
		}
		if _, err := repo.CommitPaths(ctx, []string{"built.txt"}, "built"); err != nil {
			return nil, err
		}
		return &builder.Summary{Verdict: builder.VerdictPass, Tokens: 5, WorkOrders: wo, BuildDir: b.Out}, nil
	}
	o := Options{Suite: suite, Models: []string{"good", "fails", "down"}, Runs: 1, Jobs: 2, Out: t.TempDir(),
		Flags: map[string]any{}, Build: build, Sandbox: sandbox.Request{Mode: sandbox.ModeOff}}
	sum, err := Run(context.Background(), o)
	if err != nil {
		t.Fatal(err)
	}
	rs, err := readResults(sum.Results)
	if err != nil || len(rs) != 3 {
		t.Fatalf("results %+v, %v", rs, err)
	}
	for i, want := range []struct{ status, verdict, checks, err string }{
		{StatusSolved, "PASS", "2/2", ""},
		{StatusUnsolved, "FAIL", "0/2", ""},
		{StatusError, "", "0/2", "server is unreachable"},
	} {
		r := rs[i]
		got := r.Status + " " + r.BuildVerdict + " " + fmt.Sprintf("%d/%d", r.ChecksPassed, r.ChecksTotal)
		if got != want.status+" "+want.verdict+" "+want.checks || !strings.Contains(r.Error, want.err) {
			t.Errorf("%s: %s (%q), want %s %s %s (%q)", r.Model, got, r.Error, want.status, want.verdict, want.checks, want.err)
		}
	}
	if rs[1].Attempts != 2 || rs[1].Tokens != 7 || rs[0].Tokens != 5 || !rs[0].FirstAttemptPass || rs[1].Repairs != 2 || rs[0].Repairs != 0 {
		t.Errorf("attempts, tokens and repairs from the summary: %+v", rs[:2])
	}
	// Again: only the error is built again.
	if _, err := Run(context.Background(), o); err != nil {
		t.Fatal(err)
	}
	if calls["a/good/1"] != 1 || calls["a/fails/1"] != 1 || calls["a/down/1"] != 2 {
		t.Errorf("builds per run %v, want the error's twice and the others once", calls)
	}
	if len(keys) != 3 {
		t.Errorf("cache keys %v: want one per run, the same when a run is built again", keys)
	}
	o.Prepare = func(context.Context, RunKey, io.Writer) (builder.Options, error) { return builder.Options{}, nil }
	if _, err := Run(context.Background(), o); err == nil {
		t.Error("Prepare and Build together were accepted")
	}
}
