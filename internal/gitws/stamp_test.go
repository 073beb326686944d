package gitws

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// The stamps let Rollback skip git only while the index and refs are as
// they were: any change by git, including one whose mtimes a command set
// back afterwards, shows.
func TestStamps(t *testing.T) {
	for _, c := range []struct {
		name        string
		change      func(t *testing.T, f fixture)
		index, refs bool // whether the stamp must change
	}{
		{"nothing", func(*testing.T, fixture) {}, false, false},
		{"work tree edit", func(t *testing.T, f fixture) { writeFile(t, f.root, "src/app.py", "changed\n") }, false, false},
		{"git add", func(t *testing.T, f fixture) {
			writeFile(t, f.root, "new.txt", "x\n")
			git(t, f.root, "add", "new.txt")
		}, true, false},
		{"git add, index mtime set back", func(t *testing.T, f fixture) {
			index := filepath.Join(f.root, ".git", "index")
			info, err := os.Stat(index)
			if err != nil {
				t.Fatal(err)
			}
			writeFile(t, f.root, "new.txt", "x\n")
			git(t, f.root, "add", "new.txt")
			if err := os.Chtimes(index, info.ModTime(), info.ModTime()); err != nil {
				t.Fatal(err)
			}
		}, true, false},
		{"new branch", func(t *testing.T, f fixture) { git(t, f.root, "branch", "other") }, false, true},
		{"new nested branch", func(t *testing.T, f fixture) { git(t, f.root, "branch", "topic/x") }, false, true},
		{"moved branch", func(t *testing.T, f fixture) {
			writeFile(t, f.root, "new.txt", "x\n")
			git(t, f.root, "add", "new.txt")
			git(t, f.root, "commit", "-q", "-m", "more")
		}, true, true},
		{"packed refs", func(t *testing.T, f fixture) { git(t, f.root, "pack-refs", "--all") }, false, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			f := newFixture(t)
			b, err := f.repo.Snapshot(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			st := b.state
			if st.indexStamp == "" || st.refsStamp == "" {
				t.Fatalf("no stamps: %+v", st)
			}
			time.Sleep(10 * time.Millisecond) // past the file system's timestamp granularity
			c.change(t, f)
			if got := f.repo.indexStamp() != st.indexStamp; got != c.index {
				t.Errorf("index stamp changed = %v, want %v", got, c.index)
			}
			if got := f.repo.refsStamp() != st.refsStamp; got != c.refs {
				t.Errorf("refs stamp changed = %v, want %v", got, c.refs)
			}
		})
	}
}
