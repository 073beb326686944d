package eval

import (
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func writeTree(t testing.TB, root string, files map[string]string) {
	t.Helper()
	for p, content := range files {
		full := filepath.Join(root, filepath.FromSlash(p))
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(full, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

const goodCheck = "[[checks]]\ncommand = [\"python3\", \"-m\", \"unittest\"]\n"

func TestLoadCase(t *testing.T) {
	for _, tc := range []struct {
		name  string
		files map[string]string
		err   string // "" means valid
	}{
		{"spec", map[string]string{"case.toml": "spec = \"spec.md\"\n" + goodCheck, "spec.md": "x"}, ""},
		{"plan, start, hidden and overrides", map[string]string{
			"case.toml": "plan = \"plan\"\nstart = \"start/\"\nhidden = \"hidden\"\nmax_attempts = 3\nplan_max_attempts = 2\ntimeout_seconds = 30\ndescription = \"d\"\n" +
				"[[checks]]\nname = \"n\"\ncommand = [\"true\"]\ntimeout_seconds = 5\n",
			"plan/WO-01.json": "{}", "start/a.py": "", "hidden/t.py": ""}, ""},
		{"unknown top-level key", map[string]string{"case.toml": "spec = \"spec.md\"\nretries = 2\n" + goodCheck, "spec.md": "x"}, "unknown keys: retries"},
		{"a key spelled otherwise", map[string]string{"case.toml": "Spec = \"spec.md\"\n" + goodCheck, "spec.md": "x"}, "unknown keys: Spec"},
		{"two spellings of a key", map[string]string{"case.toml": "spec = \"spec.md\"\nSPEC = \"other.md\"\n" + goodCheck, "spec.md": "x", "other.md": "x"}, "unknown keys: SPEC"},
		{"a key spelled otherwise that breaks decoding", map[string]string{"case.toml": "spec = \"spec.md\"\nCheCks = 5\n" + goodCheck, "spec.md": "x"}, "unknown keys: CheCks"},
		{"a check key spelled otherwise", map[string]string{"case.toml": "spec = \"spec.md\"\n[[checks]]\nCommand = [\"true\"]\n", "spec.md": "x"}, "unknown keys: checks.Command"},
		{"a timeout beyond a week", map[string]string{"case.toml": "spec = \"spec.md\"\ntimeout_seconds = 9223372036854775807\n" + goodCheck, "spec.md": "x"}, "cannot exceed 604800"},
		{"a check timeout beyond a week", map[string]string{"case.toml": "spec = \"spec.md\"\n[[checks]]\ncommand = [\"true\"]\ntimeout_seconds = 604801\n", "spec.md": "x"}, "checks[0]: timeout_seconds must be between 0 and 604800"},
		{"unknown check key", map[string]string{"case.toml": "spec = \"spec.md\"\n[[checks]]\ncommand = [\"true\"]\nshell = true\n", "spec.md": "x"}, "unknown keys: checks.shell"},
		{"neither spec nor plan", map[string]string{"case.toml": goodCheck}, `give spec = "FILE" or plan = "DIR"`},
		{"both spec and plan", map[string]string{"case.toml": "spec = \"spec.md\"\nplan = \"plan\"\n" + goodCheck, "spec.md": "x", "plan/x": ""}, "cannot both be given"},
		{"missing spec", map[string]string{"case.toml": "spec = \"nope.md\"\n" + goodCheck}, `spec = "nope.md": does not exist`},
		{"spec outside the case", map[string]string{"case.toml": "spec = \"../other.md\"\n" + goodCheck}, "must be inside the case directory"},
		{"absolute hidden", map[string]string{"case.toml": "spec = \"spec.md\"\nhidden = \"/etc\"\n" + goodCheck, "spec.md": "x"}, "must be relative"},
		{"hidden is a file", map[string]string{"case.toml": "spec = \"spec.md\"\nhidden = \"spec.md\"\n" + goodCheck, "spec.md": "x"}, "is not a directory"},
		{"no checks", map[string]string{"case.toml": "spec = \"spec.md\"\n", "spec.md": "x"}, "no [[checks]]"},
		{"empty command", map[string]string{"case.toml": "spec = \"spec.md\"\n[[checks]]\ncommand = []\n", "spec.md": "x"}, "checks[0]: command must be a non-empty list"},
		{"command as a string", map[string]string{"case.toml": "spec = \"spec.md\"\n[[checks]]\ncommand = \"make test\"\n", "spec.md": "x"}, "case.toml:"},
		{"negative attempts", map[string]string{"case.toml": "spec = \"spec.md\"\nmax_attempts = -1\n" + goodCheck, "spec.md": "x"}, "cannot be negative"},
		{"not TOML", map[string]string{"case.toml": "spec = \n"}, "case.toml:"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "case")
			writeTree(t, dir, tc.files)
			os.WriteFile(filepath.Join(filepath.Dir(dir), "other.md"), []byte("x"), 0o644)
			c, err := loadCase(dir)
			switch {
			case tc.err == "" && err != nil:
				t.Fatalf("loadCase: %v", err)
			case tc.err != "" && (err == nil || !strings.Contains(err.Error(), tc.err)):
				t.Fatalf("loadCase error %v, want one containing %q", err, tc.err)
			case tc.err == "" && c.Name != "case":
				t.Errorf("name %q", c.Name)
			}
		})
	}
}

// A bad case is listed by name and the others load; --case picks cases.
func TestLoadSuite(t *testing.T) {
	dir := t.TempDir()
	writeTree(t, dir, map[string]string{
		"b/case.toml": "spec = \"spec.md\"\n" + goodCheck, "b/spec.md": "x",
		"a/case.toml": "spec = \"spec.md\"\n" + goodCheck, "a/spec.md": "x",
		"bad/case.toml": "spec = \"spec.md\"\n", "nocase/spec.md": "x",
		".git/config": "", "README.md": "",
	})
	s, err := Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(s.Cases) != 2 || s.Cases[0].Name != "a" || s.Cases[1].Name != "b" {
		t.Errorf("cases %v, want a and b", s.Cases)
	}
	if len(s.Invalid) != 2 || s.Invalid[0].Case != "bad" || s.Invalid[1].Case != "nocase" || !strings.Contains(s.Invalid[1].Error, "no case.toml") {
		t.Errorf("invalid %+v", s.Invalid)
	}
	cases, invalid, err := s.Select([]string{"b", "bad"})
	if err != nil || len(cases) != 1 || cases[0].Name != "b" || len(invalid) != 1 {
		t.Errorf("Select(b, bad) = %v, %v, %v", cases, invalid, err)
	}
	if _, _, err := s.Select([]string{"zz"}); err == nil || !strings.Contains(err.Error(), "--case zz") {
		t.Errorf("Select(zz): %v", err)
	}
	// The hash covers every file: an edit is a new eval.
	before := s.SHA256
	writeTree(t, dir, map[string]string{"a/spec.md": "y"})
	if s2, _ := Load(dir); s2.SHA256 == before {
		t.Error("editing a spec did not change the suite hash")
	}
	if _, err := Load(t.TempDir()); err == nil || !strings.Contains(err.Error(), "holds no cases") {
		t.Errorf("empty suite: %v", err)
	}
}

func TestWilson(t *testing.T) {
	for _, tc := range []struct {
		k, n      int
		low, high float64
	}{
		{4, 6, 0.3000, 0.9032},
		{0, 10, 0, 0.2775},
		{10, 10, 0.7225, 1},
		{1, 2, 0.0945, 0.9055},
	} {
		low, high := Wilson(tc.k, tc.n)
		if math.Abs(low-tc.low) > 5e-4 || math.Abs(high-tc.high) > 5e-4 {
			t.Errorf("Wilson(%d, %d) = [%.4f, %.4f], want [%.4f, %.4f]", tc.k, tc.n, low, high, tc.low, tc.high)
		}
	}
}

func TestIDAndModelDir(t *testing.T) {
	flags := map[string]any{"max_attempts": 2}
	a, _ := ID("s", []string{"m1", "m2"}, 2, flags)
	b, _ := ID("s", []string{"m1", "m2"}, 2, map[string]any{"max_attempts": 2})
	if a != b || len(a) != 16 {
		t.Errorf("ID is not deterministic: %s %s", a, b)
	}
	for _, other := range []string{
		must(ID("t", []string{"m1", "m2"}, 2, flags)), must(ID("s", []string{"m2", "m1"}, 2, flags)),
		must(ID("s", []string{"m1", "m2"}, 3, flags)), must(ID("s", []string{"m1", "m2"}, 2, map[string]any{"max_attempts": 3})),
	} {
		if other == a {
			t.Error("a different suite, model order, run count or flag gave the same id")
		}
	}
	for in, want := range map[string]string{"gpt-4.1": "gpt-4.1", "anthropic:claude-x": "anthropic_claude-x", "qwen2.5-coder:7b": "qwen2.5-coder_7b", "..": "_..", "a/b": "a_b"} {
		if got := ModelDir(in); got != want {
			t.Errorf("ModelDir(%q) = %q, want %q", in, got, want)
		}
	}
}

func must(s string, err error) string {
	if err != nil {
		panic(err)
	}
	return s
}
