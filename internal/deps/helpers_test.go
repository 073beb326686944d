package deps

import (
	"bufio"
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"
)

// workTree writes files, by slash-separated path, into a new work tree.
func workTree(t *testing.T, files map[string]string) string {
	t.Helper()
	root := t.TempDir()
	writeFiles(t, root, files)
	return root
}

// writeFiles writes files, by slash-separated path, into root.
func writeFiles(t *testing.T, root string, files map[string]string) {
	t.Helper()
	for name, body := range files {
		path := filepath.Join(root, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// readLog reads deps.jsonl, checking that each line has every field and no other.
func readLog(t *testing.T, dir string) []Request {
	t.Helper()
	f, err := os.Open(filepath.Join(dir, "deps.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []Request
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		var fields map[string]any
		if err := json.Unmarshal(sc.Bytes(), &fields); err != nil {
			t.Fatalf("deps.jsonl line %q: %v", sc.Text(), err)
		}
		for _, k := range []string{"method", "url", "status", "bytes", "sha256", "decision", "reason"} {
			if _, ok := fields[k]; !ok {
				t.Errorf("deps.jsonl line %s: no %q", sc.Text(), k)
			}
		}
		var r Request
		dec := json.NewDecoder(bytes.NewReader(sc.Bytes()))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&r); err != nil {
			t.Fatalf("deps.jsonl line %q: %v", sc.Text(), err)
		}
		out = append(out, r)
	}
	return out
}
