// Package gitws runs git as a subprocess: preflight checks, baseline snapshots, exact rollback and tree hashes.
package gitws

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"iter"
	"maps"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/factory-harness/factory/internal/proc"
)

// ErrNotGitRepo is returned (wrapped) by Open when the directory is not inside a git work tree.
var ErrNotGitRepo = errors.New("not a git repository")

// ErrNoCommits is returned (wrapped) by Head when HEAD does not point at a commit yet.
var ErrNoCommits = errors.New("repository has no commits")

// Repo is a git work tree addressed by its root, with its git directories
// resolved once by Open. Every git command then names them explicitly
// (--git-dir, --work-tree), so a command that rewrites the work tree's .git
// file (a linked worktree's pointer) cannot redirect the harness's git to
// another repository.
type Repo struct {
	Root      string // absolute work-tree root with symlinks resolved
	GitDir    string // absolute git directory of this work tree (.git, or .git/worktrees/<name> of the main repository)
	CommonDir string // absolute common git directory: config, hooks, refs and objects; GitDir unless a linked worktree
	index     *indexCache
	// sleep is how Lock waits for a dead holder's lock to go; nil:
	// time.Sleep (a test that needs no waiting sets it).
	sleep func(time.Duration)
}

// gitSettings keep git from running code the repository or a command planted
// (hooks, fsmonitor, pagers, network transports for submodules) and from
// changing how paths are printed. External diff and textconv drivers need
// no setting: the harness runs only plumbing (diff-index), which never uses
// them. Filter drivers cannot be switched off by name; the metadata check
// (MetaChanges) keeps a planted one from ever reaching a git the harness runs.
var gitSettings = []string{
	"-c", "core.hooksPath=/dev/null",
	"-c", "core.fsmonitor=false",
	"-c", "core.quotepath=false",
	"-c", "core.pager=cat",
	"-c", "protocol.allow=never",
	// A commit may start `git gc --auto` in the background, whose repack
	// rewrites .git/info/refs while a command runs: the metadata check
	// would blame the command.
	"-c", "gc.auto=0",
	"-c", "maintenance.auto=false",
	"--no-pager",
}

// gitEnvKeep are the only variables git processes inherit: enough to find
// git, the user's own configuration and commit identity, never provider
// credentials or other secrets (a filter driver git runs sees exactly
// this environment). Variables that would point git at another repository
// or inject configuration (GIT_DIR, GIT_CONFIG_COUNT, ...) are not here.
var gitEnvKeep = []string{
	"PATH", "HOME", "XDG_CONFIG_HOME", "TMPDIR", "USER", "LOGNAME",
	"GIT_CONFIG_NOSYSTEM", "GIT_CONFIG_GLOBAL", "GIT_CONFIG_SYSTEM",
	"GIT_AUTHOR_NAME", "GIT_AUTHOR_EMAIL", "GIT_AUTHOR_DATE",
	"GIT_COMMITTER_NAME", "GIT_COMMITTER_EMAIL", "GIT_COMMITTER_DATE",
	"GIT_CEILING_DIRECTORIES",
}

// gitEnv returns the minimal environment of a git process (see gitEnvKeep)
// plus the settings every call needs and extra; later entries win.
func gitEnv(readOnly bool, extra ...string) []string {
	env := make([]string, 0, len(gitEnvKeep)+4+len(extra))
	for _, name := range gitEnvKeep {
		if v, ok := os.LookupEnv(name); ok {
			env = append(env, name+"="+v)
		}
	}
	env = append(env, "GIT_TERMINAL_PROMPT=0", "LC_ALL=C", "GIT_PAGER=cat")
	if readOnly {
		// Stops status and friends from refreshing the user's index behind their back.
		env = append(env, "GIT_OPTIONAL_LOCKS=0")
	}
	return append(env, extra...)
}

// runGit runs git in dir with gitSettings, then pinned (the --git-dir and
// --work-tree options, empty before Open has resolved them), then args.
func runGit(ctx context.Context, dir string, env, pinned []string, args ...string) ([]byte, error) {
	return proc.Output(ctx, dir, gitArgv(pinned, args), env)
}

func gitArgv(pinned, args []string) []string {
	argv := make([]string, 0, 1+len(gitSettings)+len(pinned)+len(args))
	return append(append(append(append(argv, "git"), gitSettings...), pinned...), args...)
}

func (r *Repo) pinned() []string {
	return []string{"--git-dir=" + r.GitDir, "--work-tree=" + r.Root}
}

// query runs a read-only git command in the work tree.
func (r *Repo) query(ctx context.Context, args ...string) ([]byte, error) {
	return runGit(ctx, r.Root, gitEnv(true), r.pinned(), args...)
}

// mutate runs a git command that may write to the repository.
func (r *Repo) mutate(ctx context.Context, args ...string) ([]byte, error) {
	return runGit(ctx, r.Root, gitEnv(false), r.pinned(), args...)
}

