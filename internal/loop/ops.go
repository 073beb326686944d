package loop

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"io"
	"os"
	"path"
	"strings"
	"time"

	"github.com/factory-harness/factory/internal/gitws"
	"github.com/factory-harness/factory/internal/loop/tree"
	"github.com/factory-harness/factory/internal/proc"
)

// StartOptions are the inputs of Start.
type StartOptions struct {
	Root  string
	RunID string           // "" to generate one
	Now   func() time.Time // for a generated run id; nil: time.Now
}

// initFiles are what Start accepts uncommitted: what Init wrote.
func initDirtyOK(p string) bool {
	return p == ".gitignore" || p == tree.SchemaPath || strings.HasPrefix(p, RunnerDir+"/")
}

// Start fixes the run id, creates and checks out loop/<run-id> at HEAD and
// commits the bootstrap (init's files and .runner/run.json).
func Start(ctx context.Context, o StartOptions) (RunState, string, error) {
	if o.Now == nil {
		o.Now = time.Now
	}
	repo, err := gitws.Open(ctx, o.Root)
	if err != nil {
		return RunState{}, "", refusef("--repo: %v", err)
	}
	if _, err := repo.Head(ctx); err != nil {
		return RunState{}, "", refusef("%v: commit something first; the run branch starts at HEAD", err)
	}
	if _, err := os.Stat(abs(repo.Root, RunnerDir)); err != nil {
		return RunState{}, "", refusef("no %s in %s: run 'factory loop init' first", RunnerDir, repo.Root)
	}
	lock, err := repo.Lock()
	if err != nil {
		return RunState{}, "", refusef("%v", err)
	}
	defer lock.Unlock()
	if _, err := os.Stat(abs(repo.Root, RunStatePath)); err == nil {
		s, _ := readRunState(repo.Root)
		return RunState{}, "", refusef("run %s was already started (%s); a repository holds one run", s.RunID, RunStatePath)
	}
	if ps := Validate(ctx, repo.Root); len(ps) > 0 {
		return RunState{}, "", refusef("the loop files are invalid:\n  %s", strings.Join(ps, "\n  "))
	}
	dirty, err := repo.Dirty(ctx)
	if err != nil {
		return RunState{}, "", err
	}
	var other []string
	for _, l := range dirty {
		if p := l[3:]; !initDirtyOK(p) {
			other = append(other, l)
		}
	}
	if len(other) > 0 {
		return RunState{}, "", refusef("the work tree has changes other than 'factory loop init' made (%s): commit or remove them first", summarize(other, 5))
	}
	id := o.RunID
	if id == "" {
		var b [3]byte
		_, _ = rand.Read(b[:])
		id = o.Now().UTC().Format("20060102-150405") + "-" + hex.EncodeToString(b[:])
	}
	if !runIDPattern.MatchString(id) {
		return RunState{}, "", refusef("--run-id %q does not match %s", id, runIDPattern)
	}
	branch := BranchPrefix + id
	if cur, err := repo.CurrentBranch(ctx); err == nil && cur == branch {
		return RunState{}, "", refusef("already on %s", branch)
	}
	if err := repo.CreateBranch(ctx, branch); err != nil {
		return RunState{}, "", refusef("%v", err)
	}
	st := RunState{RunID: id, Branch: branch}
	if err := writeRunState(repo.Root, st); err != nil {
		return st, "", err
	}
	commit, err := commitAll(ctx, repo, "chore(loop): start run "+id)
	if err != nil {
		return st, "", err
	}
	if err := os.MkdirAll(abs(repo.Root, path.Join(IterationsDir, id)), 0o755); err == nil {
		_ = eventLog{path: abs(repo.Root, path.Join(IterationsDir, id, "events.jsonl")), runID: id, now: o.Now}.add(0, "run_started", "", map[string]any{"branch": branch, "commit": commit})
	}
	return st, commit, nil
}

