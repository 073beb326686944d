package gitws

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"
)

// WorktreesDir is where a build's linked worktrees live: <common git
// dir>/factory/worktrees/<name>/, one directory per work order. Inside the
// git directory no work tree sees them and git status never lists them.
func (r *Repo) WorktreesDir(name string) string {
	return filepath.Join(r.CommonDir, FactoryDirName, "worktrees", name)
}

// AddWorktree makes dir a linked worktree of r with HEAD detached at
// commit (no branch is created, so none can be left behind) and opens it.
// A directory left at dir by a killed build is removed first.
func (r *Repo) AddWorktree(ctx context.Context, dir, commit string) (*Repo, error) {
	if err := r.RemoveWorktree(ctx, dir); err != nil {
		return nil, err
	}
	if err := os.MkdirAll(filepath.Dir(dir), 0o755); err != nil {
		return nil, fmt.Errorf("add worktree %s: %w", dir, err)
	}
	if _, err := r.mutate(ctx, "worktree", "add", "-q", "--detach", dir, commit+"^{commit}"); err != nil {
		// Killed half way (an interrupt), git leaves a locked worktree that is still
		// "initializing": none of the caller's, so none it would remove.
		return nil, errors.Join(fmt.Errorf("add worktree %s at %s: %w", dir, ShortHash(commit), err),
			r.RemoveWorktree(context.WithoutCancel(ctx), dir))
	}
	wt, err := Open(ctx, dir)
	if err != nil {
		return nil, errors.Join(err, r.RemoveWorktree(context.WithoutCancel(ctx), dir))
	}
	return wt, nil
}

// RemoveWorktree removes the linked worktree at dir, whatever it holds
// (git worktree remove --force, twice for a locked one), its directory
// if git did not know it, and prunes git's records of worktrees that are
// gone. A dir that does not exist is fine.
func (r *Repo) RemoveWorktree(ctx context.Context, dir string) error {
	if _, err := os.Lstat(dir); errors.Is(err, fs.ErrNotExist) {
		_, err := r.mutate(ctx, "worktree", "prune")
		return wrapWorktree("prune worktrees", err)
	}
	// Best effort: a directory git does not know as a worktree fails here
	// and is removed below.
	_, _ = r.mutate(ctx, "worktree", "remove", "--force", "--force", dir)
	if err := removeTree(dir); err != nil {
		return fmt.Errorf("remove worktree %s: %w", dir, err)
	}
	_, err := r.mutate(ctx, "worktree", "prune")
	return wrapWorktree("prune worktrees", err)
}

// removeTree is os.RemoveAll that first makes directories a command made
// inaccessible writable again.
func removeTree(dir string) error {
	if err := os.RemoveAll(dir); err == nil {
		return nil
	}
	_ = filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if d != nil && d.IsDir() {
			_ = os.Chmod(p, 0o755)
		}
		return nil
	})
	return os.RemoveAll(dir)
}

func wrapWorktree(what string, err error) error {
	if err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	return nil
}

// Worktrees lists the directories under WorktreesDir("") two levels
// deep (<name>/<work order>): the worktrees builds made, whether git
// still knows them or not.
func (r *Repo) Worktrees() ([]string, error) {
	root := r.WorktreesDir("")
	names, err := os.ReadDir(root)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("list worktrees in %s: %w", root, err)
	}
	var dirs []string
	for _, n := range names {
		orders, err := os.ReadDir(filepath.Join(root, n.Name()))
		if err != nil {
			return nil, fmt.Errorf("list worktrees in %s: %w", root, err)
		}
		for _, o := range orders {
			dirs = append(dirs, filepath.Join(root, n.Name(), o.Name()))
		}
	}
	return dirs, nil
}

// replayScratch is the prefix of Replay's scratch directories in the
// common git directory's factory/.
const replayScratch = "replay-"

// RemoveScratch removes the scratch directories of a Replay that was
// killed before it could remove them.
func (r *Repo) RemoveScratch() error {
	dirs, err := filepath.Glob(filepath.Join(r.CommonDir, FactoryDirName, replayScratch+"*"))
	for _, d := range dirs {
		err = errors.Join(err, os.RemoveAll(d))
	}
	if err != nil {
		return fmt.Errorf("remove what an interrupted replay left: %w", err)
	}
	return nil
}

// RemoveWorktreesDir removes WorktreesDir("") once it is empty.
func (r *Repo) RemoveWorktreesDir() {
	root := r.WorktreesDir("")
	if entries, err := os.ReadDir(root); err == nil {
		for _, e := range entries {
			_ = os.Remove(filepath.Join(root, e.Name()))
		}
	}
	_ = os.Remove(root)
}

// DetachHead points HEAD at the commit it names now, off its branch,
// without touching the index or the work tree.
func (r *Repo) DetachHead(ctx context.Context) error {
	head, err := r.Head(ctx)
	if err != nil {
		return err
	}
	if _, err := r.mutate(ctx, "update-ref", "--no-deref", "-m", "factory: detach for a parallel build", "HEAD", head); err != nil {
		return fmt.Errorf("detach HEAD in %s: %w", r.Root, err)
	}
	return nil
}

// CheckoutDetached checks commit out with HEAD detached; the tree must be
// clean.
func (r *Repo) CheckoutDetached(ctx context.Context, commit string) error {
	if _, err := r.mutate(ctx, "checkout", "-q", "--detach", commit, "--"); err != nil {
		return fmt.Errorf("check out %s in %s: %w", ShortHash(commit), r.Root, err)
	}
	return nil
}

