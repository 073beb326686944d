// E107: acceptance commands of other languages' toolchains that name a
// package directory, manifest or file nothing can have created by then.

package planner

import (
	"fmt"
	"path"
	"strings"

	"github.com/factory-harness/factory/internal/workorder"
)

// need is a repository path an acceptance command cannot work without:
// a file, or (dir) a directory with at least one file under it.
type need struct {
	path   string
	dir    bool   // a directory with a file under it
	prefix bool   // any file whose path starts with path (node's x → x.js, x/index.js)
	what   string // how the command uses it, for the message
}

// met reports whether a file in s satisfies n.
func (n need) met(s *fileState) bool {
	switch {
	case n.dir:
		return s.isDir(n.path)
	case s.hasFile(n.path):
		return true
	case n.prefix:
		for f := range s.files {
			if strings.HasPrefix(f, n.path) {
				return true
			}
		}
	}
	return false
}

// toolNeeds returns what argv needs from the repository, for the toolchains
// whose command lines say so unambiguously: go (package directories and
// .go files), cargo (its manifest) and node (its script or test files).
// Anything the parser does not understand ends the search, so every need
// returned is one the command surely has: when none of the files a work
// order up to this one may write or the repository holds can satisfy it,
// the command fails whatever the model writes.
func toolNeeds(argv []string) []need {
	if len(argv) < 2 {
		return nil
	}
	switch path.Base(argv[0]) {
	case "go":
		return goNeeds(argv[1:])
	case "cargo":
		return cargoNeeds(argv[1:])
	case "node", "nodejs":
		return nodeNeeds(argv[1:])
	}
	return nil
}

// goValueFlags take a value as the next argument (build and test flags).
var goValueFlags = setOf("-run", "-skip", "-bench", "-benchtime", "-count", "-cpu", "-parallel", "-timeout", "-list",
	"-fuzz", "-fuzztime", "-fuzzminimizetime", "-shuffle", "-coverpkg", "-covermode", "-coverprofile", "-cpuprofile",
	"-memprofile", "-memprofilerate", "-blockprofile", "-blockprofilerate", "-mutexprofile", "-mutexprofilefraction",
	"-trace", "-outputdir", "-exec", "-o", "-p", "-tags", "-mod", "-modfile", "-pkgdir", "-gcflags", "-ldflags",
	"-asmflags", "-buildmode", "-compiler", "-gccgoflags", "-installsuffix", "-overlay", "-pgo", "-toolexec", "-vettool")

// goBoolFlags take no value.
var goBoolFlags = setOf("-v", "-race", "-short", "-cover", "-x", "-n", "-a", "-json", "-failfast", "-benchmem",
	"-trimpath", "-msan", "-asan", "-work", "-linkshared", "-modcacherw", "-i", "-c", "-fullpath")

func goNeeds(args []string) []need {
	sub := args[0]
	if sub != "test" && sub != "vet" && sub != "build" && sub != "run" {
		return nil
	}
	var out []need
	for i := 1; i < len(args); i++ {
		a := args[i]
		switch {
		case a == "--args" || a == "--":
			return out
		case a == "-C" || strings.HasPrefix(a, "-C="):
			return nil // another directory: paths are relative to it
		case strings.HasPrefix(a, "-"):
			name, _, hasValue := strings.Cut(strings.TrimPrefix(a, "-"), "=")
			name = "-" + strings.TrimPrefix(name, "-") // --run is -run
			switch {
			case hasValue:
			case goValueFlags[name]:
				i++
			case goBoolFlags[name]:
			default:
				return out // unknown: its value might follow
			}
			continue
		}
		if n, ok := goPackageNeed(a); ok {
			out = append(out, n)
		}
		if sub == "run" {
			return out // the rest are the program's arguments
		}
	}
	return out
}

// goPackageNeed reads a relative package pattern (./x, ./x/...) or a .go
// file; import paths and the module root need nothing checkable.
func goPackageNeed(arg string) (need, bool) {
	if strings.HasSuffix(arg, ".go") {
		if p, err := workorder.NormalizePath(arg); err == nil {
			return need{path: p, what: "Go file"}, true
		}
		return need{}, false
	}
	if !strings.HasPrefix(arg, "./") || strings.ContainsAny(arg, "*?[") {
		return need{}, false
	}
	dir := strings.TrimSuffix(strings.TrimSuffix(arg, "..."), "/")
	p, err := workorder.NormalizePath(dir)
	if err != nil || p == "." {
		return need{}, false
	}
	return need{path: p, dir: true, what: "package directory"}, true
}