// CheckRoot returns the resolved root of the work tree at dir, refusing a
// directory that is not a work-tree root or has no .runner/.
func CheckRoot(ctx context.Context, dir string) (string, error) {
	repo, err := gitws.Open(ctx, dir)
	if err != nil {
		return "", refusef("--repo: %v", err)
	}
	if _, err := os.Stat(abs(repo.Root, RunnerDir)); err != nil {
		return "", refusef("no %s in %s: run 'factory loop init' first", RunnerDir, repo.Root)
	}
	return repo.Root, nil
}

// Validate checks the layout, the config, run.json if present, and the
// tree (schema and invariants) and returns every problem as "path:
// message", sorted by file.
func Validate(ctx context.Context, root string) []string {
	var ps []string
	for _, p := range append([]string{GoalPath, TreePath}, memoryFiles...) {
		if _, err := os.Stat(abs(root, p)); err != nil {
			ps = append(ps, p+": missing")
		}
	}
	if data, err := os.ReadFile(abs(root, ConfigPath)); err == nil || os.IsNotExist(err) {
		_, cps := ParseConfig(data)
		for _, p := range cps {
			ps = append(ps, ConfigPath+": "+p)
		}
	} else {
		ps = append(ps, ConfigPath+": "+err.Error())
	}
	if _, err := os.Stat(abs(root, RunStatePath)); err == nil {
		if _, err := readRunState(root); err != nil {
			ps = append(ps, strings.TrimPrefix(err.Error(), ErrRefused.Error()+": "))
		}
	}
	if data, err := os.ReadFile(abs(root, tree.SchemaPath)); err != nil {
		ps = append(ps, tree.SchemaPath+": missing (factory loop init writes it)")
	} else if string(data) != string(tree.SchemaV1) {
		ps = append(ps, tree.SchemaPath+": differs from the schema this factory enforces")
	}
	if data, err := os.ReadFile(abs(root, TreePath)); err == nil {
		tps, err := committedProblems(ctx, root, data)
		if err != nil {
			tps = []string{err.Error()}
		}
		for _, p := range tps {
			ps = append(ps, TreePath+"#"+p)
		}
	}
	return ps
}

// Selection describes the next step without running it.
type Selection struct {
	Status   string   `json:"status"` // open, complete, stuck or repair
	Node     string   `json:"id,omitempty"`
	Path     string   `json:"path,omitempty"`
	Attempts int      `json:"attempts"`
	Max      int      `json:"max_attempts"`
	Problems []string `json:"problems,omitempty"` // repair: why the tree is invalid
}

// Line is the one-line form `factory loop select` prints.
func (s Selection) Line() string {
	switch s.Status {
	case string(tree.StatusOpen), string(tree.StatusStuck):
		return fmt.Sprintf("status=%s id=%s path=%s attempts=%d/%d", s.Status, s.Node, s.Path, s.Attempts, s.Max)
	case "repair":
		return fmt.Sprintf("status=repair problems=%d", len(s.Problems))
	}
	return "status=" + s.Status
}

// Select reads the tree in root and returns what the next step would do.
func Select(ctx context.Context, root string) (Selection, *tree.Node, error) {
	data, err := os.ReadFile(abs(root, TreePath))
	if err != nil {
		if os.IsNotExist(err) {
			return Selection{}, nil, refusef("no %s in %s: run 'factory loop init' first", TreePath, root)
		}
		return Selection{}, nil, fmt.Errorf("read %s: %w", TreePath, err)
	}
	ps, err := committedProblems(ctx, root, data)
	if err != nil {
		return Selection{}, nil, err
	}
	if len(ps) > 0 {
		return Selection{Status: "repair", Problems: ps}, nil, nil
	}
	t, _ := loadTree(data)
	s := tree.Select(t)
	out := Selection{Status: string(s.Status)}
	if s.Node != nil {
		out.Node, out.Path, out.Attempts, out.Max = s.Node.ID, s.PathString(), s.Node.Attempts, s.Node.MaxAttempts
	}
	return out, t, nil
}

