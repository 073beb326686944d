package repomap

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"
)

func TestTry(t *testing.T) {
	dir := os.Getenv("TRY_DIR")
	if dir == "" {
		t.Skip()
	}
	out, _ := exec.Command("git", "-C", dir, "ls-files", "-s").Output()
	var files []Entry
	content := map[string]string{}
	for _, l := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		f := strings.Fields(l)
		p := strings.SplitN(l, "\t", 2)[1]
		fi, err := os.Stat(dir + "/" + p)
		if err != nil {
			continue
		}
		files = append(files, Entry{Path: p, Blob: f[1], Size: fi.Size()})
		content[f[1]] = dir + "/" + p
	}
	read := func(ctx context.Context, blobs []string, each func(string, []byte) error) error {
		for _, b := range blobs {
			d, _ := os.ReadFile(content[b])
			if err := each(b, d); err != nil {
				return err
			}
		}
		return nil
	}
	start := time.Now()
	m, err := Build(context.Background(), Options{Files: files, Read: read, CacheDir: os.Getenv("TRY_CACHE")})
	if err != nil {
		t.Fatal(err)
	}
	fmt.Println("build", time.Since(start), len(m.Files), m.Parsed, m.Cached, m.Skipped)
	start = time.Now()
	f := m.FocusFromText(os.Getenv("TRY_TEXT"))
	v := m.Render(f, 4096)
	fmt.Println("render", time.Since(start), f)
	fmt.Println(v.Text)
}