// Open returns the Repo whose work-tree root is dir. A subdirectory of a work
// tree is rejected so that Rollback and TreeHash always cover the whole tree.
func Open(ctx context.Context, dir string) (*Repo, error) {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return nil, fmt.Errorf("open git repo %s: %w", dir, err)
	}
	root, err := filepath.EvalSymlinks(abs)
	if err != nil {
		return nil, fmt.Errorf("open git repo %s: %w", dir, err)
	}
	if info, err := os.Stat(root); err != nil || !info.IsDir() {
		return nil, fmt.Errorf("open git repo %s: not a directory", dir)
	}
	env := gitEnv(true)
	// One git process in the usual case: inside a work tree, rev-parse
	// prints one line per option, in order. Anywhere else --show-toplevel
	// fails, and the two steps below say why.
	out, err := runGit(ctx, root, env, nil, "rev-parse", "--is-inside-work-tree", "--path-format=absolute", "--show-toplevel", "--git-dir", "--git-common-dir")
	lines := strings.Split(strings.TrimSuffix(string(out), "\n"), "\n")
	if err != nil || len(lines) != 4 || lines[0] != "true" {
		if out, err = runGit(ctx, root, env, nil, "rev-parse", "--is-inside-work-tree"); err != nil {
			var re *proc.RunError
			if errors.As(err, &re) && strings.Contains(re.Stderr, "not a git repository") {
				return nil, fmt.Errorf("open git repo %s: %w", dir, ErrNotGitRepo)
			}
			return nil, fmt.Errorf("open git repo %s: %w", dir, err)
		}
		if strings.TrimSpace(string(out)) != "true" {
			return nil, fmt.Errorf("open git repo %s: %w: no work tree here (bare repository or inside .git)", dir, ErrNotGitRepo)
		}
		out, err = runGit(ctx, root, env, nil, "rev-parse", "--path-format=absolute", "--show-toplevel", "--git-dir", "--git-common-dir")
		if err != nil {
			return nil, fmt.Errorf("open git repo %s: %w", dir, err)
		}
		lines = append([]string{"true"}, strings.Split(strings.TrimSuffix(string(out), "\n"), "\n")...)
		if len(lines) != 4 {
			return nil, fmt.Errorf("open git repo %s: unexpected rev-parse output %q", dir, out)
		}
	}
	lines = lines[1:]
	var resolved [3]string
	for i, p := range lines {
		if !filepath.IsAbs(p) {
			return nil, fmt.Errorf("open git repo %s: git printed %q, not an absolute path", dir, p)
		}
		if resolved[i], err = filepath.EvalSymlinks(p); err != nil {
			return nil, fmt.Errorf("open git repo %s: resolve %s: %w", dir, p, err)
		}
	}
	if resolved[0] != root {
		return nil, fmt.Errorf("open git repo %s: it is a subdirectory of the work tree %s; pass the work tree root", dir, resolved[0])
	}
	return &Repo{Root: root, GitDir: resolved[1], CommonDir: resolved[2], index: &indexCache{}}, nil
}

// Head returns the full commit hash of HEAD, or an error wrapping ErrNoCommits
// when the current branch is unborn.
func (r *Repo) Head(ctx context.Context) (string, error) {
	out, err := r.query(ctx, "rev-parse", "-q", "--verify", "HEAD^{commit}")
	if err != nil {
		var re *proc.RunError
		// With -q --verify, exit status 1 (rather than 128) means only that HEAD does not resolve.
		if errors.As(err, &re) && re.ExitCode == 1 {
			return "", fmt.Errorf("git head in %s: %w", r.Root, ErrNoCommits)
		}
		return "", fmt.Errorf("git head in %s: %w", r.Root, err)
	}
	return strings.TrimSpace(string(out)), nil
}

// Files lists the tracked files at HEAD, sorted, slash-separated: the file
// state a plan for this repository starts from.
func (r *Repo) Files(ctx context.Context) ([]string, error) {
	out, err := r.query(ctx, "ls-tree", "-r", "-z", "--name-only", "--full-tree", "HEAD")
	if err != nil {
		return nil, fmt.Errorf("git ls-tree in %s: %w", r.Root, err)
	}
	files := splitNUL(out)
	slices.Sort(files)
	return files, nil
}

// IndexProblems lists what makes an exact rollback impossible in the index:
// hidden holds tracked files git was told not to look at, marked
// skip-worktree (sparse checkouts) or assume-unchanged, which `reset --hard`
// does not restore; submodules holds gitlinks, whose work trees are separate
// repositories that a rollback of this one would not cover.
//
// With head, the commit HEAD names (its length gives the object ids'), it
// reads the index file itself; without, or when it cannot (see
// parseIndex), it asks git.
func (r *Repo) IndexProblems(ctx context.Context, head string) (hidden, submodules []string, err error) {
	if idx, _, err := r.readIndex(head); err == nil {
		for _, e := range idx.entries {
			if e.flags&entryAssumeValid != 0 || e.extFlags&entrySkipWorktree != 0 {
				hidden = append(hidden, e.path)
			}
			if e.mode == 0o160000 {
				submodules = append(submodules, e.path)
			}
		}
		return hidden, r.withModulesDir(submodules), nil
	}
	out, err := r.query(ctx, "ls-files", "-s", "-v", "-z")
	if err != nil {
		return nil, nil, fmt.Errorf("git ls-files in %s: %w", r.Root, err)
	}
	// "<tag> <mode> <object> <stage>\t<path>" for each of maybe 10,000s of
	// entries: read in place, a string only for the few that are problems.
	for rest := out; len(rest) > 0; {
		entry := rest
		if i := bytes.IndexByte(rest, 0); i >= 0 {
			entry, rest = rest[:i], rest[i+1:]
		} else {
			rest = nil
		}
		tab := bytes.IndexByte(entry, '\t')
		if tab < 0 {
			continue
		}
		meta, p := entry[:tab], entry[tab+1:]
		tag, mode, ok := bytes.Cut(meta, []byte(" "))
		if !ok {
			continue
		}
		// S: skip-worktree; lower case: assume-unchanged.
		if string(tag) == "S" || bytes.ContainsFunc(tag, unicode.IsLower) {
			hidden = append(hidden, string(p))
		}
		if bytes.HasPrefix(mode, []byte("160000 ")) {
			submodules = append(submodules, string(p))
		}
	}
	return hidden, r.withModulesDir(submodules), nil
}

// withModulesDir adds .git/modules, where git keeps submodules' own
// repositories, to submodules when it exists.
func (r *Repo) withModulesDir(submodules []string) []string {
	if _, err := os.Stat(filepath.Join(r.CommonDir, "modules")); err == nil {
		submodules = append(submodules, ".git/modules")
	}
	return submodules
}

// Dirty lists what makes the tree unclean: staged, unstaged and untracked
// (not ignored) changes, as sorted porcelain v1 lines such as "?? new.txt" or
// " M a.py". Empty means clean. Renames are reported as a deletion plus an
// addition (--no-renames) so that every entry names exactly one path.
func (r *Repo) Dirty(ctx context.Context) ([]string, error) {
	out, err := r.query(ctx, "status", "--porcelain=v1", "-z", "--untracked-files=all",
		"--ignore-submodules=none", "--no-renames")
	if err != nil {
		return nil, fmt.Errorf("git status in %s: %w", r.Root, err)
	}
	lines := splitNUL(out)
	slices.Sort(lines)
	return lines, nil
}

