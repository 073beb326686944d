package factory

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"unicode/utf8"

	"github.com/factory-harness/factory/internal/canon"
	"github.com/factory-harness/factory/internal/lang"
	"github.com/factory-harness/factory/internal/llm"
	"github.com/factory-harness/factory/internal/workorder"
)

// se starts an attempt: precondition gate, prompt, model call, strict parse.
func (r *Run) se(ctx context.Context, s *state) error {
	index := len(s.records) + 1
	a := &attempt{index: index, dir: filepath.Join(r.runDir, fmt.Sprintf("attempt_%d", index))}
	s.cur = a
	if err := os.MkdirAll(filepath.Join(a.dir, "logs"), 0o755); err != nil {
		return fmt.Errorf("create attempt directory: %w", err)
	}
	if msg := r.checkConditions(r.opts.WorkOrder.Preconditions); msg != "" {
		a.brief = newBrief(StagePreflight, nil, nil, "PLANNER-CONTRACT BUG: precondition failed before any model call: "+msg)
		return nil
	}
	prompt, err := r.buildPrompt(s.previous)
	if err != nil {
		return err
	}
	if err := a.batch.WriteFile(filepath.Join(a.dir, "se_prompt.txt"), []byte("### system\n"+prompt.system+"\n### user\n"+strings.Join(prompt.user, "")), 0o644); err != nil {
		return err
	}
	req := llm.Request{
		Model:       r.opts.ModelName,
		Temperature: r.opts.Temperature,
		Messages:    []llm.Message{{Role: "system", Content: prompt.system}},
		CacheKey:    r.opts.CacheKey,
		LongCache:   r.opts.LongCache,
	}
	if req.CacheKey == "" {
		req.CacheKey, err = runCacheKey(r.opts.WorkOrder)
		if err != nil {
			return err
		}
	}
	for _, seg := range prompt.user {
		req.Messages = append(req.Messages, llm.Message{Role: "user", Content: seg})
	}
	if r.opts.JSONSchema {
		schema, err := workorder.ProposalResponseSchema()
		if err != nil {
			return err
		}
		req.SchemaName, req.Schema = "write_proposal", schema
	}
	r.progress("attempt %d/%d: se: asking %s for a write proposal", index, r.opts.MaxAttempts, r.opts.ModelName)
	stop := r.waiting("waiting for the model")
	resp, err := r.opts.Model.Complete(ctx, req)
	stop()
	var mismatch *llm.ReplayMismatchError
	var recordErr *llm.RecordError
	var budget *llm.BudgetError
	switch {
	case ctx.Err() != nil:
		return context.Cause(ctx)
	case errors.As(err, &mismatch), errors.As(err, &recordErr):
		return err // a replay that diverged, or a record that cannot be kept, ends the run
	case isProviderError(err), errors.As(err, &budget):
		// Not the model's fault, or a budget reached before the call was
		// sent: no attempt is counted and no provider text reaches a
		// prompt; the run ends as ERROR (a budget: exit 5) with the hint.
		s.cur = nil
		return err
	case err != nil:
		a.brief = newBrief(StageException, nil, nil, "model call failed: "+err.Error())
		return nil
	}
	a.response = &resp
	p, err := workorder.ParseProposal(resp.Content)
	if err != nil {
		a.brief = newBrief(StageLLMOutputInvalid, nil, nil, invalidReplyExcerpt(err, resp))
		return nil
	}
	a.proposal = p
	return nil
}

// runCacheKey is the prompt cache key of a run outside a build: from the
// work order alone, so that its attempts, and a replay of them on another
// baseline, send the same.
func runCacheKey(wo *workorder.WorkOrder) (string, error) {
	b, err := canon.JSON(wo)
	if err != nil {
		return "", fmt.Errorf("canonical JSON of work order %s: %w", wo.ID, err)
	}
	return "factory-run-" + canon.SHA256Hex(b)[:16], nil
}

func isProviderError(err error) bool {
	_, ok := llm.AsProviderError(err)
	return ok
}