// StatusReport is `factory loop status`.
type StatusReport struct {
	RunID     string     `json:"run_id"`
	Branch    string     `json:"branch"`
	Iteration int        `json:"iteration"`
	Next      Selection  `json:"next"`
	Last      string     `json:"last_commit"` // subject of HEAD
	Tree      *tree.Node `json:"tree"`
}

// Status reads the run's state in root.
func Status(ctx context.Context, root string) (StatusReport, error) {
	dir, err := CheckRoot(ctx, root)
	if err != nil {
		return StatusReport{}, err
	}
	repo, err := gitws.Open(ctx, dir)
	if err != nil {
		return StatusReport{}, err
	}
	sel, t, err := Select(ctx, repo.Root)
	if err != nil {
		return StatusReport{}, err
	}
	rep := StatusReport{Next: sel, Tree: t}
	if st, err := readRunState(repo.Root); err == nil {
		rep.RunID, rep.Branch, rep.Iteration = st.RunID, st.Branch, st.Iteration
	}
	if log, err := repo.Log(ctx, "HEAD", 1); err == nil && len(log) == 1 {
		rep.Last = log[0].Subject
	}
	if t != nil {
		rep.Tree = tree.Clone(t)
	}
	return rep, nil
}

// WriteOutline prints the report as an indented outline.
func (s StatusReport) WriteOutline(w io.Writer) {
	run := s.RunID
	if run == "" {
		run = "(not started)"
	}
	fmt.Fprintf(w, "run %s on %s, %d iterations\n", run, orDash(s.Branch), s.Iteration)
	fmt.Fprintf(w, "last: %s\n", orDash(s.Last))
	fmt.Fprintf(w, "next: %s\n\n", s.Next.Line())
	if s.Tree == nil {
		fmt.Fprintf(w, "the tree is invalid (REPAIR TREE next):\n")
		for _, p := range s.Next.Problems {
			fmt.Fprintf(w, "  %s\n", p)
		}
		return
	}
	s.Tree.Walk(func(n, _ *tree.Node, depth int) {
		state := "open "
		switch {
		case n.Passes:
			state = "✓    "
		case n.Stuck():
			state = "stuck"
		}
		next := ""
		if n.ID == s.Next.Node && s.Next.Status == string(tree.StatusOpen) {
			next = "  <- next"
		}
		fmt.Fprintf(w, "%s%s %s  %s  (%d/%d)%s\n", strings.Repeat("  ", depth-1), state, n.ID, cut(n.Title, 80), n.Attempts, n.MaxAttempts, next)
	})
}

// RecoverResult says what Recover did.
type RecoverResult struct {
	Found     bool   `json:"found"`
	RunID     string `json:"run_id"`
	Iteration int    `json:"iteration"`
	Killed    bool   `json:"killed"`    // the executor's process group was still alive
	Committed bool   `json:"committed"` // the iteration had been committed: nothing to reset
	Reset     string `json:"reset_to"`  // the commit the repository was reset to
	// GitLocks are the lock files of a git killed mid-write (a SIGKILL
	// during the iteration's commit) that were removed.
	GitLocks []string `json:"removed_git_locks"`
	// AgentHomes are the private homes of killed iterations removed from
	// $TMPDIR.
	AgentHomes []string `json:"removed_agent_homes"`
}

