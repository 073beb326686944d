package builder

import (
	"context"
	"encoding/json"
	"errors"
	"io/fs"
	"os"
	"strings"
	"testing"

	"github.com/factory-harness/factory/internal/artifact"
	"github.com/factory-harness/factory/internal/gitws"
)

// FuzzReadPointer feeds ReadPointer build pointers (<gitdir>/factory/build.json,
// which status, resume and the web view read, and whose plan hash names the
// spend record to open): a refusal names the file; an accepted pointer has a
// plan hash of 16 hex digits (so no path can be built from it) and reads
// back the same once written as a build writes it.
func FuzzReadPointer(f *testing.F) {
	dir := f.TempDir()
	git(f, dir, "init", "-q", "-b", "main")
	repo, err := gitws.Open(context.Background(), dir)
	if err != nil {
		f.Fatal(err)
	}
	if err := os.MkdirAll(repo.FactoryFile(""), 0o755); err != nil {
		f.Fatal(err)
	}
	path := repo.FactoryFile(PointerFile)
	good := Pointer{PlanHash: "0123456789abcdef", PlanDir: "/o/plans/0123456789abcdef", PlanSource: "compiled",
		Spec: "/s/spec.md", Branch: "factory/0123456789abcdef", BuildDir: "/o/builds/0123456789abcdef"}
	data, err := artifact.MarshalJSON(good)
	if err != nil {
		f.Fatal(err)
	}
	f.Add(data)
	for _, s := range []string{"", "null", "{}", `{"plan_hash":"../../x"}`, `{"plan_hash":"0123456789ABCDEF"}`,
		`{"plan_hash":"0123456789abcdef","extra":1}`, `{"plan_hash":"0123456789abcdef","plan_hash":"fedcba9876543210"}`} {
		f.Add([]byte(s))
	}
	f.Add([]byte(strings.Replace(string(data), "0123456789abcdef", "0123456789abcde/", 1)))
	f.Fuzz(func(t *testing.T, data []byte) {
		if err := os.WriteFile(path, data, 0o644); err != nil {
			t.Fatal(err)
		}
		p, err := ReadPointer(repo)
		if err != nil {
			if !strings.Contains(err.Error(), "build pointer") {
				t.Fatalf("error does not name the build pointer: %v", err)
			}
			return
		}
		if !isPlanHash(p.PlanHash) || strings.ContainsAny(p.PlanHash, "/.") {
			t.Fatalf("accepted plan hash %q", p.PlanHash)
		}
		again, err := artifact.MarshalJSON(p)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, again, 0o644); err != nil {
			t.Fatal(err)
		}
		back, err := ReadPointer(repo)
		if err != nil || back != p {
			t.Fatalf("written back it reads %+v, %v; want %+v", back, err, p)
		}
		var v map[string]any
		if json.Unmarshal(again, &v) != nil {
			t.Fatal("written pointer is not JSON")
		}
	})
}

func TestReadPointerMissing(t *testing.T) {
	dir := t.TempDir()
	git(t, dir, "init", "-q", "-b", "main")
	repo, err := gitws.Open(context.Background(), dir)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := ReadPointer(repo); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("ReadPointer without a pointer = %v, want fs.ErrNotExist", err)
	}
}
