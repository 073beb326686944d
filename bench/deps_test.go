//go:build unix

package bench

import (
	"context"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/factory-harness/factory/internal/deps"
	"github.com/factory-harness/factory/internal/deps/registrytest"
	"github.com/factory-harness/factory/internal/lang"
	"github.com/factory-harness/factory/internal/proc/sandbox"
)

// The dependency step's targets (issue 36), paired in one run against the same package manager
// run directly against the same local registry (run with bench/deps.sh):
//
//   - BenchmarkDepsCold: an empty dependency cache: the step through the gateway against the
//     commands the driver runs, pointed at the registry itself, each with an empty cache of its own.
//   - BenchmarkDepsSkip: nothing changed since the last step: Step finds the stamp and runs nothing.
//   - BenchmarkDepsWarm: a reinstall from a warm cache with the registry closed: the step against
//     `npm ci --offline` and `GOPROXY=off go mod download all` (+ the driver's go list).
//
// Each iteration of the cold and warm benchmarks runs every side once, in an order rotated by the
// iteration: "direct" (the package manager alone), "step" (deps.Step unconfined, --sandbox off) and
// "boxed" (deps.Step confined as factory confines it, when the machine has user namespaces). The
// custom metrics are medians over the iterations: wall and CPU (user + system of this process, which
// serves the registry and runs the gateway, and of its children) milliseconds of each side, and the
// median of the per-iteration ratios side/direct. ns/op counts every side and the setup: ignore it.

// depsNPMPackages are the npm registry's packages: 40 packages p00…p39, each in versions 1.0.0,
// 1.1.0, 1.2.0 and 2.0.0 (a packument of four versions), p<i> depending on p<2i+1> and p<2i+2>
// (^1.0.0), each tarball seven files (~12 KB before compression).
func depsNPMPackages() []registrytest.NPMPackage {
	const n = 40
	var pkgs []registrytest.NPMPackage
	for i := range n {
		name := fmt.Sprintf("p%02d", i)
		deps := map[string]string{}
		for _, c := range []int{2*i + 1, 2*i + 2} {
			if c < n {
				deps[fmt.Sprintf("p%02d", c)] = "^1.0.0"
			}
		}
		for _, v := range []string{"1.0.0", "1.1.0", "1.2.0", "2.0.0"} {
			files := map[string]string{"README.md": text(name+v+"readme", 1500)}
			for f := range 4 {
				files[fmt.Sprintf("lib/part%d.js", f)] = "module.exports = " + fmt.Sprintf("%q", text(fmt.Sprint(name, v, f), 2500)) + ";\n"
			}
			pkgs = append(pkgs, registrytest.NPMPackage{Name: name, Version: v, Dependencies: deps, Files: files})
		}
	}
	return pkgs
}

// depsNPMProject depends on p00 (hence on all 40), on p03 ^1.1.0, and on p10 ^2.0.0, which p04's
// ^1.0.0 then gets nested under it: 41 packages installed.
var depsNPMProject = map[string]string{
	"package.json": `{"name": "app", "version": "1.0.0", "private": true,
  "dependencies": {"p00": "^1.0.0", "p03": "^1.1.0", "p10": "^2.0.0"}}
`,
	"index.js": "console.log(require('p00'));\n",
}

