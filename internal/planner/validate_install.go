// E108: commands that install or download packages or files. The harness
// installs what the manifests declare (package.json, go.mod, Cargo.toml,
// requirements*.txt, pyproject.toml) before verification; verification and
// acceptance commands run without network, so an install in one of them
// fails whatever the model writes.

package planner

import (
	"path"
	"regexp"
	"strings"
	"unicode"
	"unicode/utf8"

	"mvdan.cc/sh/v3/syntax"

	"github.com/factory-harness/factory/internal/proc"
)

// installKind says which manifest would declare what a command installs,
// and so how to do without it.
type installKind int

const (
	installNode   installKind = iota // npm, pnpm, yarn, bun, npx
	installGo                        // go get, go install x@v, go mod download
	installCargo                     // cargo add, install, fetch, …
	installPython                    // pip, uv, poetry, pipenv, pipx
	installFetch                     // curl, wget, git clone
	installSystem                    // apt, dnf, apk, brew, snap
	installOther                     // gem, bundle, composer, deno, dotnet, conda
)

// does is what a command of the kind does, for the message.
func (k installKind) does() string {
	switch k {
	case installFetch:
		return "downloads from the network"
	case installSystem:
		return "installs system packages"
	}
	return "installs or downloads packages"
}

// hint is how to do without the command.
func (k installKind) hint() string {
	const offline = " and test it with a command that runs offline"
	switch k {
	case installNode:
		return "declare the dependency in package.json (the harness installs it from the manifest and lockfile before verification)" + offline
	case installGo:
		return "declare the module in go.mod (the harness downloads what go.mod and go.sum require before verification)" + offline
	case installCargo:
		return "declare the crate in Cargo.toml (the harness fetches what Cargo.toml and Cargo.lock name before verification)" + offline
	case installPython:
		return "declare the dependency in requirements.txt or in pyproject.toml's [project] dependencies (the harness installs it into .venv before verification)" + offline
	case installFetch:
		return "a file the work needs must be written by a work order (listed in its allowed_files), and a library declared in the project's manifest " +
			"(package.json, go.mod, Cargo.toml, requirements.txt or pyproject.toml), which the harness installs before verification"
	}
	return "the harness installs dependencies only from package.json, go.mod, Cargo.toml, requirements.txt or pyproject.toml (before verification); " +
		"use what those declare or the system already has, and test with a command that runs offline"
}

// installing is what installCheck found: the words that install, as
// written (e.g. "npm install", "python3 -m pip install"), and their kind.
type installing struct {
	what string
	kind installKind
}

// installCheck reports E108 when argv installs or downloads (see installs).
// subject names the command in the message ("acceptance command").
func (v *validator) installCheck(idx int, woid, field, subject, line string, argv []string) bool {
	in, ok := installs(argv)
	if !ok {
		return false
	}
	v.add(idx, "E108", woid, field, "%s %s %s (%s): commands run without network; %s",
		subject, clip(strings.TrimSpace(line), 200), in.kind.does(), plainClip(in.what, 100), in.kind.hint())
	return true
}

// plainClip is s unquoted, cut to about n bytes, unless it holds control
// characters: then clip quotes it.
func plainClip(s string, n int) string {
	if strings.ContainsFunc(s, unicode.IsControl) {
		return clip(s, n)
	}
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n] + "…"
}

// opaque stands for a word of a `sh -c` string that is not a literal (a
// $VAR, a quoted word with escapes): it is an operand nothing matches. No
// argv of ParseCommand holds it, as none holds a NUL byte.
const opaque = "\x00"

// maxInstallDepth bounds how deep wrappers (env, timeout, sh -c, python
// -m) are followed.
const maxInstallDepth = 4

// installs reports whether argv installs or downloads packages or files,
// reading the command line as the tools do where that is easy: options
// before a subcommand (`npm --prefix x install`, `go -C dir get`),
// wrappers (env, timeout, nice, nohup, sudo, time, stdbuf), `python -m
// pip|uv|poetry|pipenv|pipx` and the commands of a `sh -c`/`bash -c`
// string. It keeps to the clear cases: a command it does not understand
// installs nothing.
func installs(argv []string) (installing, bool) {
	return installsAt(argv, 0)
}

