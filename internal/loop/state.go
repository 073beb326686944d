package loop

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"regexp"
	"time"

	"github.com/factory-harness/factory/internal/artifact"
	"github.com/factory-harness/factory/internal/gitws"
	"github.com/factory-harness/factory/internal/loop/tree"
	"github.com/factory-harness/factory/internal/proc/sandbox"
	"github.com/factory-harness/factory/internal/workorder"
)

// RunState is .runner/run.json: the run id and the runner's bookkeeping,
// written by the runner in every commit (an agent's edit of it is
// overwritten). It holds no timestamp, so identical runs commit identical
// bytes.
type RunState struct {
	RunID     string           `json:"run_id"`
	Branch    string           `json:"branch"`
	Iteration int              `json:"iteration"` // iterations committed so far
	Repair    tree.RepairState `json:"repair"`
	Stuck     string           `json:"stuck,omitempty"` // the leaf whose question is committed
}

var runIDPattern = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$`)

// BranchPrefix is the prefix of a run's branch: loop/<run-id>.
const BranchPrefix = "loop/"

func readRunState(root string) (RunState, error) {
	var s RunState
	data, err := os.ReadFile(abs(root, RunStatePath))
	if errors.Is(err, fs.ErrNotExist) {
		return s, refusef("%s is missing: run 'factory loop start' first", RunStatePath)
	}
	if err != nil {
		return s, fmt.Errorf("read %s: %w", RunStatePath, err)
	}
	s, err = decodeRunState(data)
	if err != nil {
		return s, refusef("%s is not valid: %v", RunStatePath, err)
	}
	return s, nil
}

// decodeRunState reads a run.json strictly (workorder.DecodeStrict: one
// JSON object, every key once and spelt as the runner spells it, each value
// of its type; encoding/json alone would take "REPAIR" for "repair", the
// last of two equal keys, and ignore data after the object) with a valid
// run id.
func decodeRunState(data []byte) (RunState, error) {
	var s RunState
	if err := workorder.DecodeStrict(data, &s); err != nil {
		return RunState{}, err
	}
	if !runIDPattern.MatchString(s.RunID) {
		return RunState{}, fmt.Errorf("run_id %q does not match %s", s.RunID, runIDPattern)
	}
	return s, nil
}

func writeRunState(root string, s RunState) error {
	data, err := json.MarshalIndent(s, "", "  ")
	if err != nil {
		return fmt.Errorf("encode %s: %w", RunStatePath, err)
	}
	if err := artifact.WriteFileAtomic(abs(root, RunStatePath), append(data, '\n'), 0o644); err != nil {
		return fmt.Errorf("write %s: %w", RunStatePath, err)
	}
	return nil
}

// journal is the step journal, kept in the git directory while an
// iteration runs: what `factory loop recover` needs after a SIGKILL.
type journal struct {
	Version   int            `json:"version"`
	RunID     string         `json:"run_id"`
	Iteration int            `json:"iteration"`
	Branch    string         `json:"branch"`
	PID       int            `json:"pid"`
	Baseline  gitws.Baseline `json:"baseline"`
}

const (
	journalVersion = 1
	journalName    = "loop-step.json"
)

func journalPath(r *gitws.Repo) string { return r.FactoryFile(journalName) }

func readJournal(r *gitws.Repo) (*journal, error) {
	if _, err := os.Lstat(journalPath(r)); errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	var j journal
	if err := gitws.ReadJournalFile(journalPath(r), &j); err != nil {
		return nil, fmt.Errorf("read the step journal: %w", err)
	}
	if j.Version != journalVersion {
		return nil, fmt.Errorf("step journal %s has version %d; this factory reads version %d", journalPath(r), j.Version, journalVersion)
	}
	return &j, nil
}

// writeJournal writes the step journal with a checksum (see
// gitws.WriteJournalFile), so that recovery refuses a damaged one.
func writeJournal(r *gitws.Repo, j *journal) error {
	if err := gitws.WriteJournalFile(journalPath(r), j); err != nil {
		return fmt.Errorf("write the step journal: %w", err)
	}
	return nil
}

func removeJournal(r *gitws.Repo) error {
	if err := r.ClearCommand(); err != nil {
		return err
	}
	if err := os.Remove(journalPath(r)); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("remove the step journal: %w", err)
	}
	_ = os.Remove(r.FactoryFile("")) // when empty
	return nil
}

// Event is one line of events.jsonl.
type Event struct {
	Time      string `json:"time"`
	RunID     string `json:"run_id"`
	Iteration int    `json:"iteration,omitempty"`
	Event     string `json:"event"`
	Node      string `json:"node,omitempty"`
	Detail    any    `json:"detail,omitempty"`
}

// eventLog appends events to .runner/iterations/<run-id>/events.jsonl.
type eventLog struct {
	path  string
	runID string
	now   func() time.Time
}

func (l eventLog) add(iteration int, event, node string, detail any) error {
	e := Event{Time: l.now().UTC().Format(time.RFC3339Nano), RunID: l.runID, Iteration: iteration, Event: event, Node: node, Detail: detail}
	line, err := json.Marshal(e)
	if err != nil {
		return fmt.Errorf("encode event %s: %w", event, err)
	}
	f, err := os.OpenFile(l.path, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o644)
	if err != nil {
		return fmt.Errorf("append to %s: %w", l.path, err)
	}
	if _, err := f.Write(append(line, '\n')); err != nil {
		f.Close()
		return fmt.Errorf("append to %s: %w", l.path, err)
	}
	return f.Close()
}

// Meta is meta.json of an iteration.
type Meta struct {
	RunID           string           `json:"run_id"`
	Iteration       int              `json:"iteration"`
	Mode            string           `json:"mode"`
	Node            string           `json:"node"`
	Path            string           `json:"path"`
	Kind            tree.Kind        `json:"classification"`
	Guard           string           `json:"guard"`
	Reason          string           `json:"reason"`
	StartCommit     string           `json:"start_commit"`
	Commit          string           `json:"commit"`
	ExecutorArgv    []string         `json:"executor_argv"`
	ExecutorExit    int              `json:"executor_exit_code"`
	ExecutorError   string           `json:"executor_error"`
	ExecutorSeconds float64          `json:"executor_seconds"`
	ExecutorSandbox sandbox.Summary  `json:"executor_sandbox"` // how the agent is (or would be) confined
	GuardArgv       []string         `json:"guard_argv"`
	GuardExit       *int             `json:"guard_exit_code"`
	GuardError      string           `json:"guard_error"`
	GuardSeconds    float64          `json:"guard_seconds"`
	GuardSandbox    sandbox.Summary  `json:"guard_sandbox"` // how the guard is (or would be) confined
	Changed         []string         `json:"changed_paths"`
	Overwritten     []tree.Overwrite `json:"overwritten_fields"`
	Problems        []string         `json:"tree_problems"`
	Charged         string           `json:"charged_node"`
	NewRefs         []string         `json:"new_refs"`
}

func jsonUnmarshal(data []byte, v any) error { return json.Unmarshal(data, v) }
