package eval

import (
	"bytes"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/BurntSushi/toml"
)

// caseKeys and checkKeys are the keys case.toml may hold.
var (
	knownCaseKeys = []string{"description", "spec", "plan", "start", "hidden", "checks", "max_attempts", "plan_max_attempts", "timeout_seconds"}
	checkKeys     = []string{"name", "command", "timeout_seconds"}
	bareKey       = regexp.MustCompile(`^[A-Za-z0-9_-]+$`)
)

// unknownKeys lists the keys of a decoded case.toml that are not the
// format's, exactly spelled.
func unknownKeys(m map[string]any) []string {
	var out []string
	for k, v := range m {
		switch {
		case !contains(knownCaseKeys, k):
			out = append(out, k)
		case k == "checks":
			list, ok := v.([]map[string]any)
			if !ok {
				continue // a type error, which the strict decode refuses
			}
			for _, ch := range list {
				for ck := range ch {
					if !contains(checkKeys, ck) {
						out = append(out, ck)
					}
				}
			}
		}
	}
	return out
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// FuzzCase feeds Load a suite of one case whose case.toml is the input.
// The case directory holds a spec, plan, start and hidden directories and
// symlinks leading out of it (to a file and a directory beside the suite)
// and within it. Properties: the result is deterministic; a refusal is an
// Invalid naming the case and case.toml, and names every unknown key; no
// key outside the format (exactly spelled) is accepted; every path of an
// accepted case resolves, symlinks followed, strictly inside the case
// directory and is of its kind; its timeouts fit a time.Duration; and the
// case encoded back to TOML loads to the same Case.
//
// Each input is read as Load reads a case (loadCase), without Load's
// listing and hashing of the suite, which the input does not change and
// which took half of an input's time: Load of every seed is checked to
// give the same.
// fuzz.sh: min-execs 300 (Go's engine exchanges a coverage map of every counter in this
// large test binary with each worker every 100 ms: 1,100-3,900 inputs in 10 s on a quiet
// machine, under 1,000 at load 11; docs/testing.md)
func FuzzCase(f *testing.F) {
	examples, _ := filepath.Glob("../../examples/eval/suite/*/case.toml")
	if len(examples) == 0 {
		f.Fatal("no example cases under ../../examples/eval/suite")
	}
	var seeds []string
	for _, p := range examples {
		data, err := os.ReadFile(p)
		if err != nil {
			f.Fatal(err)
		}
		seeds = append(seeds, string(data))
	}
	seeds = append(seeds,
		"plan = \"plan\"\nstart = \"start/\"\nhidden = \"hidden\"\nmax_attempts = 3\nplan_max_attempts = 2\ntimeout_seconds = 30\ndescription = \"d\"\n"+
			"[[checks]]\nname = \"n\"\ncommand = [\"true\"]\ntimeout_seconds = 5\n",
		"spec = \"spec.md\"\nretries = 2\n"+goodCheck,
		"spec = \"spec.md\"\n[[checks]]\ncommand = [\"true\"]\nshell = true\n",
		"Spec = \"spec.md\"\n"+goodCheck,
		"spec = \"spec.md\"\nSPEC = \"link-file\"\n"+goodCheck,
		"spec = \"spec.md\"\n[[checks]]\nCommand = [\"true\"]\n",
		"spec = \"../other.md\"\n"+goodCheck,
		"spec = \"link-file\"\n"+goodCheck,
		"spec = \"link-in\"\nhidden = \"link-dir\"\n"+goodCheck,
		"spec = \"spec.md\"\nhidden = \"link-out\"\n"+goodCheck,
		"spec = \"spec.md\"\nhidden = \"link-out/sub\"\n"+goodCheck,
		"spec = \"spec.md\"\nhidden = \".\"\n"+goodCheck,
		"spec = \"spec.md\"\nhidden = \"hidden/..\"\n"+goodCheck,
		"spec = \"spec.md\"\nhidden = \"/etc\"\n"+goodCheck,
		"spec = \"spec.md\"\nstart = \"start/../../case/start\"\n"+goodCheck,
		"spec = \"spec.md\"\ntimeout_seconds = 9223372036854775807\n"+goodCheck,
		"spec = \"spec.md\"\n[[checks]]\ncommand = [\"true\"]\ntimeout_seconds = 9223372036854775807\n",
		"spec = \"spec.md\"\n[checks]\ncommand = [\"true\"]\n",
		"spec = \"spec.md\"\nchecks = []\n",
		"spec = \"spec.md\"\n[[checks]]\ncommand = [\"\"]\n",
		"spec = \"spec.md\"\n[[checks]]\ncommand = \"make test\"\n",
		"spec = \"spec.md\"\nspec = \"spec.md\"\n"+goodCheck,
		"spec = \"spec.md\"\n[extra]\nx = 1\n"+goodCheck,
		"\"spec\" = \"spec.md\"\n"+goodCheck,
		"spec = \"spec.md\"\n'a b' = 1\n"+goodCheck,
		"spec = \"spec.md\"\x00\n"+goodCheck,
		"spec = \n",
		"",
	)
	for _, s := range seeds {
		f.Add(s)
		f.Add(s[:len(s)/2])
	}

	// The suite: one case, with files inside and links out.
	root := f.TempDir()
	suite := filepath.Join(root, "suite")
	dir := filepath.Join(suite, "case")
	writeTree(f, root, map[string]string{
		"outside.md": "secret", "outside/sub/x": "secret", "suite/other.md": "x",
		"suite/case/spec.md": "x", "suite/case/plan/WO-01.json": "{}", "suite/case/start/a.py": "",
		"suite/case/hidden/t.py": "", "suite/case/link-dir-target/t.py": "",
	})
	for link, target := range map[string]string{
		"link-file": "../../outside.md", "link-out": "../../outside", "link-in": "spec.md", "link-dir": "link-dir-target",
		"link-self": ".", "link-up": "..",
	} {
		if err := os.Symlink(target, filepath.Join(dir, link)); err != nil {
			f.Fatal(err)
		}
	}
	realDir, err := filepath.EvalSymlinks(dir)
	if err != nil {
		f.Fatal(err)
	}
	tomlPath := filepath.Join(dir, CaseFile)
	realSuite, err := filepath.EvalSymlinks(suite)
	if err != nil {
		f.Fatal(err)
	}
	// load writes data as the case's case.toml and reads the case as Load
	// does: what the suite holds, the case read, or why not.
	load := func(t testing.TB, data []byte) *Suite {
		t.Helper()
		if err := os.WriteFile(tomlPath, data, 0o644); err != nil {
			t.Fatal(err)
		}
		s := &Suite{Dir: realSuite}
		c, err := loadCase(filepath.Join(realSuite, "case"))
		if err != nil {
			s.Invalid = append(s.Invalid, Invalid{Case: "case", Error: err.Error()})
		} else {
			s.Cases = append(s.Cases, c)
		}
		return s
	}
	for _, text := range seeds {
		want := load(f, []byte(text))
		s, err := Load(suite)
		if err != nil {
			f.Fatalf("Load: %v", err)
		}
		if !reflect.DeepEqual(s.Cases, want.Cases) || !reflect.DeepEqual(s.Invalid, want.Invalid) || s.Dir != want.Dir {
			f.Fatalf("Load reads the case otherwise:\n%+v %+v\nthen\n%+v %+v", s.Cases, s.Invalid, want.Cases, want.Invalid)
		}
	}

	f.Fuzz(func(t *testing.T, text string) {
		s := load(t, []byte(text))
		again := load(t, []byte(text))
		if !reflect.DeepEqual(s.Cases, again.Cases) || !reflect.DeepEqual(s.Invalid, again.Invalid) {
			t.Fatalf("not deterministic: %+v %+v, then %+v %+v", s.Cases, s.Invalid, again.Cases, again.Invalid)
		}
		var raw map[string]any
		_, rawErr := toml.Decode(text, &raw)
		var unknown []string
		if rawErr == nil {
			unknown = unknownKeys(raw)
		}
		if len(s.Invalid) == 1 {
			inv := s.Invalid[0]
			if inv.Case != "case" || !strings.HasPrefix(inv.Error, CaseFile+": ") {
				t.Fatalf("a refusal does not name the case and %s: %+v", CaseFile, inv)
			}
			for _, k := range unknown {
				if bareKey.MatchString(k) && !strings.Contains(inv.Error, k) {
					t.Fatalf("refusal %q does not name the unknown key %q", inv.Error, k)
				}
			}
			return
		}
		c := s.Cases[0]
		if len(unknown) > 0 {
			t.Fatalf("accepted a case with unknown keys %q: %+v", unknown, c)
		}
		if rawErr != nil {
			t.Fatalf("accepted a case.toml that is not TOML (%v)", rawErr)
		}
		for _, p := range []struct {
			key, path string
			dir       bool
		}{{"spec", c.SpecPath(), false}, {"plan", c.PlanDir(), true}, {"start", c.StartDir(), true}, {"hidden", c.HiddenDir(), true}} {
			if p.path == "" {
				continue
			}
			real, err := filepath.EvalSymlinks(p.path)
			if err != nil {
				t.Fatalf("%s %s of an accepted case does not resolve: %v", p.key, p.path, err)
			}
			if !strings.HasPrefix(real, realDir+string(filepath.Separator)) {
				t.Fatalf("%s = %q escapes the case directory: it is %s", p.key, p.path, real)
			}
			info, err := os.Stat(real)
			if err != nil || info.IsDir() != p.dir {
				t.Fatalf("%s = %q: %v, %v", p.key, p.path, info, err)
			}
		}
		if (c.Spec == "") == (c.Plan == "") || len(c.Checks) == 0 {
			t.Fatalf("accepted a case without exactly one of spec and plan, or without checks: %+v", c)
		}
		const maxSeconds = int(time.Duration(1<<63-1) / time.Second)
		for _, n := range append([]int{c.MaxAttempts, c.PlanMaxAttempts, c.TimeoutSeconds}, checkTimeouts(c)...) {
			if n < 0 || n > maxSeconds {
				t.Fatalf("accepted a number out of range: %+v", c)
			}
		}
		var buf bytes.Buffer
		if err := toml.NewEncoder(&buf).Encode(c); err != nil {
			t.Fatalf("encode the accepted case: %v", err)
		}
		back := load(t, buf.Bytes())
		if len(back.Cases) != 1 || !reflect.DeepEqual(back.Cases[0], c) {
			t.Fatalf("the case encoded back does not load the same:\n%s\n%+v\nfrom %+v", buf.Bytes(), back, c)
		}
	})
}

func checkTimeouts(c *Case) []int {
	var out []int
	for _, ch := range c.Checks {
		out = append(out, ch.TimeoutSeconds)
	}
	return out
}
