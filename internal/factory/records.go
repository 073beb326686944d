package factory

import (
	"github.com/factory-harness/factory/internal/deps"
	"github.com/factory-harness/factory/internal/llm"
	"github.com/factory-harness/factory/internal/proc/sandbox"
)

// Failure stages, as in the seeds (AGENTS.md §4.3).
const (
	StagePreflight           = "preflight"
	StageLLMOutputInvalid    = "llm_output_invalid"
	StageWriteScopeViolation = "write_scope_violation"
	StageStaleContext        = "stale_context"
	StageWriteFailed         = "write_failed"
	StageVerifyFailed        = "verify_failed"
	StageAcceptanceFailed    = "acceptance_failed"
	StageException           = "exception"
	// StageGitMetadataChanged: a command changed git metadata that can run
	// code or steer git (config, hooks, HEAD, ...). Not retried: the code
	// the model wrote is hostile or broken.
	StageGitMetadataChanged = "git_metadata_changed"
	// StageDepsFailed: the dependency step could not install what the
	// manifests name (an unknown package or version, a refused request, an
	// integrity mismatch). Retried: the model can fix its manifest.
	StageDepsFailed = "deps_failed"
	// StageEditMismatch: an edit's old text does not occur exactly once in
	// the file's current content, or two edits overlap; nothing was
	// written. Retried: the brief shows where the text is, or is not.
	StageEditMismatch = "edit_mismatch"
	// StageElidedContent: a whole write of an existing file drops most of
	// it behind an elision line ("// ... rest of the code"); nothing was
	// written. Retried: the model sends the full content or edits.
	StageElidedContent = "elided_content"
)

// Verdicts of a run.
const (
	VerdictPass  = "PASS"
	VerdictFail  = "FAIL"
	VerdictError = "ERROR" // interrupted, internal error or replay mismatch; the repo was rolled back
)

// MaxExcerptChars bounds the error excerpt that reaches the model.
const MaxExcerptChars = 2000

// constraintsReminder is repeated in every FailureBrief so a retry does not
// drift from the contract.
const constraintsReminder = "Write only paths listed in allowed_files and never a forbidden path. " +
	"Give every write the base_sha256 of the file's current content as shown in the prompt " +
	"(the empty-content hash " + "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855" + " for a new file). " +
	"Each write is the complete new file content, text only; each edit's old text occurs exactly once in the file's current content. " +
	"Reply with one JSON object {\"summary\", \"writes\", \"edits\"} and nothing else."

// FailureBrief is the bounded account of a failed attempt given to the next
// attempt's prompt. Full logs stay in files.
type FailureBrief struct {
	Stage               string  `json:"stage"`
	Command             *string `json:"command"`
	ExitCode            *int    `json:"exit_code"`
	PrimaryErrorExcerpt string  `json:"primary_error_excerpt"`
	ConstraintsReminder string  `json:"constraints_reminder"`
}

// retryable reports whether another attempt can change the outcome: a
// violated precondition is a plan bug, a failed disk write is an
// environment problem, and code that tampers with git metadata is not to
// be run again, so none of them is retried.
func (b *FailureBrief) retryable() bool {
	return b.Stage != StagePreflight && b.Stage != StageWriteFailed && b.Stage != StageGitMetadataChanged
}

// CmdResult is one executed command. Paths are relative to the run directory.
type CmdResult struct {
	Command         []string `json:"command"`
	ExitCode        int      `json:"exit_code"`
	TimedOut        bool     `json:"timed_out"`
	OutputLimited   bool     `json:"output_limited"` // killed for writing more than 50 MiB to stdout or stderr
	Error           string   `json:"error,omitempty"`
	StdoutTrunc     string   `json:"stdout_trunc"`
	StderrTrunc     string   `json:"stderr_trunc"`
	StdoutPath      string   `json:"stdout_path"`
	StderrPath      string   `json:"stderr_path"`
	DurationSeconds float64  `json:"duration_seconds"`
}

// WriteResult is write_result.json.
type WriteResult struct {
	WriteOK      bool          `json:"write_ok"`
	TouchedFiles []string      `json:"touched_files"`
	Errors       []string      `json:"errors"`
	Files        []WrittenFile `json:"files"`
}

// WrittenFile records one applied write.
type WrittenFile struct {
	Path         string `json:"path"`
	Created      bool   `json:"created"`
	SHA256Before string `json:"sha256_before"`
	SHA256After  string `json:"sha256_after"`
	Bytes        int    `json:"bytes"`
	// Edits are, for a file changed by edits, where each one applied; null
	// for a whole write.
	Edits []EditRange `json:"edits"`
}

// EditRange is where one edit applied: 1-based inclusive line ranges of
// the text it replaced (in the file before) and of its new text (after).
type EditRange struct {
	Index    int    `json:"index"`
	Lines    [2]int `json:"lines"`
	NewLines [2]int `json:"new_lines"`
}

// AttemptRecord summarises one attempt in run_summary.json.
type AttemptRecord struct {
	AttemptIndex   int           `json:"attempt_index"`
	BaselineCommit string        `json:"baseline_commit"`
	ProposalPath   *string       `json:"proposal_path"`
	TouchedFiles   []string      `json:"touched_files"`
	WriteOK        bool          `json:"write_ok"`
	Verify         []CmdResult   `json:"verify"`
	Acceptance     []CmdResult   `json:"acceptance"`
	FailureBrief   *FailureBrief `json:"failure_brief"`
	// Deps is what the dependency step did, null when it did not run
	// (--deps off, or the attempt failed before it).
	Deps *deps.Report `json:"deps"`
	// Rollback is what restoring the baseline did; null when the attempt
	// passed or never touched the repo.
	Rollback *RollbackRecord `json:"rollback"`
	Usage    llm.Usage       `json:"usage"`
	// CostUSD is the model call's estimated cost; null when the model's
	// price is unknown.
	CostUSD *float64 `json:"cost_usd"`
}

// RollbackRecord is the audit trail of one rollback.
type RollbackRecord struct {
	RemovedFiles    []string `json:"removed_files"`    // files the attempt created (ignored ones and .git metadata included)
	RestoredFiles   []string `json:"restored_files"`   // baseline ignored files and .git metadata put back
	UnrestoredFiles []string `json:"unrestored_files"` // baseline ignored files changed that could not be put back
	NewRefs         []string `json:"new_refs"`         // git refs a command created, left in place
}

// RunSummary is run_summary.json, written at the end of every run.
type RunSummary struct {
	RunID             string          `json:"run_id"`
	WorkOrderID       string          `json:"work_order_id"`
	Verdict           string          `json:"verdict"`
	TotalAttempts     int             `json:"total_attempts"`
	MaxAttempts       int             `json:"max_attempts"`
	BaselineCommit    string          `json:"baseline_commit"`
	RepoTreeHashAfter *string         `json:"repo_tree_hash_after"`
	LLMModel          string          `json:"llm_model"`
	Attempts          []AttemptRecord `json:"attempts"`
	Usage             llm.Usage       `json:"usage"`
	CostUSD           *float64        `json:"cost_usd"` // null when any attempt's cost is unknown
	// EnvPassed lists the names (never values) of the environment variables
	// commands received from factory's environment (see --env-policy).
	EnvPassed []string `json:"env_passed"`
	// StoppedEarly says why the run stopped before --max-attempts:
	// "identical failure" when two consecutive attempts failed the same way.
	StoppedEarly string `json:"stopped_early,omitempty"`
	// Sandbox is how commands were confined.
	Sandbox sandbox.Summary `json:"sandbox"`
	Error   string          `json:"error,omitempty"`
}
