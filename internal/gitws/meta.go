package gitws

import (
	"bytes"
	"cmp"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"
)

// metaSpot is one place of git metadata a command could change to make git
// run code (config filters, hooks, fsmonitor) or act elsewhere (a linked
// worktree's gitdir/commondir pointers, HEAD, the checked-out branch).
type metaSpot struct {
	path string // absolute
	walk bool   // a directory whose whole content counts (hooks/, info/); else the entry alone
}

// metaSpots lists the metadata the harness snapshots and guards for r, given
// the branch HEAD is on ("" when detached). In a linked worktree they span
// the worktree's own git directory, the common one, and the work tree's .git
// file; elsewhere GitDir and CommonDir coincide and duplicates are dropped.
func (r *Repo) metaSpots(headRef string) []metaSpot {
	c, g := r.CommonDir, r.GitDir
	spots := []metaSpot{
		{path: filepath.Join(c, "config")},
		{path: filepath.Join(c, "config.worktree")},
		{path: filepath.Join(c, "hooks"), walk: true},
		{path: filepath.Join(c, "info"), walk: true},
		// Absent at baseline (Preflight refuses submodules), so anything a
		// command puts there, such as a submodule's config, is new.
		{path: filepath.Join(c, "modules"), walk: true},
		{path: filepath.Join(g, "HEAD")},
		{path: filepath.Join(g, "config.worktree")},
		{path: filepath.Join(g, "commondir")},
		{path: filepath.Join(g, "gitdir")},
		{path: filepath.Join(r.Root, ".git")},
	}
	if headRef != "" {
		spots = append(spots, metaSpot{path: filepath.Join(c, filepath.FromSlash(headRef))})
	}
	slices.SortFunc(spots, func(a, b metaSpot) int { return strings.Compare(a.path, b.path) })
	return slices.CompactFunc(spots, func(a, b metaSpot) bool { return a.path == b.path })
}

// metaSnapshot is the recorded state of metaSpots: every entry found, by
// absolute path, with the bytes of regular files and the targets of symlinks.
type metaSnapshot struct {
	spots   []metaSpot
	entries map[string]*entry
}

// scanMeta reads what is at spots now. A missing spot is simply absent.
func scanMeta(spots []metaSpot) (map[string]*entry, error) {
	found := map[string]*entry{}
	add := func(p string, info fs.FileInfo) error {
		e := &entry{mode: info.Mode(), size: info.Size(), mtime: info.ModTime()}
		var err error
		switch {
		case info.Mode().IsRegular():
			if e.data, err = os.ReadFile(p); err != nil {
				return err
			}
			e.backed = true
		case info.Mode()&fs.ModeSymlink != 0:
			if e.target, err = os.Readlink(p); err != nil {
				return err
			}
		}
		found[p] = e
		return nil
	}
	for _, s := range spots {
		if !s.walk {
			info, err := os.Lstat(s.path)
			if errors.Is(err, fs.ErrNotExist) || errors.Is(err, fs.ErrInvalid) {
				continue
			}
			if err == nil {
				err = add(s.path, info)
			}
			if err != nil {
				return nil, fmt.Errorf("read git metadata: %w", err)
			}
			continue
		}
		err := filepath.WalkDir(s.path, func(p string, d fs.DirEntry, err error) error {
			if err != nil {
				if p == s.path && errors.Is(err, fs.ErrNotExist) {
					return nil
				}
				return err
			}
			info, err := d.Info()
			if err != nil {
				return err
			}
			return add(p, info)
		})
		if err != nil {
			return nil, fmt.Errorf("read git metadata: %w", err)
		}
	}
	return found, nil
}

// snapshotMeta records the metadata at spots.
func snapshotMeta(spots []metaSpot) (metaSnapshot, error) {
	entries, err := scanMeta(spots)
	return metaSnapshot{spots: spots, entries: entries}, err
}

// sameEntry reports whether a (baseline) and b (now) are the same for the
// purpose of git metadata: type, permission bits, and bytes or target.
// Times do not count: git rewrites config with the same content.
func sameEntry(a, b *entry) bool {
	switch {
	case a == nil || b == nil:
		return a == b
	case a.mode.Type() != b.mode.Type() || permBits(a.mode) != permBits(b.mode):
		return false
	case a.mode.IsRegular():
		return bytes.Equal(a.data, b.data)
	case a.mode&fs.ModeSymlink != 0:
		return a.target == b.target
	}
	return true
}

// metaLabel names a metadata path in reports the same way wherever the
// repository is: ".git/<path in the common git directory>", or ".git" for
// the work tree's own .git entry.
func (r *Repo) metaLabel(p string) string {
	if rel, err := filepath.Rel(r.CommonDir, p); err == nil && rel != ".." && !strings.HasPrefix(rel, "../") {
		return filepath.ToSlash(filepath.Join(".git", rel))
	}
	if rel, err := filepath.Rel(r.Root, p); err == nil && rel != ".." && !strings.HasPrefix(rel, "../") {
		return filepath.ToSlash(rel)
	}
	return p
}

