package cli

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/factory-harness/factory/internal/factory"
	"github.com/factory-harness/factory/internal/llmtest"
)

// realFile reads a large file of a real project: Go's own source, which
// every machine that builds factory has.
func realFile(t *testing.T, rel string) string {
	t.Helper()
	out, err := exec.Command("go", "env", "GOROOT").Output()
	if err != nil {
		t.Skipf("go env GOROOT: %v (the go toolchain is needed for its source files)", err)
	}
	data, err := os.ReadFile(filepath.Join(strings.TrimSpace(string(out)), "src", filepath.FromSlash(rel)))
	if err != nil {
		t.Skipf("the Go source tree is not installed: %v", err)
	}
	return string(data)
}

// editRepo is a repository holding net/http's server.go (~130 KB, 4,000
// lines) and the compiler's rewriteAMD64.go (~1.9 MB), with a verify
// script that passes, so only the acceptance commands judge.
type editRepo struct {
	repo, woPath    string
	server, rewrite string
	baseline        map[string]string
}

const (
	serverPath  = "net/http/server.go"
	rewritePath = "ssa/rewriteAMD64.go"
	// serverOld is one line of server.go, unique in it.
	serverOld = "const TimeFormat = \"Mon, 02 Jan 2006 15:04:05 GMT\"\n"
	serverNew = "const TimeFormat = \"Mon, 02 Jan 2006 15:04:05 GMT\" // factory-edit-marker\n"
)

func newEditRepo(t *testing.T) *editRepo {
	t.Helper()
	e := &editRepo{server: realFile(t, "net/http/server.go"), rewrite: realFile(t, "cmd/compile/internal/ssa/rewriteAMD64.go")}
	if strings.Count(e.server, serverOld) != 1 {
		t.Skipf("this Go release's server.go does not hold %q once", serverOld)
	}
	e.repo = newRepo(t, map[string]string{
		serverPath: e.server, rewritePath: e.rewrite, "scripts/verify.sh": "exit 0\n", "README.md": "edits\n",
	})
	e.baseline = treeSnapshot(t, e.repo)
	wo := map[string]any{
		"id": "WO-01", "title": "Mark TimeFormat",
		"intent":              "Add the comment `// factory-edit-marker` after the TimeFormat constant in net/http/server.go and write NOTES.md.",
		"allowed_files":       []string{serverPath, rewritePath, "NOTES.md"},
		"forbidden":           []string{"README.md"},
		"acceptance_commands": []string{"grep -q factory-edit-marker " + serverPath, "test -f NOTES.md"},
		"context_files":       []string{serverPath, rewritePath},
	}
	e.woPath = filepath.Join(t.TempDir(), "wo.json")
	data, _ := json.Marshal(wo)
	if err := os.WriteFile(e.woPath, data, 0o644); err != nil {
		t.Fatal(err)
	}
	return e
}

func (e *editRepo) goodEdit() llmtest.Edit {
	return llmtest.Edit{Path: serverPath, BaseSHA256: sha(e.server), Replace: [][2]string{{serverOld, serverNew}}}
}

// notes is the new file the passing proposals also write.
var notes = llmtest.Write{Path: "NOTES.md", BaseSHA256: sha(""), Content: "marked\n"}

