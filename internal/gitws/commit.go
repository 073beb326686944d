package gitws

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/factory-harness/factory/internal/proc"
)

// FallbackName and FallbackEmail sign commits in a repository whose user has
// no git identity configured, instead of failing at the first commit.
const (
	FallbackName  = "factory"
	FallbackEmail = "factory@factory.invalid"
)

// Init creates dir (and its parents) as a new git repository with one empty
// commit, "factory: initial empty commit", on git's default branch.
func Init(ctx context.Context, dir string) (*Repo, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("create repository %s: %w", dir, err)
	}
	if _, err := runGit(ctx, dir, gitEnv(false), nil, "init", "-q", "."); err != nil {
		return nil, fmt.Errorf("git init %s: %w", dir, err)
	}
	r, err := Open(ctx, dir)
	if err != nil {
		return nil, err
	}
	if _, err := r.commit(ctx, nil, "--allow-empty", "-m", "factory: initial empty commit"); err != nil {
		return nil, err
	}
	return r, nil
}

// identity returns -c options that sign commits with the fallback identity
// when neither git's configuration nor the environment gives one.
func (r *Repo) identity(ctx context.Context) []string {
	var opts []string
	for _, k := range []struct{ key, env, fallback string }{
		{"user.name", "GIT_AUTHOR_NAME", FallbackName},
		{"user.email", "GIT_AUTHOR_EMAIL", FallbackEmail},
	} {
		if os.Getenv(k.env) != "" {
			continue
		}
		if out, err := r.query(ctx, "config", "--get", k.key); err == nil && strings.TrimSpace(string(out)) != "" {
			continue
		}
		opts = append(opts, "-c", k.key+"="+k.fallback)
	}
	return opts
}

// commit runs git commit with args, without hooks or signing, and returns
// the new HEAD. who, when set, is the author and committer; else the
// user's identity signs, or the fallback when the user has none.
func (r *Repo) commit(ctx context.Context, who *Identity, args ...string) (string, error) {
	var env, opts []string
	if who != nil {
		env = []string{"GIT_AUTHOR_NAME=" + who.Name, "GIT_AUTHOR_EMAIL=" + who.Email,
			"GIT_COMMITTER_NAME=" + who.Name, "GIT_COMMITTER_EMAIL=" + who.Email}
	} else {
		opts = r.identity(ctx)
	}
	// --cleanup=whitespace whatever commit.cleanup says: our messages are
	// ours, and CommitStaged cleans them the same way.
	argv := append(opts, append([]string{"commit", "-q", "--no-verify", "--no-gpg-sign", "--cleanup=whitespace"}, args...)...)
	if _, err := runGit(ctx, r.Root, gitEnv(false, env...), r.pinned(), argv...); err != nil {
		return "", fmt.Errorf("git commit in %s: %w", r.Root, err)
	}
	return r.Head(ctx)
}

// CommitPaths stages exactly paths (slash-separated, relative to the root;
// ignored ones too: they were asked for by name) and commits them alone
// with message — also when they hold no change (a proposal that rewrote
// files with their own content still records its work order). Anything else
// staged would be committed too, so call it on a tree whose index matches
// HEAD.
func (r *Repo) CommitPaths(ctx context.Context, paths []string, message string) (string, error) {
	if len(paths) == 0 {
		return "", errors.New("commit: no paths given")
	}
	args := append([]string{"add", "-f", "--"}, paths...)
	if _, err := r.mutate(ctx, args...); err != nil {
		return "", fmt.Errorf("git add in %s: %w", r.Root, err)
	}
	return r.commit(ctx, nil, "--allow-empty", "-m", message)
}

// stagedIndex is an index TreeHashAt staged: the user's index (as stamped
// by base) with paths, sorted, staged from the work tree, and the tree it
// writes.
type stagedIndex struct {
	data  []byte
	tree  string
	paths []string
	base  string
}