func installsAt(argv []string, depth int) (installing, bool) {
	if len(argv) == 0 || depth > maxInstallDepth {
		return installing{}, false
	}
	name := path.Base(argv[0])
	args := argv[1:]
	if w, ok := wrappers[name]; ok {
		return installsAt(w.command(args), depth+1)
	}
	if t, ok := tools[name]; ok {
		return t.installs(name, args)
	}
	switch {
	case pipName.MatchString(name):
		return tools["pip"].installs(name, args)
	case isPython(name):
		mode, module, rest := pythonArgs(argv)
		if mode != pyModule || !pythonModules[module] {
			return installing{}, false
		}
		in, ok := installsAt(append([]string{module}, argv[rest:]...), depth+1)
		in.what = name + " -m " + in.what
		return in, ok
	case isShellName(name):
		if script, ok := shellCommandString(args); ok {
			return scriptInstalls(script, depth+1)
		}
		return installing{}, false
	}
	switch name {
	case "go":
		return goInstalls(args)
	case "npm":
		return npmInstalls(args)
	case "npx":
		return npxInstalls(args)
	case "uvx":
		if hasOperandOrFlag(args) {
			return installing{"uvx", installPython}, true
		}
	case "curl", "wget":
		if hasOperandOrFlag(args) {
			return installing{name, installFetch}, true
		}
	case "dotnet":
		return dotnetInstalls(args)
	}
	return installing{}, false
}

// pipName matches pip, pip3 and pip3.N.
var pipName = regexp.MustCompile(`^pip(3(\.[0-9]+)?)?$`)

// pythonModules are the installers `python -m` runs like their commands.
var pythonModules = setOf("pip", "pip3", "uv", "poetry", "pipenv", "pipx")

func isShellName(name string) bool {
	switch name {
	case "sh", "bash", "dash", "zsh", "ksh":
		return true
	}
	return false
}

// tool is a package manager whose subcommand (after global options)
// says whether it installs.
type tool struct {
	kind   installKind
	valued map[string]bool            // global options that take the next argument as value
	subs   map[string]bool            // subcommands that install or download
	nested map[string]map[string]bool // subcommands whose own subcommand does (uv pip install)
	bare   bool                       // without a subcommand it installs (yarn, bundle)
}

func (t tool) installs(name string, args []string) (installing, bool) {
	if name == "cargo" && len(args) > 0 && strings.HasPrefix(args[0], "+") {
		args = args[1:] // cargo +toolchain …
	}
	i := firstOperand(args, t.valued)
	if i < 0 {
		if t.bare && !asksVersion(args) {
			return installing{name, t.kind}, true
		}
		return installing{}, false
	}
	sub := args[i]
	if t.subs[sub] {
		return installing{name + " " + sub, t.kind}, true
	}
	if subs, ok := t.nested[sub]; ok {
		if j := firstOperand(args[i+1:], nil); j >= 0 && subs[args[i+1+j]] {
			return installing{name + " " + sub + " " + args[i+1+j], t.kind}, true
		}
	}
	return installing{}, false
}