// MoveBranch moves branch from old to commit (refusing if it is not at
// old any more), without touching any work tree.
func (r *Repo) MoveBranch(ctx context.Context, branch, commit, old, reason string) error {
	if _, err := r.mutate(ctx, "update-ref", "-m", reason, "refs/heads/"+branch, commit, old); err != nil {
		return fmt.Errorf("move branch %s to %s in %s: %w", branch, ShortHash(commit), r.Root, err)
	}
	return nil
}

// ChangedPaths lists the paths whose content differs between commits a
// and b among paths (all paths when paths is empty), sorted.
func (r *Repo) ChangedPaths(ctx context.Context, a, b string, paths []string) ([]string, error) {
	args := append([]string{"diff-tree", "-r", "-z", "--no-renames", "--name-only", a, b, "--"}, paths...)
	out, err := r.query(ctx, args...)
	if err != nil {
		return nil, fmt.Errorf("compare %s and %s in %s: %w", ShortHash(a), ShortHash(b), r.Root, err)
	}
	return splitNUL(out), nil
}

var signature = regexp.MustCompile(`^(author|committer) (.*) <(.*)> (\d+ [+-]\d{4})$`)

// Replay makes a commit on top of onto that applies the change commit
// made to its first parent, as a tree operation: onto's tree with the
// paths commit changed as commit has them. The new commit keeps commit's
// message, author, committer and dates, so replaying onto commit's own
// parent gives commit itself. It refuses when a path commit changed
// differs between that parent and onto (the change would have to be
// merged, not applied). The repository's index and work tree are not
// touched.
func (r *Repo) Replay(ctx context.Context, commit, onto string) (string, error) {
	fail := func(err error) (string, error) {
		return "", fmt.Errorf("replay %s onto %s in %s: %w", ShortHash(commit), ShortHash(onto), r.Root, err)
	}
	raw, err := r.query(ctx, "cat-file", "commit", commit)
	if err != nil {
		return fail(err)
	}
	header, message, ok := strings.Cut(string(raw), "\n\n")
	if !ok {
		return fail(errors.New("the commit has no message"))
	}
	var parent string
	env := []string{}
	for _, line := range strings.Split(header, "\n") {
		if p, ok := strings.CutPrefix(line, "parent "); ok && parent == "" {
			parent = p
		}
		if m := signature.FindStringSubmatch(line); m != nil {
			who := "GIT_AUTHOR_"
			if m[1] == "committer" {
				who = "GIT_COMMITTER_"
			}
			env = append(env, who+"NAME="+m[2], who+"EMAIL="+m[3], who+"DATE="+m[4])
		}
	}
	if parent == "" || len(env) != 6 {
		return fail(errors.New("the commit has no parent, or no author and committer git can read back"))
	}
	changed, err := r.ChangedPaths(ctx, parent, commit, nil)
	if err != nil {
		return fail(err)
	}
	if len(changed) > 0 {
		moved, err := r.ChangedPaths(ctx, parent, onto, changed)
		if err != nil {
			return fail(err)
		}
		if len(moved) > 0 {
			return fail(fmt.Errorf("%s changed between %s and %s too", strings.Join(moved, ", "), ShortHash(parent), ShortHash(onto)))
		}
	}
	if err := os.MkdirAll(filepath.Join(r.CommonDir, FactoryDirName), 0o755); err != nil {
		return fail(err)
	}
	scratch, err := os.MkdirTemp(filepath.Join(r.CommonDir, FactoryDirName), replayScratch)
	if err != nil {
		return fail(err)
	}
	defer os.RemoveAll(scratch)
	indexEnv := gitEnv(false, "GIT_INDEX_FILE="+filepath.Join(scratch, "index"))
	git := func(extra []string, args ...string) ([]byte, error) {
		return runGit(ctx, r.Root, append(indexEnv, extra...), r.pinned(), args...)
	}
	if _, err := git(nil, "read-tree", onto+"^{tree}"); err != nil {
		return fail(err)
	}
	if len(changed) > 0 {
		// Drop the changed paths, then add them back as commit has them: a
		// path commit deleted stays out.
		if _, err := git(nil, append([]string{"update-index", "--force-remove", "--"}, changed...)...); err != nil {
			return fail(err)
		}
		out, err := r.query(ctx, append([]string{"ls-tree", "-r", "-z", "--full-tree", commit, "--"}, changed...)...)
		if err != nil {
			return fail(err)
		}
		args := []string{"update-index", "--add"}
		for _, entry := range splitNUL(out) {
			meta, path, ok := strings.Cut(entry, "\t")
			f := strings.Fields(meta)
			if !ok || len(f) != 3 {
				return fail(fmt.Errorf("unexpected ls-tree entry %q", entry))
			}
			args = append(args, "--cacheinfo", f[0]+","+f[2]+","+path)
		}
		if len(args) > 2 {
			if _, err := git(nil, args...); err != nil {
				return fail(err)
			}
		}
	}
	tree, err := git(nil, "write-tree")
	if err != nil {
		return fail(err)
	}
	msgFile := filepath.Join(scratch, "message")
	if err := os.WriteFile(msgFile, []byte(message), 0o600); err != nil {
		return fail(err)
	}
	out, err := git(env, "commit-tree", "--no-gpg-sign", strings.TrimSpace(string(tree)), "-p", onto, "-F", msgFile)
	if err != nil {
		return fail(err)
	}
	return strings.TrimSpace(string(out)), nil
}
