package cli

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/factory-harness/factory/internal/factory"
	"github.com/factory-harness/factory/internal/llmtest"
	"github.com/factory-harness/factory/internal/workorder"
)

// TestRunDuplicateWritesAreRefused proposes the same path more than once in
// one proposal (README "What happens in a run", step 3: all checks run before
// the first byte is written). The reply is not a valid proposal
// (llm_output_invalid, issue 37) and the brief names every repeat, and nothing at all is written — not even the first,
// otherwise valid, write of the duplicated path or an unrelated valid write.
func TestRunDuplicateWritesAreRefused(t *testing.T) {
	calc := func(content string) llmtest.Write {
		return llmtest.Write{Path: "calc.py", BaseSHA256: sha(calcV1), Content: content}
	}
	newTest := func(content string) llmtest.Write {
		return llmtest.Write{Path: "test_calc.py", BaseSHA256: sha(""), Content: content}
	}
	tests := []struct {
		name    string
		writes  []llmtest.Write
		excerpt string
	}{
		{
			name:    "existing file twice, identical writes",
			writes:  []llmtest.Write{calc(calcV2), calc(calcV2)},
			excerpt: "writes[1]: calc.py is already named by writes[0]",
		},
		{
			name:    "existing file twice, different content, after a valid write",
			writes:  []llmtest.Write{newTest("def test_x():\n    pass\n"), calc(calcV2), calc(calcBad)},
			excerpt: "writes[2]: calc.py is already named by writes[1]",
		},
		{
			name:    "new file twice around a valid write",
			writes:  []llmtest.Write{newTest("a = 1\n"), calc(calcV2), newTest("a = 2\n")},
			excerpt: "writes[2]: test_calc.py is already named by writes[0]",
		},
		{
			name:    "three times: every repeat is reported",
			writes:  []llmtest.Write{calc(calcV2), calc(calcV2), calc(calcV2)},
			excerpt: "writes[1]: calc.py is already named by writes[0]\nwrites[2]: calc.py is already named by writes[0]",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			reply := llmtest.Reply{Content: llmtest.Proposal("dup", tt.writes...)}
			f := newFixture(t, workOrder(), reply)
			res := f.run(t, "--max-attempts", "1")
			if res.code != ExitFail {
				t.Fatalf("exit %d, want %d\nstdout: %s\nstderr: %s", res.code, ExitFail, res.stdout, res.stderr)
			}
			s := f.summary(t, res)
			if s.TotalAttempts != 1 || len(s.Attempts) != 1 {
				t.Fatalf("attempts = %d (%d records), want 1", s.TotalAttempts, len(s.Attempts))
			}
			brief := s.Attempts[0].FailureBrief
			if brief == nil || brief.Stage != factory.StageLLMOutputInvalid {
				t.Fatalf("brief = %+v, want stage %s", brief, factory.StageLLMOutputInvalid)
			}
			if !strings.Contains(brief.PrimaryErrorExcerpt, tt.excerpt) {
				t.Errorf("excerpt %q lacks %q", brief.PrimaryErrorExcerpt, tt.excerpt)
			}
			if n := strings.Count(brief.PrimaryErrorExcerpt, "is already named by"); n != strings.Count(tt.excerpt, "is already named by") {
				t.Errorf("excerpt reports %d duplicates, want %d: %q", n, strings.Count(tt.excerpt, "is already named by"), brief.PrimaryErrorExcerpt)
			}
			if got := s.Attempts[0].TouchedFiles; len(got) != 0 {
				t.Errorf("touched_files = %v, want none: refused paths are never touched", got)
			}
			if n := len(f.srv.Requests()); n != 1 {
				t.Errorf("model requests = %d, want 1", n)
			}
			sameTree(t, f.baseline, treeSnapshot(t, f.repo))
		})
	}
}

// invalidReply makes the attempt end right after the prompt was sent, so the
// context tests do not run verification or acceptance.
var invalidReply = llmtest.Reply{Content: "not json"}

// contextRun runs a work order whose context_files are ctx after committing
// files (and symlinks: path → target) to the fixture repo, and returns the
// user prompt the model received and the se_prompt.txt artifact.
func contextRun(t *testing.T, ctx []string, files map[string]string, links map[string]string) (prompt, artifact string, f *fixture) {
	t.Helper()
	wo := workOrder()
	wo["context_files"] = ctx
	f = newFixture(t, wo, invalidReply)
	writeFiles(t, f.repo, files)
	for p, target := range links {
		full := filepath.Join(f.repo, filepath.FromSlash(p))
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.Symlink(target, full); err != nil {
			t.Fatal(err)
		}
	}
	if len(files)+len(links) > 0 {
		git(t, f.repo, "add", "-A")
		git(t, f.repo, "commit", "-q", "-m", "context fixtures")
	}
	f.baseline = treeSnapshot(t, f.repo)
	res := f.run(t, "--max-attempts", "1")
	if res.code != ExitFail {
		t.Fatalf("exit %d, want %d\nstdout: %s\nstderr: %s", res.code, ExitFail, res.stdout, res.stderr)
	}
	s := f.summary(t, res)
	if brief := s.Attempts[0].FailureBrief; brief == nil || brief.Stage != factory.StageLLMOutputInvalid {
		t.Fatalf("brief = %+v, want %s (the model must have been called)", brief, factory.StageLLMOutputInvalid)
	}
	data, err := os.ReadFile(filepath.Join(filepath.Dir(summaryPath(t, res)), "attempt_1", "se_prompt.txt"))
	if err != nil {
		t.Fatal(err)
	}
	prompt = f.srv.UserPrompt(0)
	if prompt == "" {
		t.Fatal("the model received no user prompt")
	}
	if !strings.HasSuffix(string(data), "### user\n"+prompt) {
		t.Errorf("se_prompt.txt does not end with the user prompt the model received")
	}
	sameTree(t, f.baseline, treeSnapshot(t, f.repo))
	return prompt, string(data), f
}

