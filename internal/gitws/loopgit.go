package gitws

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
)

// Identity is a commit author and committer. Dates are not part of it: the
// usual GIT_AUTHOR_DATE and GIT_COMMITTER_DATE apply.
type Identity struct{ Name, Email string }

// ErrNotInCommit is returned (wrapped) by Show when the commit has no such file.
var ErrNotInCommit = errors.New("no such file in the commit")

// CreateBranch creates branch name at HEAD and checks it out, keeping
// uncommitted changes in the work tree and index. It refuses an existing
// branch.
func (r *Repo) CreateBranch(ctx context.Context, name string) error {
	if err := CheckBranchName(ctx, name); err != nil {
		return fmt.Errorf("create branch in %s: %w", r.Root, err)
	}
	if _, err := r.mutate(ctx, "checkout", "-q", "-b", name); err != nil {
		return fmt.Errorf("create branch %q in %s: %w", name, r.Root, err)
	}
	return nil
}

// CommitAll stages every change in the work tree except the paths under
// exclude (slash-separated, relative to the root) and commits it, also when
// nothing changed, with message as author and committer who, without
// running hooks or signing. It returns the new commit's hash.
func (r *Repo) CommitAll(ctx context.Context, message string, who Identity, exclude ...string) (string, error) {
	if _, err := r.mutate(ctx, "add", "-A", "--", "."); err != nil {
		return "", fmt.Errorf("commit in %s: stage changes: %w", r.Root, err)
	}
	// An exclude pathspec in add fails when the path is also ignored, so
	// unstage instead.
	if len(exclude) > 0 {
		if _, err := r.mutate(ctx, append([]string{"rm", "-r", "-q", "--cached", "--ignore-unmatch", "--"}, exclude...)...); err != nil {
			return "", fmt.Errorf("commit in %s: unstage %s: %w", r.Root, strings.Join(exclude, ", "), err)
		}
	}
	return r.commit(ctx, &who, "--allow-empty", "--cleanup=verbatim", "-m", message)
}

// Show returns the content of the file path (slash-separated) in commit rev;
// an error wrapping ErrNotInCommit if the commit has no such file.
func (r *Repo) Show(ctx context.Context, rev, path string) ([]byte, error) {
	spec := rev + ":" + path
	if _, err := r.query(ctx, "cat-file", "-e", spec); err != nil {
		return nil, fmt.Errorf("show %s in %s: %w", spec, r.Root, ErrNotInCommit)
	}
	out, err := r.query(ctx, "cat-file", "blob", spec)
	if err != nil {
		return nil, fmt.Errorf("show %s in %s: %w", spec, r.Root, err)
	}
	return out, nil
}

// ChangedSince lists the paths whose content in the work tree differs from
// commit, plus untracked files that are not ignored, sorted, slash-separated,
// each once; renames count as a deletion and an addition.
func (r *Repo) ChangedSince(ctx context.Context, commit string) ([]string, error) {
	tracked, err := r.query(ctx, "diff", "--name-only", "-z", "--no-renames", "--no-ext-diff", commit, "--")
	if err != nil {
		return nil, fmt.Errorf("changed files in %s since %s: %w", r.Root, commit, err)
	}
	untracked, err := r.query(ctx, "ls-files", "-z", "--others", "--exclude-standard")
	if err != nil {
		return nil, fmt.Errorf("changed files in %s since %s: %w", r.Root, commit, err)
	}
	paths := append(splitNUL(tracked), splitNUL(untracked)...)
	slices.Sort(paths)
	return slices.Compact(paths), nil
}

// Diff returns the binary patch from commit from to commit to.
func (r *Repo) Diff(ctx context.Context, from, to string) ([]byte, error) {
	out, err := r.query(ctx, "diff", "--binary", "--no-renames", "--no-ext-diff", "--no-textconv", from, to, "--")
	if err != nil {
		return nil, fmt.Errorf("diff %s..%s in %s: %w", from, to, r.Root, err)
	}
	return out, nil
}

// Keep makes Rollback leave everything under dir (slash-separated,
// relative to the root) as it finds it, as if it were an ignored nested
// repository: for the harness's own logs, written in the work tree while an
// attempt runs. Baseline ignored files under dir are no longer restored.
func (b *Baseline) Keep(dir string) {
	dir = strings.TrimSuffix(dir, "/")
	inside := func(p string) bool { return p == dir || strings.HasPrefix(p, dir+"/") }
	b.Ignored = slices.DeleteFunc(slices.Clone(b.Ignored), inside)
	b.Ignored = append(b.Ignored, dir+"/")
	slices.Sort(b.Ignored)
	if b.state != nil {
		st := *b.state
		st.ignored = slices.DeleteFunc(slices.Clone(st.ignored), func(f ignoredFile) bool { return inside(strings.TrimSuffix(f.path, "/")) })
		b.state = &st
	}
}