// MetaChanges compares the git metadata that can run code or change what git
// does (config, config.worktree, hooks/, info/, modules/, HEAD, the checked
// out branch, a linked worktree's gitdir/commondir and .git file) with b and
// returns the changed, added and removed paths, sorted, labelled as in
// RollbackReport. It reads files only and never runs git, so it is safe to
// call right after a command that may have planted a filter driver. A
// Baseline built by hand has no metadata snapshot and reports nothing.
func (r *Repo) MetaChanges(b Baseline) ([]string, error) {
	if b.state == nil {
		return nil, nil
	}
	now, err := scanMeta(b.state.meta.spots)
	if err != nil {
		return nil, err
	}
	var changed []string
	for p, e := range now {
		if !sameEntry(b.state.meta.entries[p], e) {
			changed = append(changed, r.metaLabel(p))
		}
	}
	for p := range b.state.meta.entries {
		if now[p] == nil {
			changed = append(changed, r.metaLabel(p))
		}
	}
	slices.Sort(changed)
	return changed, nil
}

// RestoreMeta puts the git metadata back exactly as b recorded it, with
// files only (no git process), and reports what it removed and restored.
// Call it as soon as MetaChanges reports a change, before running git again.
func (r *Repo) RestoreMeta(b Baseline) (RollbackReport, error) {
	var rep RollbackReport
	if b.state == nil {
		return rep, nil
	}
	errs, fatal := r.restoreMeta(b.state.meta, &rep)
	rep.sort()
	if fatal != nil {
		return rep, fatal
	}
	return rep, errors.Join(errs...)
}

// restoreMeta makes the metadata exactly as recorded: entries the attempt
// added are deleted (files reported in rep.Removed), changed or deleted ones
// are put back (files reported in rep.Restored). A failure to restore a
// config file is returned as fatal, since git must not run with a planted
// config; other failures are returned in errs.
func (r *Repo) restoreMeta(snap metaSnapshot, rep *RollbackReport) (errs []error, fatal error) {
	report := func(list *[]string, p string, e *entry) {
		if e == nil || !e.mode.IsDir() {
			*list = append(*list, r.metaLabel(p))
		}
	}
	now, err := scanMeta(snap.spots)
	if err != nil {
		return nil, err
	}
	// Pass 1: delete what is not in the baseline, or not of its baseline
	// type, deepest first so that directories are empty when their turn comes.
	current := make([]string, 0, len(now))
	for p := range now {
		current = append(current, p)
	}
	slices.SortFunc(current, byDepth(true))
	for _, p := range current {
		e, base := now[p], snap.entries[p]
		if base != nil && base.mode.Type() == e.mode.Type() {
			continue
		}
		rm := os.Remove
		if !isWalked(snap.spots, p) {
			rm = os.RemoveAll // a spot that is one entry: whatever is under it came with it
		}
		if err := rm(p); err != nil && !errors.Is(err, fs.ErrNotExist) {
			errs = append(errs, fmt.Errorf("restore git metadata %s: %w", r.metaLabel(p), err))
			continue
		}
		if base == nil {
			report(&rep.Removed, p, e)
		}
	}
	// Pass 2: recreate and rewrite baseline entries, parents first.
	paths := make([]string, 0, len(snap.entries))
	for p := range snap.entries {
		paths = append(paths, p)
	}
	slices.SortFunc(paths, byDepth(false))
	for _, p := range paths {
		e := snap.entries[p]
		changed, err := restoreMetaEntry(p, e)
		if err != nil {
			err = fmt.Errorf("restore git metadata %s: %w", r.metaLabel(p), err)
			if base := filepath.Base(p); base == "config" || base == "config.worktree" {
				return errs, err
			}
			errs = append(errs, err)
			continue
		}
		if changed {
			report(&rep.Restored, p, e)
		}
	}
	return errs, nil
}

// isWalked reports whether p is inside (or is) a walked spot.
func isWalked(spots []metaSpot, p string) bool {
	for _, s := range spots {
		if s.walk && (p == s.path || strings.HasPrefix(p, s.path+string(filepath.Separator))) {
			return true
		}
	}
	return false
}

// byDepth orders paths by their number of separators, deepest first when
// deepestFirst, then by name.
func byDepth(deepestFirst bool) func(a, b string) int {
	return func(a, b string) int {
		d := strings.Count(a, string(filepath.Separator)) - strings.Count(b, string(filepath.Separator))
		if deepestFirst {
			d = -d
		}
		return cmp.Or(d, strings.Compare(a, b))
	}
}

// restoreMetaEntry makes p match e, which pass 1 of restoreMeta guarantees
// is absent or of e's type, and reports whether it changed anything.
func restoreMetaEntry(p string, e *entry) (bool, error) {
	info, err := os.Lstat(p)
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return false, err
	}
	missing := err != nil
	switch {
	case e.mode.IsDir():
		if missing {
			if err := os.Mkdir(p, 0o700); err != nil {
				return false, err
			}
		} else if permBits(info.Mode()) == permBits(e.mode) {
			return false, nil
		}
		return true, os.Chmod(p, permBits(e.mode))
	case e.mode&fs.ModeSymlink != 0:
		if !missing {
			if target, err := os.Readlink(p); err == nil && target == e.target {
				return false, nil
			}
		}
		return true, symlinkAtomic(p, e.target)
	case e.mode.IsRegular():
		if !missing && permBits(info.Mode()) == permBits(e.mode) && info.Size() == int64(len(e.data)) {
			data, err := os.ReadFile(p)
			if err != nil {
				return false, err
			}
			if bytes.Equal(data, e.data) {
				return false, nil
			}
		}
		return true, writeFileAtomic(p, e.data, permBits(e.mode), time.Time{})
	}
	return false, nil // sockets and the like: nothing to restore
}
