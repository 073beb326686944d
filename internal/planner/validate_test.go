package planner

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/factory-harness/factory/internal/workorder"
)

// fakePython understands just enough Python for the validator tests: code
// containing SYNTAX does not compile; "import a, b" and "from a import b"
// statements separated by ';' or newlines are imports; a few names are
// stdlib.
type fakePython struct {
	err   error
	mu    sync.Mutex
	calls int // Inspect calls
	codes int // codes passed to Inspect, in all calls
}

var fakeStdlib = map[string]bool{"os": true, "sys": true, "json": true, "math": true, "unittest": true, "pathlib": true}

func (f *fakePython) Inspect(_ context.Context, codes []string) ([]PythonInfo, error) {
	f.mu.Lock()
	f.calls++
	f.codes += len(codes)
	f.mu.Unlock()
	if f.err != nil {
		return nil, f.err
	}
	out := make([]PythonInfo, len(codes))
	for i, code := range codes {
		out[i] = f.inspect(code)
	}
	return out, nil
}

func (f *fakePython) inspect(code string) PythonInfo {
	if strings.Contains(code, "SYNTAX") {
		return PythonInfo{SyntaxError: "line 1: invalid syntax"}
	}
	var info PythonInfo
	imp := func(module string, names []string) {
		top, _, _ := strings.Cut(module, ".")
		info.Imports = append(info.Imports, Import{Module: module, Names: names, Stdlib: fakeStdlib[top]})
	}
	for _, stmt := range strings.FieldsFunc(code, func(r rune) bool { return r == ';' || r == '\n' }) {
		f := strings.Fields(strings.ReplaceAll(stmt, ",", " "))
		switch {
		case len(f) >= 2 && f[0] == "import":
			for _, m := range f[1:] {
				imp(m, nil)
			}
		case len(f) >= 4 && f[0] == "from" && f[2] == "import" && !strings.HasPrefix(f[1], "."):
			imp(f[1], f[3:])
		}
	}
	return info
}

// wo returns a valid work order WO-NN whose allowed and context file is
// fNN.py, changed by the mutators.
func wo(n int, mutate ...func(m map[string]any)) map[string]any {
	m := map[string]any{
		"id":                  fmt.Sprintf("WO-%02d", n),
		"title":               "Title",
		"intent":              "Do it.",
		"allowed_files":       []any{fmt.Sprintf("f%02d.py", n)},
		"forbidden":           []any{},
		"acceptance_commands": []any{"python3 -m unittest -v"},
		"context_files":       []any{fmt.Sprintf("f%02d.py", n)},
	}
	for _, f := range mutate {
		f(m)
	}
	return m
}

func set(key string, val any) func(m map[string]any) {
	return func(m map[string]any) { m[key] = val }
}

func del(key string) func(m map[string]any) {
	return func(m map[string]any) { delete(m, key) }
}

func cmds(c ...string) func(m map[string]any) {
	list := []any{}
	for _, s := range c {
		list = append(list, s)
	}
	return set("acceptance_commands", list)
}

func strs(s ...string) []any {
	out := []any{}
	for _, x := range s {
		out = append(out, x)
	}
	return out
}

func exists(p string) map[string]any { return map[string]any{"kind": workorder.FileExists, "path": p} }
func absent(p string) map[string]any { return map[string]any{"kind": workorder.FileAbsent, "path": p} }

func conds(c ...map[string]any) []any {
	out := []any{}
	for _, x := range c {
		out = append(out, x)
	}
	return out
}

// creates makes an order that declares files as allowed, in context and
// created.
func creates(files ...string) func(m map[string]any) {
	return func(m map[string]any) {
		m["allowed_files"] = strs(files...)
		m["context_files"] = strs(files...)
		var post []map[string]any
		for _, f := range files {
			post = append(post, exists(f))
		}
		m["postconditions"] = conds(post...)
	}
}