// depsGoModules are the module proxy's modules: 15 modules example.com/m00…m14 in v1.0.0 and
// v1.1.0, m<i> requiring and importing m<2i+1> and m<2i+2>, each a package of three files.
func depsGoModules() []registrytest.GoModule {
	const n = 15
	var mods []registrytest.GoModule
	for i := range n {
		path := fmt.Sprintf("example.com/m%02d", i)
		var req, imports, calls []string
		for _, c := range []int{2*i + 1, 2*i + 2} {
			if c < n {
				req = append(req, fmt.Sprintf("require example.com/m%02d v1.0.0\n", c))
				imports = append(imports, fmt.Sprintf("\t\"example.com/m%02d\"\n", c))
				calls = append(calls, fmt.Sprintf(" + m%02d.F()", c))
			}
		}
		for _, v := range []string{"v1.0.0", "v1.1.0"} {
			src := fmt.Sprintf("package m%02d\n\nimport (\n%s)\n\nfunc F() string { return %q%s }\n", i, strings.Join(imports, ""), path+"@"+v, strings.Join(calls, ""))
			if len(imports) == 0 {
				src = fmt.Sprintf("package m%02d\n\nfunc F() string { return %q }\n", i, path+"@"+v)
			}
			mods = append(mods, registrytest.GoModule{
				Path: path, Version: v,
				GoMod: "module " + path + "\n\ngo 1.21\n\n" + strings.Join(req, ""),
				Files: map[string]string{
					fmt.Sprintf("m%02d.go", i):      src,
					"data.go":                       fmt.Sprintf("package m%02d\n\nconst Data = %q\n", i, text(path+v, 4000)),
					fmt.Sprintf("m%02d_test.go", i): fmt.Sprintf("package m%02d\n\nimport \"testing\"\n\nfunc TestF(t *testing.T) { _ = F() }\n", i),
				},
			})
		}
	}
	return mods
}

// depsGoProject requires m00 and m05 at v1.1.0, hence every module.
var depsGoProject = map[string]string{
	"go.mod":       "module example.com/app\n\ngo 1.21\n\nrequire (\n\texample.com/m00 v1.1.0\n\texample.com/m05 v1.1.0\n)\n",
	"main.go":      "package main\n\nimport (\n\t\"fmt\"\n\n\t\"example.com/m00\"\n\t\"example.com/m05\"\n)\n\nfunc main() { fmt.Println(m00.F(), m05.F()) }\n",
	"main_test.go": "package main\n\nimport \"testing\"\n\nfunc TestMain(t *testing.T) { main() }\n",
}

// text is n bytes of deterministic words from seed, so that tarballs and zips compress as code does.
func text(seed string, n int) string {
	words := []string{"const", "value", "return", "function", "module", "export", "string", "number", "if", "else", "for", "while", "object", "array", "length", "index"}
	var h uint32 = 2166136261
	for _, c := range []byte(seed) {
		h = (h ^ uint32(c)) * 16777619
	}
	var b strings.Builder
	for b.Len() < n {
		h = h*1664525 + 1013904223
		b.WriteString(words[h>>28])
		if h&0x700 == 0 {
			b.WriteString(fmt.Sprintf("%d", h>>20))
		}
		b.WriteByte(" \n"[(h>>8)&1])
	}
	return b.String()[:n]
}

// depsBench is one benchmark's scratch: work trees and caches (emptied before each use) and the
// confinement policies prepared for them (one per work tree and dependency cache).
type depsBench struct {
	b   *testing.B
	dir string
	env []string
	// npmRegistry and goProxy are the registries' URLs, "" when not started.
	npmRegistry, goProxy string
	boxes                map[[2]string]*sandbox.Policy
	n                    int
}

func newDepsBench(b *testing.B) *depsBench {
	b.Helper()
	for _, tool := range []string{"go", "npm"} {
		if _, err := exec.LookPath(tool); err != nil {
			b.Skipf("%s is not installed", tool)
		}
	}
	// The test proxy has no checksum database; the step passes these from the environment.
	b.Setenv("GONOSUMDB", "example.com")
	b.Setenv("GOPRIVATE", "")
	b.Setenv("GOFLAGS", "")
	dir := b.TempDir()
	// A user module cache with a download cache: the Go step reads it first (a file:// proxy), as it
	// does on a machine that has ever built Go. It has none of the benchmark's modules.
	userMod := filepath.Join(scratch, "usermod")
	if err := os.MkdirAll(filepath.Join(userMod, "cache", "download"), 0o755); err != nil {
		b.Fatal(err)
	}
	b.Setenv("GOMODCACHE", userMod)
	// The build cache both sides share (go list reads it): made now, so that the sandbox shows it.
	out, err := exec.Command("go", "env", "GOCACHE").Output()
	if err != nil {
		b.Fatal(err)
	}
	if err := os.MkdirAll(strings.TrimSpace(string(out)), 0o755); err != nil {
		b.Fatal(err)
	}
	return &depsBench{b: b, dir: dir, env: os.Environ(), boxes: map[[2]string]*sandbox.Policy{}}
}

