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