// CommitStaged is CommitPaths for a tree snapshotted as b whose tree hash
// TreeHashAt took last: when what it staged then is exactly paths and the
// index has not changed since, it commits that tree and makes that index the
// repository's (git commit would stage the paths again, then stat every
// tracked file and write the same tree); otherwise it calls CommitPaths.
// Either way the commit is the same object.
func (r *Repo) CommitStaged(ctx context.Context, b Baseline, paths []string, message string) (string, error) {
	s := r.stagedFor(b, paths)
	if b.state != nil {
		b.state.staged = nil
	}
	if s == nil || stripSpace(message) == "" {
		return r.CommitPaths(ctx, paths, message) // git refuses an empty message; let it say so
	}
	fail := func(err error) (string, error) { return "", fmt.Errorf("git commit in %s: %w", r.Root, err) }
	// Held as git holds it while committing: nobody else writes the index
	// meanwhile, and it stays as it was unless the branch moved.
	lockPath := filepath.Join(r.GitDir, "index.lock")
	lock, err := os.OpenFile(lockPath, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o666)
	if err != nil {
		return fail(fmt.Errorf("lock the index: %w", err))
	}
	locked := true
	unlock := func() {
		if locked {
			lock.Close()
			os.Remove(lockPath)
			locked = false
		}
	}
	defer unlock()
	if r.indexStamp() != s.base {
		// Written between the check and the lock: git's way sees that write.
		unlock()
		return r.CommitPaths(ctx, paths, message)
	}
	if _, err := lock.Write(s.data); err != nil {
		return fail(err)
	}
	if err := lock.Close(); err != nil {
		return fail(err)
	}
	message = stripSpace(message)
	args := append(r.identity(ctx), "commit-tree", "--no-gpg-sign", s.tree, "-p", b.Commit, "-m", message)
	out, err := r.mutate(ctx, args...)
	if err != nil {
		return fail(err)
	}
	commit := strings.TrimSpace(string(out))
	subject, _, _ := strings.Cut(message, "\n")
	if _, err := r.mutate(ctx, "update-ref", "-m", "commit: "+subject, "HEAD", commit, b.Commit); err != nil {
		return fail(err)
	}
	if err := os.Rename(lockPath, filepath.Join(r.GitDir, "index")); err != nil {
		return fail(fmt.Errorf("HEAD is at %s but the index was not updated: %w", ShortHash(commit), err))
	}
	locked = false
	return commit, nil
}

// stagedFor returns what TreeHashAt staged for b if it is exactly paths
// and the index is still the one it was staged from, else nil.
func (r *Repo) stagedFor(b Baseline, paths []string) *stagedIndex {
	if b.state == nil || b.state.staged == nil {
		return nil
	}
	s := b.state.staged
	if want := slices.Compact(slices.Sorted(slices.Values(paths))); len(want) == 0 || !slices.Equal(s.paths, want) || r.indexStamp() != s.base {
		return nil
	}
	return s
}

// stripSpace cleans a commit message as `git commit -m` does (its default
// "whitespace" cleanup): trailing whitespace of each line, leading and
// trailing blank lines and runs of blank lines go; the last line ends in a
// newline.
func stripSpace(msg string) string {
	var b strings.Builder
	blank := false
	for line := range strings.SplitSeq(msg, "\n") {
		line = strings.TrimRight(line, " \t\r")
		if line == "" {
			blank = b.Len() > 0
			continue
		}
		if blank {
			b.WriteString("\n")
			blank = false
		}
		b.WriteString(line + "\n")
	}
	return b.String()
}

// CurrentBranch returns the short name of the branch HEAD is on, or "" when
// HEAD is detached.
func (r *Repo) CurrentBranch(ctx context.Context) (string, error) {
	out, err := r.query(ctx, "symbolic-ref", "-q", "--short", "HEAD")
	if err != nil {
		var re *proc.RunError
		if errors.As(err, &re) && re.ExitCode == 1 {
			return "", nil
		}
		return "", fmt.Errorf("current branch of %s: %w", r.Root, err)
	}
	return strings.TrimSpace(string(out)), nil
}

// BranchCommit returns the commit branch points at, and false when there is
// no such branch.
func (r *Repo) BranchCommit(ctx context.Context, branch string) (string, bool, error) {
	out, err := r.query(ctx, "rev-parse", "-q", "--verify", "refs/heads/"+branch+"^{commit}")
	if err != nil {
		var re *proc.RunError
		if errors.As(err, &re) && re.ExitCode == 1 {
			return "", false, nil
		}
		return "", false, fmt.Errorf("look up branch %s in %s: %w", branch, r.Root, err)
	}
	return strings.TrimSpace(string(out)), true, nil
}

// CheckBranchName refuses a name git would not accept as a branch.
func CheckBranchName(ctx context.Context, name string) error {
	if strings.HasPrefix(name, "-") {
		return fmt.Errorf("branch name %q starts with '-'", name)
	}
	if _, err := runGit(ctx, os.TempDir(), gitEnv(true), nil, "check-ref-format", "--branch", name); err != nil {
		return fmt.Errorf("%q is not a valid branch name", name)
	}
	return nil
}