// Baseline is the state Rollback restores.
type Baseline struct {
	Commit string
	// Ignored holds the sorted, slash-separated, root-relative paths of every
	// ignored file present (symlinks count as files). Git lists a repository
	// nested inside an ignored directory once, as its path with a trailing "/".
	Ignored []string
	// EmptyDirs holds the sorted, slash-separated, root-relative paths of the
	// empty directories present (outside .git). Git cannot see them, so
	// without this Rollback could not tell a baseline directory such as a
	// virtualenv's empty include/ from one the attempt created.
	EmptyDirs []string
	// Modes holds the permission bits of every file and directory in the
	// work tree (outside .git; a nested repository's own .git is listed, not
	// what it holds), by slash path: git restores content and the
	// executable bit only, so a 0600 file it rewrites comes back 0644.
	Modes map[string]fs.FileMode
	// state is what only Snapshot records: git metadata, HEAD, refs and the
	// ignored files' attributes and backups. It is nil in a Baseline built
	// by hand, and Rollback then restores only the work tree.
	state *baselineState
	// watch, from Snapshot, says which paths may have changed mode since;
	// nil (a Baseline built by hand or read from a journal) walks the tree.
	watch *modeWatch
	// walked is the stat data of the files Snapshot walked, and tree the
	// tree of Commit, for DirtyAt.
	walked []walkedFile
	tree   string
}

// keeps reports whether Rollback must keep the untracked path p: it is in
// Ignored, or inside a nested repository listed there (whose files git
// lists one by one once the attempt deletes that repository's .git).
func (b Baseline) keeps(p string) bool {
	if b.IsIgnored(p) {
		return true
	}
	for dir := path.Dir(p); dir != "."; dir = path.Dir(dir) {
		if b.IsIgnored(dir + "/") {
			return true
		}
	}
	return false
}

// wasEmptyDir reports whether dir was an empty directory at baseline.
func (b Baseline) wasEmptyDir(dir string) bool {
	_, found := slices.BinarySearch(b.EmptyDirs, dir)
	return found
}

// IsIgnored reports whether path, slash-separated and relative to the root,
// was an ignored file at baseline.
func (b Baseline) IsIgnored(path string) bool {
	_, found := slices.BinarySearch(b.Ignored, path)
	return found
}

// Snapshot records HEAD, the ignored files and the empty directories
// present. It does not record uncommitted or untracked (non-ignored) work:
// take it on a clean tree (Dirty empty), since Rollback discards such work.
//
// It also records, for Rollback: the branch HEAD is on (or that it is
// detached) and the refs that exist; the bytes and modes of the git metadata
// files that make git run code or change behaviour (config and everything in
// hooks/ and info/ of the common git directory); and the type, size, mode
// and mtime of every ignored file, with the content of a bounded subset
// (see backupFileMax and backupTotalMax), shallowest first.
func (r *Repo) Snapshot(ctx context.Context) (Baseline, error) {
	head, err := r.Head(ctx)
	if err != nil {
		return Baseline{}, fmt.Errorf("snapshot %s: %w", r.Root, err)
	}
	return r.SnapshotAt(ctx, head)
}

// SnapshotAt is Snapshot for a caller that has just read HEAD (head, as
// Head returned it) and holds the repository lock, so that HEAD cannot
// have moved since: it saves one git process.
func (r *Repo) SnapshotAt(ctx context.Context, head string) (Baseline, error) {
	if !isHexHash(head) {
		return Baseline{}, fmt.Errorf("snapshot %s: HEAD %q is not a full hex object id", r.Root, head)
	}
	// The walk of the work tree (an lstat of every file) needs no git: it
	// runs while git lists the ignored files and the refs, which only read.
	var empty []string
	var files []walkedFile
	modes := map[string]fs.FileMode{}
	watch := newModeWatch(r.Root)
	scanned := make(chan error, 1)
	go func() { scanned <- scanTree(r.Root, ".", &empty, modes, watch, &files) }()
	wait := func() error {
		err := <-scanned
		scanned = nil
		return err
	}
	defer func() {
		if scanned != nil {
			<-scanned // never leave the walk running behind an error
		}
	}()
	// Without --directory, files inside ignored directories are listed one by one.
	out, err := r.query(ctx, "ls-files", "-z", "--others", "--ignored", "--exclude-standard")
	if err != nil {
		return Baseline{}, fmt.Errorf("snapshot %s: list ignored files: %w", r.Root, err)
	}
	ignored := splitNUL(out)
	slices.Sort(ignored)
	// Stamped before they are read: a change in between makes Rollback ask git.
	st := &baselineState{indexStamp: r.indexStamp(), refsStamp: r.refsStamp()}
	if st.refs, st.headRef, err = r.listRefs(ctx); err != nil {
		return Baseline{}, fmt.Errorf("snapshot %s: %w", r.Root, err)
	}
	// For DirtyAt, while the walk goes on; "" (unknown) if git cannot say.
	tree, _ := r.query(ctx, "rev-parse", "--verify", "-q", head+"^{tree}")
	if err := wait(); err != nil {
		watch.invalidate()
		return Baseline{}, fmt.Errorf("snapshot %s: %w", r.Root, err)
	}
	slices.Sort(empty)
	if st.meta, err = snapshotMeta(r.metaSpots(st.headRef)); err != nil {
		watch.invalidate()
		return Baseline{}, fmt.Errorf("snapshot %s: %w", r.Root, err)
	}
	st.ignored, st.dirModes = r.snapshotIgnored(ignored)
	b := Baseline{Commit: head, Ignored: ignored, EmptyDirs: empty, Modes: modes, state: st, watch: watch,
		walked: files, tree: strings.TrimSpace(string(tree))}
	if what, name, ok := b.notUTF8(); ok {
		watch.invalidate()
		return Baseline{}, fmt.Errorf("snapshot %s: a %s is not valid UTF-8 (%q): the journal that a recovery after a crash restores from is JSON text, which cannot hold it exactly; rename it", r.Root, what, name)
	}
	return b, nil
}