func invalidReplyExcerpt(err error, resp llm.Response) string {
	var b strings.Builder
	fmt.Fprintf(&b, "The reply is not a valid write proposal: %v\n", err)
	if resp.Refusal != "" {
		fmt.Fprintf(&b, "The model refused: %s\n", resp.Refusal)
	}
	if resp.FinishReason == "length" {
		b.WriteString("The reply was cut off at the output token limit. Change existing files with edits (only the changed text, with a few lines around it) instead of whole writes, and write fewer or smaller files.\n")
	}
	b.WriteString("Start of the reply:\n")
	b.WriteString(resp.Content)
	return b.String()
}

// checkConditions returns "" when every condition holds, else what failed.
func (r *Run) checkConditions(conds []workorder.Condition) string {
	var failed []string
	for _, c := range conds {
		_, err := os.Lstat(filepath.Join(r.repo.Root, filepath.FromSlash(c.Path)))
		exists := err == nil
		if c.Kind == workorder.FileExists && !exists {
			failed = append(failed, fmt.Sprintf("%s %s: the file does not exist", c.Kind, c.Path))
		}
		if c.Kind == workorder.FileAbsent && exists {
			failed = append(failed, fmt.Sprintf("%s %s: the file exists", c.Kind, c.Path))
		}
	}
	return strings.Join(failed, "; ")
}

// prompt is the SE's request: the system prompt, then the user turn in
// cache segments, stablest first (see buildPrompt).
type prompt struct {
	system string
	user   []string
}

const systemPrompt = `You are the SE (software engineer) step of a deterministic build harness.
You propose changes to files: complete new contents, or exact search/replace edits of
existing files. The harness, not you, checks the proposal, writes the files, installs the
dependencies the manifests and lockfiles name, runs global verification and the acceptance
commands, and decides PASS or FAIL. You cannot run commands.

Reply with exactly one JSON object and nothing else: no prose, no markdown fences.
Its shape:
{"summary": "<one or two sentences>",
 "writes": [{"path": "<an allowed file>", "base_sha256": "<sha256 of its current content>", "content": "<the complete new file content>"}],
 "edits": [{"path": "<an allowed file that exists>", "base_sha256": "<sha256 of its current content>",
            "replace": [{"old": "<exact text of the current file>", "new": "<its replacement>"}]}]}

Use "writes" for new files and small ones; use "edits" to change an existing file of more
than 100 lines or 4 KB: an edit costs what the change costs, a whole write what the file costs.
Either list may be empty, not both.

Rules the harness enforces (a violation fails the attempt and nothing is written):
- Each path is written exactly as listed under allowed files, and named once in the whole
  proposal: several changes to one file are several entries of its "replace" list.
- "base_sha256" is the sha256 shown for that file in this prompt; for a file that does
  not exist yet it is e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855.
- A write's "content" is the whole file, never a diff and never "... rest of the file
  unchanged"; text only; at most 200 KB per file and 500 KB in all.
- An edit's "old" is copied byte for byte from the file's current content (indentation,
  blank lines and all) and occurs exactly once in it: include enough surrounding lines to
  make it unique. Edits of one file must not overlap; all are matched against the file as
  it is now, not after the earlier edits. "new" replaces "old" exactly; "old" is never empty.
- Dependencies are declared in the manifest (go.mod, package.json, Cargo.toml,
  requirements.txt or pyproject.toml); the harness installs them. Never install or
  download anything in a command.
- Never write a forbidden path.
- Commands run without a shell and files are written without executable bits: scripts are
  run as "bash scripts/x.sh" or "python x.py", never "./x".`