// SwitchBranch checks out branch, creating it at start when it does not
// exist. The tree must be clean: a checkout carries local changes along.
func (r *Repo) SwitchBranch(ctx context.Context, branch, start string) error {
	_, exists, err := r.BranchCommit(ctx, branch)
	if err != nil {
		return err
	}
	args := []string{"checkout", "-q", branch, "--"}
	if !exists {
		args = []string{"checkout", "-q", "-b", branch, start, "--"}
	}
	if _, err := r.mutate(ctx, args...); err != nil {
		return fmt.Errorf("check out branch %s in %s: %w", branch, r.Root, err)
	}
	return nil
}

// Commit is one commit as Log reads it.
type Commit struct {
	Hash     string
	Subject  string
	Parent   string            // first parent; "" for a root commit
	Trailers map[string]string // the last value of each trailer key
}

// Log lists at most n (all when n <= 0) commits reachable from tip along
// first parents (the build's or the loop's own line of history), newest
// first.
func (r *Repo) Log(ctx context.Context, tip string, n int) ([]Commit, error) {
	// Fields end in NUL, the one byte a commit message cannot hold (a
	// subject comes from a work order title, which may hold any other
	// control character); git ends each entry with a newline.
	args := []string{"log", "--first-parent", "--format=%H%x00%P%x00%s%x00%(trailers:only,unfold)%x00"}
	if n > 0 {
		args = append(args, fmt.Sprintf("--max-count=%d", n))
	}
	out, err := r.query(ctx, append(args, tip, "--")...)
	if err != nil {
		return nil, fmt.Errorf("git log %s in %s: %w", tip, r.Root, err)
	}
	fields := strings.Split(string(out), "\x00")
	if rest := fields[len(fields)-1]; strings.Trim(rest, "\n") != "" || (len(fields)-1)%4 != 0 {
		return nil, fmt.Errorf("git log in %s: unexpected output %q", r.Root, clipText(string(out)))
	}
	var commits []Commit
	for i := 0; i+4 < len(fields); i += 4 {
		hash := strings.TrimLeft(fields[i], "\n")
		if !isHexHash(hash) {
			return nil, fmt.Errorf("git log in %s: unexpected commit hash %q", r.Root, clipText(hash))
		}
		c := Commit{Hash: hash, Subject: fields[i+2], Trailers: map[string]string{}}
		c.Parent, _, _ = strings.Cut(fields[i+1], " ")
		for _, line := range strings.Split(fields[i+3], "\n") {
			if k, v, ok := strings.Cut(line, ":"); ok {
				c.Trailers[strings.TrimSpace(k)] = strings.TrimSpace(v)
			}
		}
		commits = append(commits, c)
	}
	return commits, nil
}

// clipText shortens s for an error message.
func clipText(s string) string {
	if len(s) > 200 {
		return s[:200] + "…"
	}
	return s
}

// FilesAt lists the files of commit rev, slash-separated and sorted, as
// Files does for HEAD.
func (r *Repo) FilesAt(ctx context.Context, rev string) ([]string, error) {
	out, err := r.query(ctx, "ls-tree", "-r", "-z", "--name-only", "--full-tree", rev+"^{commit}", "--")
	if err != nil {
		return nil, fmt.Errorf("list files of %s in %s: %w", rev, r.Root, err)
	}
	return splitNUL(out), nil
}

// TreeOf is the tree id of commit rev: what a commit holds, whatever its
// parents, author and dates.
func (r *Repo) TreeOf(ctx context.Context, rev string) (string, error) {
	out, err := r.query(ctx, "rev-parse", "--verify", "-q", rev+"^{tree}")
	if err != nil {
		return "", fmt.Errorf("tree of %s in %s: %w", rev, r.Root, err)
	}
	return strings.TrimSpace(string(out)), nil
}

// Rebased returns a Baseline that restores the work tree to commit while
// keeping what b keeps (its ignored files, empty directories and modes). It
// leaves git metadata, refs and HEAD alone, so that after a commit the
// leftovers of the commands can be cleaned without undoing the commit.
func (b Baseline) Rebased(commit string) Baseline {
	return Baseline{Commit: commit, Ignored: b.Ignored, EmptyDirs: b.EmptyDirs, Modes: b.Modes, watch: b.watch}
}

// FactoryFile is <git dir>/factory/<name> (with name "", that directory),
// where the journals and build pointers of this work tree live: git ignores
// it and Rollback never touches it.
func (r *Repo) FactoryFile(name string) string {
	return r.factoryPath(name)
}

// ShortHash abbreviates an object id to 12 hex digits for messages.
func ShortHash(h string) string {
	if len(h) > 12 {
		return h[:12]
	}
	return h
}