// notUTF8 returns the first string of b, by kind and then sorted, that the
// journal's JSON could not hold (encoding/json writes each byte that is not
// UTF-8 as U+FFFD), and what it is.
func (b Baseline) notUTF8() (what, name string, found bool) {
	check := func(kind string, names iter.Seq[string]) bool {
		var bad []string
		for n := range names {
			if !utf8.ValidString(n) {
				bad = append(bad, n)
			}
		}
		if len(bad) == 0 {
			return false
		}
		what, name, found = kind, slices.Min(bad), true
		return true
	}
	if check("file name", maps.Keys(b.Modes)) || check("file name", slices.Values(b.Ignored)) || check("file name", slices.Values(b.EmptyDirs)) {
		return
	}
	st := b.state
	if st == nil {
		return
	}
	var spots, targets []string
	for _, sp := range st.meta.spots {
		spots = append(spots, sp.path)
	}
	for _, e := range st.meta.entries {
		targets = append(targets, e.target)
	}
	for _, f := range st.ignored {
		targets = append(targets, f.target)
	}
	_ = check("branch or tag name", slices.Values(append([]string{st.headRef}, st.refs...))) ||
		check("path of the repository or its git directory", slices.Values(spots)) ||
		check("file name in the git directory", maps.Keys(st.meta.entries)) ||
		check("symlink target", slices.Values(targets)) ||
		check("directory name", maps.Keys(st.dirModes))
	return
}

// RollbackReport says what Rollback did and what it could not undo.
type RollbackReport struct {
	// Removed lists what the attempt created and Rollback deleted: untracked
	// work-tree files and symlinks, nested repositories (as "dir/"), and git
	// metadata files (as ".git/<rel>", for example a planted
	// ".git/hooks/pre-commit").
	Removed []string
	// Restored lists the baseline ignored files and git metadata files (as
	// ".git/<rel>") that were changed or deleted and have been put back.
	Restored []string
	// Unrestored lists the baseline ignored files that were changed or
	// deleted and could not be put back because their content was not backed
	// up (too large, or over the snapshot's budget), and ignored nested
	// repositories that were removed.
	Unrestored []string
	// NewRefs lists the refs (branches, tags, refs/stash, ...) that exist now
	// but did not at baseline. Rollback leaves them in place.
	NewRefs []string
}

// Rollback restores the repository to b. All lists in the report are sorted.
//
// With a Baseline from Snapshot it first puts back the git metadata (see
// MetaChanges) exactly, deleting files the attempt added there:
// a planted hook would otherwise run on the user's next commit, and planted
// config (filter drivers, core.worktree) would steer the git commands
// Rollback runs next. HEAD is part of that metadata, so it is back on the
// baseline branch (or detached at b.Commit) before the reset, which then
// moves the baseline branch and not whatever the attempt checked out.
// Branches, tags and stashes the attempt created are left alone and reported
// in NewRefs.
//
// It then resets the work tree and index to b.Commit and deletes every
// untracked file or symlink present that is not in b.Ignored, whether
// ignored or not. Directories left empty by those deletions are removed too,
// except the root, .git, b.EmptyDirs, and ancestors of b.Ignored paths,
// b.EmptyDirs or tracked files.
//
// Last, every baseline ignored file whose type, size, mode or mtime (for a
// symlink: type or target) differs from the snapshot is restored from its
// backup, with its mode and mtime, so that a later Rollback sees it as
// unchanged; without a backup it is reported in Unrestored. It is
// idempotent: a second Rollback removes and restores nothing (and reports
// the same Unrestored and NewRefs, which are still true).
//
// Directories a command made inaccessible are opened up first (so git sees
// inside), and every file and directory of b.Modes gets its baseline
// permission bits back at the end, when what git never lists goes too:
// special files (FIFOs, sockets) and a .git a command put into a tracked
// directory (see restoreModes).
//
// Rollback never deletes a path in b.Ignored. Untracked nested repositories
// are removed like any new directory (git clean -fd would keep them): the
// baseline tree was clean, so the attempt created them.
//
// It deliberately does not run git clean: an untracked .gitignore created by
// the attempt (say "!*.log") can un-ignore baseline files and make git clean
// delete them. Instead it lists every untracked file with ls-files --others
// and no exclude rules, so ignore rules cannot change what it keeps.
//
// On error the report still describes what was done.
func (r *Repo) Rollback(ctx context.Context, b Baseline) (rep RollbackReport, err error) {
	short := ShortHash(b.Commit)
	defer rep.sort()
	fail := func(err error) (RollbackReport, error) {
		return rep, fmt.Errorf("git rollback to %s: %w", short, err)
	}
	if !isHexHash(b.Commit) {
		return fail(fmt.Errorf("baseline commit %q is not a full hex object id", b.Commit))
	}
	var errs []error
	st := b.state
	if st != nil {
		st.staged = nil // the tree it holds is being undone
		metaErrs, err := r.restoreMeta(st.meta, &rep)
		if err != nil {
			return fail(err)
		}
		errs = append(errs, metaErrs...)
		if err := r.reportNewRefs(ctx, st, &rep); err != nil {
			return fail(err)
		}
	}
	// A directory a command left unreadable would hide its content from git
	// and from the removals below (when not running as root).
	errs = append(errs, r.unlockChanged(b)...)
	if plan, ok := r.planRestore(b); ok {
		// checkout-index passes over a file whose stat data git finds
		// unchanged (it compares ctime to the second); these are known to
		// have changed, so they go first and are written anew.
		for _, p := range plan.stale {
			if err := os.Remove(r.abs(p)); err != nil && !errors.Is(err, fs.ErrNotExist) {
				return fail(fmt.Errorf("remove the changed tracked file %s: %w", p, err))
			}
		}
		if err := r.checkoutIndex(ctx, plan.stale); err != nil {
			return fail(err)
		}
		errs = append(errs, r.removeUntracked(ctx, b, plan.untracked, plan.tracked, &rep)...)
	} else {
		untracked, err := r.resetHard(ctx, b)
		if err != nil {
			return fail(err)
		}
		errs = append(errs, r.removeUntracked(ctx, b, untracked, nil, &rep)...)
	}
	if st != nil {
		errs = append(errs, r.restoreIgnored(st, &rep)...)
	}
	_, modeErrs := r.restoreModes(b, &rep)
	errs = append(errs, modeErrs...)
	if len(errs) > 0 {
		return fail(errors.Join(errs...))
	}
	return rep, nil
}

