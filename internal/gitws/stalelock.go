package gitws

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"
)

// StaleLockAge is how old a git lock file must be before RemoveStaleLocks
// takes it for a leftover of a killed git rather than the lock of a git
// still at work.
const StaleLockAge = 10 * time.Second

// YoungLockError is returned by RemoveStaleLocks for a lock file younger
// than StaleLockAge: a git process may still hold it.
type YoungLockError struct {
	Path string
	Age  time.Duration
}

func (e *YoungLockError) Error() string {
	return fmt.Sprintf("%s is %s old: a git process may still hold it; wait for it to finish (or remove the file if no git runs here), then try again", e.Path, e.Age.Round(time.Millisecond))
}

// GitLockError is a git lock file that RecoverGitLocks leaves alone: no
// journal says a factory was cut off in this repository, so nothing says
// the file is not the lock of a git at work.
type GitLockError struct {
	Path string
	Age  time.Duration
}

func (e *GitLockError) Error() string {
	return fmt.Sprintf("git's lock file %s exists (%s old), and no factory was cut off here, so it is not factory's to remove: a git process may be at work in this repository (an editor opened by 'git commit'?), or one was killed and left it. Let it finish; if no git runs, remove the file, then run factory again",
		e.Path, e.Age.Round(time.Millisecond))
}

// RecoverGitLocks deals with the lock files git leaves when it is killed
// (see RemoveStaleLocks: index.lock, HEAD.lock, and the lock of the branch
// a noted step was on, or else of HEAD's) before a factory that holds the
// repository Lock goes on; journal says whether it found the journal of a
// run of its own that was cut off. It returns the paths removed.
//
//   - A GitStep note (RecordGitStep) says a factory died inside a git step
//     that writes these locks: they are its leftovers (it held the
//     repository lock, and git dies with it), and each is removed whatever
//     its age, then the note.
//   - A journal without the note: a factory was cut off, but not inside a
//     step of its own git; RemoveStaleLocks's age check decides.
//   - Neither: nothing is removed, and a lock is a *GitLockError, which
//     says what to do, before git refuses with its own advice.
func (r *Repo) RecoverGitLocks(journal bool, now time.Time) ([]string, error) {
	step, noted, err := r.RecordedGitStep()
	if err != nil {
		return nil, err
	}
	head := r.headBranch()
	switch {
	case noted:
		var removed []string
		for _, p := range r.gitLockPaths(step.Branch) {
			err := os.Remove(p)
			if err == nil {
				removed = append(removed, p)
			} else if !errors.Is(err, fs.ErrNotExist) {
				return removed, fmt.Errorf("remove git lock %s left by factory (pid %d) killed during its %s: %w", p, step.PID, step.Step, err)
			}
		}
		return removed, r.ClearGitStep()
	case journal:
		return r.RemoveStaleLocks(head, now)
	}
	for _, p := range r.gitLockPaths(head) {
		info, err := os.Lstat(p)
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("inspect git lock %s: %w", p, err)
		}
		return nil, &GitLockError{Path: p, Age: now.Sub(info.ModTime())}
	}
	return nil, nil
}

// gitLockPaths are the lock files of this work tree's index and HEAD and
// of the given branches (those that name one: empty, absolute or ".."
// names are skipped, as a note in the git directory could hold anything).
func (r *Repo) gitLockPaths(branches ...string) []string {
	paths := []string{filepath.Join(r.GitDir, "index.lock"), filepath.Join(r.GitDir, "HEAD.lock")}
	for _, b := range branches {
		p := filepath.Join(r.CommonDir, "refs", "heads", filepath.FromSlash(b)+".lock")
		if b != "" && filepath.IsLocal(filepath.FromSlash(b)) && !slices.Contains(paths, p) {
			paths = append(paths, p)
		}
	}
	return paths
}

// headBranch is the short name of the branch HEAD is on, read from the
// HEAD file (a git killed while moving HEAD leaves it as it was, beside
// HEAD.lock); "" when HEAD is detached or unreadable.
func (r *Repo) headBranch() string {
	data, err := os.ReadFile(filepath.Join(r.GitDir, "HEAD"))
	if err != nil {
		return ""
	}
	name, ok := strings.CutPrefix(strings.TrimSpace(string(data)), "ref: refs/heads/")
	if !ok {
		return ""
	}
	return name
}

// RemoveStaleLocks removes the lock files git leaves when it is killed
// while it writes the index or moves HEAD or branch (a SIGKILL during a
// commit): index.lock and HEAD.lock of this work tree's git directory and
// refs/heads/<branch>.lock. It returns the paths removed.
//
// Git takes these locks by creating the file (O_EXCL), not with fcntl or
// flock, so no kernel lock says whether a git process still holds one, and
// looking for one in the process table would be guesswork. The caller
// vouches that no git of its own can be running (it holds the repository
// Lock and its commands are dead), and a lock file must be StaleLockAge
// old: a git that holds it is working right now, and git holds these locks
// for milliseconds. A younger one is a *YoungLockError, and nothing is
// removed.
func (r *Repo) RemoveStaleLocks(branch string, now time.Time) ([]string, error) {
	paths := []string{filepath.Join(r.GitDir, "index.lock"), filepath.Join(r.GitDir, "HEAD.lock")}
	if branch != "" {
		paths = append(paths, filepath.Join(r.CommonDir, "refs", "heads", filepath.FromSlash(branch)+".lock"))
	}
	var stale []string
	for _, p := range paths {
		info, err := os.Lstat(p)
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("inspect git lock %s: %w", p, err)
		}
		if age := now.Sub(info.ModTime()); age < StaleLockAge {
			return nil, &YoungLockError{Path: p, Age: age}
		}
		stale = append(stale, p)
	}
	for i, p := range stale {
		if err := os.Remove(p); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return stale[:i], fmt.Errorf("remove stale git lock %s: %w", p, err)
		}
	}
	return stale, nil
}

// RelPaths gives paths relative to the work tree's root where they are
// inside it (".git/index.lock"), for messages.
func (r *Repo) RelPaths(paths []string) []string {
	out := make([]string, len(paths))
	for i, p := range paths {
		out[i] = p
		if rel, err := filepath.Rel(r.Root, p); err == nil && filepath.IsLocal(rel) {
			out[i] = rel
		}
	}
	return out
}