var tools = map[string]tool{
	"pnpm": {kind: installNode, valued: setOf("-C", "--dir", "-F", "--filter", "--reporter", "--loglevel"),
		subs: setOf("install", "i", "add", "update", "up", "upgrade", "dlx", "create", "fetch", "install-test", "it")},
	"yarn": {kind: installNode, valued: setOf("--cwd"),
		subs:   setOf("add", "install", "upgrade", "up", "upgrade-interactive", "dlx", "create"),
		nested: map[string]map[string]bool{"global": setOf("add", "upgrade")}, bare: true},
	"bun": {kind: installNode, valued: setOf("--cwd"), subs: setOf("install", "i", "add", "a", "update", "create")},
	"pip": {kind: installPython, valued: setOf("--log", "--log-file", "--proxy", "--retries", "--timeout", "--exists-action",
		"--trusted-host", "--cert", "--client-cert", "--cache-dir", "--python", "--use-feature", "--use-deprecated", "--keyring-provider"),
		subs: setOf("install", "download", "wheel")},
	"uv": {kind: installPython, valued: setOf("--directory", "--project", "--cache-dir", "--config-file", "--color", "-p", "--python"),
		subs:   setOf("add", "sync"),
		nested: map[string]map[string]bool{"pip": setOf("install", "sync"), "tool": setOf("install", "run", "upgrade")}},
	"poetry": {kind: installPython, valued: setOf("-C", "--directory", "-P", "--project"), subs: setOf("add", "install", "update", "sync")},
	"pipenv": {kind: installPython, subs: setOf("install", "sync", "update", "upgrade")},
	"pipx":   {kind: installPython, subs: setOf("install", "run", "inject", "upgrade", "reinstall")},
	"cargo": {kind: installCargo, valued: setOf("--color", "--config", "-Z", "-C"),
		subs: setOf("add", "install", "fetch", "update", "generate-lockfile", "vendor")},
	"git": {kind: installFetch, valued: setOf("-C", "-c", "--git-dir", "--work-tree", "--namespace", "--super-prefix", "--config-env"),
		subs:   setOf("clone", "fetch", "pull", "ls-remote"),
		nested: map[string]map[string]bool{"submodule": setOf("update", "add"), "lfs": setOf("fetch", "pull")}},
	"apt":      aptTool,
	"apt-get":  aptTool,
	"aptitude": aptTool,
	"dnf":      rpmTool,
	"yum":      rpmTool,
	"microdnf": rpmTool,
	"apk":      {kind: installSystem, valued: setOf("-X", "--repository", "-p", "--root"), subs: setOf("add", "update", "upgrade", "fetch")},
	"brew":     {kind: installSystem, subs: setOf("install", "reinstall", "upgrade", "update", "fetch", "tap")},
	"snap":     {kind: installSystem, subs: setOf("install", "refresh", "download")},
	"gem":      {kind: installOther, subs: setOf("install", "update", "fetch")},
	"bundle":   bundleTool,
	"bundler":  bundleTool,
	"composer": {kind: installOther, valued: setOf("-d", "--working-dir"),
		subs:   setOf("install", "i", "require", "update", "u", "upgrade", "create-project"),
		nested: map[string]map[string]bool{"global": setOf("require", "install", "update")}},
	"deno":       {kind: installOther, subs: setOf("add", "install", "i", "cache")},
	"conda":      condaTool,
	"mamba":      condaTool,
	"micromamba": condaTool,
}

var (
	aptTool = tool{kind: installSystem, valued: setOf("-o", "-c", "-t", "--option", "--config-file", "--target-release"),
		subs: setOf("install", "reinstall", "update", "upgrade", "dist-upgrade", "full-upgrade", "download", "source", "build-dep")}
	rpmTool = tool{kind: installSystem, valued: setOf("-c", "--config", "--releasever", "--setopt", "--installroot"),
		subs: setOf("install", "reinstall", "update", "upgrade", "download", "makecache")}
	bundleTool = tool{kind: installOther, subs: setOf("install", "update", "add"), bare: true}
	condaTool  = tool{kind: installOther, subs: setOf("install", "create", "update", "upgrade")}
)

// firstOperand returns the index of the first argument that is not an
// option, skipping the values of the options in valued ("--opt=value"
// carries its own); -1 when there is none. "--" ends the options.
func firstOperand(args []string, valued map[string]bool) int {
	for i := 0; i < len(args); i++ {
		a := args[i]
		switch {
		case a == "--":
			if i+1 < len(args) {
				return i + 1
			}
			return -1
		case a == "-" || !strings.HasPrefix(a, "-"):
			return i
		case valued[a]:
			i++
		}
	}
	return -1
}

// asksVersion reports an argument that asks for the version or help
// instead of running the command.
func asksVersion(args []string) bool {
	for _, a := range args {
		switch a {
		case "--version", "-v", "-V", "--help", "-h", "--manual", "-M":
			return true
		}
	}
	return false
}

// hasOperandOrFlag reports a command that does more than print its version
// or help.
func hasOperandOrFlag(args []string) bool {
	for _, a := range args {
		switch a {
		case "--version", "-V", "--help", "-h", "--manual", "-M":
		default:
			return true
		}
	}
	return false
}

// npmSubs install or download packages (npm's aliases and the misspellings
// it accepts included).
var npmSubs = setOf("install", "i", "in", "ins", "inst", "insta", "instal", "isnt", "isnta", "isntal", "isntall",
	"add", "ci", "clean-install", "ic", "install-clean", "isntall-clean", "install-test", "it", "install-ci-test", "cit",
	"clean-install-test", "sit", "update", "up", "upgrade", "udpate", "create")

var npmValued = setOf("--prefix", "-C", "--workspace", "-w", "--registry", "--cache", "--userconfig", "--globalconfig", "--loglevel")

