package planner

import (
	"slices"
	"strings"
	"testing"

	"github.com/factory-harness/factory/internal/proc"
	"github.com/factory-harness/factory/internal/workorder"
)

// FuzzToolNeeds reads model-written command lines for what E107 checks.
// Properties: deterministic; every need is a clean repository path that
// one of the command's own words names (E107 never invents a path); and
// the file or directory it names satisfies it, so a plan that creates what
// the command uses is never refused.
func FuzzToolNeeds(f *testing.F) {
	for _, s := range []string{
		`go test ./calc -run "^TestAdd$" -v`, "go test ./internal/... -count=1", "go vet -tags x ./a ./b/...", "go run main.go ./x",
		"go test -C sub ./x", "go build --o=bin ./cmd/tool", "go test . ./...", "cargo test", "cargo +nightly test --manifest-path a/Cargo.toml",
		"cargo build --manifest-path=b/Cargo.toml --all-targets", "cargo new x", "node --test test/a.test.js test/b.test.mjs",
		"node -r ./setup.js app.js --flag", "node -e 1", "node --test-reporter=spec --test x.js", "nodejs ./x/../y.cjs",
		"go test ./../escape", "node /abs/x.js", "cargo test -- --nocapture",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, line string) {
		argv, err := proc.ParseCommand(line)
		if err != nil {
			return
		}
		needs := toolNeeds(argv)
		if again := toolNeeds(argv); !slices.Equal(needs, again) {
			t.Fatalf("not deterministic: %v then %v", needs, again)
		}
		for _, n := range needs {
			clean, err := workorder.NormalizePath(n.path)
			if err != nil || clean != n.path || n.path == "." {
				t.Fatalf("need %q is not a clean repository path (%v)", n.path, err)
			}
			if !slices.ContainsFunc(argv[1:], func(w string) bool { return namesPath(w, n.path) }) && n.path != "Cargo.toml" {
				t.Fatalf("need %q is named by none of %q", n.path, argv)
			}
			s := newFileState(nil)
			if n.dir {
				s.add(n.path+"/x.go", "WO-01")
			} else {
				s.add(n.path, "WO-01")
			}
			if !n.met(s) {
				t.Fatalf("need %+v is not met by the path it names", n)
			}
			if !n.dir && !n.prefix && n.met(newFileState([]string{n.path + "x", "y/" + n.path})) {
				t.Fatalf("need %+v is met by other files", n)
			}
		}
	})
}

// namesPath reports whether an argument names p, as a package pattern, a
// file or a --manifest-path value.
func namesPath(w, p string) bool {
	w = strings.TrimPrefix(w, "--manifest-path=")
	w = strings.TrimSuffix(strings.TrimSuffix(w, "..."), "/")
	clean, err := workorder.NormalizePath(w)
	return err == nil && clean == p
}