// path is a directory of the scratch, made empty (made if missing; emptied but kept if there:
// a policy names it).
func (d *depsBench) path(name string) string {
	d.b.Helper()
	p := filepath.Join(d.dir, name)
	if err := os.MkdirAll(p, 0o755); err != nil {
		d.b.Fatal(err)
	}
	entries, err := os.ReadDir(p)
	if err != nil {
		d.b.Fatal(err)
	}
	for _, e := range entries {
		if err := removeAll(filepath.Join(p, e.Name())); err != nil {
			d.b.Fatal(err)
		}
	}
	return p
}

// removeAll removes path, making the Go module cache's read-only directories writable first.
func removeAll(path string) error {
	if err := os.RemoveAll(path); err == nil {
		return nil
	}
	_ = filepath.WalkDir(path, func(p string, e fs.DirEntry, err error) error {
		if err == nil && e.IsDir() {
			_ = os.Chmod(p, 0o755)
		}
		return nil
	})
	return os.RemoveAll(path)
}

// tree empties the work tree name and writes files into it.
func (d *depsBench) tree(name string, files map[string]string) string {
	d.b.Helper()
	root := d.path(name)
	for rel, body := range files {
		p := filepath.Join(root, filepath.FromSlash(rel))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			d.b.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			d.b.Fatal(err)
		}
	}
	return root
}

// box is the step's confinement for root and cache as factory prepares it (internal/factory's
// prepareSandbox, the CLI's caches and settings from lang.MachineToolchains), or nil without user
// namespaces.
func (d *depsBench) box(root, cache string) *sandbox.Policy {
	d.b.Helper()
	if !sandbox.Detect().UserNamespaces {
		return nil
	}
	key := [2]string{root, cache}
	if p := d.boxes[key]; p != nil {
		return p
	}
	tc := lang.MachineToolchains()
	req, err := deps.StepRequest(sandbox.Request{Mode: sandbox.ModeRequired, WorkTree: root, Caches: tc.Caches, Env: tc.Env}, cache)
	if err != nil {
		d.b.Fatal(err)
	}
	p, err := sandbox.Prepare(req)
	if err != nil {
		d.b.Fatal(err)
	}
	d.boxes[key] = p
	return p
}

func (d *depsBench) opts(cache string) deps.Options {
	regs := map[deps.Ecosystem]string{}
	if d.npmRegistry != "" {
		regs[deps.NPM] = d.npmRegistry
	}
	if d.goProxy != "" {
		regs[deps.Go] = d.goProxy + "/"
	}
	return deps.Options{Registries: regs, Cache: cache}
}

// step runs deps.Step on root with the dependency cache cache, and checks that eco was installed
// (not skipped) without error. It returns the outcome. The logs (deps.jsonl and the commands'
// output, a few KB) stay in the scratch, as they stay in an attempt's directory.
func (d *depsBench) step(root, cache string, box *sandbox.Policy, eco deps.Ecosystem) deps.Outcome {
	d.b.Helper()
	d.n++
	logs := d.path(fmt.Sprintf("logs-%d", d.n))
	rep, err := deps.Step(context.Background(), deps.Spec{Root: root, Opts: d.opts(cache), Sandbox: box, Env: d.env, Dir: logs})
	if err != nil {
		d.b.Fatalf("step: %v (%+v)", err, rep.Outcomes)
	}
	for _, o := range rep.Outcomes {
		if o.Ecosystem == eco {
			if o.Skipped {
				d.b.Fatalf("step: %s skipped, want an install", eco)
			}
			return o
		}
	}
	d.b.Fatalf("step: no %s outcome in %+v", eco, rep.Outcomes)
	return deps.Outcome{}
}

