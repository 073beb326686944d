package builder

import (
	"path"
	"slices"
	"strings"

	"github.com/factory-harness/factory/internal/lang"
	"github.com/factory-harness/factory/internal/workorder"
)

// Dependencies derives, from the plan alone, the earlier work orders each
// work order depends on: deps[j] lists, ascending, the indices i < j such
// that order j must start from a tree holding order i's commit. Order B
// depends on an earlier order A when
//
//   - A writes a file every later order's checks may read (see isGlobal):
//     a project file at the root that decides the languages and their
//     default verification (go.mod, package.json, pyproject.toml,
//     Makefile, …), any .gitignore or .gitattributes, scripts/verify.sh,
//     a conftest.py or __init__.py, or a path the verify contract names;
//   - A's allowed files meet B's allowed files, context files or the
//     paths of B's pre- and postconditions (the same path, or one a
//     directory holding the other): B would read or overwrite what A
//     writes, or its preconditions need a file A creates;
//   - B's acceptance commands name one of A's allowed files (see names).
//
// When in doubt, depend: a dependency only costs parallelism, a missing
// one would show B a tree the serial build never shows it. The result is
// a pure function of the plan: no decision of a parallel build depends on
// timing.
func Dependencies(m *workorder.Manifest) [][]int {
	global := globalPaths(m.VerifyContract)
	deps := make([][]int, len(m.WorkOrders))
	for j, b := range m.WorkOrders {
		reads := slices.Concat(b.AllowedFiles, b.ContextFiles, conditionPaths(b.Preconditions), conditionPaths(b.Postconditions))
		cmds := commandTexts(b.AcceptanceCommands)
		for i, a := range m.WorkOrders[:j] {
			if dependsOn(a.AllowedFiles, reads, cmds, global) {
				deps[j] = append(deps[j], i)
			}
		}
	}
	return deps
}

// dependsOn reports whether an order reading reads and running cmds
// depends on an earlier order that writes writes.
func dependsOn(writes, reads []string, cmds []commandText, global []string) bool {
	for _, w := range writes {
		if isGlobal(w, global) || slices.ContainsFunc(reads, func(r string) bool { return pathsMeet(w, r) }) {
			return true
		}
		for _, c := range cmds {
			if c.names(w) {
				return true
			}
		}
	}
	return false
}

// pathsMeet reports whether a and b are the same path or one is a
// directory holding the other.
func pathsMeet(a, b string) bool {
	a, b = strings.TrimSuffix(a, "/"), strings.TrimSuffix(b, "/")
	return a == b || strings.HasPrefix(b, a+"/") || strings.HasPrefix(a, b+"/")
}

func conditionPaths(cs []workorder.Condition) []string {
	out := make([]string, len(cs))
	for i, c := range cs {
		out[i] = c.Path
	}
	return out
}

// globalBases are file names that change how the checks of every order
// run wherever they are: git's attributes and ignore rules, pytest's
// conftest.py and a Python package's __init__.py (test discovery).
var globalBases = []string{".gitignore", ".gitattributes", "conftest.py", "__init__.py"}

// globalPaths are the paths the verify contract names: its requirements
// and the words of its command that look like paths, and
// scripts/verify.sh, which global verification runs when it exists.
func globalPaths(vc *workorder.VerifyContract) []string {
	paths := []string{"scripts/verify.sh"}
	if vc == nil {
		return paths
	}
	paths = append(paths, conditionPaths(vc.Requires)...)
	for _, w := range strings.Fields(vc.Command) {
		if w = strings.Trim(w, `"'`); strings.Contains(w, "/") || strings.Contains(w, ".") {
			paths = append(paths, strings.TrimPrefix(w, "./"))
		}
	}
	return paths
}

// isGlobal reports whether writing p may change the checks of every later
// order (see Dependencies).
func isGlobal(p string, global []string) bool {
	if slices.Contains(globalBases, path.Base(p)) || !strings.Contains(p, "/") && !lang.DetectFiles([]string{p}).Fallback {
		return true
	}
	return slices.ContainsFunc(global, func(g string) bool { return pathsMeet(p, g) })
}

// commandText is an acceptance command as names reads it.
type commandText struct {
	text  string
	words []string // split at white space and quotes
	ident []string // split at every character that cannot be in a name
}

func commandTexts(cmds []string) []commandText {
	out := make([]commandText, len(cmds))
	for i, c := range cmds {
		out[i] = commandText{
			text:  c,
			words: strings.FieldsFunc(c, func(r rune) bool { return r == ' ' || r == '\t' || r == '\n' || r == '"' || r == '\'' }),
			ident: strings.FieldsFunc(c, func(r rune) bool {
				return !(r == '_' || r == '-' || 'a' <= r && r <= 'z' || 'A' <= r && r <= 'Z' || '0' <= r && r <= '9')
			}),
		}
	}
	return out
}

// names reports whether the command may read or run file p: it holds p,
// or p as a Python module (pkg/mod.py as pkg.mod), or p's name without
// its extension as a whole word (import mod, tests.test_mod), or a word
// naming a directory that holds p ("tests", "tests/", "." runs them all).
func (c commandText) names(p string) bool {
	stem := strings.TrimSuffix(p, path.Ext(p))
	if strings.Contains(c.text, p) || strings.Contains(stem, "/") && strings.Contains(c.text, strings.ReplaceAll(stem, "/", ".")) {
		return true
	}
	if slices.Contains(c.ident, path.Base(stem)) {
		return true
	}
	return slices.ContainsFunc(c.words, func(w string) bool {
		w = strings.TrimPrefix(w, "./")
		return w == "." || strings.HasPrefix(p, strings.TrimSuffix(w, "/")+"/")
	})
}

// Concurrent reports whether any two orders of a plan with deps could run
// at the same time: whether some order does not depend, directly or
// through others, on the order before it. A plan where none could runs
// exactly as a serial build.
func Concurrent(deps [][]int) bool {
	reach := make([]map[int]bool, len(deps))
	for j, ds := range deps {
		reach[j] = map[int]bool{}
		for _, i := range ds {
			reach[j][i] = true
			for k := range reach[i] {
				reach[j][k] = true
			}
		}
		if j > 0 && !reach[j][j-1] {
			return true
		}
	}
	return false
}