// shownSection is how contextSection renders a text file that is shown.
func shownSection(p, whole, shown string) string {
	s := "\n### " + p + " (sha256 " + sha(whole) + ", " + itoa(len(whole)) + " bytes)\n```\n" + shown
	if !strings.HasSuffix(shown, "\n") {
		s += "\n"
	}
	s += "```\n"
	if len(shown) < len(whole) {
		s += "[context budget reached: showing the first " + itoa(len(shown)) + " of " + itoa(len(whole)) +
			" bytes; the sha256 above is of the whole file]\n"
	}
	return s
}

func itoa(n int) string { return strconv.Itoa(n) }

// TestRunContextBudgetCut checks README step 2: context files are read in
// order within a 200 KB budget (all files together), cut deterministically
// on the first bytes at a UTF-8 boundary, and the shown sha256 and size are
// of the whole file.
func TestRunContextBudgetCut(t *testing.T) {
	const budget = workorder.ContextReadBudget
	a := func(n int) string { return strings.Repeat("a", n) }
	type ctxFile struct{ path, content, shown string }
	tests := []struct {
		name  string
		files []ctxFile
	}{
		{
			name:  "exactly the budget is shown whole",
			files: []ctxFile{{"big.txt", a(budget), a(budget)}},
		},
		{
			name:  "one byte over is cut at the budget",
			files: []ctxFile{{"big.txt", a(budget) + "Z", a(budget)}},
		},
		{
			// é is 2 bytes starting at budget-1: the cut backs off before it.
			name:  "two-byte rune across the budget is not split",
			files: []ctxFile{{"big.txt", a(budget-1) + "é" + a(10), a(budget - 1)}},
		},
		{
			// 😀 is 4 bytes starting at budget-2: the cut backs off 2 bytes.
			name:  "four-byte rune across the budget is not split",
			files: []ctxFile{{"big.txt", a(budget-2) + "😀" + a(10), a(budget - 2)}},
		},
		{
			name:  "rune ending exactly at the budget is kept",
			files: []ctxFile{{"big.txt", a(budget-2) + "é" + a(10), a(budget-2) + "é"}},
		},
		{
			name: "budget is shared in order; a file after it is exhausted shows nothing",
			files: []ctxFile{
				{"one.txt", a(100 * 1024), a(100 * 1024)},
				{"two.txt", strings.Repeat("b", 150*1024), strings.Repeat("b", budget-100*1024)},
				{"three.txt", "c\n", ""},
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			files := map[string]string{}
			var ctx []string
			for _, cf := range tt.files {
				files[cf.path] = cf.content
				ctx = append(ctx, cf.path)
			}
			prompt, _, _ := contextRun(t, ctx, files, nil)
			for _, cf := range tt.files {
				want := shownSection(cf.path, cf.content, cf.shown)
				if !strings.Contains(prompt, want) {
					i := max(strings.Index(prompt, "\n### "+cf.path), 0)
					t.Errorf("prompt lacks the expected section for %s (%d of %d bytes shown); it starts:\n%.200s", cf.path, len(cf.shown), len(cf.content), prompt[i:])
				}
			}
		})
	}
}

// TestRunContextCutIsDeterministic runs the same oversized context twice
// (two attempts) and requires identical context sections in both prompts.
func TestRunContextCutIsDeterministic(t *testing.T) {
	const budget = workorder.ContextReadBudget
	content := strings.Repeat("xé", budget) // 3*budget bytes; cut lands mid-rune every other byte
	wo := workOrder()
	wo["context_files"] = []string{"big.txt"}
	f := newFixture(t, wo, invalidReply, invalidReply)
	writeFiles(t, f.repo, map[string]string{"big.txt": content})
	git(t, f.repo, "add", "-A")
	git(t, f.repo, "commit", "-q", "-m", "big")
	res := f.run(t, "--max-attempts", "2")
	if res.code != ExitFail {
		t.Fatalf("exit %d\n%s", res.code, res.stderr)
	}
	section := func(p string) string {
		i := strings.Index(p, "# Context files")
		j := strings.Index(p, "\n## The previous attempt failed")
		if j < 0 {
			j = strings.Index(p, "\nReply now")
		}
		if i < 0 || j < i {
			t.Fatalf("prompt lacks its sections:\n%.2000s", p)
		}
		return p[i:j]
	}
	first, second := section(f.srv.UserPrompt(0)), section(f.srv.UserPrompt(1))
	if first != second {
		t.Errorf("the context section differs between attempts")
	}
	// budget = 204800: "xé" is 3 bytes, 68266 pairs = 204798 bytes, then "x" at 204798, é at 204799–204800.
	shown := strings.Repeat("xé", budget/3) + "x"
	if want := shownSection("big.txt", content, shown); !strings.Contains(first, want) {
		t.Errorf("context section is not cut at byte %d with the whole-file sha256 %s", len(shown), sha(content))
	}
}