// buildPrompt lays the SE prompt out for prompt caching: what changes least
// comes first, so that every request shares the longest possible prefix
// with the ones before it. The system prompt is fixed (no ids, no times);
// the user turn has three segments, each a separate message:
//
//  1. stable shared: the order's context files that the build lists as
//     shared and that no work order of the build may write
//     (Options.StableContext), sorted — the same bytes in every order that
//     lists them;
//  2. other shared: its other shared context files, sorted — the same
//     bytes in every order that lists them until one changes them;
//  3. the order's own: its other context files, in the work order's
//     order (the context budget is spent in that order), the repository
//     map ranked for this order (Options.RepoMap: it differs from order to
//     order, so it never goes before this segment), then the work
//     order itself (intent, notes, allowed files with their hashes,
//     forbidden, acceptance, verification, postconditions) — the same bytes
//     in every attempt, since each starts from the same baseline;
//  4. the tail: the previous attempt's failure brief, if any, and the
//     closing instruction.
//
// A segment with nothing in it is left out. With the system prompt that
// makes at most four places to cache up to, Anthropic's limit. TestSEPromptPrefixStable
// fails if something that varies between attempts moves before the tail.
func (r *Run) buildPrompt(previous *FailureBrief) (prompt, error) {
	wo := r.opts.WorkOrder
	shared, own := splitContext(wo.ContextFiles, r.opts.SharedContext)
	slices.Sort(shared)
	stable, shared := splitContext(shared, r.opts.StableContext)
	budget := workorder.ContextReadBudget
	contextPart := func(title string, paths []string) (string, error) {
		var b strings.Builder
		b.WriteString(title)
		for _, p := range paths {
			section, used, err := r.contextSection(p, budget)
			if err != nil {
				return "", err
			}
			budget -= used
			b.WriteString(section)
		}
		return b.String(), nil
	}
	var segments []string
	for _, sec := range []struct {
		title string
		paths []string
	}{
		{"# Context files shared with other work orders of this build, which none of them writes\n", stable},
		{"# Context files shared with other work orders of this build\n", shared},
	} {
		if len(sec.paths) == 0 {
			continue
		}
		part, err := contextPart(sec.title, sec.paths)
		if err != nil {
			return prompt{}, err
		}
		segments = append(segments, part)
	}

	var b strings.Builder
	switch {
	case len(own) > 0:
		part, err := contextPart("# Context files\n", own)
		if err != nil {
			return prompt{}, err
		}
		b.WriteString(part + "\n")
	case len(shared) == 0 && len(stable) == 0:
		b.WriteString("# Context files\n(none)\n\n")
	}
	if r.repoMap != "" {
		b.WriteString("# Code elsewhere in the repository\nDefinitions and signatures of other files, ranked by how much this " +
			"work order's files use them or are used by them. Keep these signatures unless the work order changes them.\n\n")
		b.WriteString(strings.TrimRight(r.repoMap, "\n") + "\n\n")
	}
	fmt.Fprintf(&b, "# Work order %s: %s\n\n## Intent\n%s\n", wo.ID, wo.Title, wo.Intent)
	if wo.Notes != nil && strings.TrimSpace(*wo.Notes) != "" {
		fmt.Fprintf(&b, "\n## Notes\n%s\n", *wo.Notes)
	}
	b.WriteString("\n## Allowed files (the only paths you may write)\n")
	for _, p := range wo.AllowedFiles {
		sum, exists, err := r.fileHash(p)
		switch {
		case err != nil:
			fmt.Fprintf(&b, "- %s (unusable: %v)\n", p, err)
		case exists:
			fmt.Fprintf(&b, "- %s (exists; current sha256 %s)\n", p, sum)
		default:
			fmt.Fprintf(&b, "- %s (does not exist yet; current sha256 %s)\n", p, sum)
		}
	}
	b.WriteString("\n## Forbidden (never write these; entries with spaces are rules to follow)\n")
	if len(wo.Forbidden) == 0 {
		b.WriteString("- (none beyond the allowed-files rule)\n")
	}
	for _, f := range wo.Forbidden {
		fmt.Fprintf(&b, "- %s\n", f)
	}
	b.WriteString("\n## Acceptance commands (run in order from the repository root after global verification; each must exit 0)\n")
	for _, c := range wo.AcceptanceCommands {
		fmt.Fprintf(&b, "- %s\n", c)
	}
	rule, err := r.verifyRule()
	if err != nil {
		return prompt{}, err
	}
	fmt.Fprintf(&b, "\n## Global verification\n%s\n", rule)
	if len(wo.Postconditions) > 0 {
		b.WriteString("\n## Postconditions (checked after your writes)\n")
		for _, c := range wo.Postconditions {
			fmt.Fprintf(&b, "- %s %s\n", c.Kind, c.Path)
		}
	}
	segments = append(segments, b.String())

	b.Reset()
	if previous != nil {
		b.WriteString("\n## The previous attempt failed; the repository was rolled back to the baseline\n")
		fmt.Fprintf(&b, "stage: %s\n", previous.Stage)
		if previous.Command != nil {
			fmt.Fprintf(&b, "command: %s\n", *previous.Command)
		}
		if previous.ExitCode != nil {
			fmt.Fprintf(&b, "exit code: %d\n", *previous.ExitCode)
		}
		fmt.Fprintf(&b, "error excerpt:\n%s\n", fence(previous.PrimaryErrorExcerpt))
		fmt.Fprintf(&b, "reminder: %s\n", previous.ConstraintsReminder)
	}
	b.WriteString("\nReply now with the JSON object only.\n")
	segments = append(segments, b.String())
	return prompt{system: systemPrompt, user: segments}, nil
}

