package gitws

import (
	"context"
	"encoding/json"
	"fmt"
	"io/fs"
	"math/rand/v2"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"
)

// The differential test of the fast paths (the watch and the index's stat
// data standing in for git) against the git commands they replace: random
// command effects on three copies of one repository, then
//   - TreeHashAt (fast) and TreeHash (git add -A) give the same tree;
//   - DirtyAt of a snapshot of the changed tree says what Dirty says;
//   - Rollback with a watched baseline (fast), an unwatched one (git) and
//     one read back from the journal's JSON (git) report the same, leave
//     the same tree (content, type, mode, ignored files, special files) and
//     the same git state, and that tree is the one before the effects;
//   - a second Rollback removes and restores nothing.

// fsPaths are the names the effects act on: tracked files and directories,
// a tracked symlink, ignored files (one under an ignored directory), the
// ignore rules themselves, and names that do not exist at baseline.
var fsPaths = []string{
	"a", "d", "d/b", "d/e", "d/e/c", "x.sh", "l", ".gitignore",
	".env", "x.log", "ign", "ign/f", "n", "n/m", "n/m/o", "d/e/new",
}

// fsOp is one command effect, decoded from three bytes.
type fsOp struct {
	kind     byte
	p, q     string // q: a second path (rename, hard link)
	arg      byte
	describe string
}

const fsOpKinds = 17

// fsCommonOps are the effects on the work tree alone.
var fsCommonOps = []byte{0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 15, 16}

func decodeOps(data []byte) []fsOp {
	var ops []fsOp
	for i := 0; i+2 < len(data) && len(ops) < 12; i += 3 {
		// Effects on git's own state (11-14) make every fast path step
		// aside; drawn as often as the rest, they would leave few cases
		// that test one.
		kind := data[i] % 64
		if kind >= fsOpKinds {
			kind = fsCommonOps[int(kind)%len(fsCommonOps)]
		}
		op := fsOp{kind: kind, p: fsPaths[int(data[i+1])%len(fsPaths)], arg: data[i+2]}
		op.q = fsPaths[int(op.arg)%len(fsPaths)]
		ops = append(ops, op)
	}
	return ops
}

func (op fsOp) String() string {
	names := []string{"write", "rewrite-same-size-old-mtime", "touch", "mkdir", "rm-rf", "rename", "chmod",
		"symlink", "hardlink-write", "mkfifo", "socket", "git-init", "git-add", "git-checkout-b", "git-commit",
		"file-to-dir", "gitignore-unignore"}
	return fmt.Sprintf("%s(%s,%s,%d)", names[op.kind], op.p, op.q, op.arg)
}