// TestRunContextNotShown checks README step 2 for files that are not shown:
// binary files (NUL or invalid UTF-8) are announced with their whole-file
// hash but no content; symlinks are never read through, so the target of a
// link pointing outside the repository never reaches the model; a missing
// file is announced as new with the empty-content hash.
func TestRunContextNotShown(t *testing.T) {
	outsideDir := t.TempDir()
	outside := filepath.Join(outsideDir, "secret.txt")
	const secret = "OUTSIDE-SECRET-9f2c\n"
	if err := os.WriteFile(outside, []byte(secret), 0o644); err != nil {
		t.Fatal(err)
	}
	const binNUL = "BINARY-MARKER-1\x00rest\n"
	const binInvalid = "BINARY-MARKER-2\xff\xfe\n"
	const inRepo = "IN-REPO-TARGET-7\n"
	tests := []struct {
		name    string
		path    string
		files   map[string]string
		links   map[string]string
		section string
		hidden  []string // must not appear anywhere in the prompt or se_prompt.txt
	}{
		{
			name:    "binary: contains NUL",
			path:    "data.bin",
			files:   map[string]string{"data.bin": binNUL},
			section: "\n### data.bin (sha256 " + sha(binNUL) + ", " + itoa(len(binNUL)) + " bytes)\n(binary file, not shown)\n",
			hidden:  []string{"BINARY-MARKER-1"},
		},
		{
			name:    "binary: invalid UTF-8",
			path:    "latin.txt",
			files:   map[string]string{"latin.txt": binInvalid},
			section: "\n### latin.txt (sha256 " + sha(binInvalid) + ", " + itoa(len(binInvalid)) + " bytes)\n(binary file, not shown)\n",
			hidden:  []string{"BINARY-MARKER-2"},
		},
		{
			name:    "symlink to a file outside the repo",
			path:    "leak.txt",
			links:   map[string]string{"leak.txt": outside},
			section: "\n### leak.txt\n(not shown: leak.txt: leak.txt is a symlink; the harness never writes or reads through symlinks)\n",
			hidden:  []string{"OUTSIDE-SECRET", sha(secret), outsideDir},
		},
		{
			name:    "symlink to a file inside the repo",
			path:    "alias.txt",
			files:   map[string]string{"target.txt": inRepo},
			links:   map[string]string{"alias.txt": "target.txt"},
			section: "\n### alias.txt\n(not shown: alias.txt: alias.txt is a symlink; the harness never writes or reads through symlinks)\n",
			hidden:  []string{"IN-REPO-TARGET", sha(inRepo)},
		},
		{
			name:    "file under a symlinked directory outside the repo",
			path:    "linkdir/secret.txt",
			links:   map[string]string{"linkdir": outsideDir},
			section: "\n### linkdir/secret.txt\n(not shown: linkdir/secret.txt: linkdir is a symlink; the harness never writes or reads through symlinks)\n",
			hidden:  []string{"OUTSIDE-SECRET", sha(secret), outsideDir},
		},
		{
			name:    "missing file is announced as new",
			path:    "new_module.py",
			section: "\n### new_module.py\n(does not exist yet; base_sha256 for a new file is " + sha("") + ")\n",
		},
		{
			name:    "directory is not shown",
			path:    "pkg",
			files:   map[string]string{"pkg/mod.py": "DIR-CONTENT-3\n"},
			section: "\n### pkg\n(not shown: pkg: exists and is not a regular file)\n",
			hidden:  []string{"DIR-CONTENT-3"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			// A shown file after the hidden one proves that hidden files
			// use none of the budget and do not stop the listing.
			after := strings.Repeat("q", workorder.ContextReadBudget)
			files := map[string]string{"after.txt": after}
			for p, c := range tt.files {
				files[p] = c
			}
			prompt, art, _ := contextRun(t, []string{tt.path, "after.txt"}, files, tt.links)
			if !strings.Contains(prompt, tt.section) {
				i := strings.Index(prompt, "\n### "+tt.path)
				t.Errorf("prompt lacks section %q; found:\n%.400s", tt.section, prompt[max(i, 0):])
			}
			for _, h := range tt.hidden {
				if strings.Contains(prompt, h) || strings.Contains(art, h) {
					t.Errorf("prompt or se_prompt.txt contains %q", h)
				}
			}
			if want := shownSection("after.txt", after, after); !strings.Contains(prompt, want) {
				t.Errorf("the file after %s is not shown whole: the hidden file used budget", tt.path)
			}
		})
	}
}
