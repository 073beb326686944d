package planner

import (
	"slices"
	"strings"
	"testing"
)

func TestPythonMode(t *testing.T) {
	for _, tc := range []struct {
		argv string // split on spaces; "_" stands for an empty argument
		mode pyMode
		val  string
	}{
		{"python -c code", pyCode, "code"},
		{"python3 -c code more args", pyCode, "code"},
		{"python3 -I -S -c code", pyCode, "code"},
		{"python3 -W ignore -c code", pyCode, "code"},
		{"python3 -Wignore -X dev -c code", pyCode, "code"},
		{"python3 -Bc code", pyCode, "code"},
		{"python3 -ccode", pyCode, "code"},
		{"python3 -c _", pyCode, ""},
		{"python3 -c", pyNoArg, ""},
		{"python3 -m pytest -q", pyModule, "pytest"},
		{"python3 -mpytest", pyModule, "pytest"},
		{"python3 -u tools/x.py -c y", pyScript, "tools/x.py"},
		{"python3 -- -x.py", pyScript, "-x.py"},
		{"python3 --check-hash-based-pycs always x.py", pyScript, "x.py"},
		{"python3 --version", pyNone, ""},
		{"python3 - -c code", pyNone, ""},
		{"python3", pyNone, ""},
	} {
		argv := strings.Split(tc.argv, " ")
		for i := range argv {
			if argv[i] == "_" {
				argv[i] = ""
			}
		}
		mode, val := pythonMode(argv)
		if mode != tc.mode || val != tc.val {
			t.Errorf("pythonMode(%q) = %v, %q; want %v, %q", tc.argv, mode, val, tc.mode, tc.val)
		}
	}
}

func TestPythonCode(t *testing.T) {
	for _, tc := range []struct {
		argv []string
		ok   bool
	}{
		{[]string{"python", "-c", "x"}, true},
		{[]string{"python3", "-c", "x"}, true},
		{[]string{"python3.12", "-c", "x"}, true},
		{[]string{"/usr/local/bin/python3", "-c", "x"}, true},
		{[]string{"python2", "-c", "x"}, false},
		{[]string{"python3.x", "-c", "x"}, false},
		{[]string{"ipython", "-c", "x"}, false},
		{[]string{"py", "-c", "x"}, false},
		{[]string{"python3", "-m", "x"}, false},
		{nil, false},
	} {
		if _, ok := pythonCode(tc.argv); ok != tc.ok {
			t.Errorf("pythonCode(%q) ok = %v, want %v", tc.argv, ok, tc.ok)
		}
	}
}

func TestScriptDependency(t *testing.T) {
	for _, tc := range []struct {
		argv []string
		want string // "" for none
	}{
		{[]string{"bash", "scripts/check.sh"}, "scripts/check.sh"},
		{[]string{"sh", "./scripts/check.sh", "arg"}, "scripts/check.sh"},
		{[]string{"/bin/bash", "-eu", "-o", "pipefail", "x.sh"}, "x.sh"},
		{[]string{"bash", "--norc", "x.sh"}, "x.sh"},
		{[]string{"bash", "-c", "echo hi"}, ""},
		{[]string{"bash", "-ec", "echo hi"}, ""},
		{[]string{"bash"}, ""},
		{[]string{"bash", "-"}, ""},
		{[]string{"bash", "/etc/profile"}, ""},
		{[]string{"bash", "../outside.sh"}, ""},
		{[]string{"python3", "tools/check.py"}, "tools/check.py"},
		{[]string{"python", "-u", "main.py", "--flag"}, "main.py"},
		{[]string{"python3", "-m", "tools.check"}, ""},
		{[]string{"python3", "-c", "import x"}, ""},
		{[]string{"node", "x.js"}, ""},
		{[]string{"zsh", "x.sh"}, ""},
	} {
		got, ok := scriptDependency(tc.argv)
		if ok != (tc.want != "") || got != tc.want {
			t.Errorf("scriptDependency(%q) = %q, %v; want %q", tc.argv, got, ok, tc.want)
		}
	}
}

func TestIsVerifyCommand(t *testing.T) {
	for _, tc := range []struct {
		argv []string
		want bool
	}{
		{[]string{"bash", "scripts/verify.sh"}, true},
		{[]string{"sh", "scripts/verify.sh"}, true},
		{[]string{"bash", "./scripts/verify.sh"}, true},
		{[]string{"/usr/bin/bash", "scripts/verify.sh"}, true},
		{[]string{"bash", "-x", "scripts/verify.sh", "--fast"}, true},
		{[]string{"./scripts/verify.sh"}, true},
		{[]string{"scripts/verify.sh"}, true},
		{[]string{"./scripts/verify.sh", "-v"}, true},
		{[]string{"bash", "scripts/verify.sh.bak"}, false},
		{[]string{"bash", "other/verify.sh"}, false},
		{[]string{"bash", "-c", "scripts/verify.sh"}, false},
		{[]string{"cat", "scripts/verify.sh"}, false},
		{[]string{"python3", "scripts/verify.sh"}, false},
		{[]string{"verify.sh"}, false},
		{nil, false},
	} {
		if got := isVerifyCommand(tc.argv); got != tc.want {
			t.Errorf("isVerifyCommand(%q) = %v, want %v", tc.argv, got, tc.want)
		}
	}
}

func TestImportCandidates(t *testing.T) {
	for _, tc := range []struct {
		imp  Import
		want []string
	}{
		{Import{Module: "calc"}, []string{"calc.py", "calc/__init__.py"}},
		{Import{Module: "a.b"}, []string{"a/b.py", "a/b/__init__.py"}},
		{Import{Module: "a.b", Names: []string{"c", "*", "D"}}, []string{"a/b.py", "a/b/__init__.py", "a/b/c.py", "a/b/c/__init__.py", "a/b/D.py", "a/b/D/__init__.py"}},
		{Import{Module: "données"}, []string{"données.py", "données/__init__.py"}},
		{Import{Module: "a..b"}, nil},
		{Import{Module: "1a"}, nil},
		{Import{Module: ""}, nil},
	} {
		if got := importCandidates(tc.imp); !slices.Equal(got, tc.want) {
			t.Errorf("importCandidates(%+v) = %q, want %q", tc.imp, got, tc.want)
		}
	}
}
