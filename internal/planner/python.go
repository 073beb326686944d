package planner

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/factory-harness/factory/internal/proc"
	"github.com/factory-harness/factory/internal/workorder"
)

// PythonInspector checks the code of `python -c CODE` acceptance commands
// without running it. Validate takes one through Env so that it stays pure
// and fast in tests; NewPython3Inspector is the real one.
type PythonInspector interface {
	// Inspect compiles each code and lists its imports, returning one
	// PythonInfo per code, in order. A syntax error in a code is a
	// PythonInfo, not an error; an error means the check itself could not
	// be done (python3 missing or broken, ctx done, a code too long), for
	// any of them.
	Inspect(ctx context.Context, codes []string) ([]PythonInfo, error)
}

// PythonInfo is what Inspect found in one piece of code.
type PythonInfo struct {
	// SyntaxError is "" when the code compiles, else where and why it
	// does not, e.g. "line 1: invalid syntax" or
	// "line 3: 'return' outside function".
	SyntaxError string `json:"syntax_error" jsonschema:"required"`
	// Imports are the absolute imports (import a.b, from a.b import c) in
	// source order; relative imports (from . import x) are left out. Empty
	// when there is a syntax error.
	Imports []Import `json:"imports" jsonschema:"required"`
}

// Import is one imported module.
type Import struct {
	Module string   `json:"module" jsonschema:"required"`         // "a.b" for both `import a.b` and `from a.b import c`
	Names  []string `json:"names" jsonschema:"required,nullable"` // ["c"] for `from a.b import c`; nil for `import a.b`
	Stdlib bool     `json:"stdlib" jsonschema:"required"`         // the top-level package is in sys.stdlib_module_names
}

// MaxPythonCodeBytes bounds one code Inspect accepts: the factory runs it
// as one argv element, and Linux refuses a single argument over 128 KiB.
const MaxPythonCodeBytes = 64 * 1024

// inspectTimeout bounds one python3 run; compiling even a plan's worth of
// code takes milliseconds, so hitting it means python3 hangs.
const inspectTimeout = 30 * time.Second

// inspectScript runs under `python3 -I -S -X utf8 -c`, with sys.argv[1] a
// file holding the codes to check as a JSON array of strings; it prints a
// JSON array of verdicts, one per code. One process checks them all: a
// python3 start costs ~90 ms, a compile well under one. compile() rather
// than ast.parse alone, because only the compiler reports errors such as
// 'return' outside function; dont_inherit keeps one code's __future__
// imports from reaching the next. It never executes the code.
const inspectScript = `import ast, json, sys, warnings
if sys.version_info < (3, 10):
    sys.exit("python3 is %d.%d; checking acceptance commands needs 3.10 or newer (sys.stdlib_module_names)" % sys.version_info[:2])
warnings.simplefilter("ignore")
std = sys.stdlib_module_names
def inspect(src):
    out = {"syntax_error": "", "imports": []}
    try:
        tree = ast.parse(src, "<acceptance>")
        compile(tree, "<acceptance>", "exec", dont_inherit=True)
    except SyntaxError as e:
        out["syntax_error"] = ("line %d: %s" % (e.lineno, e.msg)) if e.lineno else str(e.msg)
        return out
    except (ValueError, RecursionError, MemoryError) as e:
        out["syntax_error"] = "%s: %s" % (type(e).__name__, e)
        return out
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for a in node.names:
                found.append((node.lineno, node.col_offset, a.name, None))
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            found.append((node.lineno, node.col_offset, node.module, [a.name for a in node.names]))
    found.sort(key=lambda f: (f[0], f[1]))
    out["imports"] = [{"module": m, "names": n, "stdlib": m.split(".")[0] in std} for _, _, m, n in found]
    return out
with open(sys.argv[1], encoding="utf-8") as f:
    srcs = json.load(f)
sys.stdout.write(json.dumps([inspect(s) for s in srcs]))
`

// python3Inspector runs one python3 per Inspect call for the codes it has
// not seen, and caches the verdicts: plans repeat commands across attempts
// and work orders.
type python3Inspector struct {
	bin   string
	mu    sync.Mutex
	cache map[string]PythonInfo
}

// NewPython3Inspector returns an inspector that asks python3 on PATH, run
// as `python3 -I -S -X utf8 -c <script> <file of codes>` through proc (never
// a shell), isolated from the environment, site-packages and the current
// directory. The verdict is that python3's: the factory may later run the
// command with another Python version. It is safe for concurrent use.
func NewPython3Inspector() PythonInspector { return newPythonInspector("python3") }

func newPythonInspector(bin string) *python3Inspector {
	return &python3Inspector{bin: bin, cache: map[string]PythonInfo{}}
}