// plan marshals a manifest; contract may be nil (no key).
func plan(t testing.TB, contract any, orders ...map[string]any) []byte {
	t.Helper()
	top := map[string]any{"work_orders": orders}
	if orders == nil {
		top["work_orders"] = []any{}
	}
	if contract != nil {
		top["verify_contract"] = contract
	}
	b, err := json.Marshal(top)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func contract(requires ...map[string]any) map[string]any {
	return map[string]any{"command": "bash scripts/verify.sh", "requires": conds(requires...)}
}

// codes lists the distinct codes of issues.
func codes(issues []Issue) []string {
	var out []string
	for _, i := range issues {
		if !slices.Contains(out, i.Code) {
			out = append(out, i.Code)
		}
	}
	return out
}

func TestValidateCodes(t *testing.T) {
	pyErr := errors.New("python3 not found")
	type tc struct {
		name    string
		raw     []byte
		repo    []string
		python  PythonInspector // nil: a fakePython
		noPy    bool            // Env.Python nil
		unknown bool            // Env.RepoUnknown: validate without --repo
		trigger bool
		field   string // for triggers: the field of one issue with the code ("-" for none)
		msg     string // for triggers: a substring of that issue's message
	}
	ok := func(name string, raw []byte) tc { return tc{name: name, raw: raw} }
	bad := func(name string, raw []byte, field, msg string) tc {
		return tc{name: name, raw: raw, trigger: true, field: field, msg: msg}
	}
	huge := append([]byte(`{"work_orders":[`), make([]byte, MaxPlanBytes)...)
	for i := range huge[16:] {
		huge[16+i] = ' '
	}
	hundred := make([]map[string]any, 100)
	for i := range hundred {
		hundred[i] = wo(i + 1)
	}

	tests := map[string][]tc{
		"E000": {
			bad("over MaxPlanBytes", huge, "", "limit is"),
			bad("invalid JSON", []byte(`{"work_orders":[`), "", "not valid JSON"),
			bad("markdown fence", append(append([]byte("```json\n"), plan(t, nil, wo(1))...), "\n```"...), "", "no prose or markdown fences"),
			bad("invalid UTF-8", []byte("{\"work_orders\":[\"\xff\"]}"), "", "UTF-8"),
			bad("top-level array", []byte(`[`+string(plan(t, nil, wo(1)))+`]`), "", "JSON array; it must be an object"),
			bad("top-level null", []byte(`null`), "", "JSON null"),
			bad("trailing data", append(plan(t, nil, wo(1)), " {}"...), "", "data after the JSON object"),
			bad("unknown key", []byte(`{"work_orders":[`+string(mustJSON(t, wo(1)))+`],"plan":"x"}`), "plan", "unknown top-level key"),
			bad("duplicate key", []byte(`{"work_orders":[],"work_orders":[]}`), "work_orders", "appears twice"),
			bad("missing work_orders", []byte(`{}`), "work_orders", "required key is missing"),
			bad("null work_orders", []byte(`{"work_orders":null}`), "work_orders", "not null"),
			bad("work_orders object", []byte(`{"work_orders":{}}`), "work_orders", "not object"),
			bad("empty work_orders", plan(t, nil), "work_orders", "at least one"),
			bad("100 work orders", plan(t, nil, hundred...), "work_orders", "at most 99"),
			bad("contract without requires", plan(t, map[string]any{"command": "bash scripts/verify.sh"}, wo(1)), "verify_contract.requires", "required field is missing"),
			bad("contract not an object", plan(t, "bash scripts/verify.sh", wo(1)), "verify_contract", "expected a JSON object"),
			bad("contract extra key", plan(t, map[string]any{"command": "c", "requires": []any{}, "x": 1}, wo(1)), "verify_contract.x", "unknown field"),
			bad("contract unknown fields", plan(t, map[string]any{"command": "c", "requires": []any{}, "b": 1, "a": 1}, wo(1)), "verify_contract.a", "unknown field (allowed: command, requires)"),
			bad("contract bad kind", plan(t, contract(map[string]any{"kind": "exists", "path": "a"}), wo(1)), "verify_contract.requires[0].kind", "must be"),
			bad("contract bad path", plan(t, contract(exists("../a")), wo(1)), "verify_contract.requires[0].path", "escapes"),
			bad("contract empty command", plan(t, map[string]any{"command": " ", "requires": []any{}}, wo(1)), "verify_contract.command", "must not be empty"),
			ok("valid", plan(t, nil, wo(1))),
			ok("surrounding whitespace", append(append([]byte("\n  "), plan(t, nil, wo(1))...), "\n"...)),
			ok("null contract", []byte(`{"verify_contract":null,"work_orders":[`+string(mustJSON(t, wo(1)))+`]}`)),
			ok("valid contract", plan(t, map[string]any{"command": "bash scripts/verify.sh", "requires": []any{}}, wo(1))),
			ok("99 work orders", plan(t, nil, hundred[:99]...)),
		},
		"E001": {
			bad("one digit", plan(t, nil, wo(1, set("id", "WO-1"))), "id", `"WO-1" is not of the form WO-NN`),
			bad("three digits", plan(t, nil, wo(1, set("id", "WO-001"))), "id", `work order 1 must be "WO-01"`),
			bad("lower case", plan(t, nil, wo(1, set("id", "wo-01"))), "id", "not of the form"),
			bad("gap", plan(t, nil, wo(1), wo(3)), "id", "out of sequence"),
			bad("starts at two", plan(t, nil, wo(2)), "id", `work order 1 must be "WO-01"`),
			bad("duplicate", plan(t, nil, wo(1), wo(1)), "id", "already the id of work order 1"),
			bad("reversed", plan(t, nil, wo(2), wo(1)), "id", "out of sequence"),
			ok("in order", plan(t, nil, wo(1), wo(2), wo(3))),
			ok("missing id is E005 only", plan(t, nil, wo(1, del("id")))),
		},
		"E003": {
			bad("contract shell command", plan(t, map[string]any{"command": "bash scripts/verify.sh && echo ok", "requires": []any{}}, wo(1)), "verify_contract.command", "'&&' lists"),
			bad("pipe", plan(t, nil, wo(1, cmds("python3 -m unittest | tee log"))), "acceptance_commands[0]", "pipes are not allowed (commands run without a shell)"),
			bad("and list", plan(t, nil, wo(1, cmds("true", "python3 a.py && echo ok"))), "acceptance_commands[1]", "without a shell"),
			bad("redirection", plan(t, nil, wo(1, cmds("python3 a.py > out.txt"))), "acceptance_commands[0]", "redirections"),
			bad("glob", plan(t, nil, wo(1, cmds("python3 -m pytest tests/*.py"))), "acceptance_commands[0]", "(commands run without a shell)"),
			bad("variable", plan(t, nil, wo(1, cmds("python3 $SCRIPT"))), "acceptance_commands[0]", "parameter expansion"),
			bad("assignment", plan(t, nil, wo(1, cmds("PYTHONPATH=src python3 -m pytest"))), "acceptance_commands[0]", "variable assignments"),
			ok("quoted semicolon", plan(t, nil, wo(1, cmds(`python3 -c "import os; print(1)"`)))),
			ok("plain", plan(t, nil, wo(1, cmds("python3 -m pytest -q tests/test_a.py")))),
		},
		"E004": {
			bad("allowed_files", plan(t, nil, wo(1, set("allowed_files", strs("src/*.py")))), "allowed_files[0]", "glob character"),
			bad("context_files", plan(t, nil, wo(1, set("context_files", strs("a.py", "docs/?.md")))), "context_files[1]", "glob character"),
			bad("precondition", plan(t, nil, wo(1, set("preconditions", conds(exists("[ab].py"))))), "preconditions[0].path", "list each file"),
			bad("postcondition", plan(t, nil, wo(1, set("postconditions", conds(exists("*.py"))))), "postconditions[0].path", "glob character"),
			bad("contract requires", plan(t, contract(exists("tests/*.py")), wo(1)), "verify_contract.requires[0].path", "glob character"),
			bad("in a broken order", plan(t, nil, wo(1, del("title"), set("allowed_files", strs("*.py")))), "allowed_files[0]", "glob character"),
			ok("glob in forbidden", plan(t, nil, wo(1, set("forbidden", strs("*.lock", "secrets/**"))))),
		},
		"E005": {
			bad("missing title", plan(t, nil, wo(1, del("title"))), "title", "required field is missing"),
			bad("empty intent", plan(t, nil, wo(1, set("intent", " "))), "intent", "must not be empty"),
			bad("unknown field", plan(t, nil, wo(1, set("priority", 1))), "priority", "unknown field"),
			bad("wrong type", plan(t, nil, wo(1, set("verify_exempt", "yes"))), "verify_exempt", "expected bool"),
			bad("escaping path", plan(t, nil, wo(1, set("allowed_files", strs("a.py", "../x.py")))), "allowed_files[1]", "escapes"),
			bad("eleven context files", plan(t, nil, wo(1, set("context_files", strs("a", "b", "c", "d", "e", "f", "g", "h", "i", "j", "k")))), "context_files", "at most 10"),
			bad("file_absent postcondition", plan(t, nil, wo(1, set("postconditions", conds(absent("f01.py"))))), "postconditions[0].kind", "postconditions may only use"),
			bad("allowed and forbidden", plan(t, nil, wo(1, set("forbidden", strs("f01.py")))), "allowed_files[0]", "also covered by forbidden"),
			bad("empty acceptance commands", plan(t, nil, wo(1, cmds())), "acceptance_commands", "at least one"),
			bad("null order", []byte(`{"work_orders":[null]}`), "", "not null"),
			bad("string order", []byte(`{"work_orders":["WO-01"]}`), "", "must be a JSON object"),
			bad("glob and escape in one path", plan(t, nil, wo(1, set("allowed_files", strs("/abs/*.py")))), "allowed_files[0]", "absolute"),
			ok("valid", plan(t, nil, wo(1))),
			ok("glob only is E004", plan(t, nil, wo(1, set("allowed_files", strs("*.py"))))),
		},
		"E006": {
			bad("syntax error", plan(t, nil, wo(1, cmds(`python3 -c "SYNTAX("`))), "acceptance_commands[0]", "does not compile: line 1: invalid syntax"),
			bad("python and a path", plan(t, nil, wo(1, cmds("true", `/usr/bin/python3.12 -c "SYNTAX"`))), "acceptance_commands[1]", "does not compile"),
			bad("options before -c", plan(t, nil, wo(1, cmds(`python -I -W ignore -c "SYNTAX"`))), "acceptance_commands[0]", "does not compile"),
			bad("combined -Bc", plan(t, nil, wo(1, cmds(`python3 -Bc "SYNTAX"`))), "acceptance_commands[0]", "does not compile"),
			bad("in a broken order", plan(t, nil, wo(1, del("intent"), cmds(`python3 -c "SYNTAX"`))), "acceptance_commands[0]", "does not compile"),
			bad("too long to check", plan(t, nil, wo(1, cmds(`python3 -c "`+strings.Repeat("x", MaxPythonCodeBytes+1)+`"`))), "acceptance_commands[0]", "bytes, over the"),
			{name: "inspector fails", raw: plan(t, nil, wo(1, cmds(`python3 -c "import os"`))), python: &fakePython{err: pyErr}, trigger: true, field: "acceptance_commands[0]", msg: "not checked: python3 not found"},
			ok("valid code", plan(t, nil, wo(1, cmds(`python3 -c "import os; print(os.sep)"`)))),
			ok("-c of a script", plan(t, nil, wo(1, cmds(`python3 f01.py -c "SYNTAX"`), creates("f01.py")))),
			ok("-m module", plan(t, nil, wo(1, cmds(`python3 -m SYNTAX -c "SYNTAX"`)))),
			ok("not python", plan(t, nil, wo(1, cmds(`node -c "SYNTAX"`)))),
			ok("python2", plan(t, nil, wo(1, cmds(`python2 -c "SYNTAX"`)))),
			{name: "no inspector", raw: plan(t, nil, wo(1, cmds(`python3 -c "SYNTAX"`))), noPy: true},
		},
		"E007": {
			bad("contract unclosed quote", plan(t, map[string]any{"command": "bash scripts/verify.`h", "requires": []any{}}, wo(1)), "verify_contract.command", "cannot be split into program arguments"),
			bad("unclosed quote", plan(t, nil, wo(1, cmds(`python3 -c "print(1)`))), "acceptance_commands[0]", "reached EOF without closing quote"),
			bad("trailing backslash", plan(t, nil, wo(1, cmds("true", `echo a\`))), "acceptance_commands[1]", "trailing backslash"),
			bad("bash-only syntax", plan(t, nil, wo(1, cmds(`python3 a.py &> log`))), "acceptance_commands[0]", "not a valid POSIX shell command line"),
			bad("empty program", plan(t, nil, wo(1, cmds(`'' a`))), "acceptance_commands[0]", "program name is empty"),
			bad("python -c without code", plan(t, nil, wo(1, cmds(`python3 -c`))), "acceptance_commands[0]", "has no argument"),
			ok("valid", plan(t, nil, wo(1, cmds(`python3 -c 'print("a b")'`)))),
			ok("blank command is E005 only", plan(t, nil, wo(1, cmds("  ")))),
		},
		"E101": {
			bad("missing in empty repo", plan(t, nil, wo(1, set("preconditions", conds(exists("calc.py"))))), "preconditions[0].path", "not in the repository"),
			{name: "absent but in repo", raw: plan(t, nil, wo(1, set("preconditions", conds(absent("calc.py"))))), repo: []string{"calc.py"}, trigger: true, field: "preconditions[0].path", msg: "the repository already has it"},
			bad("absent but created earlier", plan(t, nil, wo(1, creates("a.py")), wo(2, set("preconditions", conds(absent("a.py"))))), "preconditions[0].path", "WO-01 creates it"),
			bad("created later", plan(t, nil, wo(1, set("preconditions", conds(exists("f02.py")))), wo(2, creates("f02.py"))), "preconditions[0].path", "does not hold"),
			bad("written without postcondition", plan(t, nil, wo(1, set("allowed_files", strs("a.py"))), wo(2, set("preconditions", conds(exists("a.py"))))), "preconditions[0].path", "not tracked"),
			{name: "in repo", raw: plan(t, nil, wo(1, set("preconditions", conds(exists("calc.py"), absent("new.py"))))), repo: []string{"calc.py"}},
			{name: "repo listing normalised", raw: plan(t, nil, wo(1, set("preconditions", conds(exists("./src/calc.py"))))), repo: []string{"./src//calc.py"}},
			{name: "directory of a repo file", raw: plan(t, nil, wo(1, set("preconditions", conds(exists("src"))))), repo: []string{"src/calc.py"}},
			ok("created earlier", plan(t, nil, wo(1, creates("a.py")), wo(2, set("preconditions", conds(exists("a.py")))))),
			ok("after an unparsable order", plan(t, nil, wo(1, del("title")), wo(2, set("preconditions", conds(exists("a.py")))))),
			// Without --repo, a file that must already exist may well exist.
			{name: "repo unknown: file_exists skipped", raw: plan(t, nil, wo(1, set("preconditions", conds(exists("calc.py"))))), unknown: true},
			{name: "repo unknown: created later skipped", raw: plan(t, nil, wo(1, set("preconditions", conds(exists("f02.py")))), wo(2, creates("f02.py"))), unknown: true},
			// ... but a file an earlier order creates cannot be absent.
			{name: "repo unknown: absent but created earlier", raw: plan(t, nil, wo(1, creates("a.py")), wo(2, set("preconditions", conds(absent("a.py"))))), unknown: true,
				trigger: true, field: "preconditions[0].path", msg: "WO-01 creates it"},
		},
		"E102": {
			bad("exists and absent", plan(t, nil, wo(1, set("preconditions", conds(exists("a.py"), absent("./a.py"))))), "preconditions[1].path", "must also exist by preconditions[0]"),
			ok("different paths", plan(t, nil, wo(1, set("preconditions", conds(absent("a.py"), absent("b.py")))))),
		},
		"E103": {
			bad("not allowed", plan(t, nil, wo(1, set("postconditions", conds(exists("f01.py"), exists("other.py"))))), "postconditions[1].path", "not in allowed_files"),
			ok("allowed after normalisation", plan(t, nil, wo(1, set("allowed_files", strs("./src/a.py")), set("postconditions", conds(exists("src/x/../a.py")))))),
		},
		"E104": {
			bad("allowed without postcondition", plan(t, nil, wo(1, set("allowed_files", strs("a.py", "b.py")), set("postconditions", conds(exists("a.py"))))), "allowed_files[1]", `"b.py" has no file_exists postcondition`),
			ok("no postconditions at all", plan(t, nil, wo(1, set("allowed_files", strs("a.py", "b.py"))))),
			ok("only preconditions", plan(t, nil, wo(1, set("preconditions", conds(absent("f01.py")))))),
		},
		"E105": {
			bad("bash", plan(t, nil, wo(1, cmds("python3 -m unittest", "bash scripts/verify.sh"))), "acceptance_commands[1]", "factory already runs"),
			bad("sh", plan(t, nil, wo(1, cmds("sh scripts/verify.sh"))), "acceptance_commands[0]", "scripts/verify.sh"),
			bad("direct", plan(t, nil, wo(1, cmds("./scripts/verify.sh"))), "acceptance_commands[0]", "scripts/verify.sh"),
			bad("bash path and dot slash", plan(t, nil, wo(1, cmds("/bin/bash ./scripts/verify.sh"))), "acceptance_commands[0]", "scripts/verify.sh"),
			bad("with arguments", plan(t, nil, wo(1, cmds("bash -e scripts/verify.sh --quick"))), "acceptance_commands[0]", "scripts/verify.sh"),
			bad("in an order without conditions", plan(t, nil, wo(1, creates("a.py")), wo(2, cmds("bash scripts/verify.sh"))), "acceptance_commands[0]", "scripts/verify.sh"),
			ok("another script", plan(t, nil, wo(1, creates("scripts/check.sh"), cmds("bash scripts/check.sh")))),
			ok("reading it", plan(t, nil, wo(1, cmds("grep -q pytest scripts/verify.sh")))),
		},
		"E106": {
			bad("never created", plan(t, contract(exists("scripts/verify.sh")), wo(1)), "verify_contract.requires[0]", "does not hold after the last work order"),
			bad("second requirement", plan(t, contract(exists("scripts/verify.sh"), exists("tests/__init__.py")), wo(1, creates("scripts/verify.sh"))), "verify_contract.requires[1]", "tests/__init__.py"),
			ok("created", plan(t, contract(exists("scripts/verify.sh")), wo(1, creates("scripts/verify.sh")))),
			{name: "in repo", raw: plan(t, contract(exists("scripts/verify.sh")), wo(1)), repo: []string{"scripts/verify.sh"}},
			ok("no contract", plan(t, nil, wo(1))),
			ok("empty requires", plan(t, contract(), wo(1))),
			ok("unknown after an unparsable order", plan(t, contract(exists("scripts/verify.sh")), wo(1, del("title")))),
			{name: "repo unknown: never created skipped", raw: plan(t, contract(exists("scripts/verify.sh")), wo(1)), unknown: true},
			{name: "repo unknown: absent but created", raw: plan(t, contract(absent("f01.py")), wo(1, creates("f01.py"))), unknown: true,
				trigger: true, field: "verify_contract.requires[0]", msg: "WO-01 creates it"},
		},
		"E107": {
			bad("go test of a package nothing creates", plan(t, nil, wo(1, creates("calc/calc.go"), cmds("go test ./calc -run ^TestAdd$ -v", "go test ./store/..."))), "acceptance_commands[1]", "go test needs the package directory store, but the repository has no file under it"),
			bad("go vet after a value flag", plan(t, nil, wo(1, cmds("go vet -tags integration ./missing"))), "acceptance_commands[0]", "package directory missing"),
			bad("go run of a missing file", plan(t, nil, wo(1, cmds("go run tools/gen.go"))), "acceptance_commands[0]", "Go file tools/gen.go"),
			bad("go package created later", plan(t, nil, wo(1, cmds("go test ./later")), wo(2, creates("later/a.go"))), "acceptance_commands[0]", "later"),
			bad("cargo without a manifest", plan(t, nil, wo(1, creates("src/lib.rs"), cmds("cargo test --test calc"))), "acceptance_commands[0]", "Cargo manifest Cargo.toml"),
			bad("cargo manifest path", plan(t, nil, wo(1, cmds("cargo +stable test --manifest-path crates/a/Cargo.toml"))), "acceptance_commands[0]", "crates/a/Cargo.toml"),
			bad("node test file nothing creates", plan(t, nil, wo(1, creates("src/calc.js"), cmds("node --test --test-reporter spec test/calc.test.js"))), "acceptance_commands[0]", "node --test needs the script test/calc.test.js"),
			bad("node script", plan(t, nil, wo(1, cmds("node --no-warnings scripts/check.mjs arg.js"))), "acceptance_commands[0]", "scripts/check.mjs"),
			ok("go package created here", plan(t, nil, wo(1, creates("calc/calc.go", "calc/calc_test.go"), cmds("go test ./calc/... -run ^TestAdd$", "go vet ./calc", "go test ./...", "go test .")))),
			ok("go package in an allowed file without postcondition", plan(t, nil, wo(1, set("allowed_files", strs("calc/calc.go")), cmds("go test ./calc")))),
			{name: "go package in repo", raw: plan(t, nil, wo(1, cmds("go test ./internal/x/... -count=1", "go build ./cmd/tool"))), repo: []string{"go.mod", "internal/x/y/a.go", "cmd/tool/main.go"}},
			ok("go import paths are not checked", plan(t, nil, wo(1, cmds("go test example.com/m/calc", "go list ./missing")))),
			ok("go run arguments are the program's", plan(t, nil, wo(1, creates("main.go"), cmds("go run main.go ./not-a-package")))),
			ok("unknown go flag stops the check", plan(t, nil, wo(1, cmds("go test -newflag ./missing")))),
			ok("go -C changes directory", plan(t, nil, wo(1, cmds("go test -C sub ./missing")))),
			{name: "cargo with the repo's manifest", raw: plan(t, nil, wo(1, cmds("cargo test", "cargo build --all-targets"))), repo: []string{"Cargo.toml"}},
			ok("cargo manifest created", plan(t, nil, wo(1, creates("Cargo.toml", "src/lib.rs"), cmds("cargo test")))),
			ok("cargo new needs no manifest", plan(t, nil, wo(1, cmds("cargo --version", "cargo new x")))),
			ok("node resolves extensions", plan(t, nil, wo(1, creates("test/calc.test.js.js"), cmds("node test/calc.test.js")))),
			ok("node -e", plan(t, nil, wo(1, cmds(`node -e "require('./x.js')"`)))),
			ok("node test directory", plan(t, nil, wo(1, creates("test/a.test.js"), cmds("node --test test/a.test.js", "node --test")))),
			ok("python is not checked by E107", plan(t, nil, wo(1, cmds("python3 -m pytest tests/test_missing.py")))),
			{name: "repo unknown", raw: plan(t, nil, wo(1, cmds("go test ./missing", "cargo test"))), unknown: true},
			ok("after an unparsable order", plan(t, nil, wo(1, del("title")), wo(2, cmds("go test ./missing")))),
		},
		"E108": {
			bad("npm install", plan(t, nil, wo(1, cmds("npm test", "npm install lodash"))), "acceptance_commands[1]",
				`acceptance command "npm install lodash" installs or downloads packages (npm install): commands run without network; declare the dependency in package.json`),
			bad("pip install", plan(t, nil, wo(1, cmds("python3 -m pip install -r requirements.txt"))), "acceptance_commands[0]", "requirements.txt or in pyproject.toml"),
			bad("go get after -C", plan(t, nil, wo(1, cmds("go -C tools get example.com/x@v1"))), "acceptance_commands[0]", "(go get)"),
			bad("cargo add", plan(t, nil, wo(1, cmds("cargo add serde"))), "acceptance_commands[0]", "Cargo.toml"),
			bad("curl", plan(t, nil, wo(1, cmds("curl -fsSL https://example.com/x.json"))), "acceptance_commands[0]", "downloads from the network (curl)"),
			bad("inside sh -c", plan(t, nil, wo(1, cmds(`sh -c "npm ci && npm test"`))), "acceptance_commands[0]", "(npm ci)"),
			bad("in a broken order", plan(t, nil, wo(1, del("title"), cmds("yarn"))), "acceptance_commands[0]", "(yarn)"),
			bad("verify contract", plan(t, map[string]any{"command": "npm ci", "requires": []any{}}, wo(1)), "verify_contract.command", `verify command "npm ci" installs`),
			ok("offline commands", plan(t, nil, wo(1, cmds("npm test", "npm run build", "go test ./...", "cargo test", "python -m pytest", "pip --version",
				"pip list", "pip show requests", "go mod verify", "go list -m all")))),
			ok("verify contract", plan(t, contract(), wo(1))),
		},
		"W101": {
			bad("python -c import", plan(t, nil, wo(1, cmds(`python3 -c "import calc"`))), "acceptance_commands[0]", "none of calc.py, calc/__init__.py"),
			bad("dotted import", plan(t, nil, wo(1, creates("pkg/__init__.py"), cmds(`python3 -c "import pkg.mod"`))), "acceptance_commands[0]", "imports pkg.mod, but none of pkg/mod.py, pkg/mod/__init__.py"),
			bad("from import", plan(t, nil, wo(1, cmds(`python3 -c "from a.b import c"`))), "acceptance_commands[0]", "a/b/c.py"),
			bad("own file without postcondition", plan(t, nil, wo(1, set("allowed_files", strs("calc.py")), cmds(`python3 -c "import calc"`))), "acceptance_commands[0]", "file_exists postcondition"),
			bad("bash script", plan(t, nil, wo(1, cmds("bash scripts/check.sh"))), "acceptance_commands[0]", "runs scripts/check.sh"),
			bad("python script", plan(t, nil, wo(1, cmds("python3 -u tools/check.py --fast"))), "acceptance_commands[0]", "runs tools/check.py"),
			bad("created later", plan(t, nil, wo(1, cmds(`python3 -c "import f02"`)), wo(2, creates("f02.py"))), "acceptance_commands[0]", "f02.py"),
			ok("created here", plan(t, nil, wo(1, creates("calc.py"), cmds(`python3 -c "import calc; import os"`)))),
			ok("created earlier", plan(t, nil, wo(1, creates("pkg/mod.py")), wo(2, cmds(`python3 -c "from pkg.mod import f"`)))),
			ok("submodule from a namespace package", plan(t, nil, wo(1, creates("pkg/sub.py"), cmds(`python3 -c "from pkg import sub"`)))),
			ok("package", plan(t, nil, wo(1, creates("pkg/__init__.py"), cmds(`python3 -c "import pkg"`)))),
			{name: "in repo", raw: plan(t, nil, wo(1, cmds(`python3 -c "import calc"`, "bash scripts/check.sh"))), repo: []string{"calc.py", "scripts/check.sh"}},
			ok("stdlib", plan(t, nil, wo(1, cmds(`python3 -c "import os, sys; from json import loads"`)))),
			ok("relative import", plan(t, nil, wo(1, cmds(`python3 -c "from . import x"`)))),
			ok("python -m is not covered", plan(t, nil, wo(1, cmds("python3 -m calc", "python3 -m pytest tests/test_x.py")))),
			ok("verify.sh is E105 only", plan(t, nil, wo(1, cmds("bash scripts/verify.sh")))),
			{name: "no inspector", raw: plan(t, nil, wo(1, cmds(`python3 -c "import calc"`))), noPy: true},
			{name: "repo unknown", raw: plan(t, nil, wo(1, cmds(`python3 -c "import calc"`, "bash scripts/check.sh"))), unknown: true},
		},
		"W102": {
			bad("allowed file not in context", plan(t, nil, wo(1, set("context_files", strs())), wo(2, set("allowed_files", strs("f02.py", "new.py")))),
				"allowed_files[0]", `"f01.py" is not in context_files`),
			bad("second allowed file", plan(t, nil, wo(1, set("allowed_files", strs("f01.py", "new.py")))), "allowed_files[1]", `"new.py" is not in context_files`),
			bad("context files full", plan(t, nil, wo(1, set("context_files", strs("c0.py", "c1.py", "c2.py", "c3.py", "c4.py", "c5.py", "c6.py", "c7.py", "c8.py", "c9.py")))),
				"allowed_files[0]", "context_files is full (10 files), so replace a read-only one with it"),
			bad("in an order with conditions", plan(t, nil, wo(1, creates("a.py", "b.py"), set("context_files", strs("a.py")))), "allowed_files[1]", `"b.py"`),
			ok("every allowed file in context", plan(t, nil, wo(1, creates("a.py", "b.py"), set("context_files", strs("b.py", "a.py", "lib.py"))))),
			ok("normalised paths compared", plan(t, nil, wo(1, set("allowed_files", strs("./src//a.py")), set("context_files", strs("src/a.py"))))),
			ok("not reported for an unparsable order", plan(t, nil, wo(1, del("title"), set("context_files", strs())))),
		},
	}
	for _, code := range []string{"E000", "E001", "E003", "E004", "E005", "E006", "E007", "E101", "E102", "E103", "E104", "E105", "E106", "E107", "E108", "W101", "W102"} {
		cases := tests[code]
		var triggers, passes int
		for _, c := range cases {
			if c.trigger {
				triggers++
			} else {
				passes++
			}
		}
		if triggers == 0 || passes == 0 {
			t.Errorf("%s: want at least one plan that triggers it and one that does not", code)
		}
		for _, c := range cases {
			t.Run(code+"/"+c.name, func(t *testing.T) {
				env := Env{RepoFiles: c.repo, RepoUnknown: c.unknown, Python: c.python}
				if env.Python == nil && !c.noPy {
					env.Python = &fakePython{}
				}
				res := Validate(context.Background(), c.raw, env)
				var got []Issue
				for _, i := range res.Issues {
					if i.Code == code {
						got = append(got, i)
					}
				}
				if !c.trigger {
					if len(got) > 0 {
						t.Fatalf("unexpected %s: %+v\nall issues: %+v", code, got, res.Issues)
					}
					return
				}
				if len(got) == 0 {
					t.Fatalf("no %s issue; issues: %+v", code, res.Issues)
				}
				if !slices.ContainsFunc(got, func(i Issue) bool { return i.Field == c.field && strings.Contains(i.Message, c.msg) }) {
					t.Fatalf("no %s issue on field %q containing %q; got %+v", code, c.field, c.msg, got)
				}
				for _, i := range got {
					if i.Message == "" {
						t.Errorf("empty message: %+v", i)
					}
					if (i.WOID == "") != (code == "E000" || code == "E106" || strings.HasPrefix(i.Field, "verify_contract")) {
						t.Errorf("wo_id %q does not match the issue's level: %+v", i.WOID, i)
					}
					if i.Field != "" && strings.HasPrefix(i.Message, i.Field+":") {
						t.Errorf("message repeats the field: %+v", i)
					}
				}
			})
		}
	}
}

func mustJSON(t testing.TB, v any) []byte {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestValidateValidPlan(t *testing.T) {
	raw := plan(t, contract(exists("scripts/verify.sh"), exists("tests/__init__.py")),
		wo(1, set("preconditions", conds(absent("calc.py"))),
			creates("calc.py", "scripts/verify.sh", "tests/__init__.py", "tests/test_calc.py"),
			cmds(`python3 -c "import calc; assert calc.add(2, 3) == 5"`, "python3 -m unittest tests.test_calc -v")),
		wo(2, set("preconditions", conds(exists("calc.py"))),
			creates("calc.py", "tests/test_multiply.py"),
			set("context_files", strs("calc.py", "tests/test_multiply.py", "tests/test_calc.py")),
			set("notes", "keep add"),
			cmds(`python3 -c "from calc import multiply; assert multiply(3, 4) == 12"`)),
	)
	py := &fakePython{}
	res := Validate(context.Background(), raw, Env{Python: py})
	if len(res.Issues) != 0 {
		t.Fatalf("issues on a valid plan: %+v", res.Issues)
	}
	if res.Issues == nil || res.Errors() == nil || res.Warnings() == nil {
		t.Error("empty issue lists should be non-nil, so they encode as []")
	}
	if res.Manifest == nil || len(res.Manifest.WorkOrders) != 2 || res.Manifest.VerifyContract == nil {
		t.Fatalf("manifest = %+v", res.Manifest)
	}
	if py.calls != 1 || py.codes != 2 {
		t.Errorf("inspector called %d times with %d codes, want once with both codes", py.calls, py.codes)
	}
	// The manifest holds the orders as ParseWorkOrder returns them.
	var top struct {
		WorkOrders []json.RawMessage `json:"work_orders"`
	}
	if err := json.Unmarshal(raw, &top); err != nil {
		t.Fatal(err)
	}
	for i, r := range top.WorkOrders {
		want, err := workorder.ParseWorkOrder(r)
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(&res.Manifest.WorkOrders[i], want) {
			t.Errorf("work order %d:\n got %#v\nwant %#v", i, res.Manifest.WorkOrders[i], *want)
		}
	}
	// The manifest also survives a round trip through ParseManifest.
	again, err := workorder.ParseManifest(mustJSON(t, res.Manifest))
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(again, res.Manifest) {
		t.Errorf("ParseManifest(manifest) differs:\n got %#v\nwant %#v", again, res.Manifest)
	}
}

func TestValidateManifestNilOnParseErrors(t *testing.T) {
	for name, raw := range map[string][]byte{
		"E000 unknown key": []byte(`{"work_orders":[` + string(mustJSON(t, wo(1))) + `],"x":1}`),
		"E000 contract":    plan(t, map[string]any{"command": "c"}, wo(1)),
		"E004":             plan(t, nil, wo(1), wo(2, set("allowed_files", strs("*.py")))),
		"E005":             plan(t, nil, wo(1, del("title")), wo(2)),
		// An id that is no work order id is E001, not E005, yet the order
		// is not one ParseManifest (or `factory run`) accepts.
		"E001 empty id":     plan(t, nil, wo(1, set("id", ""))),
		"E001 id not WO-NN": plan(t, nil, wo(1), wo(2, set("id", "WO-2"))),
	} {
		t.Run(name, func(t *testing.T) {
			if res := Validate(context.Background(), raw, Env{Python: &fakePython{}}); res.Manifest != nil {
				t.Fatalf("manifest returned despite %+v", res.Issues)
			}
		})
	}
	// Other errors keep the manifest, for callers that show it.
	res := Validate(context.Background(), plan(t, nil, wo(2), wo(1, cmds("a | b"))), Env{Python: &fakePython{}})
	if res.Manifest == nil || len(res.Errors()) == 0 {
		t.Fatalf("manifest %v, errors %+v", res.Manifest, res.Errors())
	}
	// An empty id is reported once, as E001, and the order still takes
	// part in the chain checks (E104 here).
	res = Validate(context.Background(), plan(t, nil, wo(1, set("id", ""), set("postconditions", conds(exists("f01.py"), exists("other.py"))))), Env{Python: &fakePython{}})
	var codes []string
	for _, is := range res.Issues {
		codes = append(codes, is.Code+" "+is.WOID+" "+is.Field)
	}
	if want := []string{"E001 work_orders[0] id", "E103 work_orders[0] postconditions[1].path"}; !slices.Equal(codes, want) {
		t.Errorf("issues = %q, want %q", codes, want)
	}
}

func TestValidateReportsEveryUnknownField(t *testing.T) {
	raw := plan(t, nil, wo(1, set("zeta", 1), set("alpha", 2),
		set("preconditions", conds(map[string]any{"kind": "file_exists", "path": "a", "x": 1, "b": 2}))))
	for range 10 { // DecodeStrict alone names one of them at random
		res := Validate(context.Background(), raw, Env{})
		var fields []string
		for _, i := range res.Issues {
			if i.Code != "E005" || !strings.HasPrefix(i.Message, "unknown field (allowed: ") {
				t.Fatalf("unexpected issue %+v", i)
			}
			fields = append(fields, i.Field)
		}
		if want := []string{"alpha", "preconditions[0].b", "preconditions[0].x", "zeta"}; !slices.Equal(fields, want) {
			t.Fatalf("fields = %q, want %q", fields, want)
		}
	}
}

func TestValidateBrokenOrderDoesNotHideOthers(t *testing.T) {
	raw := plan(t, nil,
		wo(1, del("title")),
		wo(2, set("allowed_files", strs("../x.py"))),
		wo(3, set("id", "WO-3"), cmds("a | b")),
	)
	res := Validate(context.Background(), raw, Env{Python: &fakePython{}})
	want := []Issue{
		{"E005", "WO-01", "title", "required field is missing"},
		{"E005", "WO-02", "allowed_files[0]", `path "../x.py" escapes the repository (".." after normalisation)`},
		{"E001", "WO-3", "id", `"WO-3" is not of the form WO-NN (two digits); work order 3 must be "WO-03"`},
		{"E003", "WO-3", "acceptance_commands[0]", "pipes are not allowed (commands run without a shell); write one plain command with literal arguments"},
	}
	if !reflect.DeepEqual(res.Issues, want) {
		t.Fatalf("issues:\n got %+v\nwant %+v", res.Issues, want)
	}
}

func TestValidateOrdering(t *testing.T) {
	commands := []string{}
	for i := range 12 {
		commands = append(commands, fmt.Sprintf("bash s%d.sh", i)) // each a W101
	}
	commands[10] = "a | b"
	commands[2] = "a > b"
	raw := plan(t, contract(exists("never.txt")),
		wo(1, set("id", "WO-9"), set("allowed_files", strs("z.py", "a.py")), set("context_files", strs("a.py")), set("postconditions", conds(exists("q.py")))),
		wo(2, cmds(commands...)),
		wo(3, del("title"), set("allowed_files", strs("*.py"))),
	)
	res := Validate(context.Background(), raw, Env{Python: &fakePython{}})
	var got []string
	for _, i := range res.Issues {
		got = append(got, i.Code+" "+i.WOID+" "+i.Field)
	}
	want := []string{
		"E001 WO-9 id",
		"E103 WO-9 postconditions[0].path",
		"E104 WO-9 allowed_files[0]",
		"E104 WO-9 allowed_files[1]",
		"W102 WO-9 allowed_files[0]",
		"E003 WO-02 acceptance_commands[2]",
		"E003 WO-02 acceptance_commands[10]",
		"W101 WO-02 acceptance_commands[0]",
		"W101 WO-02 acceptance_commands[1]",
		"W101 WO-02 acceptance_commands[3]",
		"W101 WO-02 acceptance_commands[4]",
		"W101 WO-02 acceptance_commands[5]",
		"W101 WO-02 acceptance_commands[6]",
		"W101 WO-02 acceptance_commands[7]",
		"W101 WO-02 acceptance_commands[8]",
		"W101 WO-02 acceptance_commands[9]",
		"W101 WO-02 acceptance_commands[11]",
		"E004 WO-03 allowed_files[0]",
		"E005 WO-03 title",
	}
	if !slices.Equal(got, want) {
		t.Fatalf("order:\n got %q\nwant %q", got, want)
	}
	// E106 is not reported: WO-03 did not parse, so the final state is unknown.
	for range 5 {
		if again := Validate(context.Background(), raw, Env{Python: &fakePython{}}); !reflect.DeepEqual(again.Issues, res.Issues) {
			t.Fatalf("Validate is not deterministic:\n%+v\n%+v", again.Issues, res.Issues)
		}
	}
	if w := res.Warnings(); len(w) != 11 || len(res.Errors()) != 8 {
		t.Fatalf("%d warnings, %d errors", len(w), len(res.Errors()))
	}
}

func TestValidatePlanLevelIssuesFirst(t *testing.T) {
	res := Validate(context.Background(), plan(t, contract(exists("v.sh")), wo(1, set("id", "x"))), Env{})
	if got := codes(res.Issues); !slices.Equal(got, []string{"E106", "E001"}) {
		t.Fatalf("codes = %v, want plan-level E106 before WO issues", got)
	}
}

func TestValidateChainWithRepoFiles(t *testing.T) {
	repo := []string{"README.md", "calc.py", "tests/test_calc.py"}
	raw := plan(t, contract(exists("scripts/verify.sh"), exists("tests/test_calc.py")),
		// Edits an existing file; adds verify.sh.
		wo(1, set("preconditions", conds(exists("calc.py"), absent("scripts/verify.sh"))),
			creates("calc.py", "scripts/verify.sh")),
		// Without conditions: not chain-checked and adds nothing to the state.
		wo(2, set("allowed_files", strs("util.py")), set("context_files", strs("util.py"))),
		// util.py is unknown: WO-02 declared no postcondition.
		wo(3, set("preconditions", conds(exists("util.py"), exists("tests"), absent("README.md"), exists("scripts/verify.sh"))),
			creates("app.py"), cmds(`python3 -c "import app, util, calc"`)),
	)
	res := Validate(context.Background(), raw, Env{RepoFiles: repo, Python: &fakePython{}})
	var got []string
	for _, i := range res.Issues {
		got = append(got, i.Code+" "+i.WOID+" "+i.Field)
	}
	want := []string{
		"E101 WO-03 preconditions[0].path",  // util.py
		"E101 WO-03 preconditions[2].path",  // README.md is in the repo
		"W101 WO-03 acceptance_commands[0]", // util
	}
	if !slices.Equal(got, want) {
		t.Fatalf("issues:\n got %q\nwant %q\n%+v", got, want, res.Issues)
	}
	if !strings.Contains(res.Issues[2].Message, "imports util,") {
		t.Errorf("W101 names the wrong module: %s", res.Issues[2].Message)
	}

	// The same plan against an empty repository fails WO-01's precondition
	// and the contract's tests/test_calc.py.
	res = Validate(context.Background(), raw, Env{Python: &fakePython{}})
	var e []string
	for _, i := range res.Errors() {
		e = append(e, i.Code+" "+i.WOID+" "+i.Field)
	}
	if !slices.Contains(e, "E101 WO-01 preconditions[0].path") || !slices.Contains(e, "E106  verify_contract.requires[1]") {
		t.Fatalf("errors against an empty repo: %q", e)
	}
}

func TestValidatePythonErrStopsInspecting(t *testing.T) {
	py := &fakePython{err: errors.New("exec: python3: not found")}
	raw := plan(t, nil,
		wo(1, cmds(`python3 -c "import a"`, `python3 -c "import b"`)),
		wo(2, cmds(`python3 -c "import c"`)),
	)
	res := Validate(context.Background(), raw, Env{Python: py})
	if py.calls != 1 {
		t.Errorf("inspector called %d times after failing, want 1", py.calls)
	}
	if res.PythonErr == nil || !errors.Is(res.PythonErr, py.err) {
		t.Errorf("PythonErr = %v", res.PythonErr)
	}
	if got := codes(res.Errors()); !slices.Equal(got, []string{"E006"}) || len(res.Errors()) != 3 {
		t.Errorf("errors = %+v, want E006 for each unchecked command", res.Errors())
	}
	if len(res.Warnings()) != 0 {
		t.Errorf("warnings without an inspection: %+v", res.Warnings())
	}
}

func TestValidateBoundsInspections(t *testing.T) {
	var orders []map[string]any
	for i := range 3 {
		var c []string
		for j := range 100 {
			c = append(c, fmt.Sprintf(`python3 -c "x = %d"`, i*100+j))
		}
		orders = append(orders, wo(i+1, cmds(c...)))
	}
	py := &fakePython{}
	res := Validate(context.Background(), plan(t, nil, orders...), Env{Python: py})
	if py.calls != 1 || py.codes != maxInspections {
		t.Errorf("inspector called %d times with %d codes, want once with %d", py.calls, py.codes, maxInspections)
	}
	errs := res.Errors()
	if len(errs) != 300-maxInspections || !strings.Contains(errs[0].Message, "more than 256 different python -c codes") {
		t.Fatalf("%d errors, first %+v", len(errs), errs[0])
	}
	if res.PythonErr != nil {
		t.Errorf("PythonErr = %v; the limit is the plan's problem", res.PythonErr)
	}
}

func TestValidateLongIDIsNotTheWOID(t *testing.T) {
	long := strings.Repeat("W", 1000)
	res := Validate(context.Background(), plan(t, nil, wo(1, set("id", long))), Env{})
	if len(res.Issues) != 1 || res.Issues[0].WOID != "work_orders[0]" || len(res.Issues[0].Message) > 200 {
		t.Fatalf("issues = %+v", res.Issues)
	}
}

func TestValidateSyntaxErrorQuotesTheLine(t *testing.T) {
	raw := plan(t, nil, wo(1, cmds("python3 -c \"import os\nSYNTAX here(\"")))
	py := inspectorFunc(func(code string) PythonInfo { return PythonInfo{SyntaxError: "line 2: invalid syntax"} })
	res := Validate(context.Background(), raw, Env{Python: py})
	if len(res.Issues) != 1 || !strings.HasSuffix(res.Issues[0].Message, `line 2: invalid syntax (line 2 is "SYNTAX here(")`) {
		t.Fatalf("issues = %+v", res.Issues)
	}
}

type inspectorFunc func(code string) PythonInfo

func (f inspectorFunc) Inspect(_ context.Context, codes []string) ([]PythonInfo, error) {
	out := make([]PythonInfo, len(codes))
	for i, code := range codes {
		out[i] = f(code)
	}
	return out, nil
}

func TestComputeVerifyExempt(t *testing.T) {
	verify := exists("scripts/verify.sh")
	tests := []struct {
		name     string
		contract any
		repo     []string
		orders   []map[string]any
		want     []bool
	}{
		{"no contract", nil, nil,
			[]map[string]any{wo(1, set("verify_exempt", true)), wo(2)}, []bool{false, false}},
		{"satisfied from WO-01", contract(verify), nil,
			[]map[string]any{wo(1, creates("scripts/verify.sh")), wo(2), wo(3)}, []bool{false, false, false}},
		{"satisfied only from WO-02", contract(verify, exists("tests/__init__.py")), nil,
			[]map[string]any{wo(1, creates("scripts/verify.sh")), wo(2, creates("tests/__init__.py")), wo(3)}, []bool{true, false, false}},
		{"never satisfied", contract(verify), nil,
			[]map[string]any{wo(1), wo(2)}, []bool{true, true}},
		{"satisfied by the repository", contract(verify), []string{"scripts/verify.sh"},
			[]map[string]any{wo(1), wo(2)}, []bool{false, false}},
		{"file_absent requirement", contract(absent("legacy.cfg")), nil,
			[]map[string]any{wo(1), wo(2, creates("legacy.cfg"))}, []bool{false, true}},
		{"empty requires", contract(), nil,
			[]map[string]any{wo(1, set("verify_exempt", true))}, []bool{false}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			res := Validate(context.Background(), plan(t, tt.contract, tt.orders...), Env{RepoFiles: tt.repo})
			if res.Manifest == nil {
				t.Fatalf("plan does not parse: %+v", res.Issues)
			}
			before := mustJSON(t, res.Manifest)
			got := ComputeVerifyExempt(res.Manifest, tt.repo)
			if !slices.Equal(mustJSON(t, res.Manifest), before) {
				t.Fatal("ComputeVerifyExempt modified its input")
			}
			var exempt []bool
			for i, w := range got {
				exempt = append(exempt, w.VerifyExempt)
				w.VerifyExempt = res.Manifest.WorkOrders[i].VerifyExempt
				if !reflect.DeepEqual(w, res.Manifest.WorkOrders[i]) {
					t.Errorf("work order %d changed beyond verify_exempt", i)
				}
			}
			if !slices.Equal(exempt, tt.want) {
				t.Fatalf("verify_exempt = %v, want %v", exempt, tt.want)
			}
			// The copies share no memory with the input.
			got[0].AllowedFiles[0] = "changed"
			if res.Manifest.WorkOrders[0].AllowedFiles[0] == "changed" {
				t.Fatal("result shares allowed_files with the input")
			}
		})
	}
	if got := ComputeVerifyExempt(nil, nil); got != nil {
		t.Errorf("ComputeVerifyExempt(nil) = %v", got)
	}
}

func TestNaturalCompare(t *testing.T) {
	sorted := []string{"", "a", "a[2]", "a[10]", "a[10].b", "a[010].c", "allowed_files[0]", "b", "b1", "b01x", "b2"}
	for i := range sorted {
		for j := range sorted {
			got := naturalCompare(sorted[i], sorted[j])
			want := 0
			switch {
			case i < j:
				want = -1
			case i > j:
				want = 1
			}
			if got != want {
				t.Errorf("naturalCompare(%q, %q) = %d, want %d", sorted[i], sorted[j], got, want)
			}
		}
	}
}

var validCodes = map[string]bool{
	"E000": true, "E001": true, "E003": true, "E004": true, "E005": true, "E006": true, "E007": true,
	"E101": true, "E102": true, "E103": true, "E104": true, "E105": true, "E106": true, "E107": true, "E108": true,
	"W101": true, "W102": true,
}

func FuzzValidate(f *testing.F) {
	f.Add(plan(f, nil, wo(1)))
	f.Add(plan(f, contract(exists("scripts/verify.sh")), wo(1, creates("scripts/verify.sh"), cmds(`python3 -c "import calc"`, "bash x.sh")),
		wo(2, set("preconditions", conds(exists("a"), absent("a"))), cmds("python3 -c 'SYNTAX'", "a | b", "'x"))))
	f.Add(plan(f, nil, wo(1, del("title"), set("allowed_files", strs("*.py", "../x")), set("context_files", []any{nil, 1}))))
	f.Add([]byte(`{"work_orders":[null,1,"x",[],{}],"verify_contract":{"command":"","requires":[{"kind":"file_exists","path":"[x"}]}}`))
	f.Add([]byte(`{"work_orders":[{"id":"\ud800"}]}`))
	f.Add(plan(f, map[string]any{"command": "npm ci", "requires": []any{}}, wo(1, cmds("npm install x", `sh -c "pip install y && go get z"`, "env A=1 cargo add w"))))
	f.Add([]byte(`{"a":1,"a":2}`))
	f.Add([]byte(`{"work_orders":[{"8c":[{"":"0"}],"7":""}]}`)) // once named a random one of its unknown fields
	f.Add([]byte("\xff"))
	f.Add([]byte(""))
	f.Fuzz(func(t *testing.T, raw []byte) {
		res := Validate(context.Background(), raw, Env{RepoFiles: []string{"calc.py", "src/a.py", "../odd", ""}, Python: &fakePython{}})
		again := Validate(context.Background(), raw, Env{RepoFiles: []string{"calc.py", "src/a.py", "../odd", ""}, Python: &fakePython{}})
		if !reflect.DeepEqual(res.Issues, again.Issues) || !reflect.DeepEqual(res.Manifest, again.Manifest) {
			t.Fatalf("not deterministic:\n%+v\n%+v", res.Issues, again.Issues)
		}
		for i, is := range res.Issues {
			if !validCodes[is.Code] {
				t.Fatalf("unknown code in %+v", is)
			}
			if is.Message == "" {
				t.Fatalf("empty message in %+v", is)
			}
			if res.Manifest != nil && (is.Code == "E000" || is.Code == "E004" || is.Code == "E005") {
				t.Fatalf("manifest returned despite %+v", is)
			}
			if i > 0 && res.Issues[i-1] == is {
				t.Fatalf("duplicate issue %+v", is)
			}
		}
		// The validator and the strict decoder agree: the manifest exists
		// exactly when ParseManifest accepts the plan, and is what it
		// returns. (A plan over MaxPlanBytes is the validator's own limit.)
		decoded, decodeErr := workorder.ParseManifest(raw)
		switch {
		case res.Manifest == nil && decodeErr == nil && len(raw) <= MaxPlanBytes:
			t.Fatalf("ParseManifest accepts the plan, the validator returns no manifest: %+v", res.Issues)
		case res.Manifest == nil && len(res.Errors()) == 0:
			t.Fatalf("no manifest and no error: %+v", res.Issues)
		case res.Manifest != nil && decodeErr != nil:
			t.Fatalf("the validator returns a manifest, ParseManifest refuses the plan: %v", decodeErr)
		case res.Manifest != nil && !reflect.DeepEqual(res.Manifest, decoded):
			t.Fatalf("the validator's manifest differs from ParseManifest's:\n%s\n%s", mustJSON(t, res.Manifest), mustJSON(t, decoded))
		}
		if res.Manifest != nil {
			if len(res.Manifest.WorkOrders) == 0 {
				t.Fatal("manifest without work orders")
			}
			again, err := workorder.ParseManifest(mustJSON(t, res.Manifest))
			if err != nil {
				t.Fatalf("accepted manifest does not re-parse: %v", err)
			}
			if !reflect.DeepEqual(again, res.Manifest) {
				t.Fatalf("manifest changes in a round trip:\n%s\n%s", mustJSON(t, res.Manifest), mustJSON(t, again))
			}
			ex := ComputeVerifyExempt(res.Manifest, nil)
			if len(ex) != len(res.Manifest.WorkOrders) {
				t.Fatal("ComputeVerifyExempt changed the number of orders")
			}
		}
	})
}