// Recover finishes an iteration cut off by SIGKILL (or a crash): it kills
// the executor's process group if it survived, and unless the iteration's
// commit was made, resets the repository to the iteration's starting commit
// (ignored files kept), moving its logs aside. A git killed with it may
// have left index.lock (or HEAD's or the branch's lock), which would stop
// the reset: with the journal present, the executor dead and the
// repository lock held, such a lock is removed at once when the git-step
// note says a loop died inside that git step (its commits and resets run
// under one, as a build's do), else once it is gitws.StaleLockAge old
// (gitws.RecoverGitLocks says why). Without a
// journal it changes nothing in the repository. Either way it removes the
// private homes that killed iterations of this repository left in $TMPDIR.
func Recover(ctx context.Context, root string, now func() time.Time) (RecoverResult, error) {
	if now == nil {
		now = time.Now
	}
	repo, err := gitws.Open(ctx, root)
	if err != nil {
		return RecoverResult{}, refusef("--repo: %v", err)
	}
	lock, err := repo.Lock()
	if err != nil {
		return RecoverResult{}, refusef("%v", err)
	}
	defer lock.Unlock()
	j, err := readJournal(repo)
	if err != nil {
		return RecoverResult{}, refusef("%v (check the repository, then remove it)", err)
	}
	homes, err := removeAgentHomes(repo)
	res := RecoverResult{AgentHomes: nonNil(homes), GitLocks: []string{}}
	if err != nil {
		return res, err
	}
	if j == nil {
		return res, nil
	}
	res.Found, res.RunID, res.Iteration = true, j.RunID, j.Iteration
	if cmd, running, err := repo.RecordedCommand(); err != nil {
		return res, err
	} else if running {
		if res.Killed, err = proc.KillGroupIfSame(cmd.PGID, cmd.StartTicks); err != nil {
			return res, fmt.Errorf("kill the executor left running (process group %d): %w", cmd.PGID, err)
		}
	}
	locks, err := repo.RecoverGitLocks(true, now())
	res.GitLocks = nonNil(locks)
	if err != nil {
		return res, fmt.Errorf("before resetting iteration %d: %w", j.Iteration, err)
	}
	events := eventLog{path: abs(repo.Root, path.Join(IterationsDir, j.RunID, "events.jsonl")), runID: j.RunID, now: now}
	prefix := fmt.Sprintf("chore(loop): run %s iter %d ", j.RunID, j.Iteration)
	if log, err := repo.Log(ctx, "HEAD", 1); err == nil && len(log) == 1 && log[0].Hash != j.Baseline.Commit && strings.HasPrefix(log[0].Subject, prefix) {
		res.Committed = true
	} else {
		ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), rollbackTimeout)
		defer cancel()
		if _, err := repo.Rollback(ctx, j.Baseline); err != nil {
			return res, fmt.Errorf("reset to %.12s: %w", j.Baseline.Commit, err)
		}
		res.Reset = j.Baseline.Commit
		dir := abs(repo.Root, path.Join(IterationsDir, j.RunID, fmt.Sprint(j.Iteration)))
		aside := dir + ".interrupted"
		_ = os.RemoveAll(aside)
		_ = os.Rename(dir, aside)
	}
	if err := removeJournal(repo); err != nil {
		return res, err
	}
	_ = events.add(j.Iteration, "recovered", "", res)
	return res, nil
}

// committedProblems is repairProblems for the tree bytes data in root,
// with the run state of run.json (none before start).
func committedProblems(ctx context.Context, root string, data []byte) ([]string, error) {
	st, err := readRunState(root)
	if err != nil {
		_, ps := loadTree(data)
		return ps, nil
	}
	repo, err := gitws.Open(ctx, root)
	if err != nil {
		return nil, err
	}
	return repairProblems(ctx, repo, st, data)
}

// commitAll commits everything but the iteration logs as the loop, under a
// git-step note (gitws.Repo.DuringGitStep): if the loop is killed inside
// the commit, Recover knows the lock files git left are its own.
func commitAll(ctx context.Context, repo *gitws.Repo, message string) (commit string, err error) {
	err = repo.DuringGitStep(gitws.GitStep{Step: "commit"}, func() error {
		commit, err = repo.CommitAll(ctx, message, gitws.Identity{Name: CommitName, Email: CommitEmail}, IterationsDir)
		return err
	})
	return commit, err
}
