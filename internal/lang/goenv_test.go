package lang

import (
	"encoding/json"
	"io"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"testing"
	"time"
)

// goMachine is a machine for deriveGoEnv: under D, a home with the user's go env file, XDG
// directories, an explicit GOENV file, and go binaries on PATH: bin/go links to the real go, A and
// B are copies of the real go in GOROOTs of their own whose go.env sets defaults (binB links to
// B's), C's go sits in GOROOT/bin/GOOS_GOARCH, and gr/go is a GOROOT holding no go.
type goMachine struct{ dir, root string }

// goEnvFileLines are the user's go env file's lines a configuration draws from: settings,
// relative and empty values, and lines go skips.
var goEnvFileLines = []string{"GOPATH=/fgp", "GOPATH=relfgp", "GOPATH=", "GOPATH=/fgp1:/fgp2", "GOMODCACHE=/fmc",
	"GOMODCACHE=", "GOMODCACHE=relfmc", "GOCACHE=/fgc", "GOCACHE=off", "GOCACHE=relfgc", "GOCACHE=", "GOROOT=$D/B",
	"GOROOT=$D/none", "# GOCACHE=/comment", "gomodcache=/lower", "=x", "GOCACHE =/space", "GOENV=/ignored", "GOPATH=~/fgp"}

func newGoMachine(t *testing.T) goMachine {
	t.Helper()
	goBin, err := exec.LookPath("go")
	if err != nil {
		t.Skip("go is not installed")
	}
	goBin, err = filepath.EvalSymlinks(goBin)
	if err != nil {
		t.Fatal(err)
	}
	m := goMachine{dir: t.TempDir(), root: installedGOROOT(goBin)}
	if m.root == "" {
		t.Skipf("go %s sits in no GOROOT", goBin)
	}
	for _, d := range []string{"h/.config/go", "xc/go", "xk", "cwd", "bin", "binB", "h/go", "gr/go/pkg/tool"} {
		mkdir(t, filepath.Join(m.dir, d))
	}
	for root, goEnv := range map[string]string{
		"A": "# defaults\nGOPATH=/ga1:/ga2\nGOPATH=/ignored\nGOCACHE=/gacache\nGOMODCACHE=\n",
		"B": "GOMODCACHE=/gbmod\ngocache=/lower\nGOCACHE=relgb\n",
		"C": "",
	} {
		bin := filepath.Join(m.dir, root, "bin")
		if root == "C" {
			bin = filepath.Join(bin, runtime.GOOS+"_"+runtime.GOARCH)
		}
		mkdir(t, bin)
		mkdir(t, filepath.Join(m.dir, root, "pkg/tool"))
		copyFile(t, goBin, filepath.Join(bin, "go"))
		write(t, filepath.Join(m.dir, root, "go.env"), goEnv)
	}
	symlink(t, goBin, filepath.Join(m.dir, "bin/go"))
	symlink(t, filepath.Join(m.dir, "B/bin/go"), filepath.Join(m.dir, "binB/go"))
	return m
}

// configure writes the user's go env file everywhere a configuration may look for it and
// returns env with $D, $R (the real GOROOT) and $REL (D relative to the working directory)
// expanded.
func (m goMachine) configure(t *testing.T, env map[string]string, file string) map[string]string {
	t.Helper()
	wd, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	rel, err := filepath.Rel(wd, m.dir)
	if err != nil {
		t.Fatal(err)
	}
	expand := strings.NewReplacer("$REL", rel, "$D", m.dir, "$R", m.root).Replace
	for _, p := range []string{"h/.config/go/env", "xc/go/env", "genv"} {
		write(t, filepath.Join(m.dir, p), expand(file))
	}
	out := map[string]string{}
	for k, v := range env {
		out[k] = expand(v)
	}
	return out
}