// apply performs op in root; failures (a path in the way) are part of the
// effect, as they would be for a command, and are ignored.
func (op fsOp) apply(t *testing.T, root string) {
	abs := func(p string) string { return filepath.Join(root, filepath.FromSlash(p)) }
	p, q := abs(op.p), abs(op.q)
	content := strings.Repeat(fmt.Sprintf("v%d\n", op.arg), 1+int(op.arg)%3)
	old := time.Unix(1_000_000_000+int64(op.arg)*1000, 0)
	switch op.kind {
	case 0: // write, creating parents
		os.MkdirAll(filepath.Dir(p), 0o755)
		writeNonblock(p, content, os.O_TRUNC)
	case 1: // the same size, new content, the old mtime: only ctime and content tell
		if info, err := os.Lstat(p); err == nil && info.Mode().IsRegular() {
			data, _ := os.ReadFile(p)
			for i := range data {
				data[i] ^= 1
			}
			os.WriteFile(p, data, 0)
			os.Chtimes(p, info.ModTime(), info.ModTime())
		}
	case 2: // mtime only
		os.Chtimes(p, old, old)
	case 3:
		os.MkdirAll(p, 0o755)
	case 4:
		os.RemoveAll(p)
	case 5:
		os.MkdirAll(filepath.Dir(q), 0o755)
		os.Rename(p, q)
	case 6:
		modes := []fs.FileMode{0, 0o600, 0o755, 0o700, 0o500, 0o644, 0o444, 0o711}
		os.Chmod(p, modes[int(op.arg)%len(modes)])
	case 7:
		targets := []string{"a", "d", "/etc/hostname", "../outside", "e/c", "missing", "."}
		if info, err := os.Lstat(p); err == nil && !info.IsDir() {
			os.Remove(p)
		}
		os.MkdirAll(filepath.Dir(p), 0o755)
		os.Symlink(targets[int(op.arg)%len(targets)], p)
	case 8: // a second name for p, written through
		if info, err := os.Lstat(q); err == nil && !info.IsDir() {
			os.Remove(q)
		}
		os.MkdirAll(filepath.Dir(q), 0o755)
		if os.Link(p, q) == nil {
			writeNonblock(q, content, os.O_APPEND)
		}
	case 9:
		os.MkdirAll(filepath.Dir(p), 0o755)
		syscall.Mkfifo(p, 0o644)
	case 10:
		os.MkdirAll(filepath.Dir(p), 0o755)
		if l, err := net.ListenUnix("unix", &net.UnixAddr{Name: p, Net: "unix"}); err == nil {
			l.SetUnlinkOnClose(false)
			l.Close()
		}
	case 11:
		os.MkdirAll(p, 0o755)
		quietGit(root, "init", "-q", op.p)
	case 12:
		if op.arg%2 == 0 {
			quietGit(root, "add", "-A")
		} else {
			quietGit(root, "add", "-f", ".env", "x.log")
		}
	case 13:
		quietGit(root, "checkout", "-q", "-b", fmt.Sprintf("br%d", op.arg))
	case 14:
		quietGit(root, "commit", "-q", "-a", "--allow-empty", "-m", "c")
	case 15: // a file turned into a directory (and, applied again, rm -rf'd)
		os.RemoveAll(p)
		os.MkdirAll(p, 0o755)
		writeNonblock(filepath.Join(p, "z"), content, os.O_TRUNC)
	case 16:
		writeNonblock(abs(".gitignore"), "!*.log\nign/\n", os.O_TRUNC)
	}
}

// writeNonblock writes content to p as a command would, except that a FIFO
// without a reader fails instead of blocking the test.
func writeNonblock(p, content string, flag int) {
	if f, err := os.OpenFile(p, os.O_WRONLY|os.O_CREATE|syscall.O_NONBLOCK|flag, 0o644); err == nil {
		f.WriteString(content)
		f.Close()
	}
}

// quietGit runs git for an effect; its failure is part of the effect.
func quietGit(dir string, args ...string) {
	cmd := exec.Command("git", args...)
	cmd.Dir = dir
	cmd.Run()
}

// fastSlowTemplate makes the repository every case starts from: tracked
// files two levels deep, an executable, a tracked symlink, ignored files
// (0600 .env, a log, a file in an ignored directory) and an empty
// directory. Every time is in the past, so no index entry is racy.
func fastSlowTemplate(t testing.TB) string {
	root := t.TempDir()
	git(t, root, "init", "-q", "-b", "main")
	for _, dir := range []string{".git/hooks", ".git/info"} {
		os.MkdirAll(filepath.Join(root, dir), 0o755)
	}
	for p, c := range map[string]string{".gitignore": ".env\n*.log\nign/\n", "a": "a\n", "d/b": "b\n", "d/e/c": "c\n", "x.sh": "#!/bin/sh\n"} {
		writeFile(t, root, p, c)
	}
	os.Chmod(filepath.Join(root, "x.sh"), 0o755)
	os.Symlink("a", filepath.Join(root, "l"))
	git(t, root, "add", "-A")
	git(t, root, "commit", "-q", "-m", "base")
	writeFile(t, root, ".env", "SECRET=1\n")
	os.Chmod(filepath.Join(root, ".env"), 0o600)
	writeFile(t, root, "x.log", "log\n")
	writeFile(t, root, "ign/f", "f\n")
	os.MkdirAll(filepath.Join(root, "empty"), 0o755)
	return root
}