// resetHard resets the index and the work tree to b.Commit with git and
// returns the untracked files present after it, as git lists them.
func (r *Repo) resetHard(ctx context.Context, b Baseline) ([]string, error) {
	// A plain reset --hard deletes files that are in the index but not in the
	// target, so a baseline ignored file the attempt staged or committed
	// (git add -f .env) would be lost. Resetting the index first turns such
	// files back into untracked ones that the pass below keeps.
	// Checking first is cheap; the index reset re-stats every tracked file.
	// An index as it was at the snapshot, when Preflight found it clean,
	// stages nothing.
	st := b.state
	staged := false
	if st == nil || st.indexStamp == "" || r.indexStamp() != st.indexStamp {
		var err error
		if staged, err = r.indexDiffers(ctx, b.Commit); err != nil {
			return nil, err
		}
	}
	if staged {
		if _, err := r.mutate(ctx, "reset", "-q", b.Commit, "--"); err != nil {
			return nil, err
		}
	}
	if _, err := r.mutate(ctx, "reset", "-q", "--hard", b.Commit, "--"); err != nil {
		return nil, err
	}
	out, err := r.query(ctx, "ls-files", "-z", "--others")
	if err != nil {
		return nil, fmt.Errorf("list untracked files: %w", err)
	}
	return splitNUL(out), nil
}

// removeUntracked deletes the untracked paths (as git lists them: files,
// symlinks, nested repositories as "dir/") that b does not keep, reports
// them in rep.Removed, then removes the directories that left empty.
// tracked, when not nil, is every tracked path, sorted (else git is asked).
func (r *Repo) removeUntracked(ctx context.Context, b Baseline, untracked, tracked []string, rep *RollbackReport) []error {
	var errs []error
	var removed []string
	for _, p := range untracked {
		if b.keeps(p) || inDotGit(p) {
			continue
		}
		if strings.HasSuffix(p, "/") {
			// A repository the attempt created (git init scratch): the
			// baseline tree was clean, so none was there unignored.
			if err := os.RemoveAll(r.abs(p)); err != nil {
				errs = append(errs, fmt.Errorf("remove nested repository %s: %w", p, err))
				continue
			}
			removed = append(removed, p)
			continue
		}
		if err := os.Remove(r.abs(p)); err != nil && !errors.Is(err, os.ErrNotExist) {
			errs = append(errs, err)
			continue
		}
		removed = append(removed, p)
	}
	slices.Sort(removed)
	rep.Removed = append(rep.Removed, removed...)
	if err := r.pruneEmptyDirs(ctx, b, removed, tracked); err != nil {
		errs = append(errs, err)
	}
	return errs
}

// Tidy removes, after a commit, what the commands left that is neither
// committed nor kept by b (see Baseline.Rebased), and reports whether the
// tree is now provably clean (Dirty would be empty).
//
// One `git status --ignored` lists every change. When it shows only
// untracked and ignored files — the usual leftovers of verification, such
// as __pycache__/ — Tidy removes those b does not keep (as Rollback does),
// and gives files and directories their baseline modes back. The tree is
// then clean by construction, unless a mode had to be restored on a file
// (git may see an executable bit), and clean is true only when none was.
// When the listing shows any change to tracked files or the index, Tidy
// does a full Rollback to b.Commit instead, and clean is false: check with
// Dirty. keep are directories at the root (the installed trees:
// node_modules, .venv) that Tidy leaves in place, with all they hold, when
// git ignores them.
func (r *Repo) Tidy(ctx context.Context, b Baseline, keep []string) (rep RollbackReport, clean bool, err error) {
	if b.state != nil {
		return rep, false, errors.New("tidy: only for a Baseline without git metadata (see Rebased)")
	}
	defer rep.sort()
	fail := func(err error) (RollbackReport, bool, error) {
		return rep, false, fmt.Errorf("clean up at %s: %w", b.Commit, err)
	}
	errs := r.unlockChanged(b)
	untracked, tracked, ok, err := r.leftovers(ctx, b)
	if err != nil {
		return fail(err)
	}
	if !ok {
		// A tracked file or the index changed: only a reset restores that.
		rep, err := r.Rollback(ctx, b)
		return rep, false, err
	}
	untracked = r.withoutIgnoredDirs(ctx, untracked, keep)
	errs = append(errs, r.removeUntracked(ctx, b, untracked, tracked, &rep)...)
	fixed, modeErrs := r.restoreModes(b, &rep)
	errs = append(errs, modeErrs...)
	if len(errs) > 0 {
		return fail(errors.Join(errs...))
	}
	return rep, fixed == 0, nil
}

// withoutIgnoredDirs is paths without those inside a directory of dirs
// that git ignores. When git cannot say (check-ignore fails), the paths
// stay, to be removed: keeping is never the default.
func (r *Repo) withoutIgnoredDirs(ctx context.Context, paths, dirs []string) []string {
	for _, d := range dirs {
		inside := func(p string) bool { return p == d || strings.HasPrefix(p, d+"/") }
		if !slices.ContainsFunc(paths, inside) {
			continue
		}
		if _, err := r.query(ctx, "check-ignore", "-q", "--", d+"/"); err != nil {
			continue
		}
		paths = slices.DeleteFunc(paths, inside)
	}
	return paths
}

// leftovers lists for Tidy the untracked files present in a tree whose
// tracked files and index are those of b.Commit, and false when they are
// not. Where the watch and the stat data can tell (see treeChanges) it
// returns every tracked path too; else it asks `git status`.
func (r *Repo) leftovers(ctx context.Context, b Baseline) (untracked, tracked []string, ok bool, err error) {
	tree, err := r.query(ctx, "rev-parse", "--verify", "-q", b.Commit+"^{tree}")
	if err != nil {
		return nil, nil, false, fmt.Errorf("read the tree of %s: %w", ShortHash(b.Commit), err)
	}
	// An index whose cache tree is the commit's stages nothing.
	if c, ok := r.changesSince(b, strings.TrimSpace(string(tree))); ok {
		return c.untracked, c.tracked, len(c.stale) == 0, nil
	}
	out, err := r.query(ctx, "status", "--porcelain=v1", "-z", "--untracked-files=all", "--ignored",
		"--ignore-submodules=none", "--no-renames")
	if err != nil {
		return nil, nil, false, fmt.Errorf("git status: %w", err)
	}
	for _, line := range splitNUL(out) {
		code, p, ok := strings.Cut(line, " ")
		if !ok || (code != "??" && code != "!!") || p == "" {
			return nil, nil, false, nil
		}
		untracked = append(untracked, p)
	}
	return untracked, nil, true, nil
}