func (p *python3Inspector) Inspect(ctx context.Context, codes []string) ([]PythonInfo, error) {
	var todo []string // distinct codes not in the cache, in order
	queued := map[string]bool{}
	p.mu.Lock()
	for _, code := range codes {
		if _, ok := p.cache[code]; !ok && !queued[code] {
			queued[code] = true
			todo = append(todo, code)
		}
	}
	p.mu.Unlock()
	for _, code := range todo {
		switch {
		case len(code) > MaxPythonCodeBytes:
			return nil, fmt.Errorf("python -c code is %d bytes; at most %d can be checked", len(code), MaxPythonCodeBytes)
		case strings.ContainsRune(code, 0):
			return nil, errors.New("python -c code contains a NUL byte, which no program argument can carry")
		}
	}
	if len(todo) > 0 {
		infos, err := p.run(ctx, todo)
		if err != nil {
			return nil, err
		}
		p.mu.Lock()
		for i, code := range todo {
			p.cache[code] = infos[i]
		}
		p.mu.Unlock()
	}
	out := make([]PythonInfo, len(codes))
	p.mu.Lock()
	defer p.mu.Unlock()
	for i, code := range codes {
		out[i] = cloneInfo(p.cache[code])
	}
	return out, nil
}

// run checks codes in one python3 process. They go in a file rather than
// as arguments, which Linux caps at 128 KiB each and 2 MiB together.
func (p *python3Inspector) run(ctx context.Context, codes []string) ([]PythonInfo, error) {
	in, err := json.Marshal(codes)
	if err != nil {
		return nil, fmt.Errorf("encode python -c codes for %s: %w", p.bin, err)
	}
	f, err := os.CreateTemp("", "factory-pycheck-*.json")
	if err != nil {
		return nil, fmt.Errorf("cannot create a file for the python -c codes: %w", err)
	}
	defer os.Remove(f.Name())
	_, werr := f.Write(in)
	if cerr := f.Close(); werr == nil {
		werr = cerr
	}
	if werr != nil {
		return nil, fmt.Errorf("cannot write the python -c codes to %s: %w", f.Name(), werr)
	}
	ctx, cancel := context.WithTimeout(ctx, inspectTimeout)
	defer cancel()
	argv := []string{p.bin, "-I", "-S", "-X", "utf8", "-c", inspectScript, f.Name()}
	out, err := proc.Output(ctx, "", argv, coreEnv())
	if err != nil {
		return nil, inspectError(p.bin, err)
	}
	return decodeInspection(p.bin, out, len(codes))
}

// decodeInspection reads what inspectScript printed for n codes, strictly:
// an array of n objects with exactly the keys the script writes, each of
// the type it writes (a missing, null or misspelt syntax_error must not
// read as "compiles"), no repeated key, nothing after the array; imports
// only where the code compiles. An error names bin and what is wrong, and
// where.
func decodeInspection(bin string, out []byte, n int) ([]PythonInfo, error) {
	bad := func(format string, args ...any) error {
		return fmt.Errorf("%s printed something other than the inspection JSON (%s): %.200q", bin, fmt.Sprintf(format, args...), out)
	}
	// Item by item, so that an error names the result (a null item stays
	// nil here and is refused below).
	var items []*json.RawMessage
	if err := workorder.DecodeStrict(out, &items); err != nil {
		return nil, bad("%v", err)
	}
	if len(items) != n {
		return nil, fmt.Errorf("%s returned %d inspection results for %d codes", bin, len(items), n)
	}
	infos := make([]PythonInfo, n)
	for i, item := range items {
		if item == nil {
			return nil, bad("result %d: null", i)
		}
		if err := checkInspection(*item, &infos[i]); err != nil {
			return nil, bad("result %d: %v", i, err)
		}
	}
	return infos, nil
}

// checkInspection decodes one result into info and checks what the types
// cannot say.
func checkInspection(raw []byte, info *PythonInfo) error {
	if err := workorder.DecodeStrict(raw, info); err != nil {
		return err
	}
	if info.SyntaxError != "" && len(info.Imports) > 0 {
		return errors.New("imports listed for code that does not compile")
	}
	for j, imp := range info.Imports {
		switch {
		case imp.Module == "":
			return fmt.Errorf("imports[%d]: module is empty", j)
		case imp.Names != nil && (len(imp.Names) == 0 || slices.Contains(imp.Names, "")):
			return fmt.Errorf("imports[%d]: names %q: neither null nor names", j, imp.Names)
		}
	}
	return nil
}

// inspectError rewords a proc error without its argv, which holds the whole
// script and code, keeping the *proc.RunError (and ctx errors) in the chain.
func inspectError(bin string, err error) error {
	msg := fmt.Sprintf("cannot run %s to check python -c code: %v", bin, err)
	var re *proc.RunError
	if errors.As(err, &re) {
		msg = fmt.Sprintf("cannot run %s to check python -c code: %v", bin, re.Err)
		if s := strings.TrimSpace(re.Stderr); s != "" {
			msg += ": " + s
		}
	}
	return &wrapped{msg: msg, err: err}
}

type wrapped struct {
	msg string
	err error
}

func (w *wrapped) Error() string { return w.msg }
func (w *wrapped) Unwrap() error { return w.err }

// cloneInfo copies the slices so a caller cannot change the cache.
func cloneInfo(info PythonInfo) PythonInfo {
	if info.Imports == nil {
		return info
	}
	imps := make([]Import, len(info.Imports))
	for i, imp := range info.Imports {
		imp.Names = slices.Clone(imp.Names)
		imps[i] = imp
	}
	info.Imports = imps
	return info
}

// coreEnv is the environment python3 runs with: the core set only, as for
// any command that reads model-written code.
func coreEnv() []string {
	env, _ := proc.EnvPolicy{}.Environ(os.Environ())
	return env
}
