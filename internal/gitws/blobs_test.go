package gitws

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"testing"
)

// BlobsAt lists the commit's regular files with ids and sizes (no
// symlinks); ReadBlobs returns each one's content, across cat-file batches.
func TestBlobs(t *testing.T) {
	f := newFixture(t)
	symlink(t, "README.md", f.repo.Root, "link.md")
	var many []string
	for i := range blobsPerCatFile + 3 {
		name := "many/f" + strconv.Itoa(i) + ".txt"
		writeFile(t, f.repo.Root, name, "content "+strconv.Itoa(i%100)+"\n") // repeated contents: one blob, listed again
		many = append(many, name)
	}
	git(t, f.repo.Root, "add", "-A", "--", "link.md", "many")
	git(t, f.repo.Root, "commit", "-q", "-m", "more")
	ctx := context.Background()
	blobs, err := f.repo.BlobsAt(ctx, "HEAD")
	if err != nil {
		t.Fatal(err)
	}
	byPath := map[string]Blob{}
	var ids []string
	for _, b := range blobs {
		byPath[b.Path] = b
		ids = append(ids, b.ID)
	}
	if _, ok := byPath["link.md"]; ok {
		t.Error("the symlink is listed")
	}
	if b := byPath["src/app.py"]; b.Size != int64(len("print('hi')\n")) || b.ID != git(t, f.repo.Root, "rev-parse", "HEAD:src/app.py") {
		t.Errorf("src/app.py: %+v", b)
	}
	if len(blobs) != 5+len(many) {
		t.Errorf("%d blobs, want %d", len(blobs), 5+len(many))
	}
	got := map[string]string{}
	if err := f.repo.ReadBlobs(ctx, ids, func(id string, data []byte) error {
		got[id] = string(data)
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	for _, b := range blobs {
		if want := git(t, f.repo.Root, "cat-file", "blob", b.ID); strings.TrimSpace(got[b.ID]) != want {
			t.Errorf("%s: read %q, want %q", b.Path, got[b.ID], want)
		}
	}
	stop := errors.New("stop")
	if err := f.repo.ReadBlobs(ctx, ids, func(string, []byte) error { return stop }); !errors.Is(err, stop) {
		t.Errorf("an error from each: %v", err)
	}
	if err := f.repo.ReadBlobs(ctx, []string{strings.Repeat("0", 40)}, func(string, []byte) error { return nil }); err == nil || !strings.Contains(err.Error(), "missing") {
		t.Errorf("a missing blob: %v", err)
	}
	if _, err := f.repo.BlobsAt(ctx, "no-such-rev"); err == nil {
		t.Error("BlobsAt of a bad revision succeeded")
	}
}

func TestSplitCatFile(t *testing.T) {
	nop := func(string, []byte) error { return nil }
	for _, tc := range []struct {
		name, out string
		ids       []string
		want      string
	}{
		{"ok", "a blob 2\nhi\nb blob 0\n\n", []string{"a", "b"}, ""},
		{"truncated", "a blob 5\nhi\n", []string{"a"}, "truncated"},
		{"other id", "b blob 2\nhi\n", []string{"a"}, "printed"},
		{"ended", "", []string{"a"}, "ended before"},
		{"bad size", "a blob x\nhi\n", []string{"a"}, "bad or truncated"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := splitCatFile([]byte(tc.out), tc.ids, nop)
			if tc.want == "" && err != nil || tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)) {
				t.Errorf("splitCatFile: %v, want %q", err, tc.want)
			}
		})
	}
}