// run runs argv in dir with env over the benchmark's environment.
func (d *depsBench) run(dir string, env []string, argv ...string) {
	d.b.Helper()
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Dir, cmd.Env = dir, append(slices.Clone(d.env), env...)
	if out, err := cmd.CombinedOutput(); err != nil {
		d.b.Fatalf("%s: %v\n%s", strings.Join(argv, " "), err, out)
	}
}

// npmFlags are the flags the npm driver gives npm (internal/deps/npm.go), for registry and cache.
func (d *depsBench) npmFlags(registry, cache string) []string {
	userrc, globalrc := filepath.Join(d.dir, "user.npmrc"), filepath.Join(d.dir, "global.npmrc")
	for _, rc := range []string{userrc, globalrc} {
		if err := os.WriteFile(rc, nil, 0o644); err != nil {
			d.b.Fatal(err)
		}
	}
	return []string{
		"--registry=" + registry, "--replace-registry-host=npmjs",
		"--proxy=null", "--https-proxy=null", "--noproxy=127.0.0.1",
		"--userconfig=" + userrc, "--globalconfig=" + globalrc, "--cache=" + cache,
		"--ignore-scripts", "--package-lock", "--include=dev", "--allow-git=none", "--allow-remote=none",
		"--no-audit", "--no-fund", "--no-update-notifier", "--progress=false",
		"--fetch-retry-mintimeout=1000", "--fetch-retry-maxtimeout=5000",
	}
}

// npmDirect runs the npm driver's commands directly against registry with cache: the lock resolved,
// then npm ci.
func (d *depsBench) npmDirect(root, registry, cache string) {
	d.b.Helper()
	flags := d.npmFlags(registry, cache)
	d.run(root, nil, append([]string{"npm", "install", "--package-lock-only"}, flags...)...)
	d.run(root, nil, append([]string{"npm", "ci"}, flags...)...)
}

// goEnv is the Go driver's environment (internal/deps/golang.go) for proxy and module cache.
func goEnv(proxy, modcache string) []string {
	return []string{"GOMODCACHE=" + modcache, "GOPROXY=" + proxy, "GOFLAGS=-mod=mod", "GOENV=off",
		"GOTOOLCHAIN=local", "GOWORK=off", "GOTELEMETRY=off"}
}

// goDirect runs the Go driver's commands directly with proxy and modcache.
func (d *depsBench) goDirect(root, proxy, modcache string) {
	d.b.Helper()
	env := goEnv(proxy, modcache)
	d.run(root, env, "go", "mod", "download", "all")
	d.run(root, env, "go", "list", "-deps", "-test", "-f", "{{if .Module}}{{.Module.Path}}{{end}}", "./...")
}

// side is one way of doing an iteration's work: setup off the clock, then the timed work.
type side struct {
	name  string
	setup func()
	work  func()
}

// sample is one timed run: wall and CPU milliseconds.
type sample struct{ wall, cpu float64 }

// cpuMS is the CPU time of this process and of its waited-for children so far, in ms.
func cpuMS() float64 {
	var self, children syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &self)
	_ = syscall.Getrusage(syscall.RUSAGE_CHILDREN, &children)
	ms := func(t syscall.Timeval) float64 { return float64(t.Sec)*1e3 + float64(t.Usec)/1e3 }
	return ms(self.Utime) + ms(self.Stime) + ms(children.Utime) + ms(children.Stime)
}

