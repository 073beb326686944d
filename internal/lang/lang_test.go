package lang

import (
	"strings"
	"testing"
	"testing/fstest"

	"github.com/google/go-cmp/cmp"
)

func fsOf(files map[string]string) fstest.MapFS {
	m := fstest.MapFS{}
	for name, data := range files {
		m[name] = &fstest.MapFile{Data: []byte(data)}
	}
	return m
}

func ids(d Detection) []ID {
	var out []ID
	for _, p := range d.Profiles {
		out = append(out, p.ID)
	}
	return out
}

func TestDetect(t *testing.T) {
	for _, tc := range []struct {
		name     string
		files    map[string]string
		want     []ID
		fallback bool
		markers  string // Describe()
	}{
		{name: "empty", files: nil, want: []ID{Python}, fallback: true},
		{name: "readme only", files: map[string]string{"README.md": ""}, want: []ID{Python}, fallback: true},
		{name: "python files", files: map[string]string{"a.py": "", "tests/test_a.py": ""}, want: []ID{Python}, fallback: true},
		{name: "pyproject", files: map[string]string{"pyproject.toml": "", "pkg/a.py": ""}, want: []ID{Python}, markers: "Python (pyproject.toml)"},
		{name: "setup.py and requirements", files: map[string]string{"setup.py": "", "requirements.txt": ""}, want: []ID{Python}, markers: "Python (requirements.txt, setup.py)"},
		{name: "go", files: map[string]string{"go.mod": "module x\n", "main.go": ""}, want: []ID{Go}, markers: "Go (go.mod)"},
		{name: "go workspace", files: map[string]string{"go.work": ""}, want: []ID{Go}},
		{name: "nested go.mod is not the root's", files: map[string]string{"sub/go.mod": "", "a.py": ""}, want: []ID{Python}, fallback: true},
		{name: "rust", files: map[string]string{"Cargo.toml": "", "src/lib.rs": ""}, want: []ID{Rust}, markers: "Rust (Cargo.toml)"},
		{name: "javascript", files: map[string]string{"package.json": "{}"}, want: []ID{JavaScript}, markers: "JavaScript (package.json)"},
		{name: "typescript", files: map[string]string{"package.json": "{}", "tsconfig.json": "{}"}, want: []ID{JavaScript}, markers: "TypeScript (package.json, tsconfig.json)"},
		{name: "cmake", files: map[string]string{"CMakeLists.txt": "", "Makefile": ""}, want: []ID{CFamily}, markers: "C/C++ (CMakeLists.txt)"},
		{name: "makefile alone", files: map[string]string{"Makefile": "", "a.c": ""}, want: []ID{CFamily}, markers: "C/C++ (Makefile)"},
		{name: "makefile with python is python", files: map[string]string{"Makefile": "", "tools/gen.py": ""}, want: []ID{Python}, fallback: true},
		{name: "makefile with python only in node_modules", files: map[string]string{"Makefile": "", "node_modules/x/a.py": "", ".venv/b.py": ""}, want: []ID{CFamily}},
		{name: "makefile beside go.mod is go's task runner", files: map[string]string{"Makefile": "", "go.mod": ""}, want: []ID{Go}},
		{name: "maven", files: map[string]string{"pom.xml": ""}, want: []ID{Java}, markers: "Java (pom.xml)"},
		{name: "gradle", files: map[string]string{"build.gradle.kts": "", "settings.gradle.kts": ""}, want: []ID{Java}, markers: "Java (build.gradle.kts, settings.gradle.kts)"},
		{name: "several in fixed order", files: map[string]string{"pyproject.toml": "", "package.json": "{}", "Cargo.toml": "", "go.mod": "", "CMakeLists.txt": "", "pom.xml": ""},
			want: []ID{Go, Rust, JavaScript, CFamily, Java, Python}},
		{name: "a directory named like a marker does not count", files: map[string]string{"go.mod/x": "", "a.py": ""}, want: []ID{Python}, fallback: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d, err := Detect(fsOf(tc.files))
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, ids(d)); diff != "" {
				t.Errorf("profiles (-want +got):\n%s", diff)
			}
			if d.Fallback != tc.fallback {
				t.Errorf("Fallback = %v, want %v", d.Fallback, tc.fallback)
			}
			if tc.markers != "" && d.Describe() != tc.markers {
				t.Errorf("Describe() = %q, want %q", d.Describe(), tc.markers)
			}
			// The file list gives the same languages as the tree.
			var list []string
			for f := range tc.files {
				list = append(list, f)
			}
			if diff := cmp.Diff(tc.want, ids(DetectFiles(list))); diff != "" && !strings.Contains(tc.name, "node_modules") {
				t.Errorf("DetectFiles (-want +got):\n%s", diff)
			}
		})
	}
}