// npmInstalls reads `npm [options] subcommand`: the install family, and
// `npm init <initializer>`, which runs `npm exec create-<initializer>`.
func npmInstalls(args []string) (installing, bool) {
	i := firstOperand(args, npmValued)
	if i < 0 {
		return installing{}, false
	}
	sub := args[i]
	if npmSubs[sub] {
		return installing{"npm " + sub, installNode}, true
	}
	if sub == "init" || sub == "innit" {
		if j := firstOperand(args[i+1:], npmValued); j >= 0 && args[i+1+j] != opaque {
			return installing{"npm init " + args[i+1+j], installNode}, true
		}
	}
	return installing{}, false
}

// npxInstalls reports the clear cases of npx: a --package to fetch, or a
// create-* initializer, which no project has installed.
func npxInstalls(args []string) (installing, bool) {
	for i := 0; i < len(args); i++ {
		a := args[i]
		switch {
		case a == "-p" || a == "--package" || strings.HasPrefix(a, "--package="):
			return installing{"npx " + a, installNode}, true
		case a == "-c" || a == "--call":
			return installing{}, false
		case a == "--":
			i++
		case strings.HasPrefix(a, "-"):
			continue
		}
		if i >= len(args) {
			break
		}
		pkg := args[i]
		if strings.HasPrefix(pkg, "@") {
			_, pkg, _ = strings.Cut(pkg, "/")
		}
		if strings.HasPrefix(pkg, "create-") {
			return installing{"npx " + args[i], installNode}, true
		}
		return installing{}, false
	}
	return installing{}, false
}

// goInstalls reads `go [-C dir] subcommand`: go get, go mod download, go
// mod tidy, and go install or go run of a module path at a version
// (pkg@version), which go downloads.
func goInstalls(args []string) (installing, bool) {
	if len(args) > 0 && strings.HasPrefix(args[0], "-C=") {
		args = args[1:]
	} else if len(args) > 1 && args[0] == "-C" {
		args = args[2:]
	}
	if len(args) == 0 {
		return installing{}, false
	}
	switch sub := args[0]; sub {
	case "get":
		return installing{"go get", installGo}, true
	case "mod":
		if j := firstOperand(args[1:], nil); j >= 0 && (args[1+j] == "download" || args[1+j] == "tidy") {
			return installing{"go mod " + args[1+j], installGo}, true
		}
	case "install", "run":
		for i := 1; i < len(args); i++ {
			a := args[i]
			if a == "--" {
				return installing{}, false
			}
			if strings.HasPrefix(a, "-") {
				name, _, hasValue := strings.Cut(strings.TrimPrefix(a, "-"), "=")
				name = "-" + strings.TrimPrefix(name, "-")
				switch {
				case hasValue, goBoolFlags[name]:
				case goValueFlags[name]:
					i++
				default:
					return installing{}, false // unknown: its value might follow
				}
				continue
			}
			if strings.Contains(a, "@") && !strings.HasSuffix(a, ".go") && a != opaque {
				return installing{"go " + sub + " " + a, installGo}, true
			}
			if sub == "run" {
				return installing{}, false // the rest are the program's arguments
			}
		}
	}
	return installing{}, false
}

// dotnetInstalls reads dotnet restore, dotnet add [project] package, and
// the install commands of dotnet tool, workload and new.
func dotnetInstalls(args []string) (installing, bool) {
	i := firstOperand(args, nil)
	if i < 0 {
		return installing{}, false
	}
	switch sub := args[i]; sub {
	case "restore":
		return installing{"dotnet restore", installOther}, true
	case "add":
		for _, a := range args[i+1:] {
			if a == "package" {
				return installing{"dotnet add package", installOther}, true
			}
		}
	case "tool", "workload", "new":
		if j := firstOperand(args[i+1:], nil); j >= 0 {
			switch next := args[i+1+j]; next {
			case "install", "restore", "update":
				return installing{"dotnet " + sub + " " + next, installOther}, true
			}
		}
	}
	return installing{}, false
}

// wrapper is a program that runs the command after its own options (and
// operands, like timeout's duration).
type wrapper struct {
	valued   map[string]bool // options that take the next argument as value
	operands int             // operands before the command
	assigns  bool            // NAME=VALUE words before the command (env)
	stop     map[string]bool // options after which no command runs as argv
}

