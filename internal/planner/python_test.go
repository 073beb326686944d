package planner

import (
	"context"
	"errors"
	"reflect"
	"strings"
	"testing"

	"github.com/factory-harness/factory/internal/proc"
)

func needPython3(t *testing.T) {
	t.Helper()
	if !proc.Found("python3") {
		t.Skip("python3 is not on PATH")
	}
}

// inspectOne checks one code.
func inspectOne(ctx context.Context, p PythonInspector, code string) (PythonInfo, error) {
	infos, err := p.Inspect(ctx, []string{code})
	if err != nil {
		return PythonInfo{}, err
	}
	return infos[0], nil
}

func TestPython3InspectorSyntax(t *testing.T) {
	needPython3(t)
	p := NewPython3Inspector()
	for _, tc := range []struct {
		name, code, want string // want: "" for no syntax error, else a substring
	}{
		{"valid", "import os\nassert os.sep", ""},
		{"semicolons", "import math; assert math.isclose(0.1 + 0.2, 0.3)", ""},
		{"unicode", "s = 'é中'; assert len(s) == 2", ""},
		{"empty", "", ""},
		{"invalid syntax", "def f(:\n  pass", "line 1: "},
		{"unclosed paren", "print((1)", "line 1: "},
		{"return outside function", "x = 1\nreturn x", "line 2: 'return' outside function"},
		{"break outside loop", "break", "line 1: 'break' outside loop"},
		{"await outside function", "await x", "line 1: 'await' outside function"},
		{"single-line with statement", "import os; with open('x') as f: pass", "line 1: invalid syntax"},
		{"indentation", "if True:\nprint(1)", "line 2: expected an indented block"},
		{"tab error", "if True:\n\tx = 1\n        y = 2", "line 3: "},
		{"print statement", "print 'hi'", "line 1: "},
		{"deep nesting", strings.Repeat("(", 500) + strings.Repeat(")", 500), "too many nested parentheses"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			info, err := inspectOne(context.Background(), p, tc.code)
			if err != nil {
				t.Fatalf("Inspect: %v", err)
			}
			switch {
			case tc.want == "" && info.SyntaxError != "":
				t.Fatalf("unexpected syntax error %q", info.SyntaxError)
			case tc.want != "" && !strings.Contains(info.SyntaxError, tc.want):
				t.Fatalf("syntax error %q, want it to contain %q", info.SyntaxError, tc.want)
			case tc.want != "" && len(info.Imports) != 0:
				t.Fatalf("imports reported for code that does not compile: %+v", info.Imports)
			}
		})
	}
}

func TestPython3InspectorImports(t *testing.T) {
	needPython3(t)
	code := `from __future__ import annotations
import os.path, calc
from maze_rl.env import GridworldEnv, BUILTIN
from . import sibling
from .pkg import thing
from pkg import *
def f():
    import json as j
try:
    import numpy
except ImportError:
    pass
`
	info, err := inspectOne(context.Background(), NewPython3Inspector(), code)
	if err != nil {
		t.Fatal(err)
	}
	if info.SyntaxError != "" {
		t.Fatalf("syntax error: %s", info.SyntaxError)
	}
	want := []Import{
		{Module: "__future__", Names: []string{"annotations"}, Stdlib: true},
		{Module: "os.path", Stdlib: true},
		{Module: "calc"},
		{Module: "maze_rl.env", Names: []string{"GridworldEnv", "BUILTIN"}},
		{Module: "pkg", Names: []string{"*"}},
		{Module: "json", Stdlib: true},
		{Module: "numpy"},
	}
	if !reflect.DeepEqual(info.Imports, want) {
		t.Fatalf("imports:\n got %+v\nwant %+v", info.Imports, want)
	}
}

func TestPython3InspectorLateFutureImport(t *testing.T) {
	needPython3(t)
	info, err := inspectOne(context.Background(), NewPython3Inspector(), "import os\nfrom __future__ import annotations")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(info.SyntaxError, "line 2: from __future__ imports must occur at the beginning of the file") {
		t.Fatalf("syntax error = %q", info.SyntaxError)
	}
}

func TestPython3InspectorCaches(t *testing.T) {
	needPython3(t)
	p := newPythonInspector("python3")
	first, err := inspectOne(context.Background(), p, "import calc")
	if err != nil {
		t.Fatal(err)
	}
	first.Imports[0].Module = "mutated" // must not reach the cache
	// A binary that does not exist proves the second answer is cached.
	p.bin = "/nonexistent/python3"
	second, err := inspectOne(context.Background(), p, "import calc")
	if err != nil {
		t.Fatalf("cached Inspect ran python again: %v", err)
	}
	if len(second.Imports) != 1 || second.Imports[0].Module != "calc" {
		t.Fatalf("cached imports = %+v", second.Imports)
	}
	if _, err := inspectOne(context.Background(), p, "import other"); err == nil {
		t.Fatal("new code was answered without running python")
	}
}