// copyRepo copies the template (its .git too) to a new directory with
// every time in the past, and has git refresh the index's stat data.
func copyRepo(t testing.TB, template string) *Repo {
	dst := t.TempDir()
	past := time.Unix(1_000_000_000, 0)
	var dirs []string
	err := filepath.WalkDir(template, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(template, p)
		to := filepath.Join(dst, rel)
		info, err := d.Info()
		if err != nil {
			return err
		}
		switch {
		case d.Type()&fs.ModeSymlink != 0:
			target, err := os.Readlink(p)
			if err != nil {
				return err
			}
			return os.Symlink(target, to)
		case d.IsDir():
			dirs = append(dirs, to)
			return os.MkdirAll(to, info.Mode().Perm())
		default:
			data, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			if err := os.WriteFile(to, data, info.Mode().Perm()); err != nil {
				return err
			}
			return os.Chtimes(to, past, past)
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range slices.Backward(dirs) {
		os.Chtimes(d, past, past)
	}
	git(t, dst, "update-index", "-q", "--refresh")
	repo, err := Open(context.Background(), dst)
	if err != nil {
		t.Fatal(err)
	}
	return repo
}

// gitState is what the git side of a repository looks like: HEAD, the
// refs, the index's entries and what status reports (ignored files too),
// read without refreshing the index.
func gitState(t *testing.T, root string) string {
	var b strings.Builder
	for _, args := range [][]string{
		{"rev-parse", "HEAD"},
		{"symbolic-ref", "-q", "HEAD"},
		{"for-each-ref", "--format=%(refname) %(objectname)"},
		{"ls-files", "-s"},
		{"status", "--porcelain=v1", "--ignored", "--untracked-files=all"},
	} {
		cmd := exec.Command("git", args...)
		cmd.Dir = root
		cmd.Env = append(os.Environ(), "GIT_OPTIONAL_LOCKS=0")
		out, _ := cmd.Output()
		fmt.Fprintf(&b, "$ git %s\n%s", strings.Join(args, " "), out)
	}
	return b.String()
}

// fastSlowStats counts, over a run of cases, how often each fast path was
// the one taken, so that a test can tell that they ran at all.
type fastSlowStats struct{ cases, fastRollback, fastHash, provedClean int }

// checkFastSlow runs one case: the effects ops on three copies of template.
func checkFastSlow(t *testing.T, template string, ops []fsOp, stats *fastSlowStats) {
	ctx := context.Background()
	stats.cases++
	// B (git) and C (the journal's JSON) first: a snapshot's watch may
	// close an older one (maxLiveWatches), and A's must stay open.
	repoB, repoC, repoA := copyRepo(t, template), copyRepo(t, template), copyRepo(t, template)
	copied := time.Now()
	before := snapshotTree(t, repoA.Root)
	snap := func(r *Repo) Baseline {
		b, err := r.Snapshot(ctx)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	bB := snap(repoB)
	bB.watch.close()
	bB.watch = nil
	bC := snap(repoC)
	bC.watch.close()
	data, err := json.Marshal(bC)
	if err != nil {
		t.Fatal(err)
	}
	bC = Baseline{}
	if err := json.Unmarshal(data, &bC); err != nil {
		t.Fatal(err)
	}
	bA := snap(repoA)
	defer bA.watch.close()
	indexBefore, err := os.ReadFile(filepath.Join(repoA.GitDir, "index"))
	if err != nil {
		t.Fatal(err)
	}
	// Git compares ctime to the second: a rewrite that keeps the size and
	// mtime (1) or a touch back to the recorded mtime (2) in the second the
	// index recorded the file is beyond git's own sight. The kernel's file
	// times lag the clock by a tick, hence the margin.
	if slices.ContainsFunc(ops, func(op fsOp) bool { return op.kind == 1 || op.kind == 2 }) {
		for time.Now().Add(-50*time.Millisecond).Unix() <= copied.Unix() {
			time.Sleep(10 * time.Millisecond)
		}
	}
	for _, r := range []*Repo{repoA, repoB, repoC} {
		for _, op := range ops {
			op.apply(t, r.Root)
		}
	}
	fail := func(format string, args ...any) {
		t.Helper()
		t.Fatalf("effects %v:\n"+format, append([]any{ops}, args...)...)
	}
	changed := snapshotTree(t, repoA.Root)
	if d := diffTrees(changed, snapshotTree(t, repoB.Root)); d != "" {
		fail("the effects differ between copies (a bug of the test):\n%s", d)
	}

	// The tree hash, fast and slow, on the same tree.
	if _, ok, _ := repoA.changedToStage(ctx, bA); ok {
		stats.fastHash++
	}
	hashFast, errFast := repoA.TreeHashAt(ctx, bA)
	hashSlow, errSlow := repoA.TreeHash(ctx)
	if hashFast != hashSlow || (errFast == nil) != (errSlow == nil) {
		fail("TreeHashAt = %s, %v; TreeHash = %s, %v", hashFast, errFast, hashSlow, errSlow)
	}

	// The clean proof of a snapshot of the changed tree.
	bD, err := repoB.Snapshot(ctx)
	if err == nil {
		bD.watch.close()
		if repoB.provablyClean(ctx, bD, bD.walked) {
			stats.provedClean++
		}
		dirtyAt, errAt := repoB.DirtyAt(ctx, &bD)
		dirty, errDirty := repoB.Dirty(ctx)
		if !slices.Equal(dirtyAt, dirty) || (errAt == nil) != (errDirty == nil) {
			fail("DirtyAt = %q, %v; Dirty = %q, %v", dirtyAt, errAt, dirty, errDirty)
		}
	}

	// Rollback: fast (A), git (B), git from the journal (C).
	_, fastRollback := repoA.planRestore(bA)
	if fastRollback {
		stats.fastRollback++
	}
	repA, errA := repoA.Rollback(ctx, bA)
	repB, errB := repoB.Rollback(ctx, bB)
	repC, errC := repoC.Rollback(ctx, bC)
	if errA != nil || errB != nil || errC != nil {
		fail("Rollback: fast %v; git %v; journal %v", errA, errB, errC)
	}
	if d := diffReports(repB, repA); d != "" {
		fail("fast Rollback (fast path taken: %v) reports differently from git's:\n%s", fastRollback, d)
	}
	if d := diffReports(repB, repC); d != "" {
		fail("Rollback from the journal reports differently:\n%s", d)
	}
	treeB := snapshotTree(t, repoB.Root)
	if d := diffTrees(before, treeB); d != "" {
		fail("git Rollback left a tree unlike the baseline (report %+v):\n%s", repB, d)
	}
	if d := diffTrees(treeB, snapshotTree(t, repoA.Root)); d != "" {
		fail("fast Rollback (fast path taken: %v) left a tree unlike git's:\n%s", fastRollback, d)
	}
	if d := diffTrees(treeB, snapshotTree(t, repoC.Root)); d != "" {
		fail("Rollback from the journal left a tree unlike git's:\n%s", d)
	}
	if fastRollback {
		if index, _ := os.ReadFile(filepath.Join(repoA.GitDir, "index")); !slices.Equal(index, indexBefore) {
			fail("the fast Rollback rewrote the index")
		}
	}
	stateB := gitState(t, repoB.Root)
	if s := gitState(t, repoA.Root); s != stateB {
		fail("git state after the fast Rollback:\n%s\nafter git's:\n%s", s, stateB)
	}
	if s := gitState(t, repoC.Root); s != stateB {
		fail("git state after the Rollback from the journal:\n%s\nafter git's:\n%s", s, stateB)
	}
	for name, x := range map[string]struct {
		r *Repo
		b Baseline
	}{"fast": {repoA, bA}, "git": {repoB, bB}, "journal": {repoC, bC}} {
		rep, err := x.r.Rollback(ctx, x.b)
		if err != nil || len(rep.Removed) > 0 || len(rep.Restored) > 0 {
			fail("second %s Rollback = %+v, %v; want nothing to do", name, rep, err)
		}
		if dirty, err := x.r.Dirty(ctx); err != nil || len(dirty) > 0 {
			fail("after the %s Rollback Dirty = %q, %v", name, dirty, err)
		}
	}
}

// fastSlowSeeds are effects users' commands have, as fuzz inputs: new
// nested directories, a FIFO and a socket in one, a tracked file turned
// into a directory, a nested repository, a retargeted tracked symlink,
// staged and committed work, and an un-ignoring .gitignore.
var fastSlowSeeds = [][]byte{
	{0, 14, 0},           // write n/m/o
	{0, 14, 0, 9, 15, 1}, // write n/m/o, mkfifo d/e/new
	{10, 12, 0, 9, 1, 0}, // socket n, mkfifo d
	{3, 13, 0, 9, 14, 0}, // mkdir n/m, mkfifo n/m/o
	{15, 2, 0},           // d/b becomes a directory
	{15, 0, 0, 15, 0, 1}, // a becomes a directory and goes
	{11, 12, 0, 0, 14, 0},
	{7, 6, 1},              // l -> d
	{12, 0, 0, 14, 0, 0},   // git add -A, commit
	{12, 0, 1, 13, 0, 5},   // add -f the ignored, checkout -b
	{16, 0, 0, 4, 10, 0},   // un-ignore, rm -rf ign
	{1, 0, 0, 2, 2, 7},     // same size old mtime, touch
	{8, 0, 15, 6, 1, 0},    // write a through d/e/new, chmod d 0
	{5, 1, 12, 6, 12, 4},   // rename d to n, chmod n 0500
	{6, 8, 0, 1, 8, 0},     // chmod .env 0, rewrite it
	{4, 1, 0, 0, 3, 3},     // rm -rf d, write d/e
	{5, 10, 1, 0, 11, 0},   // rename ign to d, write ign/f
	{9, 0, 0, 10, 3, 0},    // FIFO where a was, socket at d/b
	{6, 1, 0, 9, 4, 0},     // chmod d 0, mkfifo d/e
	{7, 15, 3, 0, 13, 0},   // symlink d/e/new -> ../outside, write n/m
	{2, 8, 1, 2, 9, 2},     // touch .env, touch x.log
	{0, 9, 4, 5, 9, 15, 0}, // write x.log, rename it
}

func TestFastSlowSeeds(t *testing.T) {
	isolateGit(t)
	template := fastSlowTemplate(t)
	n := 100
	if testing.Short() {
		n = 30
	}
	var stats fastSlowStats
	for i, seed := range fastSlowSeeds {
		t.Run(fmt.Sprintf("seed%d", i), func(t *testing.T) { checkFastSlow(t, template, decodeOps(seed), &stats) })
	}
	for i := range n {
		rng := rand.New(rand.NewPCG(uint64(i), 26))
		data := make([]byte, 3*(1+rng.IntN(12)))
		for j := range data {
			data[j] = byte(rng.UintN(256))
		}
		t.Run(fmt.Sprintf("random%d", i), func(t *testing.T) { checkFastSlow(t, template, decodeOps(data), &stats) })
	}
	t.Logf("%d cases: fast rollback %d, fast tree hash %d, proved clean %d", stats.cases, stats.fastRollback, stats.fastHash, stats.provedClean)
	// Most effects leave the index and refs alone, so the fast rollback
	// must have run for most cases, and the fast tree hash (which also
	// steps aside for a changed .gitignore) for a third, or this test
	// compares git with git.
	if stats.fastRollback*2 < stats.cases || stats.fastHash*3 < stats.cases {
		t.Errorf("the fast paths ran too rarely to be tested: %+v", stats)
	}
}

// FuzzFastSlow checks, for effects the fuzzer chooses, the fast rollback
// and tree hash against git's own (checkFastSlow).
//
// fuzz.sh: min-execs 3 (git is the oracle: three copies of a repository,
// their snapshots and git's answers per input, 1–4 s each on 2 loaded
// cores; a 10 s run does not get through the seeds)
func FuzzFastSlow(f *testing.F) {
	for _, s := range fastSlowSeeds {
		f.Add(s)
	}
	isolateGit(f)
	template := fastSlowTemplate(f)
	var stats fastSlowStats
	f.Fuzz(func(t *testing.T, data []byte) {
		checkFastSlow(t, template, decodeOps(data), &stats)
	})
}