var wrappers = map[string]wrapper{
	"env":     {valued: setOf("-u", "--unset", "-C", "--chdir"), assigns: true, stop: setOf("-S", "--split-string")},
	"timeout": {valued: setOf("-s", "--signal", "-k", "--kill-after"), operands: 1},
	"nice":    {valued: setOf("-n", "--adjustment")},
	"nohup":   {},
	"sudo":    {valued: setOf("-u", "-g", "-C", "-h", "-p", "-r", "-t", "-U", "-D", "-R", "-T"), stop: setOf("-i", "-s", "-l", "-v", "-k", "-K", "-e")},
	"time":    {valued: setOf("-o", "-f", "--output", "--format")},
	"stdbuf":  {valued: setOf("-i", "-o", "-e")},
	"exec":    {valued: setOf("-a")},
	"command": {stop: setOf("-v", "-V")},
}

// command returns the argv the wrapper runs, nil if none.
func (w wrapper) command(args []string) []string {
	operands := w.operands
	for i := 0; i < len(args); i++ {
		a := args[i]
		switch {
		case a == "--":
			return skip(args[i+1:], operands)
		case w.stop[a] || w.stop[strings.SplitN(a, "=", 2)[0]]:
			return nil
		case w.valued[a]:
			i++
		case strings.HasPrefix(a, "-") && a != "-":
		case w.assigns && strings.Contains(a, "="):
		default:
			return skip(args[i:], operands)
		}
	}
	return nil
}

func skip(args []string, n int) []string {
	if n >= len(args) {
		return nil
	}
	return args[n:]
}

// shellCommandString returns the command string of `sh [options] -c
// string`: -c (alone or among other short options) makes the first operand
// the commands; -o and -O take a value.
func shellCommandString(args []string) (string, bool) {
	c := false
	for i := 0; i < len(args); i++ {
		a := args[i]
		switch {
		case a == "--":
			if c && i+1 < len(args) {
				return args[i+1], true
			}
			return "", false
		case a == "-o" || a == "+o" || a == "-O" || a == "+O":
			i++
		case strings.HasPrefix(a, "--"):
		case len(a) > 1 && (a[0] == '-' || a[0] == '+'):
			c = c || a[0] == '-' && strings.ContainsRune(a, 'c')
		case c:
			return a, true
		default:
			return "", false // a script file
		}
	}
	return "", false
}

// scriptInstalls checks every simple command of a shell string: the one
// command ParseCommand reads, or each command of the shell syntax tree
// (lists, pipelines, subshells, substitutions), its words that are not
// plain literals opaque.
func scriptInstalls(script string, depth int) (installing, bool) {
	if argv, err := proc.ParseCommand(script); err == nil {
		return installsAt(argv, depth)
	}
	f, err := syntax.NewParser(syntax.Variant(syntax.LangBash)).Parse(strings.NewReader(script), "")
	if err != nil {
		return installing{}, false
	}
	var found installing
	ok := false
	syntax.Walk(f, func(n syntax.Node) bool {
		if ok {
			return false
		}
		if call, isCall := n.(*syntax.CallExpr); isCall && len(call.Args) > 0 {
			argv := make([]string, len(call.Args))
			for i, w := range call.Args {
				argv[i] = literal(w)
			}
			found, ok = installsAt(argv, depth)
		}
		return !ok
	})
	return found, ok
}

// literal is the value of a word made only of plain text and quotes
// without escapes or expansions, else opaque.
func literal(w *syntax.Word) string {
	var b strings.Builder
	plain := func(l *syntax.Lit) bool {
		if strings.ContainsRune(l.Value, '\\') {
			return false
		}
		b.WriteString(l.Value)
		return true
	}
	for _, part := range w.Parts {
		switch p := part.(type) {
		case *syntax.Lit:
			if !plain(p) {
				return opaque
			}
		case *syntax.SglQuoted:
			if p.Dollar {
				return opaque
			}
			b.WriteString(p.Value)
		case *syntax.DblQuoted:
			if p.Dollar {
				return opaque
			}
			for _, q := range p.Parts {
				l, isLit := q.(*syntax.Lit)
				if !isLit || !plain(l) {
					return opaque
				}
			}
		default:
			return opaque
		}
	}
	if b.Len() == 0 || strings.ContainsRune(b.String(), 0) {
		return opaque
	}
	return b.String()
}