// paired runs every side b.N times, in an order rotated by the iteration, and reports each side's
// median wall and CPU ms and the median of its per-iteration ratios to the first side's.
func paired(b *testing.B, sides []side) {
	b.Helper()
	got := make([][]sample, len(sides))
	for i := range b.N {
		for k := range sides {
			j := (i + k) % len(sides)
			s := sides[j]
			if s.setup != nil {
				s.setup()
			}
			c0, t0 := cpuMS(), time.Now()
			s.work()
			wall := float64(time.Since(t0).Microseconds()) / 1e3
			got[j] = append(got[j], sample{wall, cpuMS() - c0})
		}
	}
	base := got[0]
	for j, s := range sides {
		wall := median(got[j], func(x sample) float64 { return x.wall })
		cpu := median(got[j], func(x sample) float64 { return x.cpu })
		b.ReportMetric(wall, s.name+"-ms")
		b.ReportMetric(cpu, s.name+"-cpu-ms")
		line := fmt.Sprintf("%-7s wall %8.1f ms  cpu %8.1f ms", s.name, wall, cpu)
		if j > 0 {
			var rw, rc []float64
			for i := range got[j] {
				rw = append(rw, got[j][i].wall/base[i].wall)
				rc = append(rc, got[j][i].cpu/base[i].cpu)
			}
			mw, mc := median(rw, ident), median(rc, ident)
			b.ReportMetric(mw, s.name+"/"+sides[0].name)
			b.ReportMetric(mc, s.name+"/"+sides[0].name+"-cpu")
			line += fmt.Sprintf("  %s/%s wall %.2fx (%.2f..%.2f)  cpu %.2fx", s.name, sides[0].name, mw, slices.Min(rw), slices.Max(rw), mc)
		}
		if b.N > 1 {
			var raw []string
			for _, x := range got[j] {
				raw = append(raw, fmt.Sprintf("%.0f", x.wall))
			}
			b.Logf("%s  [%s]", line, strings.Join(raw, " "))
		}
	}
}

func ident(x float64) float64 { return x }

func median[T any](xs []T, f func(T) float64) float64 {
	v := make([]float64, len(xs))
	for i, x := range xs {
		v[i] = f(x)
	}
	slices.Sort(v)
	if len(v) == 0 {
		return 0
	}
	if len(v)%2 == 1 {
		return v[len(v)/2]
	}
	return (v[len(v)/2-1] + v[len(v)/2]) / 2
}

// coldSides are the direct, step and boxed sides of a cold install: each with its own work tree
// and a new, empty dependency cache, at a path of its own each time: the Go build cache, which
// every side shares, keeps an index of each module directory of a module cache by its path (made
// by go list, and kept by the sides that write the build cache: the boxed step's writes to it are
// thrown away), which a cache at a path seen before would find. The boxed side's policy is
// prepared off the clock, as factory prepares it once per run.
func (d *depsBench) coldSides(eco deps.Ecosystem, project map[string]string, direct func(root, cache string)) []side {
	roots, caches, boxes, runs := map[string]string{}, map[string]string{}, map[string]*sandbox.Policy{}, map[string]int{}
	sides := []side{{name: "direct"}, {name: "step"}}
	if sandbox.Detect().UserNamespaces {
		sides = append(sides, side{name: "boxed"})
	} else {
		d.b.Log("no user namespaces: the confined step is not measured")
	}
	for i := range sides {
		s := &sides[i]
		name := s.name
		s.setup = func() {
			if old := caches[name]; old != "" {
				if err := removeAll(old); err != nil {
					d.b.Fatal(err)
				}
				delete(d.boxes, [2]string{roots[name], old})
			}
			runs[name]++
			roots[name], caches[name] = d.tree("root-"+name, project), d.path(fmt.Sprintf("cache-%s-%d", name, runs[name]))
			if name == "boxed" {
				boxes[name] = d.box(roots[name], caches[name])
			}
		}
		switch name {
		case "direct":
			s.work = func() { direct(roots[name], caches[name]) }
		case "step":
			s.work = func() { d.step(roots[name], caches[name], nil, eco) }
		case "boxed":
			s.work = func() { d.step(roots[name], caches[name], boxes[name], eco) }
		}
	}
	return sides
}

