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

	"github.com/factory-harness/factory/internal/llmtest"
)

var updateBuildExample = flag.Bool("update-build-example", false,
	"re-record examples/textstats/transcript.jsonl from the hand-written answers in examples/textstats/answers")

const buildExampleDir = "../../examples/textstats"

// examplePlan is the part of answers/plan.json the test needs to turn the
// answer trees into proposals.
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
// what the earlier work orders left. It also returns each work order's
// sorted files, which its commit must hold exactly.
func exampleAnswers(t *testing.T) (plan string, replies []llmtest.Reply, files []exampleCommit) {
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
		files = append(files, exampleCommit{wo.ID, answerFiles(t, woDir)})
	}
	return string(raw), replies, files
}

// exampleCommit is what a work order's commit must hold.
type exampleCommit struct {
	id    string
	files []string
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
// against the scripted servers first.
func TestBuildExample(t *testing.T) {
	plan, replies, files := exampleAnswers(t)
	env := append(os.Environ(), "FACTORY=factory", "TMPDIR="+t.TempDir())
	if *updateBuildExample {
		planner := llmtest.StartResponses(t, llmtest.ResponsesReply{Content: plan})
		se := llmtest.Start(t, replies...)
		url := routeByPath(t, map[string]string{"/v1/responses": planner.URL, "/v1/chat/completions": se.URL})
		env = append(env, "EXAMPLE_RECORD_BASE_URL="+url, "OPENAI_API_KEY=example")
		defer func() {
			if planner.Remaining() != 0 || se.Remaining() != 0 {
				t.Errorf("unused answers: planner %d, work orders %d", planner.Remaining(), se.Remaining())
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
	root := git(t, repo, "rev-list", "--max-parents=0", "HEAD")
	commits := strings.Fields(git(t, repo, "rev-list", "--reverse", root+"..HEAD"))
	if len(commits) != len(files) {
		t.Fatalf("%d commits on the build branch after the initial one, want one per work order (%d)", len(commits), len(files))
	}
	for i, c := range commits {
		id := files[i].id
		if subject := git(t, repo, "log", "-1", "--format=%s", c); !strings.HasPrefix(subject, "factory: "+id+" ") {
			t.Errorf("commit %d subject %q", i+1, subject)
		}
		trailers := git(t, repo, "log", "-1", "--format=%(trailers:only,unfold)", c)
		for _, tr := range []string{"Factory-Work-Order: " + id, "Factory-Run-Id: ", "Factory-Plan: "} {
			if !strings.Contains(trailers, tr) {
				t.Errorf("%s commit lacks trailer %q:\n%s", id, tr, trailers)
			}
		}
		got := strings.Fields(git(t, repo, "show", "--name-only", "--format=", c))
		slices.Sort(got)
		if !slices.Equal(got, files[i].files) {
			t.Errorf("%s commit holds %v, want %v", id, got, files[i].files)
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
