package artifact

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestWriteFileAtomic(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "f.txt")
	if err := WriteFileAtomic(path, []byte("one"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := WriteFileAtomic(path, []byte("two"), 0o640); err != nil {
		t.Fatal(err)
	}
	data, _ := os.ReadFile(path)
	info, _ := os.Stat(path)
	if string(data) != "two" || info.Mode().Perm() != 0o640 {
		t.Errorf("content %q mode %v, want two 0640", data, info.Mode().Perm())
	}
	// A failed write leaves neither a partial file nor a temp file behind.
	if err := WriteFileAtomic(filepath.Join(dir, "missing", "x"), []byte("x"), 0o644); err == nil {
		t.Error("write into a missing directory succeeded")
	}
	entries, _ := os.ReadDir(dir)
	for _, e := range entries {
		if strings.HasPrefix(e.Name(), ".factory-tmp-") {
			t.Errorf("temp file left behind: %s", e.Name())
		}
	}
}

func TestNewRunDirNeverReusesADirectory(t *testing.T) {
	out := filepath.Join(t.TempDir(), "out")
	var got []string
	for range 3 {
		dir, err := NewRunDir(out, "abc")
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, filepath.Base(dir))
	}
	if strings.Join(got, " ") != "abc abc.2 abc.3" {
		t.Errorf("run dirs = %v", got)
	}
}

func TestMarshalJSONIsStable(t *testing.T) {
	b, err := MarshalJSON(map[string]any{"b": "<x>", "a": 1})
	if err != nil {
		t.Fatal(err)
	}
	if want := "{\n  \"a\": 1,\n  \"b\": \"<x>\"\n}\n"; string(b) != want {
		t.Errorf("got %q, want %q", b, want)
	}
}

func TestWriteFilesAtomic(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "a.json"), []byte("old"), 0o600); err != nil {
		t.Fatal(err)
	}
	j, err := JSONFile("b.json", map[string]int{"n": 1})
	if err != nil {
		t.Fatal(err)
	}
	files := []File{{Name: "a.json", Data: []byte("new"), Perm: 0o644}, j}
	if err := WriteFilesAtomic(dir, files); err != nil {
		t.Fatal(err)
	}
	for name, want := range map[string]string{"a.json": "new", "b.json": "{\n  \"n\": 1\n}\n"} {
		data, err := os.ReadFile(filepath.Join(dir, name))
		info, _ := os.Stat(filepath.Join(dir, name))
		if err != nil || string(data) != want || info.Mode().Perm() != 0o644 {
			t.Errorf("%s: %q %v, want %q 0644", name, data, err, want)
		}
	}
	// A failure stops at the bad file and leaves no temp file behind.
	bad := []File{{Name: "c.txt", Data: []byte("c"), Perm: 0o644}, {Name: "missing/d.txt", Data: []byte("d"), Perm: 0o644}}
	if err := WriteFilesAtomic(dir, bad); err == nil {
		t.Error("write into a missing directory succeeded")
	}
	entries, _ := os.ReadDir(dir)
	for _, e := range entries {
		if strings.HasPrefix(e.Name(), ".factory-tmp-") {
			t.Errorf("temp file left behind: %s", e.Name())
		}
	}
}