// BenchmarkDepsCold: a step with an empty dependency cache, through the gateway, against the same
// commands run directly against the registry with an empty cache.
func BenchmarkDepsCold(b *testing.B) {
	b.Run("npm", func(b *testing.B) {
		d := newDepsBench(b)
		d.npmRegistry = registrytest.NPM(b, depsNPMPackages()...).URL
		paired(b, d.coldSides(deps.NPM, depsNPMProject, func(root, cache string) {
			d.npmDirect(root, d.npmRegistry, cache)
		}))
	})
	b.Run("go", func(b *testing.B) {
		d := newDepsBench(b)
		d.goProxy = registrytest.NewGoProxy(b, depsGoModules()...).URL
		paired(b, d.coldSides(deps.Go, depsGoProject, func(root, cache string) {
			d.goDirect(root, d.goProxy, filepath.Join(cache, "mod"))
		}))
	})
}

// installed runs one step for project (registries up) in a scratch tree and returns the tree's
// files afterwards that project names or the step wrote as lockfiles: the state a later step starts
// from.
func (d *depsBench) installed(project map[string]string, eco deps.Ecosystem, cache string) map[string]string {
	d.b.Helper()
	root := d.tree("root-first", project)
	out := d.step(root, cache, nil, eco)
	files := map[string]string{}
	for _, name := range append(slices.Collect(maps.Keys(project)), out.Lockfiles...) {
		b, err := os.ReadFile(filepath.Join(root, name))
		if err != nil {
			d.b.Fatal(err)
		}
		files[name] = string(b)
	}
	return files
}

// BenchmarkDepsSkip: a step with nothing changed since the last one: it must skip, in ≤ 50 ms.
// Each iteration times 20 steps; the metrics are the median and the largest per step.
func BenchmarkDepsSkip(b *testing.B) {
	for _, tc := range []struct {
		name string
		npm  bool
		goes bool
	}{{"npm", true, false}, {"go", false, true}, {"both", true, true}} {
		b.Run(tc.name, func(b *testing.B) {
			d := newDepsBench(b)
			project := map[string]string{}
			if tc.npm {
				d.npmRegistry = registrytest.NPM(b, depsNPMPackages()...).URL
				maps.Copy(project, depsNPMProject)
			}
			if tc.goes {
				d.goProxy = registrytest.NewGoProxy(b, depsGoModules()...).URL
				maps.Copy(project, depsGoProject)
			}
			root, cache := d.tree("root", project), d.path("cache")
			// The first step installs; every later one must skip.
			if _, err := deps.Step(context.Background(), deps.Spec{Root: root, Opts: d.opts(cache), Env: d.env, Dir: d.path("logs")}); err != nil {
				b.Fatal(err)
			}
			logs := d.path("logs")
			var per []float64
			b.ResetTimer()
			for range b.N {
				for range 20 {
					t0 := time.Now()
					rep, err := deps.Step(context.Background(), deps.Spec{Root: root, Opts: d.opts(cache), Env: d.env, Dir: logs})
					per = append(per, float64(time.Since(t0).Microseconds())/1e3)
					if err != nil || rep.Ran || len(rep.Outcomes) == 0 {
						b.Fatalf("step: %+v, %v: want every ecosystem skipped", rep.Outcomes, err)
					}
					for _, o := range rep.Outcomes {
						if !o.Skipped {
							b.Fatalf("step: %+v: want skipped", o)
						}
					}
				}
			}
			b.StopTimer()
			b.ReportMetric(median(per, ident), "skip-ms")
			b.ReportMetric(slices.Max(per), "max-skip-ms")
		})
	}
}

