package planner

import (
	"path"
	"regexp"
	"strings"

	"github.com/factory-harness/factory/internal/workorder"
)

// This file reads acceptance command argvs for what they run: the code of
// `python -c`, the script of `python X.py`, `bash X` and `sh X`, and the
// repository files a Python import needs. It is a heuristic for W101 and
// E006, not an interpreter: `python -m`, dynamic imports, imports that a
// script makes and non-Python programs are not followed.

// pythonName matches the interpreters whose -c code is checked: python,
// python3 and python3.N, by base name so /usr/bin/python3 counts too.
var pythonName = regexp.MustCompile(`^python(3(\.[0-9]+)?)?$`)

func isPython(argv0 string) bool { return pythonName.MatchString(path.Base(argv0)) }

func isShell(argv0 string) bool {
	b := path.Base(argv0)
	return b == "bash" || b == "sh"
}

// pyMode is what a python command line runs.
type pyMode int

const (
	pyNone   pyMode = iota // no program: stdin, --version, a malformed option list
	pyCode                 // -c CODE
	pyModule               // -m MODULE
	pyScript               // a script path
	pyNoArg                // -c or -m without its argument
)

// pythonMode follows CPython's option parsing far enough to find what a
// python argv runs: short options may be combined (-Bc CODE, -cCODE), -W and
// -X take a value, and the first non-option argument is the script.
func pythonMode(argv []string) (pyMode, string) {
	mode, arg, _ := pythonArgs(argv)
	return mode, arg
}

// pythonArgs is pythonMode and the index in argv of the first argument
// after the code, module or script: sys.argv[1:] of the program
// (len(argv) when there is none).
func pythonArgs(argv []string) (pyMode, string, int) {
	for i := 1; i < len(argv); i++ {
		a := argv[i]
		switch {
		case a == "-":
			return pyNone, "", len(argv) // the program comes from stdin
		case a == "--":
			if i+1 < len(argv) {
				return pyScript, argv[i+1], i + 2
			}
			return pyNone, "", len(argv)
		case !strings.HasPrefix(a, "-"):
			return pyScript, a, i + 1
		case a == "--check-hash-based-pycs":
			i++ // takes a value
			continue
		case strings.HasPrefix(a, "--"):
			continue // --version, --help and the like: no value
		}
		for j := 1; j < len(a); j++ {
			switch a[j] {
			case 'c', 'm':
				mode := pyCode
				if a[j] == 'm' {
					mode = pyModule
				}
				if rest := a[j+1:]; rest != "" {
					return mode, rest, i + 1
				}
				if i+1 < len(argv) {
					return mode, argv[i+1], i + 2
				}
				return pyNoArg, "", len(argv) // python reports "Argument expected"
			case 'W', 'X':
				if a[j+1:] == "" {
					i++ // the value is the next argument
				}
				j = len(a)
			}
		}
	}
	return pyNone, "", len(argv)
}

// pythonCode returns the code of a `python -c CODE` command.
func pythonCode(argv []string) (string, bool) {
	if len(argv) == 0 || !isPython(argv[0]) {
		return "", false
	}
	mode, code := pythonMode(argv)
	return code, mode == pyCode
}

// pythonMissingArg reports `python -c` or `python -m` with nothing after it,
// which python refuses before running anything.
func pythonMissingArg(argv []string) bool {
	if len(argv) == 0 || !isPython(argv[0]) {
		return false
	}
	mode, _ := pythonMode(argv)
	return mode == pyNoArg
}

// scriptDependency returns the repository file an argv runs as a script:
// X in `python X.py`, `bash X` or `sh X`. Paths that do not name a file
// inside the repository (absolute, escaping) are not dependencies.
func scriptDependency(argv []string) (string, bool) {
	if len(argv) < 2 {
		return "", false
	}
	var script string
	switch {
	case isPython(argv[0]):
		mode, p := pythonMode(argv)
		if mode != pyScript {
			return "", false
		}
		script = p
	case isShell(argv[0]):
		p, ok := shellScript(argv)
		if !ok {
			return "", false
		}
		script = p
	default:
		return "", false
	}
	clean, err := workorder.NormalizePath(script)
	if err != nil {
		return "", false
	}
	return clean, true
}

// shellScript finds the script operand of a bash or sh argv: the first
// argument that is not an option. -c means there is no script; -o and -O
// take a value.
func shellScript(argv []string) (string, bool) {
	for i := 1; i < len(argv); i++ {
		a := argv[i]
		switch {
		case a == "--":
			if i+1 < len(argv) {
				return argv[i+1], true
			}
			return "", false
		case a == "-":
			return "", false // the script comes from stdin
		case !strings.HasPrefix(a, "-") && !strings.HasPrefix(a, "+"):
			return a, true
		case strings.HasPrefix(a, "--"):
			continue // --norc, --posix and the like
		case a == "-o" || a == "+o" || a == "-O" || a == "+O":
			i++ // takes a value
		case strings.HasPrefix(a, "-") && strings.ContainsRune(a, 'c'):
			return "", false // -c: the commands are a string, not a file
		}
	}
	return "", false
}

// isVerifyCommand reports whether argv runs scripts/verify.sh, which the
// factory runs itself after every work order (E105): `bash scripts/verify.sh`,
// `sh scripts/verify.sh` or the script directly, with or without arguments.
func isVerifyCommand(argv []string) bool {
	const verify = "scripts/verify.sh"
	if len(argv) == 0 {
		return false
	}
	if p, err := workorder.NormalizePath(argv[0]); err == nil && p == verify && strings.Contains(argv[0], "/") {
		return true // run directly: a name with a slash is a path, not a PATH lookup
	}
	if len(argv) >= 2 && isShell(argv[0]) {
		if p, ok := shellScript(argv); ok {
			clean, err := workorder.NormalizePath(p)
			return err == nil && clean == verify
		}
	}
	return false
}

// importCandidates returns the files any one of which makes a non-stdlib
// import resolvable from the repository root, where `python -c` looks
// first: for module a.b, a/b.py or the package a/b/__init__.py; for
// `from a.b import c`, also the submodule a/b/c.py or a/b/c/__init__.py.
// A directory a/b (a namespace package) counts too; the state check
// handles that. It returns nil for a module name that maps to no path.
func importCandidates(imp Import) []string {
	base, ok := modulePath(imp.Module)
	if !ok {
		return nil
	}
	out := []string{base + ".py", base + "/__init__.py"}
	for _, n := range imp.Names {
		if n == "*" || !isIdentifier(n) {
			continue
		}
		out = append(out, base+"/"+n+".py", base+"/"+n+"/__init__.py")
	}
	return out
}

// modulePath turns a dotted module name into a slash path, or reports false
// for a name that is not a chain of identifiers.
func modulePath(module string) (string, bool) {
	parts := strings.Split(module, ".")
	for _, p := range parts {
		if !isIdentifier(p) {
			return "", false
		}
	}
	return strings.Join(parts, "/"), true
}

func isIdentifier(s string) bool {
	if s == "" {
		return false
	}
	for i, r := range s {
		switch {
		case r == '_', r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z', r > 0x7f:
		case r >= '0' && r <= '9' && i > 0:
		default:
			return false
		}
	}
	return true
}