// cargoCommands need a manifest; the others (new, init, install, …) do not.
var cargoCommands = setOf("build", "b", "check", "c", "test", "t", "run", "r", "bench", "clippy", "doc", "d", "fmt", "tree", "metadata")

func cargoNeeds(args []string) []need {
	i := 0
	if strings.HasPrefix(args[0], "+") { // cargo +toolchain …
		i++
	}
	if i >= len(args) || !cargoCommands[args[i]] {
		return nil
	}
	manifest := "Cargo.toml"
	for j := i + 1; j < len(args); j++ {
		a := args[j]
		switch {
		case a == "--":
			j = len(args)
		case a == "--manifest-path" && j+1 < len(args):
			manifest = args[j+1]
			j++
		case strings.HasPrefix(a, "--manifest-path="):
			manifest = strings.TrimPrefix(a, "--manifest-path=")
		case a == "-C" || strings.HasPrefix(a, "-Z"):
			return nil // another directory, or unstable flags
		}
	}
	p, err := workorder.NormalizePath(manifest)
	if err != nil {
		return nil
	}
	return []need{{path: p, what: "Cargo manifest"}}
}

var nodeValueFlags = setOf("-r", "--require", "--import", "--loader", "--experimental-loader", "-C", "--conditions",
	"--test-name-pattern", "--test-skip-pattern", "--test-reporter", "--test-reporter-destination", "--test-concurrency",
	"--test-timeout", "--test-shard", "--input-type", "--env-file", "--stack-size", "--max-old-space-size", "--title")

var nodeBoolFlags = setOf("--test", "--test-only", "--no-warnings", "--trace-warnings", "--enable-source-maps",
	"--experimental-vm-modules", "--experimental-test-coverage", "--expose-gc", "--no-deprecation", "--trace-uncaught",
	"--experimental-default-type=module", "--preserve-symlinks", "--abort-on-uncaught-exception", "--test-force-exit")

// nodeNeeds finds the script of `node [options] script [args]`, or the
// files of `node --test files…`, by extension only: node also resolves
// `x` to x.js or x/index.js, which the prefix match of the check allows.
func nodeNeeds(args []string) []need {
	test := false
	var out []need
	for i := 0; i < len(args); i++ {
		a := args[i]
		switch {
		case a == "-e" || a == "--eval" || a == "-p" || a == "--print" || a == "-" || a == "--check" || a == "-c":
			return out
		case a == "--":
			if i+1 < len(args) {
				out = append(out, nodeFile(args[i+1])...)
			}
			return out
		case strings.HasPrefix(a, "-"):
			name, _, hasValue := strings.Cut(a, "=")
			switch {
			case name == "--test":
				test = true
			case hasValue:
			case nodeValueFlags[name]:
				i++
			case nodeBoolFlags[name]:
			default:
				return out
			}
			continue
		}
		out = append(out, nodeFile(a)...)
		if !test {
			return out // the rest are the script's arguments
		}
	}
	return out
}

func nodeFile(arg string) []need {
	if strings.ContainsAny(arg, "*?[{") {
		return nil
	}
	switch path.Ext(arg) {
	case ".js", ".mjs", ".cjs", ".ts", ".mts", ".cts":
	default:
		return nil
	}
	p, err := workorder.NormalizePath(arg)
	if err != nil {
		return nil
	}
	return []need{{path: p, prefix: true, what: "script"}}
}

func setOf(names ...string) map[string]bool {
	m := make(map[string]bool, len(names))
	for _, n := range names {
		m[n] = true
	}
	return m
}

// toolChecks reports E107 for each need of the order's acceptance commands
// that no file of possible satisfies: possible holds the repository's files
// and every file the work orders up to this one may write, so a need it
// cannot meet is unmet whatever the model writes.
func (v *validator) toolChecks(o *order, possible *fileState) {
	for k, cmd := range o.cmds {
		if cmd.argv == nil || cmd.banned {
			continue
		}
		for _, n := range toolNeeds(cmd.argv) {
			if n.met(possible) {
				continue
			}
			v.add(o.idx, "E107", o.woid, fmt.Sprintf("acceptance_commands[%d]", k),
				"%s needs the %s %s, but %s; create it in this or an earlier work order (list it in allowed_files), or fix the path",
				argv0(cmd.argv), n.what, n.path, unmetNeed(n))
		}
	}
}

func unmetNeed(n need) string {
	if n.dir {
		return "the repository has no file under it and no work order up to this one may write one"
	}
	return "it is not in the repository and no work order up to this one may write it"
}

func argv0(argv []string) string {
	if len(argv) > 1 {
		return path.Base(argv[0]) + " " + argv[1]
	}
	return path.Base(argv[0])
}