// BenchmarkDepsWarm: a reinstall from a warm cache with the registry closed (a fresh work tree
// with the lockfiles the first step wrote, node_modules gone; for Go the cache's stamps removed),
// against npm ci --offline, and the Go driver's commands with GOPROXY=off, from warm caches of
// their own. For npm, "relock" is the step without the cache's record that the inputs are those a
// step left, as the step was before it kept one: the lock-only run, then npm ci.
func BenchmarkDepsWarm(b *testing.B) {
	b.Run("npm", func(b *testing.B) {
		d := newDepsBench(b)
		reg := registrytest.NPM(b, depsNPMPackages()...)
		d.npmRegistry = reg.URL
		cacheStep, cacheBox, cacheDirect := d.path("cache-step"), d.path("cache-boxed"), d.path("cache-direct")
		project := d.installed(depsNPMProject, deps.NPM, cacheStep)
		if len(project) != len(depsNPMProject)+1 {
			b.Fatalf("first step wrote %d files, want package-lock.json", len(project)-len(depsNPMProject))
		}
		d.npmDirect(d.tree("root-first", depsNPMProject), reg.URL, cacheDirect)
		sides := []side{
			{name: "direct", work: func() {
				d.run(filepath.Join(d.dir, "root-direct"), nil, append([]string{"npm", "ci", "--offline"}, d.npmFlags(reg.URL, cacheDirect)...)...)
			}},
			{name: "step", work: func() { d.warmStep(filepath.Join(d.dir, "root-step"), cacheStep, nil, deps.NPM) }},
			// The step as it was before the cache recorded the inputs steps left: the lock-only
			// run every time, then npm ci (the record removed before each run, off the clock).
			{name: "relock", work: func() { d.warmStep(filepath.Join(d.dir, "root-relock"), cacheStep, nil, deps.NPM) }},
		}
		if sandbox.Detect().UserNamespaces {
			box := d.box(d.path("root-boxed"), cacheBox)
			d.step(d.tree("root-boxed", depsNPMProject), cacheBox, box, deps.NPM) // warms the boxed cache
			sides = append(sides, side{name: "boxed", work: func() { d.warmStep(filepath.Join(d.dir, "root-boxed"), cacheBox, box, deps.NPM) }})
		}
		for i := range sides {
			name := sides[i].name
			sides[i].setup = func() {
				d.tree("root-"+name, project)
				if name == "relock" {
					if err := os.RemoveAll(filepath.Join(cacheStep, "npm", "resolved")); err != nil {
						b.Fatal(err)
					}
				}
			}
		}
		reg.Close()
		paired(b, sides)
	})
	b.Run("go", func(b *testing.B) {
		d := newDepsBench(b)
		proxy := registrytest.NewGoProxy(b, depsGoModules()...)
		d.goProxy = proxy.URL
		cacheStep, cacheBox, cacheDirect := d.path("cache-step"), d.path("cache-boxed"), d.path("cache-direct")
		project := d.installed(depsGoProject, deps.Go, cacheStep)
		d.goDirect(d.tree("root-first", depsGoProject), proxy.URL, filepath.Join(cacheDirect, "mod"))
		sides := []side{
			{name: "direct", work: func() { d.goDirect(filepath.Join(d.dir, "root-direct"), "off", filepath.Join(cacheDirect, "mod")) }},
			{name: "step", work: func() { d.warmStep(filepath.Join(d.dir, "root-step"), cacheStep, nil, deps.Go) }},
		}
		if sandbox.Detect().UserNamespaces {
			box := d.box(d.path("root-boxed"), cacheBox)
			d.step(d.tree("root-boxed", depsGoProject), cacheBox, box, deps.Go)
			sides = append(sides, side{name: "boxed", work: func() { d.warmStep(filepath.Join(d.dir, "root-boxed"), cacheBox, box, deps.Go) }})
		}
		for i := range sides {
			name := sides[i].name
			sides[i].setup = func() {
				d.tree("root-"+name, project)
				// Go's stamps are in the cache: without them the step installs again.
				if err := os.RemoveAll(filepath.Join(d.dir, "cache-"+name, "go", "stamps")); err != nil {
					b.Fatal(err)
				}
			}
		}
		proxy.Close()
		paired(b, sides)
	})
}

// warmStep is a step that must install without a single request reaching the (closed) registry.
func (d *depsBench) warmStep(root, cache string, box *sandbox.Policy, eco deps.Ecosystem) {
	d.b.Helper()
	if out := d.step(root, cache, box, eco); out.Requests != 0 {
		d.b.Fatalf("warm %s step made %d requests, want none", eco, out.Requests)
	}
}