// goEnvCases are tabled configurations: each what deriveGoEnv answers, which go confirms.
var goEnvCases = []struct {
	name string
	env  map[string]string
	file string // the user's go env file
	want goEnv  // with $D
	v    goVerdict
}{
	{"defaults under HOME", map[string]string{"PATH": "$D/bin", "HOME": "$D/h"}, "",
		goEnv{"$D/h/.cache/go-build", "$D/h/go/pkg/mod", "$D/h/.config/go/env"}, goDerived},
	{"XDG directories", map[string]string{"PATH": "$D/bin", "HOME": "$D/h", "XDG_CONFIG_HOME": "$D/xc", "XDG_CACHE_HOME": "$D/xk"}, "GOPATH=/fgp\n",
		goEnv{"$D/xk/go-build", "/fgp/pkg/mod", "$D/xc/go/env"}, goDerived},
	{"relative XDG directories: no cache, no env file", map[string]string{"PATH": "$D/bin", "HOME": "$D/h", "XDG_CONFIG_HOME": "xc", "XDG_CACHE_HOME": "xk"}, "GOPATH=/fgp\n",
		goEnv{"off", "$D/h/go/pkg/mod", ""}, goDerived},
	{"the env file, the last line winning", map[string]string{"PATH": "$D/bin", "HOME": "$D/h"}, "GOCACHE=/fgc\nGOPATH=/fgp1:/fgp2\nGOPATH=/fgp\ngomodcache=/lower\n",
		goEnv{"/fgc", "/fgp/pkg/mod", "$D/h/.config/go/env"}, goDerived},
	{"the environment over the env file", map[string]string{"PATH": "$D/bin", "HOME": "$D/h", "GOCACHE": "/gc", "GOMODCACHE": "/mc"}, "GOCACHE=/fgc\nGOMODCACHE=/fmc\n",
		goEnv{"/gc", "/mc", "$D/h/.config/go/env"}, goDerived},
	{"an empty variable is unset", map[string]string{"PATH": "$D/bin", "HOME": "$D/h", "GOCACHE": ""}, "GOCACHE=/fgc\n",
		goEnv{"/fgc", "$D/h/go/pkg/mod", "$D/h/.config/go/env"}, goDerived},
	{"GOENV names the file", map[string]string{"PATH": "$D/bin", "HOME": "$D/h", "GOENV": "$D/genv"}, "GOMODCACHE=/fmc\n",
		goEnv{"$D/h/.cache/go-build", "/fmc", "$D/genv"}, goDerived},
	{"GOENV=off", map[string]string{"PATH": "$D/bin", "HOME": "$D/h", "GOENV": "off"}, "GOMODCACHE=/fmc\n",
		goEnv{"$D/h/.cache/go-build", "$D/h/go/pkg/mod", ""}, goDerived},
	{"GOPATH's first entry", map[string]string{"PATH": "$D/bin", "HOME": "$D/h", "GOPATH": ":/gp"}, "",
		goEnv{"$D/h/.cache/go-build", "", "$D/h/.config/go/env"}, goDerived},
	{"relative GOCACHE is off", map[string]string{"PATH": "$D/bin", "HOME": "$D/h", "GOCACHE": "gc", "GOMODCACHE": "mc"}, "",
		goEnv{"off", "mc", "$D/h/.config/go/env"}, goDerived},
	{"no HOME", map[string]string{"PATH": "$D/bin"}, "",
		goEnv{"off", "", ""}, goDerived},
	{"relative HOME", map[string]string{"PATH": "$D/bin", "HOME": "h", "XDG_CONFIG_HOME": "$D/xc"}, "",
		goEnv{"h/.cache/go-build", "h/go/pkg/mod", "$D/xc/go/env"}, goDerived},
	{"go.env's defaults, the first line winning", map[string]string{"PATH": "$D/A/bin", "HOME": "$D/h"}, "",
		goEnv{"/gacache", "/ga1/pkg/mod", "$D/h/.config/go/env"}, goDerived},
	{"the env file over go.env", map[string]string{"PATH": "$D/A/bin", "HOME": "$D/h"}, "GOPATH=\nGOCACHE=/fgc\n",
		goEnv{"/fgc", "$D/h/go/pkg/mod", "$D/h/.config/go/env"}, goDerived},
	{"go linked from outside its GOROOT", map[string]string{"PATH": "$D/binB", "HOME": "$D/h"}, "",
		goEnv{"off", "/gbmod", "$D/h/.config/go/env"}, goDerived},
	{"go in GOROOT/bin/GOOS_GOARCH", map[string]string{"PATH": "$D/C/bin/" + runtime.GOOS + "_" + runtime.GOARCH, "HOME": "$D/h"}, "",
		goEnv{"$D/h/.cache/go-build", "$D/h/go/pkg/mod", "$D/h/.config/go/env"}, goDerived},
	{"GOROOT from the environment", map[string]string{"PATH": "$D/bin", "HOME": "$D/h", "GOROOT": "$D/A/"}, "",
		goEnv{"/gacache", "/ga1/pkg/mod", "$D/h/.config/go/env"}, goDerived},
	{"GOROOT from the env file, over the environment's", map[string]string{"PATH": "$D/bin", "HOME": "$D/h", "GOROOT": "$D/A"}, "GOROOT=$D/B\n",
		goEnv{"off", "/gbmod", "$D/h/.config/go/env"}, goDerived},
	{"GOROOT is $HOME/go: no GOPATH", map[string]string{"PATH": "$D/bin", "HOME": "$D/h", "GOROOT": "$D/h/go"}, "",
		goEnv{"$D/h/.cache/go-build", "", "$D/h/.config/go/env"}, goDerived},
	{"$HOME/go is a GOROOT: go knows whether it is its own", map[string]string{"PATH": "$D/bin", "HOME": "$D/gr"}, "", goEnv{}, goAsk},
	{"GOROOT is no directory", map[string]string{"PATH": "$D/bin", "HOME": "$D/h", "GOROOT": "$D/none"}, "", goEnv{}, goAbsent},
	{"GOPATH starts with ~", map[string]string{"PATH": "$D/bin", "HOME": "$D/h"}, "GOPATH=~/fgp\n", goEnv{}, goAbsent},
	{"HOME starts with ~", map[string]string{"PATH": "$D/bin", "HOME": "~h"}, "", goEnv{}, goAbsent},
	{"relative GOPATH", map[string]string{"PATH": "$D/bin", "HOME": "$D/h", "GOPATH": "/gp:gp"}, "", goEnv{}, goAbsent},
	{"no go on PATH", map[string]string{"PATH": "$D/h:/nonexistent", "HOME": "$D/h"}, "", goEnv{}, goAbsent},
	{"go through a relative PATH entry", map[string]string{"PATH": "$REL/bin", "HOME": "$D/h"}, "", goEnv{}, goAsk},
}