// unlockDirs gives the owner full access (u+rwx) to every directory at or
// below rel that lacks it and was not so at baseline, skipping .git, so
// that git can list and reset what is inside and Rollback can remove it.
// restoreModes puts the baseline modes back afterwards; directories the
// attempt created are removed. A directory locked at baseline stays locked:
// what is inside was never seen, so nothing there may be judged new.
func (r *Repo) unlockDirs(rel string, b Baseline) []error {
	var errs []error
	entries, err := os.ReadDir(r.abs(rel))
	if err != nil {
		if !errors.Is(err, fs.ErrNotExist) {
			errs = append(errs, fmt.Errorf("read directory %s: %w", rel, err))
		}
		return errs
	}
	for _, e := range entries {
		if !e.IsDir() || e.Name() == ".git" {
			continue
		}
		p := path.Join(rel, e.Name())
		info, err := e.Info()
		if err != nil {
			continue
		}
		errs = append(errs, r.unlockDir(p, info, b, true)...)
	}
	return errs
}

// unlockDir is unlockDirs for the directory p, and with deep for
// everything below it.
func (r *Repo) unlockDir(p string, info fs.FileInfo, b Baseline, deep bool) []error {
	if want, ok := b.Modes[p]; ok && want == permBits(info.Mode()) && want&0o700 != 0o700 {
		return nil
	}
	if info.Mode().Perm()&0o700 != 0o700 {
		if err := os.Chmod(r.abs(p), permBits(info.Mode())|0o700); err != nil {
			return []error{fmt.Errorf("make directory %s accessible: %w", p, err)}
		}
	}
	if !deep {
		return nil
	}
	return r.unlockDirs(p, b)
}

// unlockChanged is unlockDirs(".", b), but where b's watch saw every change
// it looks only at the directories whose attributes changed and, deeply,
// at those created or moved since the snapshot: no other directory can
// have lost its owner's access.
func (r *Repo) unlockChanged(b Baseline) []error {
	changed, ok := b.watch.paths()
	if !ok {
		return r.unlockDirs(".", b)
	}
	var errs []error
	// Sorted, a parent comes before what is inside it.
	for _, p := range slices.Sorted(maps.Keys(changed)) {
		if slices.Contains(strings.Split(p, "/"), ".git") {
			continue
		}
		info, err := os.Lstat(r.abs(p))
		if err != nil || !info.IsDir() {
			continue
		}
		errs = append(errs, r.unlockDir(p, info, b, changed[p])...)
	}
	return errs
}

// restoreModes walks the work tree (not .git, not what b keeps: baseline
// ignored paths and nested repositories) after the removals: every file and
// directory of b.Modes gets its baseline permission bits back (git rewrites
// files with default modes; commands run chmod), and what git never lists
// is removed when it was not there at baseline: special files (FIFOs,
// sockets, devices), a .git (directory or file) that made a tracked
// directory a repository of its own, and directories now empty (a
// command's mkdir). Removals go into rep.Removed (a .git as "dir/.git/"),
// and special files that could not be removed into rep.Unrestored. It
// returns how many files' modes it changed. Directories are handled last,
// deepest first, so each stays accessible while its content is fixed. A
// Baseline without Modes (built by hand) leaves everything as it is.
func (r *Repo) restoreModes(b Baseline, rep *RollbackReport) (files int, errs []error) {
	if b.Modes == nil {
		return 0, nil
	}
	var dirs []string
	check := func(p string, e fs.DirEntry) {} // set below; walk and check call each other
	var walk func(rel string)
	walk = func(rel string) {
		entries, err := os.ReadDir(r.abs(rel))
		if err != nil {
			if !errors.Is(err, fs.ErrNotExist) {
				errs = append(errs, fmt.Errorf("read directory %s: %w", rel, err))
			}
			return
		}
		for _, e := range entries {
			check(path.Join(rel, e.Name()), e)
		}
	}
	check = func(p string, e fs.DirEntry) {
		if e.Name() == ".git" {
			if _, before := b.Modes[p]; p != ".git" && !before && !b.keeps(p) {
				if err := os.RemoveAll(r.abs(p)); err != nil {
					errs = append(errs, fmt.Errorf("remove the repository %s a command made: %w", p, err))
				} else {
					rep.Removed = append(rep.Removed, p+"/")
				}
			}
			return
		}
		if e.Type()&fs.ModeSymlink != 0 || b.IsIgnored(p+"/") {
			return
		}
		if e.IsDir() {
			if want, ok := b.Modes[p]; !ok || want&0o500 == 0o500 {
				walk(p) // a directory its owner could not read at baseline was never seen inside
			}
			dirs = append(dirs, p)
			return
		}
		want, ok := b.Modes[p]
		if !ok && !e.Type().IsRegular() && !b.keeps(p) {
			// Git lists no FIFO or socket, so nothing above removed it.
			if err := os.Remove(r.abs(p)); err != nil && !errors.Is(err, fs.ErrNotExist) {
				rep.Unrestored = append(rep.Unrestored, p)
			} else {
				rep.Removed = append(rep.Removed, p)
			}
			return
		}
		if info, err := e.Info(); ok && err == nil && permBits(info.Mode()) != want {
			files++
			if err := os.Chmod(r.abs(p), want); err != nil {
				errs = append(errs, fmt.Errorf("restore mode of %s: %w", p, err))
			}
		}
	}
	if changed, ok := b.watch.paths(); ok {
		// Only the paths that may have changed since the snapshot (and,
		// inside a directory created, deleted or moved, everything): the
		// rest kept their modes, and the watched directories reported
		// their entries' changes themselves.
		for _, p := range slices.Sorted(maps.Keys(changed)) {
			if path.Base(p) == ".git" && !b.walkSkips(path.Dir(p)) {
				if info, err := os.Lstat(r.abs(p)); err == nil {
					check(p, fs.FileInfoToDirEntry(info))
				}
				continue
			}
			if b.walkSkips(p) {
				continue
			}
			info, err := os.Lstat(r.abs(p))
			if err != nil {
				continue // gone: nothing to restore
			}
			if info.IsDir() && !changed[p] {
				dirs = append(dirs, p) // its own mode only
				continue
			}
			check(p, fs.FileInfoToDirEntry(info))
		}
		// A directory flagged and also inside one walked is listed twice.
		slices.Sort(dirs)
		dirs = slices.Compact(dirs)
		slices.SortStableFunc(dirs, func(a, b string) int { return strings.Count(b, "/") - strings.Count(a, "/") })
	} else {
		walk(".")
		// walk appended children before their parents: deepest first already.
	}
	for _, p := range dirs {
		want, ok := b.Modes[p]
		if !ok {
			if err := os.Remove(r.abs(p)); err != nil && !isNotEmpty(err) && !errors.Is(err, fs.ErrNotExist) {
				errs = append(errs, fmt.Errorf("remove directory %s: %w", p, err))
			}
			continue
		}
		if info, err := os.Lstat(r.abs(p)); err == nil && permBits(info.Mode()) != want {
			if err := os.Chmod(r.abs(p), want); err != nil {
				errs = append(errs, fmt.Errorf("restore mode of %s: %w", p, err))
			}
		}
	}
	if len(errs) > 0 {
		b.watch.invalidate() // the next restore walks everything
	}
	return files, errs
}

