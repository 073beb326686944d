package cli

import (
	"encoding/json"
	"flag"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/factory-harness/factory/internal/builder"
	"github.com/factory-harness/factory/internal/llmtest"
	"github.com/factory-harness/factory/internal/planner"
)

var updateBuildExample = flag.Bool("update-build-example", false,
	"re-record examples/textstats/transcript.jsonl from the hand-written answers in examples/textstats/answers")

const buildExampleDir = "../../examples/textstats"

// examplePlan is the part of a plan the test needs: to turn the answer
// trees into proposals, and to check the commits.
type examplePlan struct {
	WorkOrders []struct {
		ID           string   `json:"id"`
		Title        string   `json:"title"`
		AllowedFiles []string `json:"allowed_files"`
	} `json:"work_orders"`
}

// exampleAnswers reads the hand-written answers: the planner's reply
// (plan.json verbatim), and one write proposal per work order holding every
// file of answers/WO-NN/, in allowed_files order, each with the base hash of
// what the earlier work orders left.
func exampleAnswers(t *testing.T) (plan string, replies []llmtest.Reply) {
	t.Helper()
	dir := filepath.Join(buildExampleDir, "answers")
	raw, err := os.ReadFile(filepath.Join(dir, "plan.json"))
	if err != nil {
		t.Fatal(err)
	}
	var p examplePlan
	if err := json.Unmarshal(raw, &p); err != nil {
		t.Fatalf("plan.json: %v", err)
	}
	tree := map[string]string{} // the repository's files after the work orders so far
	for _, wo := range p.WorkOrders {
		woDir := filepath.Join(dir, wo.ID)
		if got := answerFiles(t, woDir); !slices.Equal(got, slices.Sorted(slices.Values(wo.AllowedFiles))) {
			t.Fatalf("%s holds %v; the plan allows exactly %v", woDir, got, wo.AllowedFiles)
		}
		var writes []llmtest.Write
		for _, path := range wo.AllowedFiles {
			content, err := os.ReadFile(filepath.Join(woDir, filepath.FromSlash(path)))
			if err != nil {
				t.Fatal(err)
			}
			writes = append(writes, llmtest.Write{Path: path, BaseSHA256: sha(tree[path]), Content: string(content)})
			tree[path] = string(content)
		}
		summary := wo.Title + " (a hand-written answer for the textstats example, not a real model's)"
		replies = append(replies, llmtest.Reply{Content: llmtest.Proposal(summary, writes...)})
	}
	return string(raw), replies
}

// answerFiles lists the files under dir as sorted slash paths.
func answerFiles(t *testing.T, dir string) []string {
	t.Helper()
	var out []string
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		rel, err := filepath.Rel(dir, p)
		out = append(out, filepath.ToSlash(rel))
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	slices.Sort(out)
	return out
}

// TestBuildExample runs `bash examples/build.sh` as a user would: the whole
// pipeline, planner and every work order, replayed from the transcript into
// a fresh repository whose own tests must pass. A prompt change that
// invalidates the transcript fails here; -update-build-example re-records it
// against the scripted servers first. The checks read the plan the build
// compiled, not the answers, so a recording with a real model can replace
// the transcript.
func TestBuildExample(t *testing.T) {
	env := append(os.Environ(), "FACTORY=factory", "TMPDIR="+t.TempDir())
	if *updateBuildExample {
		plan, replies := exampleAnswers(t)
		planSrv := llmtest.StartResponses(t, llmtest.ResponsesReply{Content: plan})
		se := llmtest.Start(t, replies...)
		url := routeByPath(t, map[string]string{"/v1/responses": planSrv.URL, "/v1/chat/completions": se.URL})
		env = append(env, "EXAMPLE_RECORD_BASE_URL="+url, "OPENAI_API_KEY=example")
		defer func() {
			if planSrv.Remaining() != 0 || se.Remaining() != 0 {
				t.Errorf("unused answers: planner %d, work orders %d", planSrv.Remaining(), se.Remaining())
			}
		}()
	}
	cmd := exec.Command("bash", filepath.Join("..", "..", "examples", "build.sh"))
	cmd.Env = env
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("examples/build.sh: %v\n%s", err, out)
	}
	for _, want := range []string{"verdict: PASS", "the built project's own tests:", "\nOK\n"} {
		if !strings.Contains(string(out), want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	repo := outputField(t, string(out), "repository: ")
	sums, _ := filepath.Glob(filepath.Join(outputField(t, string(out), "artifacts: "), "builds", "*", "build_summary.json"))
	if len(sums) != 1 {
		t.Fatalf("build summaries: %v, want one", sums)
	}
	var sum builder.Summary
	readJSON(t, sums[0], &sum)
	var plan examplePlan
	readJSON(t, filepath.Join(sum.PlanDir, planner.ManifestName), &plan)

	root := git(t, repo, "rev-list", "--max-parents=0", "HEAD")
	commits := strings.Fields(git(t, repo, "rev-list", "--reverse", root+"..HEAD"))
	if len(commits) != len(plan.WorkOrders) || len(sum.WorkOrders) != len(plan.WorkOrders) {
		t.Fatalf("%d commits after the initial one and %d work orders in the summary, want one per work order of the plan (%d)",
			len(commits), len(sum.WorkOrders), len(plan.WorkOrders))
	}
	for i, c := range commits {
		wo := plan.WorkOrders[i]
		if sum.WorkOrders[i].Commit != c {
			t.Errorf("%s: summary names commit %s, the branch has %s", wo.ID, sum.WorkOrders[i].Commit, c)
		}
		if subject := git(t, repo, "log", "-1", "--format=%s", c); subject != "factory: "+wo.ID+" "+wo.Title {
			t.Errorf("commit %d subject %q", i+1, subject)
		}
		trailers := git(t, repo, "log", "-1", "--format=%(trailers:only,unfold)", c)
		for _, tr := range []string{"Factory-Work-Order: " + wo.ID, "Factory-Run-Id: ", "Factory-Plan: " + sum.PlanHash} {
			if !strings.Contains(trailers, tr) {
				t.Errorf("%s commit lacks trailer %q:\n%s", wo.ID, tr, trailers)
			}
		}
		files := strings.Fields(git(t, repo, "show", "--name-only", "--format=", c))
		if len(files) == 0 || slices.ContainsFunc(files, func(f string) bool { return !slices.Contains(wo.AllowedFiles, f) }) {
			t.Errorf("%s commit holds %v; allowed %v", wo.ID, files, wo.AllowedFiles)
		}
	}
	if st := git(t, repo, "status", "--porcelain", "--untracked-files=all"); st != "" {
		t.Errorf("work tree not clean:\n%s", st)
	}
	// The built project stands on its own: its tests pass outside factory.
	test := exec.Command("python3", "-m", "unittest", "discover", "-s", "tests", "-t", ".")
	test.Dir = repo
	if res, err := test.CombinedOutput(); err != nil {
		t.Errorf("the built repository's tests: %v\n%s", err, res)
	}
}

// outputField returns the rest of the line of out that starts with prefix.
func outputField(t *testing.T, out, prefix string) string {
	t.Helper()
	for line := range strings.Lines(out) {
		if rest, ok := strings.CutPrefix(line, prefix); ok {
			return strings.TrimSpace(rest)
		}
	}
	t.Fatalf("output has no line starting with %q:\n%s", prefix, out)
	return ""
}
