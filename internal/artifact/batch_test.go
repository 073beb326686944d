package artifact

import (
	"os"
	"path/filepath"
	"syscall"
	"testing"
)

func TestBatch(t *testing.T) {
	a, b := t.TempDir(), t.TempDir()
	var batch Batch
	if err := batch.Write(a, []File{{Name: "x.json", Data: []byte("1"), Perm: 0o644}, {Name: "y.txt", Data: []byte("2"), Perm: 0o600}}); err != nil {
		t.Fatal(err)
	}
	if err := batch.WriteFile(filepath.Join(b, "z"), []byte("3"), 0o755); err != nil {
		t.Fatal(err)
	}
	// Written, whole, before the sync.
	for path, want := range map[string]string{filepath.Join(a, "x.json"): "1", filepath.Join(a, "y.txt"): "2", filepath.Join(b, "z"): "3"} {
		if got, err := os.ReadFile(path); err != nil || string(got) != want {
			t.Fatalf("%s = %q, %v; want %q", path, got, err, want)
		}
	}
	if len(batch.dirs) != 2 {
		t.Fatalf("batch holds %v, want two directories", batch.dirs)
	}
	if err := batch.Sync(); err != nil {
		t.Fatal(err)
	}
	if batch.dirs != nil {
		t.Fatalf("Sync left %v in the batch", batch.dirs)
	}
	if info, err := os.Stat(filepath.Join(a, "y.txt")); err != nil || info.Mode().Perm() != 0o600 {
		t.Fatalf("mode: %v %v", info, err)
	}
	for _, dir := range []string{a, b} {
		entries, _ := os.ReadDir(dir)
		for _, e := range entries {
			if filepath.Ext(e.Name()) == "" && e.Name() != "z" {
				t.Errorf("left behind: %s", e.Name())
			}
		}
	}
	if err := batch.Sync(); err != nil { // an empty batch syncs nothing
		t.Fatal(err)
	}
	if err := batch.WriteFile(filepath.Join(a, "missing", "f"), nil, 0o644); err == nil {
		t.Fatal("a write into a missing directory succeeded")
	}
}

// Work-tree writes: a command may remove what was written, and a
// rollback removes it with the directories it was written in.
func TestBatchSyncPresentAndForget(t *testing.T) {
	root := t.TempDir()
	var batch Batch
	for _, p := range []string{"pkg/new/x.py", "pkg/y.py", "gone/z.py", "fifo/f"} {
		full := filepath.Join(root, filepath.FromSlash(p))
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := batch.WriteFile(full, []byte(p), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	os.RemoveAll(filepath.Join(root, "gone"))
	os.Remove(filepath.Join(root, "fifo", "f"))
	if err := syscall.Mkfifo(filepath.Join(root, "fifo", "f"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := batch.SyncPresent(); err != nil {
		t.Fatalf("SyncPresent with a directory removed and a file turned FIFO: %v", err)
	}
	if batch.dirs != nil {
		t.Fatalf("SyncPresent left %v in the batch", batch.dirs)
	}

	if err := batch.WriteFile(filepath.Join(root, "pkg", "new", "x.py"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	os.RemoveAll(filepath.Join(root, "pkg"))
	if err := batch.Sync(); err == nil {
		t.Fatal("Sync of a removed directory succeeded: a lost run directory would go unnoticed")
	}
	if err := batch.WriteFile(filepath.Join(root, "gone.py"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	os.Remove(filepath.Join(root, "gone.py"))
	batch.Forget()
	if err := batch.Sync(); err != nil || batch.dirs != nil {
		t.Fatalf("Sync after Forget = %v, batch %v; want nothing to do", err, batch.dirs)
	}
}