// splitContext splits files into those listed in set and the others,
// each in the order of files, without repeats.
func splitContext(files, set []string) (in, out []string) {
	isShared := make(map[string]bool, len(set))
	for _, p := range set {
		isShared[p] = true
	}
	seen := map[string]bool{}
	for _, p := range files {
		if seen[p] {
			continue
		}
		seen[p] = true
		if isShared[p] {
			in = append(in, p)
		} else {
			out = append(out, p)
		}
	}
	return in, out
}

// verifyRule states the global verification that will run after the
// writes (see verifyCommands), for the repository's languages as detected
// now. A Python repository gets the seeds' wording.
func (r *Run) verifyRule() (string, error) {
	if len(r.verify) > 0 {
		return "The harness runs: " + strings.Join(r.opts.VerifyCommands, "; "), nil
	}
	langs, err := r.languages()
	if err != nil {
		return "", err
	}
	if langs.PythonOnly() {
		if r.opts.WorkOrder.VerifyExempt {
			return "This work order is verify-exempt: the harness runs only `" + r.opts.Python + " -m compileall -q .`.", nil
		}
		return "If scripts/verify.sh exists after your writes, the harness runs `bash scripts/verify.sh`; otherwise `" +
			r.opts.Python + " -m compileall -q .`, `" + r.opts.Python + " -m pip --version` and `" + r.opts.Python + " -m pytest -q`.", nil
	}
	if r.opts.WorkOrder.VerifyExempt {
		cmds := langs.CompileOnly(r.opts.Python)
		if len(cmds) == 0 {
			return "This work order is verify-exempt: the harness runs no global verification, only the acceptance commands.", nil
		}
		return "This work order is verify-exempt: the harness runs only " + quoteList(cmds) + ".", nil
	}
	return "If scripts/verify.sh exists after your writes, the harness runs `bash scripts/verify.sh`; otherwise, for this " +
		langs.Describe() + " repository, " + quoteList(langs.Verify(r.opts.Python)) +
		", in this order, each of which must exit 0 for the whole repository.", nil
}

// quoteList renders commands as "`a`, `b` and `c`".
func quoteList(cmds [][]string) string {
	parts := make([]string, len(cmds))
	for i, argv := range cmds {
		parts[i] = "`" + lang.Quote(argv) + "`"
	}
	if len(parts) == 1 {
		return parts[0]
	}
	return strings.Join(parts[:len(parts)-1], ", ") + " and " + parts[len(parts)-1]
}

// fileHash returns the sha256 of a repo file's current bytes, or of empty
// bytes when it does not exist.
func (r *Run) fileHash(p string) (string, bool, error) {
	data, err := r.readRepoFile(p)
	if errors.Is(err, os.ErrNotExist) {
		return workorder.EmptySHA256, false, nil
	}
	if err != nil {
		return "", false, err
	}
	return canon.SHA256Hex(data), true, nil
}

