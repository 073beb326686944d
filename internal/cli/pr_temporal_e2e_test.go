package cli

import (
	"strings"
	"testing"

	"github.com/factory-harness/factory/internal/forge"
	"github.com/factory-harness/factory/internal/llmtest"
)

// build --temporal --pr: the workers push the branch, the submitter opens
// the pull request (the token never leaves its process: the workers and
// the workflow's history have none); a rerun changes nothing; a failed
// build is a draft with one comment; no token is refused before any
// workflow starts.
func TestTemporalBuildPR(t *testing.T) {
	addr := startTemporal(t)
	t.Run("pass", func(t *testing.T) {
		f := newPRFixture(t, buildPlan(""))
		routes := newRoutes(passingReplies)
		srv := llmtest.StartRouted(t, routes.route)
		startWorker(t, addr, "worker-pr", []string{"OPENAI_API_KEY=k"}, "--llm-base-url", srv.URL, "--task-queue", "pr")
		args := append(temporalBuildArgs(addr, "file://"+f.remote, f.buildFixture, "--task-queue", "pr", "--pr"), f.forgeArgs()...)

		noToken := runFactory(t, gitEnv(t.TempDir()), args...)
		if noToken.code != ExitUsage || !strings.Contains(noToken.stderr, "GITHUB_TOKEN") || strings.Contains(noToken.stderr, "workflow ") {
			t.Fatalf("without a token: exit %d\n%s", noToken.code, noToken.stderr)
		}
		if n := len(srv.Requests()) + len(f.gh.Requests()); n != 0 {
			t.Fatalf("without a token: %d requests to the model and the forge", n)
		}
		withRemote := runFactory(t, f.env(t), append(args, "--remote", "origin")...)
		if withRemote.code != ExitUsage || !strings.Contains(withRemote.stderr, "--remote does not apply with --temporal") {
			t.Fatalf("--remote with --temporal: exit %d\n%s", withRemote.code, withRemote.stderr)
		}

		res := runFactory(t, f.env(t), args...)
		if res.code != ExitPass || !strings.Contains(res.stdout, "pull request #1 (open, created)") {
			t.Fatalf("exit %d\nstdout:\n%s\nstderr:\n%s", res.code, res.stdout, res.stderr)
		}
		branch := "factory/" + planHashOf(t, f.buildFixture)
		prs := f.gh.PRs("acme/calc")
		if len(prs) != 1 || prs[0].Draft || prs[0].Head != branch || prs[0].Base != "main" {
			t.Fatalf("pull requests = %+v", prs)
		}
		tip := git(t, f.remote, "rev-parse", "refs/heads/"+branch)
		for _, want := range []string{forge.BeginMarker, "| WO-01 | Skeleton and add() | passed |", "| WO-03 | subtract() | passed | " + tip[:12] + " |",
			"factory build --temporal HOST:PORT --repo-url REPO_URL --plan plan --branch " + branch} {
			if !strings.Contains(prs[0].Body, want) {
				t.Errorf("body lacks %q:\n%s", want, prs[0].Body)
			}
		}
		if strings.Contains(prs[0].Body, f.remote) {
			t.Errorf("the body names the local remote's path:\n%s", prs[0].Body)
		}
		writesBefore := writes(f.gh.Requests())
		again := runFactory(t, f.env(t), args...)
		if again.code != ExitPass || !strings.Contains(again.stdout, "pull request #1 (open, unchanged)") {
			t.Fatalf("rerun: exit %d\n%s%s", again.code, again.stdout, again.stderr)
		}
		if n := writes(f.gh.Requests()) - writesBefore; n != 0 {
			t.Errorf("the rerun changed the forge %d times", n)
		}
		id := outputField(t, res.stdout, "workflow: ")
		if strings.Contains(string(historyBytes(t, addr, id)), ghToken) {
			t.Error("the token is in the workflow's history")
		}
		checkNoToken(t, ghToken, f.out, f.repo, f.remote)
	})
	t.Run("fail", func(t *testing.T) {
		f := newPRFixture(t, buildPlan(""))
		routes := newRoutes(map[string][]llmtest.Reply{"WO-01": {replyWO01}, "WO-02": {replyWO02Bad}, "WO-03": {replyWO03}})
		srv := llmtest.StartRouted(t, routes.route)
		startWorker(t, addr, "worker-pr-fail", []string{"OPENAI_API_KEY=k"}, "--llm-base-url", srv.URL, "--task-queue", "pr-fail")
		args := append(temporalBuildArgs(addr, "file://"+f.remote, f.buildFixture, "--task-queue", "pr-fail", "--pr", "--repair", "off", "--json"), f.forgeArgs()...)
		res := runFactory(t, f.env(t), args...)
		if res.code != ExitFail || !strings.Contains(res.stderr, "pull request #1 (open, draft, created)") {
			t.Fatalf("exit %d, want %d\nstdout:\n%s\nstderr:\n%s", res.code, ExitFail, res.stdout, res.stderr)
		}
		prs := f.gh.PRs("acme/calc")
		if len(prs) != 1 || !prs[0].Draft || !strings.Contains(prs[0].Body, "WO-02 failed at verify_failed") {
			t.Fatalf("pull requests = %+v", prs)
		}
		comments := f.gh.Comments("acme/calc", 1)
		if len(comments) != 1 || !strings.Contains(comments[0].Body, "**WO-02**") || !strings.Contains(comments[0].Body, "--temporal") {
			t.Fatalf("comments = %+v", comments)
		}
		// The same failure again: no second comment.
		if again := runFactory(t, f.env(t), args...); again.code != ExitFail {
			t.Fatalf("rerun: exit %d\n%s", again.code, again.stderr)
		}
		if n := len(f.gh.Comments("acme/calc", 1)); n != 1 {
			t.Errorf("%d comments after the rerun, want 1", n)
		}
	})
}