// TestRunEditsLargeFile drives the real binary, with each provider, on a
// real 4,000-line file: an edit whose old text is not in the file is
// refused with nothing written and a brief naming the nearest candidate;
// the retry, an edit and a new file together, passes; the accepted
// proposal is a small fraction of the whole file, and write_result.json
// gives the line the edit replaced.
func TestRunEditsLargeFile(t *testing.T) {
	for _, provider := range []string{"openai", "anthropic"} {
		t.Run(provider, func(t *testing.T) {
			t.Parallel()
			e := newEditRepo(t)
			wrong := strings.Replace(serverOld, "GMT", "UTC", 1)
			refused := llmtest.EditProposal("mark", []llmtest.Write{notes},
				llmtest.Edit{Path: serverPath, BaseSHA256: sha(e.server), Replace: [][2]string{{wrong, serverNew}}})
			accepted := llmtest.EditProposal("mark", []llmtest.Write{notes}, e.goodEdit())
			out := filepath.Join(t.TempDir(), "out")
			args := []string{"run", "--repo", e.repo, "--work-order", e.woPath, "--out", out, "--timeout-seconds", "60", "--max-attempts", "2"}
			var res runOut
			var prompts func(int) string
			if provider == "openai" {
				srv := llmtest.Start(t, llmtest.Reply{Content: refused}, llmtest.Reply{Content: accepted})
				res = runFactory(t, []string{"OPENAI_API_KEY=k"}, append(args, "--llm-model", "test-model", "--llm-base-url", srv.URL)...)
				prompts = srv.UserPrompt
			} else {
				srv := llmtest.StartAnthropic(t, llmtest.AnthropicReply{Content: refused}, llmtest.AnthropicReply{Content: accepted})
				res = runFactory(t, []string{"OPENAI_API_KEY=", "ANTHROPIC_API_KEY=k"}, append(args, "--llm-model", "anthropic:claude-sonnet-4-5", "--llm-base-url", srv.URL)...)
				reqs := srv.Requests()
				if len(reqs) > 0 {
					tools, _ := json.Marshal(reqs[0]["tools"])
					if !strings.Contains(string(tools), `"edits"`) {
						t.Errorf("the write_proposal tool's input schema lacks edits: %s", tools)
					}
				}
			}
			if res.code != ExitPass {
				t.Fatalf("exit %d, want PASS\nstdout: %s\nstderr: %s", res.code, res.stdout, res.stderr)
			}
			var s factory.RunSummary
			readJSON(t, summaryPath(t, res), &s)
			if len(s.Attempts) != 2 || s.Attempts[0].FailureBrief == nil || s.Attempts[0].FailureBrief.Stage != factory.StageEditMismatch {
				t.Fatalf("attempts: %+v; want edit_mismatch, then PASS", s.Attempts)
			}
			brief := s.Attempts[0].FailureBrief.PrimaryErrorExcerpt
			for _, want := range []string{"edits[0]", serverPath, "0 matches", "TimeFormat", "No change was written; send the whole proposal again."} {
				if !strings.Contains(brief, want) {
					t.Errorf("the edit_mismatch brief lacks %q:\n%s", want, brief)
				}
			}
			if prompts != nil && !strings.Contains(prompts(1), "stage: edit_mismatch") {
				t.Errorf("the retry's prompt does not carry the edit_mismatch brief")
			}
			runDir := filepath.Dir(summaryPath(t, res))
			var w1 factory.WriteResult
			readJSON(t, filepath.Join(runDir, "attempt_1", "write_result.json"), &w1)
			if w1.WriteOK || len(w1.Files) != 0 {
				t.Errorf("attempt 1 wrote files: %+v", w1)
			}
			var w2 factory.WriteResult
			readJSON(t, filepath.Join(runDir, "attempt_2", "write_result.json"), &w2)
			line := strings.Count(e.server[:strings.Index(e.server, serverOld)], "\n") + 1
			var edited *factory.WrittenFile
			for i := range w2.Files {
				if w2.Files[i].Path == serverPath {
					edited = &w2.Files[i]
				}
			}
			if edited == nil || len(edited.Edits) != 1 || edited.Edits[0].Lines != [2]int{line, line} || edited.Edits[0].NewLines != [2]int{line, line} {
				t.Errorf("write_result.json for %s: %+v; want one edit of line %d", serverPath, edited, line)
			}
			prop, err := os.ReadFile(filepath.Join(runDir, "attempt_2", "proposed_writes.json"))
			if err != nil || !strings.Contains(string(prop), `"replace"`) {
				t.Errorf("proposed_writes.json does not keep the edits (%v): %.300s", err, prop)
			}
			if ratio := float64(len(accepted)) / float64(len(e.server)); ratio > 0.02 {
				t.Errorf("the accepted proposal is %d bytes, %.1f%% of the %d-byte file; want at most 2%%", len(accepted), 100*ratio, len(e.server))
			}
			got, _ := os.ReadFile(filepath.Join(e.repo, serverPath))
			if string(got) != strings.Replace(e.server, serverOld, serverNew, 1) {
				t.Errorf("%s is not the base with the one edit spliced in", serverPath)
			}
		})
	}
}