// readRepoFile reads a regular file in the repo without following a
// symlink anywhere on its path, so context can never leak files from outside.
func (r *Run) readRepoFile(p string) ([]byte, error) {
	if err := checkNoSymlink(r.repo.Root, p); err != nil {
		return nil, err
	}
	full := filepath.Join(r.repo.Root, filepath.FromSlash(p))
	info, err := os.Lstat(full)
	if err != nil {
		return nil, err
	}
	if !info.Mode().IsRegular() {
		return nil, fmt.Errorf("%s is not a regular file", p)
	}
	return os.ReadFile(full)
}

// contextSection renders one context file within the remaining budget and
// reports how many budget bytes it used. A file over the budget is shown as
// a partial view (partialView): its head and the lines that name what the
// work order names, whole lines, so it is deterministic.
func (r *Run) contextSection(p string, budget int) (string, int, error) {
	data, err := r.readRepoFile(p)
	switch {
	case errors.Is(err, os.ErrNotExist):
		return fmt.Sprintf("\n### %s\n(does not exist yet; base_sha256 for a new file is %s)\n", p, workorder.EmptySHA256), 0, nil
	case err != nil:
		return fmt.Sprintf("\n### %s\n(not shown: %v)\n", p, err), 0, nil
	}
	sum := canon.SHA256Hex(data)
	head := fmt.Sprintf("\n### %s (sha256 %s, %d bytes)\n", p, sum, len(data))
	if !utf8.Valid(data) || strings.ContainsRune(string(data), 0) {
		return head + "(binary file, not shown)\n", 0, nil
	}
	if len(data) > budget {
		// The parts the order names, not just the first bytes: edits can
		// change the rest, matched against the whole file.
		lines := strings.Split(strings.TrimSuffix(string(data), "\n"), "\n")
		wo := r.opts.WorkOrder
		notes := ""
		if wo.Notes != nil {
			notes = *wo.Notes
		}
		terms := orderTerms(append([]string{wo.Title, wo.Intent, notes}, wo.AcceptanceCommands...)...)
		if ranges := partialView(lines, terms, max(budget, 0)); len(ranges) > 0 {
			view, used := renderPartial(lines, ranges)
			return head + view, used, nil
		}
		// Not even the first line fits (one huge line, or the budget is
		// spent): its first bytes, cut on a UTF-8 boundary.
		cut := max(budget, 0)
		for cut > 0 && !utf8.RuneStart(data[cut]) {
			cut--
		}
		note := fmt.Sprintf("[context budget reached: showing the first %d of %d bytes; the sha256 above is of the whole file]\n", cut, len(data))
		return head + fence(string(data[:cut])) + "\n" + note, cut, nil
	}
	return head + fence(string(data)) + "\n", len(data), nil
}

// fence wraps text in a backtick fence longer than any backtick run inside.
func fence(text string) string {
	longest, run := 0, 0
	for _, c := range text {
		if c == '`' {
			run++
			longest = max(longest, run)
		} else {
			run = 0
		}
	}
	f := strings.Repeat("`", max(3, longest+1))
	if !strings.HasSuffix(text, "\n") {
		text += "\n"
	}
	return f + "\n" + text + f
}

// newBrief builds a FailureBrief with the excerpt cut to MaxExcerptChars.
// Callers put the cause first (commandBrief keeps output tails itself).
func newBrief(stage string, command *string, exitCode *int, excerpt string) *FailureBrief {
	return &FailureBrief{
		Stage:               stage,
		Command:             command,
		ExitCode:            exitCode,
		PrimaryErrorExcerpt: truncateChars(excerpt, MaxExcerptChars),
		ConstraintsReminder: constraintsReminder,
	}
}

// truncateChars keeps at most n characters: the head when the text is a
// message (it starts with the cause), marked where it was cut.
func truncateChars(s string, n int) string {
	if utf8.RuneCountInString(s) <= n {
		return s
	}
	const marker = "\n[... truncated]"
	keep := n - utf8.RuneCountInString(marker)
	runes := []rune(s)
	return string(runes[:keep]) + marker
}