func TestDeriveGoEnv(t *testing.T) {
	m := newGoMachine(t)
	for _, c := range goEnvCases {
		t.Run(c.name, func(t *testing.T) {
			env := m.configure(t, c.env, c.file)
			got, v := deriveGoEnv(func(k string) string { return env[k] })
			want := c.want
			for _, f := range []*string{&want.GOCACHE, &want.GOMODCACHE, &want.GOENV} {
				*f = strings.ReplaceAll(*f, "$D", m.dir)
			}
			if got != want || v != c.v {
				t.Errorf("deriveGoEnv = %+v, %d; want %+v, %d", got, v, want, c.v)
			}
		})
	}
}

// TestDeriveGoEnvAgreesWithGo holds deriveGoEnv to the real go: under the same environment
// (nothing else set), `go env` answers the same, or fails where deriveGoEnv says go would; the
// tabled configurations, then random ones drawn from every variable's values and the env file's
// lines.
func TestDeriveGoEnvAgreesWithGo(t *testing.T) {
	m := newGoMachine(t)
	check := func(t *testing.T, env map[string]string, file string) {
		t.Helper()
		env = m.configure(t, env, file)
		got, v := deriveGoEnv(func(k string) string { return env[k] })
		if v == goAsk {
			return // go is asked
		}
		goBin, _ := lookGo(env["PATH"])
		if goBin == "" {
			return // no go to compare with
		}
		cmd := exec.Command(goBin, "env", "-json", "GOCACHE", "GOMODCACHE", "GOENV")
		cmd.Dir = filepath.Join(m.dir, "cwd") // telemetry under a relative HOME lands here
		for k, val := range env {
			cmd.Env = append(cmd.Env, k+"="+val)
		}
		out, err := cmd.Output()
		var answer goEnv
		switch {
		case err != nil && v == goDerived:
			t.Errorf("env %q, env file %q: go fails (%v: %s), deriveGoEnv says %+v", env, file, err, stderrOf(err), got)
		case err == nil && v == goAbsent:
			t.Errorf("env %q, env file %q: go answers %s, deriveGoEnv says it fails", env, file, out)
		case err == nil && (json.Unmarshal(out, &answer) != nil || answer != got):
			t.Errorf("env %q, env file %q: go answers %s, deriveGoEnv %+v", env, file, out, got)
		}
	}
	for _, c := range goEnvCases {
		t.Run(c.name, func(t *testing.T) { check(t, c.env, c.file) })
	}
	values := map[string][]string{
		"PATH":            {"$D/bin", "$R/bin", "$D/A/bin", "$D/binB", "$D/C/bin/" + runtime.GOOS + "_" + runtime.GOARCH, "/nonexistent:$D/bin", ""},
		"HOME":            {"$D/h", "$D/h", "", "h", "~h", "$D"},
		"XDG_CONFIG_HOME": {"", "$D/xc", "xc"},
		"XDG_CACHE_HOME":  {"", "$D/xk", "xk"},
		"GOENV":           {"", "", "off", "$D/genv", "$D/none", "genv"},
		"GOPATH":          {"", "", "/gp", "/gp1:/gp2", ":/gp", "gp", "~/gp", "$R", "$D/h/go"},
		"GOMODCACHE":      {"", "", "/mc", "mc"},
		"GOCACHE":         {"", "", "/gc", "off", "gc"},
		"GOROOT":          {"", "", "", "$R", "$R/", "$D/A", "$D/none", "$D/h/go"},
	}
	n := 200
	if testing.Short() {
		n = 30
	}
	seed := rand.Uint64()
	t.Logf("seed %d", seed)
	r := rand.New(rand.NewPCG(seed, 0))
	t.Run("random", func(t *testing.T) {
		for range n {
			env := map[string]string{}
			for k, vals := range values {
				if v := vals[r.IntN(len(vals))]; v != "" {
					env[k] = v
				}
			}
			var file []string
			for range r.IntN(5) {
				file = append(file, goEnvFileLines[r.IntN(len(goEnvFileLines))])
			}
			check(t, env, strings.Join(file, "\n"))
		}
	})
}