// walkSkips reports whether restoreModes' walk of the tree never reaches
// p (beyond p itself being a symlink): p lies in or is a .git directory,
// lies in or is a baseline ignored nested repository, or lies inside a
// directory its owner could not read at baseline.
func (b Baseline) walkSkips(p string) bool {
	for q := p; q != "."; q = path.Dir(q) {
		if path.Base(q) == ".git" || b.IsIgnored(q+"/") {
			return true
		}
		if want, ok := b.Modes[q]; ok && q != p && want&0o500 != 0o500 {
			return true
		}
	}
	return false
}

// isNotEmpty reports whether err says a directory still has entries.
func isNotEmpty(err error) bool {
	return errors.Is(err, syscall.ENOTEMPTY) || errors.Is(err, syscall.EEXIST)
}

func (rep *RollbackReport) sort() {
	slices.Sort(rep.Removed)
	slices.Sort(rep.Restored)
	slices.Sort(rep.Unrestored)
	slices.Sort(rep.NewRefs)
}

// pruneEmptyDirs removes the directories that deleting removed left empty.
// Deepest directories go first so that a parent is judged after its children.
func (r *Repo) pruneEmptyDirs(ctx context.Context, b Baseline, removed, tracked []string) error {
	seen := map[string]bool{}
	var dirs []string
	for _, p := range removed {
		for dir := path.Dir(strings.TrimSuffix(p, "/")); dir != "." && !seen[dir]; dir = path.Dir(dir) {
			seen[dir] = true
			dirs = append(dirs, dir)
		}
	}
	slices.SortFunc(dirs, func(a, b string) int {
		return strings.Count(b, "/") - strings.Count(a, "/")
	})
	trackedLoaded := tracked != nil // else deferred until some directory is empty
	for _, dir := range dirs {
		if hasUnder(b.Ignored, dir) || hasUnder(b.EmptyDirs, dir) || b.wasEmptyDir(dir) {
			continue
		}
		empty, err := isEmptyDir(r.abs(dir))
		if err != nil {
			return err
		}
		if !empty {
			continue
		}
		if !trackedLoaded {
			out, err := r.query(ctx, "ls-files", "-z")
			if err != nil {
				return fmt.Errorf("list tracked files: %w", err)
			}
			tracked = splitNUL(out)
			slices.Sort(tracked)
			trackedLoaded = true
		}
		// Matters in sparse checkouts, where tracked files may be absent from disk.
		if hasUnder(tracked, dir) {
			continue
		}
		if err := os.Remove(r.abs(dir)); err != nil {
			return err
		}
	}
	return nil
}

// isEmptyDir reports whether dir is an empty directory; a missing path is
// not one (something else already removed it).
func isEmptyDir(dir string) (bool, error) {
	f, err := os.Open(dir)
	if errors.Is(err, os.ErrNotExist) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	defer f.Close()
	names, err := f.Readdirnames(1)
	if len(names) > 0 {
		return false, nil
	}
	if err != nil && !errors.Is(err, io.EOF) {
		return false, fmt.Errorf("read directory %s: %w", dir, err)
	}
	return true, nil
}

// indexDiffers reports whether the index differs from commit, i.e. whether
// something was staged or committed since the baseline.
func (r *Repo) indexDiffers(ctx context.Context, commit string) (bool, error) {
	_, err := r.query(ctx, "diff-index", "--cached", "--quiet", commit, "--")
	var re *proc.RunError
	switch {
	case err == nil:
		return false, nil
	case errors.As(err, &re) && re.ExitCode == 1:
		return true, nil
	}
	return false, fmt.Errorf("compare index with %s: %w", commit, err)
}

// TreeHash returns the git tree id of the work tree as `git add -A` would
// stage it: tracked changes plus untracked, non-ignored files. It stages into
// a throwaway index in a private temporary directory, seeded from a copy of
// the user's index, which is never written; blobs do land in the object store.
func (r *Repo) TreeHash(ctx context.Context) (string, error) {
	tree, _, err := r.stageTree(ctx, nil, false)
	return tree, err
}

