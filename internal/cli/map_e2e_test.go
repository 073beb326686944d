package cli

import (
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"

	"github.com/factory-harness/factory/internal/llmtest"
)

// mapRepo is an existing Python project whose spec names one file and
// one function to extend.
func mapRepo(t *testing.T) string {
	return newRepo(t, map[string]string{
		"README.md":         "vectors\n",
		"vecmath/ops.py":    "def scale_vector(vec, factor):\n    return [v * factor for v in vec]\n\n\ndef dot(a, b):\n    return sum(x * y for x, y in zip(a, b))\n",
		"vecmath/shapes.py": "from vecmath.ops import scale_vector\n\n\nclass Polygon:\n    def grow(self, factor):\n        return [scale_vector(p, factor) for p in self.points]\n",
		"app/cli.py":        "import sys\n\n\ndef main(argv):\n    return 0\n",
	})
}

// factory plan on an existing repository sends the planner the signature
// of the function the spec names, and the reviewer the map too; the
// summary records the map's hash; --map-tokens 0 sends none.
func TestPlanSendsTheRepositoryMap(t *testing.T) {
	repo := mapRepo(t)
	for _, tc := range []struct {
		name  string
		extra []string
		want  bool
	}{
		{"default budget", nil, true},
		{"off", []string{"--map-tokens", "0"}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newPlanFixture(t, done(validPlan(t)), done(`{"findings": []}`))
			writeFiles(t, filepath.Dir(f.spec), map[string]string{"spec.txt": "Extend scale_vector in vecmath/ops.py to accept a vector of any length.\n"})
			res := f.run(t, append([]string{"--repo", repo}, tc.extra...)...)
			if res.code != 0 {
				t.Fatalf("plan: exit %d\n%s", res.code, res.stderr)
			}
			reqs := f.srv.Requests()
			if len(reqs) != 2 {
				t.Fatalf("%d requests, want the plan and the review", len(reqs))
			}
			for i, req := range reqs {
				body, err := json.Marshal(req)
				if err != nil {
					t.Fatal(err)
				}
				for _, want := range []string{"def scale_vector(vec, factor):", "class Polygon:", "# The code already in the repository"} {
					if got := strings.Contains(string(body), want); got != tc.want {
						t.Errorf("request %d: contains %q = %v, want %v", i, want, got, tc.want)
					}
				}
			}
			if got := f.summary(t).RepoMapSHA256 != ""; got != tc.want {
				t.Errorf("summary records a map hash: %v, want %v", got, tc.want)
			}
			if tc.want && !strings.Contains(res.stderr, "map: 3 source files (3 parsed") {
				t.Errorf("stderr does not report the map:\n%s", res.stderr)
			}
		})
	}
}

// factory map prints what the planner would see, ranked for --for; the
// second run parses nothing.
func TestMapCommand(t *testing.T) {
	repo := mapRepo(t)
	spec := filepath.Join(t.TempDir(), "spec.md")
	writeFiles(t, filepath.Dir(spec), map[string]string{"spec.md": "Polygon.grow must round; see vecmath/shapes.py.\n"})
	first := runFactory(t, nil, "map", "--repo", repo, "--for", spec)
	if first.code != 0 {
		t.Fatalf("map: exit %d\n%s", first.code, first.stderr)
	}
	if !strings.HasPrefix(first.stdout, "Repository map: ") || strings.Index(first.stdout, "vecmath/shapes.py") > strings.Index(first.stdout, "vecmath/ops.py") {
		t.Errorf("the named file is not first:\n%s", first.stdout)
	}
	second := runFactory(t, nil, "map", "--repo", repo, "--for", spec)
	if second.stdout != first.stdout || !strings.Contains(second.stderr, "(0 parsed, 3 from the cache") {
		t.Errorf("second run: stderr %q, same output %v", second.stderr, second.stdout == first.stdout)
	}
	asJSON := runFactory(t, nil, "map", "--repo", repo, "--json", "--map-tokens", "100000")
	var v struct {
		Shown, Total, Tokens int
		Files                []struct{ Path string }
	}
	if err := json.Unmarshal([]byte(asJSON.stdout), &v); err != nil || v.Shown != v.Total || v.Total == 0 || len(v.Files) != 3 || v.Tokens == 0 {
		t.Errorf("--json: %v %+v\n%s", err, v, asJSON.stdout)
	}
	if off := runFactory(t, nil, "map", "--repo", repo, "--map-tokens", "0"); off.code != 0 || off.stdout != "" {
		t.Errorf("--map-tokens 0: exit %d, %q", off.code, off.stdout)
	}
	if bad := runFactory(t, nil, "map", "--repo", t.TempDir()); bad.code != ExitUsage {
		t.Errorf("not a repository: exit %d", bad.code)
	}
}