// BenchmarkGoEnv finds this machine's go configuration by derivation and by asking go (issue
// 40, item 2), with the CPU it costs, go's included:
//
//	go test -run '^$' -bench GoEnv ./internal/lang/
func BenchmarkGoEnv(b *testing.B) {
	for _, c := range []struct {
		name string
		find func() (goEnv, bool)
	}{
		{"derive", func() (goEnv, bool) { e, v := deriveGoEnv(os.Getenv); return e, v == goDerived }},
		{"ask", func() (goEnv, bool) { return askGoEnv(askToolchain) }},
	} {
		b.Run(c.name, func(b *testing.B) {
			before := cpuTime(b)
			for b.Loop() {
				if _, ok := c.find(); !ok {
					b.Fatal("no go configuration")
				}
			}
			b.ReportMetric(float64((cpuTime(b)-before).Microseconds())/1000/float64(b.N), "cpu-ms/op")
		})
	}
}

// cpuTime is the CPU this process and its waited-for children have used.
func cpuTime(b *testing.B) time.Duration {
	var self, children syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &self) != nil || syscall.Getrusage(syscall.RUSAGE_CHILDREN, &children) != nil {
		b.Fatal("getrusage failed")
	}
	var total time.Duration
	for _, r := range []syscall.Rusage{self, children} {
		total += time.Duration(r.Utime.Nano() + r.Stime.Nano())
	}
	return total
}

// The cases go is left with: an answer it gives, or none.
func TestAskGoEnv(t *testing.T) {
	for _, c := range []struct {
		answer string
		ok     bool
		want   goEnv
	}{
		{`{"GOCACHE": "/c", "GOMODCACHE": "/m", "GOENV": ""}`, true, goEnv{GOCACHE: "/c", GOMODCACHE: "/m"}},
		{"GOCACHE=/c", false, goEnv{}},
		{"", false, goEnv{}},
	} {
		got, ok := askGoEnv(func(argv ...string) ([]byte, bool) { return []byte(c.answer), c.answer != "" })
		if got != c.want || ok != c.ok {
			t.Errorf("askGoEnv of %q = %+v, %v; want %+v, %v", c.answer, got, ok, c.want, c.ok)
		}
	}
}

func stderrOf(err error) string {
	if ee, ok := err.(*exec.ExitError); ok {
		return string(ee.Stderr)
	}
	return ""
}

func mkdir(t *testing.T, dir string) {
	t.Helper()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
}

func write(t *testing.T, path, content string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

func symlink(t *testing.T, target, link string) {
	t.Helper()
	if err := os.Symlink(target, link); err != nil {
		t.Fatal(err)
	}
}

func copyFile(t *testing.T, from, to string) {
	t.Helper()
	in, err := os.Open(from)
	if err != nil {
		t.Fatal(err)
	}
	defer in.Close()
	out, err := os.OpenFile(to, os.O_CREATE|os.O_WRONLY, 0o755)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := io.Copy(out, in); err != nil {
		t.Fatal(err)
	}
	if err := out.Close(); err != nil {
		t.Fatal(err)
	}
}
