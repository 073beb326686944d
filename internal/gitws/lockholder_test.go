package gitws

import (
	"os"
	"path/filepath"
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