func TestPython3InspectorErrors(t *testing.T) {
	t.Run("missing binary", func(t *testing.T) {
		_, err := inspectOne(context.Background(), newPythonInspector("/nonexistent/python3"), "x = (")
		if err == nil {
			t.Fatal("no error when python3 cannot run")
		}
		var re *proc.RunError
		if !errors.As(err, &re) {
			t.Errorf("error %v does not wrap *proc.RunError", err)
		}
		if !strings.Contains(err.Error(), "cannot run /nonexistent/python3 to check python -c code") || strings.Contains(err.Error(), "ast.walk") {
			t.Errorf("error %q should name the failure without the script", err)
		}
	})
	t.Run("python fails", func(t *testing.T) {
		// A binary that runs but exits non-zero, as an old python3 does.
		_, err := inspectOne(context.Background(), newPythonInspector("false"), "x = 1")
		if err == nil || !strings.Contains(err.Error(), "exit status 1") {
			t.Fatalf("err = %v", err)
		}
	})
	t.Run("canceled", func(t *testing.T) {
		needPython3(t)
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		_, err := inspectOne(ctx, NewPython3Inspector(), "x = 1")
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("err = %v, want context.Canceled", err)
		}
	})
	t.Run("too long", func(t *testing.T) {
		_, err := inspectOne(context.Background(), NewPython3Inspector(), strings.Repeat("x", MaxPythonCodeBytes+1))
		if err == nil || !strings.Contains(err.Error(), "at most") {
			t.Fatalf("err = %v", err)
		}
	})
	t.Run("NUL", func(t *testing.T) {
		_, err := inspectOne(context.Background(), NewPython3Inspector(), "x = 1\x00")
		if err == nil {
			t.Fatal("no error for a NUL byte")
		}
	})
}

// TestPython3InspectorBatch checks that codes checked together get the
// verdicts they get alone: one code's __future__ import, syntax error or
// recursion error does not reach the others, and a repeated code is
// answered at its every position.
func TestPython3InspectorBatch(t *testing.T) {
	needPython3(t)
	codes := []string{
		"from __future__ import annotations\nimport calc",
		"def f(x: undefined_name): pass\nimport os",
		"x = 1\nreturn x",
		strings.Repeat("(", 500) + strings.Repeat(")", 500),
		"import os\nfrom __future__ import annotations",
		"import calc",
		"from __future__ import annotations\nimport calc",
	}
	batch, err := NewPython3Inspector().Inspect(context.Background(), codes)
	if err != nil {
		t.Fatal(err)
	}
	if len(batch) != len(codes) {
		t.Fatalf("%d verdicts for %d codes", len(batch), len(codes))
	}
	for i, code := range codes {
		alone, err := inspectOne(context.Background(), NewPython3Inspector(), code)
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(batch[i], alone) {
			t.Errorf("code %d: in a batch %+v, alone %+v", i, batch[i], alone)
		}
	}
	if batch[2].SyntaxError == "" || batch[4].SyntaxError == "" || batch[3].SyntaxError == "" {
		t.Errorf("expected syntax errors in codes 2, 3 and 4: %+v", batch)
	}
}

func TestPython3InspectorLargestCode(t *testing.T) {
	needPython3(t)
	code := "x = 1\n" + strings.Repeat("#", MaxPythonCodeBytes-len("x = 1\n"))
	info, err := inspectOne(context.Background(), NewPython3Inspector(), code)
	if err != nil || info.SyntaxError != "" {
		t.Fatalf("code of MaxPythonCodeBytes: %+v, %v", info, err)
	}
}

// TestValidateWithPython3 wires the real inspector into Validate.
func TestValidateWithPython3(t *testing.T) {
	needPython3(t)
	raw := plan(t, nil,
		wo(1, creates("calc.py"), cmds(
			`python3 -c "import calc; assert calc.add(2, 3) == 5"`,
			`python3 -c "import os, helpers"`,
			`python3 -c "from . import x; return 1"`,
		)),
	)
	res := Validate(context.Background(), raw, Env{Python: NewPython3Inspector()})
	if res.PythonErr != nil {
		t.Fatal(res.PythonErr)
	}
	want := []Issue{
		{"E006", "WO-01", "acceptance_commands[2]", `the python -c code does not compile: line 1: 'return' outside function (line 1 is "from . import x; return 1")`},
		{"W101", "WO-01", "acceptance_commands[1]", "imports helpers, but none of helpers.py, helpers/__init__.py is known to exist after this work order; " +
			"declare it as a file_exists postcondition of the work order that creates it (ignore this for a third-party package)"},
	}
	if !reflect.DeepEqual(res.Issues, want) {
		t.Fatalf("issues:\n got %+v\nwant %+v", res.Issues, want)
	}
}