// TreeHashAt is TreeHash for a tree snapshotted as b (by Snapshot): where
// the index and refs are as they were then and the watch and stat data tell
// what changed (see treeChanges), it stages only those paths instead of
// having git stat every file, and with nothing changed it returns the
// snapshot's tree without running git. What it staged is kept with b, for
// CommitStaged.
func (r *Repo) TreeHashAt(ctx context.Context, b Baseline) (string, error) {
	if b.state != nil {
		b.state.staged = nil // what an earlier call staged is no longer the tree
	}
	paths, ok, err := r.changedToStage(ctx, b)
	switch {
	case err != nil:
		return "", fmt.Errorf("git tree hash of %s: %w", r.Root, err)
	case !ok:
		return r.TreeHash(ctx)
	case len(paths) == 0:
		return b.tree, nil
	}
	tree, index, err := r.stageTree(ctx, paths, true)
	if err != nil {
		return "", err
	}
	if index != nil {
		slices.Sort(paths)
		b.state.staged = &stagedIndex{data: index, tree: tree, paths: paths, base: b.state.indexStamp}
	}
	return tree, nil
}

// changedToStage returns the paths that `add -A` would stage in a tree
// snapshotted as b, or false where only staging everything can tell.
func (r *Repo) changedToStage(ctx context.Context, b Baseline) ([]string, bool, error) {
	c, ok := r.planRestore(b)
	if !ok {
		return nil, false, nil
	}
	// Ignore rules and attributes decide what else `add -A` stages, and how.
	for _, p := range slices.Concat(c.stale, c.untracked) {
		if name := path.Base(p); name == ".gitignore" || name == ".gitattributes" {
			return nil, false, nil
		}
	}
	// A baseline ignored file is still ignored (the rules did not change).
	var fresh []string
	for _, p := range c.untracked {
		if !b.keeps(p) {
			fresh = append(fresh, p)
		}
	}
	paths := c.stale
	// Named on the command line, an ignored path is an error for add.
	for chunk := range argChunks(fresh) {
		out, err := r.query(ctx, append([]string{"--literal-pathspecs", "ls-files", "-z", "--others", "--exclude-standard", "--"}, chunk...)...)
		if err != nil {
			return nil, false, fmt.Errorf("list untracked files: %w", err)
		}
		paths = append(paths, splitNUL(out)...)
	}
	return paths, true, nil
}

// stageTree is TreeHash staging only paths (with update-index: none may
// be ignored), or everything when paths is nil; with keep it also returns
// the index it staged them in, when that started as a copy of the user's
// (one read from HEAD's tree has no stat data: as the repository's index it
// would make every file look changed).
func (r *Repo) stageTree(ctx context.Context, paths []string, keep bool) (tree string, index []byte, err error) {
	tmp, err := os.MkdirTemp("", "gitws-index-")
	if err != nil {
		return "", nil, fmt.Errorf("git tree hash of %s: %w", r.Root, err)
	}
	defer os.RemoveAll(tmp)
	// read-tree refuses an existing empty file, so the index path must not
	// exist yet; the directory also holds git's index.lock. A split index
	// would write shared index files into .git, hence core.splitIndex=false.
	indexPath := filepath.Join(tmp, "index")
	env := gitEnv(true, "GIT_INDEX_FILE="+indexPath)
	steps := [][]string{{"add", "-A"}}
	if paths != nil {
		// --replace: a new file where a deleted directory was, or the reverse.
		steps = nil
		for chunk := range argChunks(paths) {
			steps = append(steps, append([]string{"update-index", "--add", "--remove", "--replace", "--"}, chunk...))
		}
	}
	steps = append(steps, []string{"write-tree"})
	// A copy of the user's index carries stat data, so `add -A` rehashes only
	// changed files instead of every tracked one (2x faster at 10,000 files).
	// Without a usable copy, start from HEAD's tree: same result, slower.
	if err := r.copyIndex(indexPath); err != nil {
		steps = append([][]string{{"read-tree", "HEAD"}}, steps...)
		keep = false
	}
	var out []byte
	for _, step := range steps {
		args := append([]string{"-c", "core.splitIndex=false"}, step...)
		if out, err = runGit(ctx, r.Root, env, r.pinned(), args...); err != nil {
			return "", nil, fmt.Errorf("git tree hash of %s: %w", r.Root, err)
		}
	}
	if keep {
		if index, err = os.ReadFile(indexPath); err != nil {
			return "", nil, fmt.Errorf("git tree hash of %s: %w", r.Root, err)
		}
	}
	return strings.TrimSpace(string(out)), index, nil
}

// copyIndex copies the repository's index file to dst, refusing a split
// index, whose shared part would not be found next to the copy.
func (r *Repo) copyIndex(dst string) error {
	data, err := os.ReadFile(filepath.Join(r.GitDir, "index"))
	if err != nil {
		return err
	}
	// A split index keeps most entries in <git dir>/sharedindex.<hash>, which
	// must exist for git to read it: without such a file the index is whole.
	// (Looking at files instead of asking `git config core.splitIndex` saves a
	// process, and also catches an index split by `update-index
	// --split-index` while the setting is off.)
	if shared, err := filepath.Glob(filepath.Join(r.GitDir, "sharedindex.*")); err != nil || len(shared) > 0 {
		return errors.New("split index")
	}
	return os.WriteFile(dst, data, 0o600)
}

// abs converts a slash-separated root-relative path from git to a filesystem path.
func (r *Repo) abs(p string) string {
	return filepath.Join(r.Root, filepath.FromSlash(p))
}

// splitNUL splits -z output into its non-empty fields.
func splitNUL(out []byte) []string {
	var fields []string
	for _, f := range bytes.Split(out, []byte{0}) {
		if len(f) > 0 {
			fields = append(fields, string(f))
		}
	}
	return fields
}

// hasUnder reports whether sorted holds a path inside directory dir.
func hasUnder(sorted []string, dir string) bool {
	prefix := dir + "/"
	i, _ := slices.BinarySearch(sorted, prefix)
	return i < len(sorted) && strings.HasPrefix(sorted[i], prefix)
}

// inDotGit reports whether p has a .git component; git never lists such
// paths, and Rollback must never touch them even if it did.
func inDotGit(p string) bool {
	return slices.Contains(strings.Split(strings.TrimSuffix(p, "/"), "/"), ".git")
}

func isHexHash(s string) bool {
	if len(s) != 40 && len(s) != 64 {
		return false
	}
	for _, c := range s {
		if !strings.ContainsRune("0123456789abcdef", c) {
			return false
		}
	}
	return true
}
