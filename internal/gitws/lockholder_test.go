package gitws

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"
)

func TestLockHolder(t *testing.T) {
	r := newFixture(t).repo
	if _, held := r.LockHolder(); held {
		t.Fatal("held before anyone locked")
	}
	l, err := r.Lock()
	if err != nil {
		t.Fatal(err)
	}
	if pid, held := r.LockHolder(); !held || pid != os.Getpid() {
		t.Errorf("while locked: pid %d held %v", pid, held)
	}
	if err := l.Unlock(); err != nil {
		t.Fatal(err)
	}
	if _, held := r.LockHolder(); held {
		t.Error("held after Unlock")
	}
	// A holder killed by SIGKILL leaves the file with its pid: not held.
	p := filepath.Join(r.CommonDir, FactoryDirName, "lock")
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte("999999999\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, held := r.LockHolder(); held {
		t.Error("a stale lock file counts as held")
	}
}

// A holder killed while starting a child leaves its lock to that child for
// as long as the child takes to exec: Lock waits for it rather than
// refusing; a live holder is refused at once.
func TestLockWaitsForDeadHoldersChild(t *testing.T) {
	r := newFixture(t).repo
	p := filepath.Join(r.CommonDir, FactoryDirName, "lock")
	hold := func(pid string) *exec.Cmd {
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		f, err := os.OpenFile(p, os.O_RDWR|os.O_CREATE|os.O_TRUNC, 0o644)
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX); err != nil {
			t.Fatal(err)
		}
		if _, err := f.WriteString(pid + "\n"); err != nil {
			t.Fatal(err)
		}
		// The child's copy of the descriptor holds the lock once ours is closed.
		child := exec.Command("sleep", "0.3")
		child.ExtraFiles = []*os.File{f}
		if err := child.Start(); err != nil {
			t.Fatal(err)
		}
		return child
	}

	child := hold("999999999") // a pid no process has
	l, err := r.Lock()
	if err != nil {
		t.Fatalf("Lock with a dead holder's child holding it: %v", err)
	}
	if err := child.Wait(); err != nil {
		t.Fatal(err)
	}
	if err := l.Unlock(); err != nil {
		t.Fatal(err)
	}

	child = hold(strconv.Itoa(os.Getpid())) // alive
	defer child.Wait()
	var locked *LockedError
	if _, err := r.Lock(); !errors.As(err, &locked) || locked.PID != os.Getpid() {
		t.Fatalf("Lock held by a live process: %v, want a LockedError naming pid %d", err, os.Getpid())
	}
}
