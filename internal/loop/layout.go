// Package loop runs `factory loop`: fresh agent sessions over a strict task
// tree, one iteration at a time, where only a green guard marks progress
// (seed 004). The pure decisions live in loop/tree; this package does the
// effects: files, git, processes, logs and commits.
package loop

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"

	"github.com/factory-harness/factory/internal/artifact"
	"github.com/factory-harness/factory/internal/loop/tree"
)

// Paths in the repository, slash-separated.
const (
	RunnerDir      = tree.RunnerDir
	TreePath       = RunnerDir + "/tree.json"
	ConfigPath     = RunnerDir + "/config.toml"
	RunStatePath   = RunnerDir + "/run.json"
	GoalPath       = RunnerDir + "/GOAL.md"
	AssumptionPath = RunnerDir + "/ASSUMPTIONS.md"
	QuestionsPath  = RunnerDir + "/HUMAN_QUESTIONS.md"
	FeedbackPath   = RunnerDir + "/FEEDBACK_LOG.md"
	ImprovePath    = RunnerDir + "/IMPROVEMENTS.md"
	IterationsDir  = RunnerDir + "/iterations"
	gitignoreEntry = "/" + IterationsDir + "/"
)

// memoryFiles are the supporting documents of seed §3.2, in prompt order.
var memoryFiles = []string{AssumptionPath, QuestionsPath, FeedbackPath, ImprovePath}

// Identity of every commit the runner makes.
const (
	CommitName  = "factory-loop"
	CommitEmail = "loop@factory.invalid"
)

func abs(root, rel string) string { return filepath.Join(root, filepath.FromSlash(rel)) }

const goalTemplate = `# Describe the goal here

Replace this paragraph with what "done" means for this project, in a few sentences: the
runner copies it into the root node of the task tree.

## Details

Constraints, context and anything an agent needs on every iteration.
`

var memoryTemplates = map[string]string{
	AssumptionPath: "# Assumptions\n\nAgents record here what they assumed when something was unclear.\n",
	QuestionsPath:  "# Questions for a human\n\nAgents (and the runner, when a leaf is stuck) record open questions here.\n",
	FeedbackPath:   "# Feedback log\n\nHumans record feedback on the work here.\n",
	ImprovePath:    "# Improvements\n\nIdeas for later, recorded instead of acted on.\n",
}

// InitOptions are the inputs of Init.
type InitOptions struct {
	Root     string // repository root
	GoalFile string // "" for the template
	Force    bool   // overwrite an existing .runner/
}

// ErrRefused marks a refusal before anything was modified.
var ErrRefused = errors.New("refused")

func refusef(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrRefused, fmt.Sprintf(format, args...))
}

// Init creates .runner/ with the goal, the memory files, a one-node tree and
// the configuration template, writes the schema and adds the iteration logs
// to .gitignore. It commits nothing.
func Init(o InitOptions) ([]string, error) {
	if _, err := os.Lstat(abs(o.Root, RunnerDir)); err == nil && !o.Force {
		return nil, refusef("%s already exists in %s (use --force to overwrite it)", RunnerDir, o.Root)
	}
	goal := []byte(goalTemplate)
	if o.GoalFile != "" {
		var err error
		if goal, err = os.ReadFile(o.GoalFile); err != nil {
			return nil, refusef("read --goal-file: %v", err)
		}
	}
	title, text := goalSummary(string(goal))
	if title == "" || text == "" {
		return nil, refusef("goal file %s needs a title line and a paragraph (the root node's title and goal)", o.GoalFile)
	}
	if len(title) > 200 {
		title = title[:200]
	}
	if len(text) > 8000 {
		text = text[:8000]
	}
	root := &tree.Node{ID: "root", Title: title, Goal: text, Acceptance: []string{}, MaxAttempts: DefaultMaxAttempts, Children: []*tree.Node{}}
	if _, err := tree.Decode(tree.Canonical(root)); err != nil {
		return nil, refusef("the goal does not make a valid root node: %v", err)
	}
	files := []struct {
		path string
		data []byte
	}{
		{GoalPath, goal},
		{AssumptionPath, []byte(memoryTemplates[AssumptionPath])},
		{QuestionsPath, []byte(memoryTemplates[QuestionsPath])},
		{FeedbackPath, []byte(memoryTemplates[FeedbackPath])},
		{ImprovePath, []byte(memoryTemplates[ImprovePath])},
		{TreePath, tree.Canonical(root)},
		{ConfigPath, []byte(configTemplate)},
		{tree.SchemaPath, tree.SchemaV1},
	}
	var written []string
	for _, f := range files {
		p := abs(o.Root, f.path)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			return written, fmt.Errorf("init %s: %w", f.path, err)
		}
		if err := artifact.WriteFileAtomic(p, f.data, 0o644); err != nil {
			return written, fmt.Errorf("init %s: %w", f.path, err)
		}
		written = append(written, f.path)
	}
	if changed, err := ensureIgnored(o.Root); err != nil {
		return written, err
	} else if changed {
		written = append(written, ".gitignore")
	}
	return written, nil
}

// ensureIgnored adds the iteration logs to .gitignore unless a line already
// names them.
func ensureIgnored(root string) (bool, error) {
	p := abs(root, ".gitignore")
	data, err := os.ReadFile(p)
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return false, fmt.Errorf("read .gitignore: %w", err)
	}
	// Every line, however long (a bufio.Scanner stops at 64 KiB).
	for line := range strings.Lines(string(data)) {
		switch strings.TrimSpace(line) {
		case gitignoreEntry, IterationsDir + "/", IterationsDir, "/" + IterationsDir:
			return false, nil
		}
	}
	if len(data) > 0 && !bytes.HasSuffix(data, []byte("\n")) {
		data = append(data, '\n')
	}
	data = append(data, []byte("# factory loop: local iteration logs\n"+gitignoreEntry+"\n")...)
	if err := artifact.WriteFileAtomic(p, data, 0o644); err != nil {
		return false, fmt.Errorf("write .gitignore: %w", err)
	}
	return true, nil
}

var headingRE = regexp.MustCompile(`^#+\s*`)

// goalSummary returns the title (the first heading, or the first line,
// without '#') and the goal (the first block of non-heading lines after it,
// joined with spaces) of a GOAL.md.
func goalSummary(goal string) (title, text string) {
	lines := strings.Split(strings.ReplaceAll(goal, "\r\n", "\n"), "\n")
	i := 0
	for ; i < len(lines) && strings.TrimSpace(lines[i]) == ""; i++ {
	}
	if i == len(lines) {
		return "", ""
	}
	first := strings.TrimSpace(lines[i])
	title = strings.TrimSpace(headingRE.ReplaceAllString(first, ""))
	i++
	var para []string
	for ; i < len(lines); i++ {
		l := strings.TrimSpace(lines[i])
		switch {
		case strings.HasPrefix(l, "#") && len(para) > 0, l == "" && len(para) > 0:
			return title, strings.Join(para, " ")
		case strings.HasPrefix(l, "#"), l == "":
			continue
		}
		para = append(para, l)
	}
	return title, strings.Join(para, " ")
}
