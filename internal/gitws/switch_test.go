package gitws

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// switchRepo is a repository on branch "left" and a branch "right" whose
// tree differs in n files changed, n added and n removed.
func switchRepo(t *testing.T, n int) (root, right string) {
	t.Helper()
	isolateGit(t)
	root = t.TempDir()
	git(t, root, "init", "-q", "-b", "left")
	for i := range n {
		writeFile(t, root, fmt.Sprintf("both/%04d.txt", i), strings.Repeat("left\n", 200))
		writeFile(t, root, fmt.Sprintf("leftonly/%04d.txt", i), "gone on the right\n")
	}
	writeFile(t, root, ".gitignore", "*.log\n")
	git(t, root, "add", "-A")
	git(t, root, "commit", "-q", "-m", "left")
	git(t, root, "checkout", "-q", "-b", "right")
	for i := range n {
		writeFile(t, root, fmt.Sprintf("both/%04d.txt", i), strings.Repeat("right\n", 200))
		writeFile(t, root, fmt.Sprintf("rightonly/%04d.txt", i), "new on the right\n")
	}
	git(t, root, "rm", "-q", "-r", "leftonly")
	git(t, root, "add", "-A")
	git(t, root, "commit", "-q", "-m", "right")
	right = git(t, root, "rev-parse", "HEAD")
	git(t, root, "checkout", "-q", "left")
	writeFile(t, root, "user.log", "the user's ignored file\n")
	return root, right
}

// TestRecoverSwitchAfterKill kills a real git checkout in the middle of a
// switch, then recovers: the locks go, the tree is exactly HEAD's again,
// the ignored file is untouched, and the switch then succeeds.
func TestRecoverSwitchAfterKill(t *testing.T) {
	root, right := switchRepo(t, 1500)
	ctx := context.Background()
	r, err := Open(ctx, root)
	if err != nil {
		t.Fatal(err)
	}
	halfway := false
	for try := 0; try < 5 && !halfway; try++ {
		if err := r.RecordGitStep(GitStep{Step: StepSwitch, Branch: "right", Target: right}); err != nil {
			t.Fatal(err)
		}
		cmd := exec.Command("git", "checkout", "-q", "right")
		cmd.Dir = root
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		// Kill once the checkout has started writing files.
		deadline := time.Now().Add(10 * time.Second)
		for time.Now().Before(deadline) {
			if _, err := os.Stat(filepath.Join(root, "rightonly", "0000.txt")); err == nil {
				break
			}
			time.Sleep(200 * time.Microsecond)
		}
		cmd.Process.Signal(syscall.SIGKILL)
		cmd.Wait()
		_, lockErr := os.Stat(filepath.Join(r.GitDir, "index.lock"))
		halfway = lockErr == nil
		if _, err := r.RecoverGitLocks(false, time.Now()); err != nil {
			t.Fatal(err)
		}
		restored, err := r.RecoverSwitch(ctx, right)
		if err != nil {
			t.Fatalf("try %d: RecoverSwitch: %v", try, err)
		}
		if dirty, err := r.Dirty(ctx); err != nil || len(dirty) != 0 {
			t.Fatalf("try %d: still dirty after restoring %d paths: %v %v", try, len(restored), dirty[:min(5, len(dirty))], err)
		}
		if got, _ := os.ReadFile(filepath.Join(root, "user.log")); string(got) != "the user's ignored file\n" {
			t.Fatalf("the ignored file changed: %q", got)
		}
		t.Logf("try %d: killed halfway: %v; restored %d paths; HEAD on %s", try, halfway, len(restored), r.headBranch())
		if r.headBranch() != "left" {
			git(t, root, "checkout", "-q", "left")
		}
	}
	if !halfway {
		t.Skip("git finished every checkout before the kill; nothing half-switched to recover")
	}
	if err := r.SwitchBranch(ctx, "right", ""); err != nil {
		t.Fatalf("switch after recovery: %v", err)
	}
}

// TestRecoverSwitchRefusesOthersChanges: a change the switch cannot
// explain is someone's; nothing is touched.
func TestRecoverSwitchRefusesOthersChanges(t *testing.T) {
	root, right := switchRepo(t, 3)
	ctx := context.Background()
	r, err := Open(ctx, root)
	if err != nil {
		t.Fatal(err)
	}
	// Half a switch: one file as on the right, one new file of the right.
	writeFile(t, root, "both/0000.txt", strings.Repeat("right\n", 200))
	writeFile(t, root, "rightonly/0001.txt", "new on the right\n")
	writeFile(t, root, "both/0002.txt", "the user's edit\n")
	writeFile(t, root, "notes.txt", "the user's new file\n")
	_, err = r.RecoverSwitch(ctx, right)
	var leftover *SwitchLeftoverError
	if !errors.As(err, &leftover) || strings.Join(leftover.Paths, " ") != "both/0002.txt notes.txt" {
		t.Fatalf("err = %v", err)
	}
	if got, _ := os.ReadFile(filepath.Join(root, "both/0002.txt")); string(got) != "the user's edit\n" {
		t.Fatalf("the user's edit was touched: %q", got)
	}
	// Without the user's changes it is explained and restored.
	os.Remove(filepath.Join(root, "notes.txt"))
	writeFile(t, root, "both/0002.txt", strings.Repeat("left\n", 200))
	os.Remove(filepath.Join(root, "leftonly/0001.txt")) // removed by the switch
	restored, err := r.RecoverSwitch(ctx, right)
	if err != nil || len(restored) != 3 {
		t.Fatalf("restored %v, %v", restored, err)
	}
	if dirty, _ := r.Dirty(ctx); len(dirty) != 0 {
		t.Fatalf("dirty: %v", dirty)
	}
	if _, err := os.Stat(filepath.Join(root, "rightonly")); !os.IsNotExist(err) {
		t.Errorf("the directory the switch made is still there: %v", err)
	}
}
