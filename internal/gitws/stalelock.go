package gitws

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
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
