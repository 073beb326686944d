// Package eval measures how often a model turns a spec into software that
// passes tests it never saw: a suite of cases, each built by factory build
// in a fresh repository per model and run, then checked with hidden files
// copied in only after the build; results and statistics per model and case.
package eval

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"

	"github.com/factory-harness/factory/internal/tomlkeys"
)

// CaseFile is the file that makes a directory of a suite a case.
const CaseFile = "case.toml"

// DefaultCheckTimeoutSeconds bounds a check without timeout_seconds.
const DefaultCheckTimeoutSeconds = 600

// Check is one [[checks]] entry: a command run in the built repository
// after the hidden files are copied in; it passes when it exits 0.
type Check struct {
	Name           string   `toml:"name" json:"name,omitempty"`
	Command        []string `toml:"command" json:"command"`
	TimeoutSeconds int      `toml:"timeout_seconds" json:"timeout_seconds,omitempty"`
}

// Case is one case of a suite: case.toml, checked.
type Case struct {
	Name string `toml:"-"` // the directory's name
	Dir  string `toml:"-"` // absolute

	Description string  `toml:"description"`
	Spec        string  `toml:"spec"`   // built with factory build --spec; or
	Plan        string  `toml:"plan"`   // work orders given (factory build --plan)
	Start       string  `toml:"start"`  // files the repository starts with
	Hidden      string  `toml:"hidden"` // files copied in after the build
	Checks      []Check `toml:"checks"`

	// Build flags that override the eval's for this case; 0 keeps them.
	MaxAttempts     int `toml:"max_attempts"`
	PlanMaxAttempts int `toml:"plan_max_attempts"`
	TimeoutSeconds  int `toml:"timeout_seconds"` // per verification or acceptance command
}

// path resolves one of the case's relative paths.
func (c *Case) path(rel string) string {
	if rel == "" {
		return ""
	}
	return filepath.Join(c.Dir, filepath.FromSlash(rel))
}

// SpecPath, PlanDir, StartDir and HiddenDir are absolute, or "" when the
// case has none.
func (c *Case) SpecPath() string  { return c.path(c.Spec) }
func (c *Case) PlanDir() string   { return c.path(c.Plan) }
func (c *Case) StartDir() string  { return c.path(c.Start) }
func (c *Case) HiddenDir() string { return c.path(c.Hidden) }

// Invalid is a case that could not be read; the others still run.
type Invalid struct {
	Case  string `json:"case"`
	Error string `json:"error"`
}

// Suite is a directory of cases, in name order.
type Suite struct {
	Dir     string // absolute
	Cases   []*Case
	Invalid []Invalid
	// SHA256 is the hash of every file of the suite, names and contents:
	// part of the eval id.
	SHA256 string
}

// MaxTimeoutSeconds bounds a timeout of case.toml: a week, far below
// where seconds overflow a time.Duration.
const MaxTimeoutSeconds = 7 * 24 * 3600