func TestVerify(t *testing.T) {
	py := "py"
	pyFallback := [][]string{{py, "-m", "compileall", "-q", "."}, {py, "-m", "pip", "--version"}, {py, "-m", "pytest", "-q"}}
	for _, tc := range []struct {
		name        string
		files       map[string]string
		want        [][]string
		compileOnly [][]string
	}{
		{name: "no marker: the seeds' python fallback", files: map[string]string{"a.py": ""}, want: pyFallback,
			compileOnly: [][]string{{py, "-m", "compileall", "-q", "."}}},
		{name: "python project", files: map[string]string{"pyproject.toml": ""}, want: pyFallback,
			compileOnly: [][]string{{py, "-m", "compileall", "-q", "."}}},
		{name: "go", files: map[string]string{"go.mod": ""},
			want:        [][]string{{"go", "vet", "./..."}, {"go", "test", "./..."}},
			compileOnly: [][]string{{"go", "build", "./..."}}},
		{name: "rust", files: map[string]string{"Cargo.toml": ""},
			want:        [][]string{{"cargo", "build", "--all-targets"}, {"cargo", "test"}},
			compileOnly: [][]string{{"cargo", "build", "--all-targets"}}},
		{name: "npm test script", files: map[string]string{"package.json": `{"scripts": {"test": "jest"}}`, "package-lock.json": ""},
			want: [][]string{{"npm", "test"}}},
		{name: "pnpm test script", files: map[string]string{"package.json": `{"scripts": {"test": "vitest run"}}`, "pnpm-lock.yaml": "", "package-lock.json": ""},
			want: [][]string{{"pnpm", "test"}}},
		{name: "yarn test script", files: map[string]string{"package.json": `{"scripts": {"test": "node --test"}}`, "yarn.lock": ""},
			want: [][]string{{"yarn", "test"}}},
		{name: "npm init's failing test script is no script", files: map[string]string{"package.json": `{"scripts": {"test": "echo \"Error: no test specified\" && exit 1"}}`},
			want: [][]string{{"node", "--test"}}},
		{name: "jest without script", files: map[string]string{"package.json": `{"devDependencies": {"jest": "^29"}}`},
			want: [][]string{{"npx", "--no", "jest"}}},
		{name: "vitest without script", files: map[string]string{"package.json": `{"devDependencies": {"vitest": "^1", "jest": "^29"}}`},
			want: [][]string{{"npx", "--no", "vitest", "run"}}},
		{name: "node --test", files: map[string]string{"package.json": `{"name": "x"}`},
			want: [][]string{{"node", "--test"}}},
		{name: "malformed package.json", files: map[string]string{"package.json": `{`},
			want: [][]string{{"node", "--test"}}},
		{name: "typescript", files: map[string]string{"package.json": `{"scripts": {"test": "vitest run"}}`, "tsconfig.json": "{}"},
			want:        [][]string{{"npx", "--no", "tsc", "--noEmit"}, {"npm", "test"}},
			compileOnly: [][]string{{"npx", "--no", "tsc", "--noEmit"}}},
		{name: "cmake", files: map[string]string{"CMakeLists.txt": ""},
			want:        [][]string{{"cmake", "-S", ".", "-B", "build"}, {"cmake", "--build", "build"}, {"ctest", "--test-dir", "build", "--output-on-failure"}},
			compileOnly: [][]string{{"cmake", "-S", ".", "-B", "build"}, {"cmake", "--build", "build"}}},
		{name: "make", files: map[string]string{"Makefile": ""}, want: [][]string{{"make", "test"}}, compileOnly: [][]string{{"make"}}},
		{name: "maven", files: map[string]string{"pom.xml": ""},
			want:        [][]string{{"mvn", "--offline", "--batch-mode", "--quiet", "test"}},
			compileOnly: [][]string{{"mvn", "--offline", "--batch-mode", "--quiet", "test-compile"}}},
		{name: "gradle", files: map[string]string{"build.gradle": ""},
			want: [][]string{{"gradle", "--offline", "test"}}, compileOnly: [][]string{{"gradle", "--offline", "testClasses"}}},
		{name: "gradle wrapper", files: map[string]string{"build.gradle": "", "gradlew": ""},
			want: [][]string{{"sh", "gradlew", "--offline", "test"}}, compileOnly: [][]string{{"sh", "gradlew", "--offline", "testClasses"}}},
		{name: "go and python, in order", files: map[string]string{"go.mod": "", "pyproject.toml": ""},
			want:        append([][]string{{"go", "vet", "./..."}, {"go", "test", "./..."}}, pyFallback...),
			compileOnly: [][]string{{"go", "build", "./..."}, {py, "-m", "compileall", "-q", "."}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d, err := Detect(fsOf(tc.files))
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, d.Verify(py)); diff != "" {
				t.Errorf("Verify (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tc.compileOnly, d.CompileOnly(py)); diff != "" {
				t.Errorf("CompileOnly (-want +got):\n%s", diff)
			}
		})
	}
}

func TestGuidesAreComplete(t *testing.T) {
	for _, id := range order {
		g := Profile{ID: id}.Guide()
		for name, s := range map[string]string{"command_example": g.CommandExample, "script_example": g.ScriptExample, "tests": g.Tests,
			"acceptance": g.Acceptance, "forbidden_example": g.ForbiddenExample, "plan_example": g.PlanExample} {
			if strings.TrimSpace(s) == "" {
				t.Errorf("%s: section %s is empty", id, name)
			}
		}
		if !strings.HasPrefix(g.CommandExample, "`") || !strings.HasSuffix(g.CommandExample, "`") {
			t.Errorf("%s: command example %q is not in backquotes", id, g.CommandExample)
		}
	}
}

func TestQuote(t *testing.T) {
	for _, tc := range []struct {
		argv []string
		want string
	}{
		{[]string{"go", "test", "./..."}, "go test ./..."},
		{[]string{"go", "test", "-run", "^TestA$"}, "go test -run '^TestA$'"},
		{[]string{"a b", "", "it's"}, `'a b' '' 'it'\''s'`},
	} {
		if got := Quote(tc.argv); got != tc.want {
			t.Errorf("Quote(%q) = %q, want %q", tc.argv, got, tc.want)
		}
	}
}