// In a build, a work order that starts from a tree with source files gets
// a map slice in its own part of the SE prompt, after the shared context;
// the first order, on a tree without any, gets none; --map-tokens 0 turns
// both off.
func TestBuildSendsWorkOrdersTheirMap(t *testing.T) {
	for _, tokens := range []string{"4096", "0"} {
		t.Run(tokens, func(t *testing.T) {
			f := newBuildFixture(t, buildPlan(""))
			planJSON, _ := json.Marshal(buildPlan(""))
			planner := llmtest.StartResponses(t, llmtest.ResponsesReply{Content: string(planJSON)})
			se := llmtest.Start(t, replyWO01, replyWO02, replyWO03)
			url := routeByPath(t, map[string]string{"/v1/responses": planner.URL, "/v1/chat/completions": se.URL})
			spec := filepath.Join(t.TempDir(), "spec.md")
			writeFiles(t, filepath.Dir(spec), map[string]string{"spec.md": "# calc\nA calculator library with add, multiply and subtract.\n"})
			res := runFactory(t, append(gitEnv(t.TempDir()), "OPENAI_API_KEY=k"), "build", "--spec", spec, "--repo", f.repo, "--out", f.out,
				"--llm-model", "test-model", "--llm-base-url", url, "--no-review", "--poll-interval", "10ms", "--map-tokens", tokens)
			if res.code != ExitPass {
				t.Fatalf("exit %d\n%s%s", res.code, res.stdout, res.stderr)
			}
			reqs := se.Requests()
			if len(reqs) != 3 {
				t.Fatalf("%d SE requests, want 3", len(reqs))
			}
			for i, req := range reqs {
				msgs, _ := req["messages"].([]any)
				user := msgs[len(msgs)-1].(map[string]any)["content"].(string)
				at := strings.Index(user, "# Code elsewhere in the repository")
				if want := i > 0 && tokens != "0"; (at >= 0) != want {
					t.Errorf("WO-0%d: map present = %v, want %v", i+1, at >= 0, want)
				}
				if at < 0 {
					continue
				}
				if shared := strings.Index(user, "# Context files shared"); at < shared || at > strings.Index(user, "# Work order") {
					t.Errorf("WO-0%d: the map is not between the shared context and the work order:\n%s", i+1, user)
				}
				if !strings.Contains(user[at:], "def test_add(self):") {
					t.Errorf("WO-0%d: the map lacks the test WO-01 wrote:\n%s", i+1, user[at:])
				}
			}
		})
	}
}

// factory run shows the SE the map ranked for its work order: the
// definitions its intent names, outside its context files.
func TestRunSendsTheWorkOrderItsMap(t *testing.T) {
	repo := mapRepo(t)
	wo := `{"id": "WO-01", "title": "CLI scaling", "intent": "Make main call scale_vector on its arguments.",
		"preconditions": [], "postconditions": [], "allowed_files": ["app/cli.py"], "forbidden": [],
		"acceptance_commands": ["python3 -c \"import app.cli\""], "context_files": ["app/cli.py"]}`
	woPath := filepath.Join(t.TempDir(), "wo.json")
	writeFiles(t, filepath.Dir(woPath), map[string]string{"wo.json": wo})
	srv := llmtest.Start(t, llmtest.Reply{Content: "not a proposal"})
	runFactory(t, []string{"OPENAI_API_KEY=k"}, "run", "--repo", repo, "--work-order", woPath, "--out", filepath.Join(t.TempDir(), "runs"),
		"--llm-model", "m", "--llm-base-url", srv.URL, "--max-attempts", "1")
	reqs := srv.Requests()
	if len(reqs) != 1 {
		t.Fatalf("%d requests, want 1", len(reqs))
	}
	body, _ := json.Marshal(reqs[0])
	at := strings.Index(string(body), "# Code elsewhere in the repository")
	if at < 0 || !strings.Contains(string(body[at:]), "def scale_vector(vec, factor):") || strings.Contains(string(body[at:]), "def main(argv)") {
		t.Errorf("the SE request does not carry the map ranked for the work order without its context file:\n%s", body)
	}
}