var caseName = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]*$`)

// Load reads the suite in dir: every subdirectory (but those whose name
// starts with a dot) is a case and must hold case.toml. A case that fails
// to parse is listed in Invalid; an error means the suite itself could not
// be read or holds no case at all.
func Load(dir string) (*Suite, error) {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return nil, err
	}
	if real, err := filepath.EvalSymlinks(abs); err == nil {
		abs = real
	}
	entries, err := os.ReadDir(abs)
	if err != nil {
		return nil, fmt.Errorf("read suite: %w", err)
	}
	s := &Suite{Dir: abs}
	for _, e := range entries {
		if !e.IsDir() || strings.HasPrefix(e.Name(), ".") {
			continue
		}
		c, err := loadCase(filepath.Join(abs, e.Name()))
		if err != nil {
			s.Invalid = append(s.Invalid, Invalid{Case: e.Name(), Error: err.Error()})
			continue
		}
		s.Cases = append(s.Cases, c)
	}
	if len(s.Cases)+len(s.Invalid) == 0 {
		return nil, fmt.Errorf("suite %s holds no cases (a case is a directory with a %s)", abs, CaseFile)
	}
	if s.SHA256, err = hashTree(abs); err != nil {
		return nil, fmt.Errorf("hash suite: %w", err)
	}
	return s, nil
}

// loadCase reads and checks dir/case.toml strictly: unknown keys, missing
// or escaping paths and empty commands are errors.
func loadCase(dir string) (*Case, error) {
	name := filepath.Base(dir)
	if !caseName.MatchString(name) {
		return nil, fmt.Errorf("case name %q: use letters, digits, '.', '_' and '-' only", name)
	}
	data, err := os.ReadFile(filepath.Join(dir, CaseFile))
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return nil, fmt.Errorf("no %s in %s", CaseFile, dir)
		}
		return nil, err
	}
	c := &Case{Name: name, Dir: dir}
	// Every key must be spelled as documented (see tomlkeys), and a key
	// spelled otherwise is named even when it broke the decoding.
	_, unknown, err := tomlkeys.Decode(string(data), c)
	var problems []string
	if len(unknown) > 0 {
		// The values decoded are not to be trusted (which spelling won
		// depends on map order): report the keys alone, the same each time.
		return nil, fmt.Errorf("%s: unknown keys: %s", CaseFile, strings.Join(unknown, ", "))
	}
	if err != nil {
		return nil, fmt.Errorf("%s: %w", CaseFile, err)
	}
	switch {
	case c.Spec == "" && c.Plan == "":
		problems = append(problems, `give spec = "FILE" or plan = "DIR"`)
	case c.Spec != "" && c.Plan != "":
		problems = append(problems, "spec and plan cannot both be given")
	}
	for _, p := range []struct {
		key, rel string
		dir      bool
	}{{"spec", c.Spec, false}, {"plan", c.Plan, true}, {"start", c.Start, true}, {"hidden", c.Hidden, true}} {
		if p.rel == "" {
			continue
		}
		if msg := checkPath(dir, p.rel, p.dir); msg != "" {
			problems = append(problems, fmt.Sprintf("%s = %q: %s", p.key, p.rel, msg))
		}
	}
	if len(c.Checks) == 0 {
		problems = append(problems, "no [[checks]]: a case is solved when its checks pass, so it needs at least one")
	}
	for i, ch := range c.Checks {
		if len(ch.Command) == 0 || ch.Command[0] == "" {
			problems = append(problems, fmt.Sprintf("checks[%d]: command must be a non-empty list of arguments", i))
		}
		if ch.TimeoutSeconds < 0 || ch.TimeoutSeconds > MaxTimeoutSeconds {
			problems = append(problems, fmt.Sprintf("checks[%d]: timeout_seconds must be between 0 and %d (a week)", i, MaxTimeoutSeconds))
		}
	}
	if c.MaxAttempts < 0 || c.PlanMaxAttempts < 0 || c.TimeoutSeconds < 0 {
		problems = append(problems, "max_attempts, plan_max_attempts and timeout_seconds cannot be negative")
	}
	if c.TimeoutSeconds > MaxTimeoutSeconds {
		problems = append(problems, fmt.Sprintf("timeout_seconds cannot exceed %d (a week)", MaxTimeoutSeconds))
	}
	if len(problems) > 0 {
		return nil, fmt.Errorf("%s: %s", CaseFile, strings.Join(problems, "; "))
	}
	return c, nil
}

// checkPath checks a path of case.toml: relative, inside the case
// directory (symlinks resolved) and of the right kind.
func checkPath(dir, rel string, wantDir bool) string {
	if filepath.IsAbs(rel) {
		return "must be relative to the case directory"
	}
	full := filepath.Join(dir, filepath.FromSlash(rel))
	real, err := filepath.EvalSymlinks(full)
	if err != nil {
		return "does not exist"
	}
	realDir, err := filepath.EvalSymlinks(dir)
	if err != nil {
		return err.Error()
	}
	if real == realDir || !strings.HasPrefix(real, realDir+string(filepath.Separator)) {
		return "must be inside the case directory"
	}
	info, err := os.Stat(real)
	switch {
	case err != nil:
		return err.Error()
	case wantDir && !info.IsDir():
		return "is not a directory"
	case !wantDir && !info.Mode().IsRegular():
		return "is not a file"
	}
	return ""
}

// Select returns the cases named (all when names is empty), in suite
// order, and the invalid cases among them; an unknown name is an error.
func (s *Suite) Select(names []string) ([]*Case, []Invalid, error) {
	if len(names) == 0 {
		return s.Cases, s.Invalid, nil
	}
	var unknown []string
	for _, n := range names {
		if !slices.ContainsFunc(s.Cases, func(c *Case) bool { return c.Name == n }) &&
			!slices.ContainsFunc(s.Invalid, func(i Invalid) bool { return i.Case == n }) {
			unknown = append(unknown, n)
		}
	}
	if len(unknown) > 0 {
		return nil, nil, fmt.Errorf("--case %s: no such case in %s", strings.Join(unknown, ", "), s.Dir)
	}
	var cases []*Case
	for _, c := range s.Cases {
		if slices.Contains(names, c.Name) {
			cases = append(cases, c)
		}
	}
	var invalid []Invalid
	for _, i := range s.Invalid {
		if slices.Contains(names, i.Case) {
			invalid = append(invalid, i)
		}
	}
	return cases, invalid, nil
}

// hashTree hashes every regular file and symlink under root (paths and
// contents, in path order), skipping nothing: any edit makes a new eval.
func hashTree(root string) (string, error) {
	type entry struct{ rel, kind, sum string }
	var entries []entry
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, p)
		rel = filepath.ToSlash(rel)
		switch {
		case d.Type()&fs.ModeSymlink != 0:
			target, err := os.Readlink(p)
			if err != nil {
				return err
			}
			entries = append(entries, entry{rel, "link", target})
		case d.Type().IsRegular():
			sum, err := fileSHA256(p)
			if err != nil {
				return err
			}
			entries = append(entries, entry{rel, "file", sum})
		}
		return nil
	})
	if err != nil {
		return "", err
	}
	sort.Slice(entries, func(i, j int) bool { return entries[i].rel < entries[j].rel })
	h := sha256.New()
	for _, e := range entries {
		fmt.Fprintf(h, "%s %s %s\n", e.kind, e.sum, e.rel)
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

func fileSHA256(path string) (string, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", err
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return "", err
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}
