package gitws

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
)

// StepSwitch is the git step of a branch switch (GitStep.Step); its
// GitStep.Target is the commit being entered.
const StepSwitch = "switch branch"

// SwitchLeftoverError is a work tree a killed branch switch left with
// changes the switch cannot explain: someone edited it since.
type SwitchLeftoverError struct{ Paths []string }

func (e *SwitchLeftoverError) Error() string {
	shown := e.Paths
	if len(shown) > 5 {
		shown = shown[:5]
	}
	return fmt.Sprintf("a build was killed while switching branches, and %d path(s) hold neither the branch it left nor the one it entered (%s): they are someone's changes; commit or stash them, then run the build again",
		len(e.Paths), strings.Join(shown, ", "))
}

// RecoverSwitch puts back at HEAD's commit a work tree that a checkout
// killed on its way to target left half-switched. It changes something
// only when every difference from HEAD is explained by the switch: each
// changed, new or missing path holds exactly what HEAD or target has
// there (or the start of what target has: git was killed writing it),
// or is missing. Anything else is someone's work: a
// *SwitchLeftoverError names it and nothing is touched. The caller has
// removed git's lock files first (RecoverGitLocks). It returns the paths
// it restored or removed.
func (r *Repo) RecoverSwitch(ctx context.Context, target string) ([]string, error) {
	dirty, err := r.Dirty(ctx)
	if err != nil || len(dirty) == 0 {
		return nil, err
	}
	head, err := r.treeBlobs(ctx, "HEAD")
	if err != nil {
		return nil, err
	}
	entered := map[string]string{}
	if target != "" {
		if entered, err = r.treeBlobs(ctx, target); err != nil {
			return nil, err
		}
	}
	var paths, files, unexplained []string
	for _, line := range dirty {
		if len(line) < 4 {
			return nil, fmt.Errorf("git status in %s: unexpected entry %q", r.Root, line)
		}
		paths = append(paths, line[3:])
	}
	for _, p := range paths {
		info, err := os.Lstat(filepath.Join(r.Root, filepath.FromSlash(p)))
		switch {
		case errors.Is(err, fs.ErrNotExist):
			// git unlinks a file before writing its new version: a
			// missing file is the switch's (and coming back loses no
			// one's content).
		case err != nil:
			return nil, fmt.Errorf("inspect %s: %w", p, err)
		case info.Mode().IsRegular():
			files = append(files, p)
		default:
			unexplained = append(unexplained, p) // a symlink or directory: not judged, left to the user
		}
	}
	oids, err := r.hashFiles(ctx, files)
	if err != nil {
		return nil, err
	}
	for i, p := range files {
		if oids[i] == head[p] || oids[i] == entered[p] {
			continue
		}
		// git killed while writing a file leaves the start of it.
		if partial, err := r.partialOf(ctx, p, entered[p]); err != nil {
			return nil, err
		} else if !partial {
			unexplained = append(unexplained, p)
		}
	}
	if len(unexplained) > 0 {
		slices.Sort(unexplained)
		return nil, &SwitchLeftoverError{Paths: unexplained}
	}
	if _, err := r.mutate(ctx, "reset", "-q", "--hard", "HEAD", "--"); err != nil {
		return nil, fmt.Errorf("restore %s to HEAD after a killed branch switch: %w", r.Root, err)
	}
	for _, p := range paths {
		if _, tracked := head[p]; tracked {
			continue
		}
		full := filepath.Join(r.Root, filepath.FromSlash(p))
		if err := os.Remove(full); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return nil, fmt.Errorf("remove %s, left by a killed branch switch: %w", p, err)
		}
		// Directories the switch created and left empty go too.
		for dir := filepath.Dir(full); dir != r.Root && strings.HasPrefix(dir, r.Root); dir = filepath.Dir(dir) {
			if os.Remove(dir) != nil {
				break
			}
		}
	}
	return paths, nil
}

// partialOf reports whether the file at p holds the start of blob oid
// (none: false).
func (r *Repo) partialOf(ctx context.Context, p, oid string) (bool, error) {
	if oid == "" {
		return false, nil
	}
	data, err := os.ReadFile(filepath.Join(r.Root, filepath.FromSlash(p)))
	if err != nil {
		return false, fmt.Errorf("read %s: %w", p, err)
	}
	blob, err := r.query(ctx, "cat-file", "blob", oid)
	if err != nil {
		return false, fmt.Errorf("read object %s in %s: %w", oid, r.Root, err)
	}
	return bytes.HasPrefix(blob, data), nil
}

// treeBlobs maps each file path of commit's tree to its object id.
func (r *Repo) treeBlobs(ctx context.Context, commit string) (map[string]string, error) {
	out, err := r.query(ctx, "ls-tree", "-r", "-z", "--full-tree", commit+"^{tree}")
	if err != nil {
		return nil, fmt.Errorf("list the tree of %s in %s: %w", commit, r.Root, err)
	}
	m := map[string]string{}
	for _, entry := range splitNUL(out) {
		meta, path, ok := strings.Cut(entry, "\t")
		fields := strings.Fields(meta)
		if !ok || len(fields) != 3 {
			return nil, fmt.Errorf("ls-tree %s: unexpected entry %q", commit, entry)
		}
		m[path] = fields[2]
	}
	return m, nil
}

// hashFiles returns the object ids the files' bytes would have, with no
// filter run (a filter is a program the repository's config names).
func (r *Repo) hashFiles(ctx context.Context, paths []string) ([]string, error) {
	var oids []string
	for chunk := range slices.Chunk(paths, 256) {
		out, err := r.query(ctx, append([]string{"hash-object", "--no-filters", "--"}, chunk...)...)
		if err != nil {
			return nil, fmt.Errorf("hash files in %s: %w", r.Root, err)
		}
		got := strings.Fields(string(out))
		if len(got) != len(chunk) {
			return nil, fmt.Errorf("hash files in %s: %d ids for %d files", r.Root, len(got), len(chunk))
		}
		oids = append(oids, got...)
	}
	return oids, nil
}
