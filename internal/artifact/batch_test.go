package artifact

import (
	"os"
	"path/filepath"
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