// TestRunEditRefusals: each attempt is refused before anything is written
// — an edit good in one file and ambiguous in another (all or nothing
// across files), a stale base, a whole write that elides most of the file
// — and the run ends FAIL with the repository as it was.
func TestRunEditRefusals(t *testing.T) {
	t.Parallel()
	e := newEditRepo(t)
	ambiguous := llmtest.Edit{Path: rewritePath, BaseSHA256: sha(e.rewrite), Replace: [][2]string{{"\treturn false\n", "\treturn true\n"}}}
	stale := e.goodEdit()
	stale.BaseSHA256 = sha(e.server + "x")
	elided := "package http\n\n// ... rest of the code unchanged ...\n\nconst TimeFormat = \"x\" // factory-edit-marker\n"
	srv := llmtest.Start(t,
		llmtest.Reply{Content: llmtest.EditProposal("both", []llmtest.Write{notes}, e.goodEdit(), ambiguous)},
		llmtest.Reply{Content: llmtest.EditProposal("stale", nil, stale)},
		llmtest.Reply{Content: llmtest.Proposal("whole", llmtest.Write{Path: serverPath, BaseSHA256: sha(e.server), Content: elided}, notes)})
	out := filepath.Join(t.TempDir(), "out")
	res := runFactory(t, []string{"OPENAI_API_KEY=k"}, "run", "--repo", e.repo, "--work-order", e.woPath, "--out", out,
		"--llm-model", "test-model", "--llm-base-url", srv.URL, "--timeout-seconds", "60", "--max-attempts", "3")
	if res.code != ExitFail {
		t.Fatalf("exit %d, want FAIL\nstdout: %s\nstderr: %s", res.code, res.stdout, res.stderr)
	}
	var s factory.RunSummary
	readJSON(t, summaryPath(t, res), &s)
	want := []string{factory.StageEditMismatch, factory.StageStaleContext, factory.StageElidedContent}
	if len(s.Attempts) != len(want) {
		t.Fatalf("%d attempts, want %d", len(s.Attempts), len(want))
	}
	for i, a := range s.Attempts {
		if a.FailureBrief == nil || a.FailureBrief.Stage != want[i] {
			t.Fatalf("attempt %d: brief %+v, want stage %s", i+1, a.FailureBrief, want[i])
		}
		t.Logf("attempt %d: %s:\n%s", i+1, a.FailureBrief.Stage, a.FailureBrief.PrimaryErrorExcerpt)
	}
	if b := s.Attempts[0].FailureBrief; !strings.Contains(b.PrimaryErrorExcerpt, "matches, at lines") {
		t.Errorf("the ambiguous edit's brief does not list where it matches:\n%s", b.PrimaryErrorExcerpt)
	}
	if b := s.Attempts[2].FailureBrief; !strings.Contains(b.PrimaryErrorExcerpt, "rest of the code unchanged") {
		t.Errorf("the elided write's brief does not quote the elision:\n%s", b.PrimaryErrorExcerpt)
	}
	sameTree(t, e.baseline, treeSnapshot(t, e.repo))
}

// TestRunEditOver200KB changes a 1.9 MB file — ten times what a whole
// write may be — with one edit; the prompt shows it as a partial view
// that includes the lines the work order names.
func TestRunEditOver200KB(t *testing.T) {
	t.Parallel()
	e := newEditRepo(t)
	const old = "func rewriteValueAMD64(v *Value) bool {\n"
	if strings.Count(e.rewrite, old) != 1 {
		t.Skipf("this Go release's rewriteAMD64.go does not hold %q once", old)
	}
	wo := map[string]any{
		"id": "WO-01", "title": "Mark rewriteValueAMD64",
		"intent":              "Add a comment line before `rewriteValueAMD64` in " + rewritePath + ".",
		"allowed_files":       []string{rewritePath},
		"forbidden":           []string{},
		"acceptance_commands": []string{"grep -q factory-edit-marker " + rewritePath},
		"context_files":       []string{rewritePath},
	}
	data, _ := json.Marshal(wo)
	if err := os.WriteFile(e.woPath, data, 0o644); err != nil {
		t.Fatal(err)
	}
	srv := llmtest.Start(t, llmtest.Reply{Content: llmtest.EditProposal("mark", nil,
		llmtest.Edit{Path: rewritePath, BaseSHA256: sha(e.rewrite), Replace: [][2]string{{old, "// factory-edit-marker\n" + old}}})})
	out := filepath.Join(t.TempDir(), "out")
	res := runFactory(t, []string{"OPENAI_API_KEY=k"}, "run", "--repo", e.repo, "--work-order", e.woPath, "--out", out,
		"--llm-model", "test-model", "--llm-base-url", srv.URL, "--timeout-seconds", "60", "--max-attempts", "1")
	if res.code != ExitPass {
		t.Fatalf("exit %d, want PASS\nstdout: %s\nstderr: %s", res.code, res.stdout, res.stderr)
	}
	prompt := srv.UserPrompt(0)
	if !strings.Contains(prompt, "[partial view:") || !strings.Contains(prompt, old) {
		t.Errorf("the prompt does not show %s as a partial view holding the named function", rewritePath)
	}
	got, _ := os.ReadFile(filepath.Join(e.repo, rewritePath))
	if string(got) != strings.Replace(e.rewrite, old, "// factory-edit-marker\n"+old, 1) {
		t.Errorf("%s is not the base with the edit spliced in", rewritePath)
	}
}
