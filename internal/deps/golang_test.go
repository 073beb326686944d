package deps

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/factory-harness/factory/internal/deps/registrytest"
	"github.com/factory-harness/factory/internal/proc/sandbox"
)

func goModules() []registrytest.GoModule {
	return []registrytest.GoModule{
		{Path: "example.com/greet", Version: "v1.0.0", GoMod: "module example.com/greet\n\ngo 1.21\n\nrequire example.com/words v1.2.0\n",
			Files: map[string]string{"greet.go": "package greet\n\nimport \"example.com/words\"\n\nfunc Hello() string { return words.Hello + \", world\" }\n"}},
		{Path: "example.com/words", Version: "v1.2.0",
			Files: map[string]string{"words.go": "package words\n\nconst Hello = \"hello\"\n"}},
	}
}

// goProject writes a module that uses example.com/greet, with go.mod naming it and no go.sum.
func goProject(t *testing.T) string {
	t.Helper()
	return workTree(t, map[string]string{
		"go.mod":  "module example.com/app\n\ngo 1.21\n\nrequire example.com/greet v1.0.0\n",
		"main.go": "package main\n\nimport (\n\t\"fmt\"\n\n\t\"example.com/greet\"\n)\n\nfunc main() { fmt.Println(greet.Hello()) }\n",
	})
}

func goEnv(t *testing.T) {
	t.Helper()
	if _, err := exec.LookPath("go"); err != nil {
		t.Skip("go is not installed")
	}
	// The test proxy has no checksum database.
	t.Setenv("GONOSUMDB", "example.com")
	t.Setenv("GOPRIVATE", "")
}

func TestGoStepDownloadsThenBuildsOffline(t *testing.T) {
	goEnv(t)
	for _, confined := range []bool{false, true} {
		name := "unconfined"
		if confined {
			name = "confined"
		}
		t.Run(name, func(t *testing.T) {
			proxy := registrytest.NewGoProxy(t, goModules()...)
			root, cache, dir := goProject(t), t.TempDir(), t.TempDir()
			opts := Options{Registries: map[Ecosystem]string{Go: proxy.URL + "/"}, Cache: cache}
			var box, runBox *sandbox.Policy
			if confined {
				if !sandbox.Detect().UserNamespaces {
					t.Skip("user namespaces are unavailable: cannot confine the step here")
				}
				req, err := StepRequest(sandbox.Request{Mode: sandbox.ModeRequired, WorkTree: root}, cache)
				if err != nil {
					t.Fatal(err)
				}
				if box, err = sandbox.Prepare(req); err != nil {
					t.Fatal(err)
				}
				if runBox, err = sandbox.Prepare(sandbox.Request{Mode: sandbox.ModeRequired, WorkTree: root, Caches: RunCaches(nil, cache)}); err != nil {
					t.Fatal(err)
				}
			}
			spec := Spec{Root: root, Opts: opts, Sandbox: box, Env: os.Environ(), Dir: dir}
			rep, err := Step(context.Background(), spec)
			if err != nil {
				t.Fatalf("step: %v", err)
			}
			if len(rep.Outcomes) != 1 || rep.Outcomes[0].Skipped || rep.Outcomes[0].Requests == 0 {
				t.Fatalf("outcomes = %+v, want one Go install with requests", rep.Outcomes)
			}
			sum, err := os.ReadFile(filepath.Join(root, "go.sum"))
			if err != nil || !strings.Contains(string(sum), "example.com/greet v1.0.0 h1:") || !strings.Contains(string(sum), "example.com/words v1.2.0 h1:") {
				t.Fatalf("go.sum = %q (%v), want both modules' hashes", sum, err)
			}
			// go.mod gains the indirect requirement, go.sum the hashes.
			if want := []string{"go.mod", "go.sum"}; strings.Join(rep.Lockfiles, ",") != strings.Join(want, ",") {
				t.Errorf("lockfiles = %v, want %v", rep.Lockfiles, want)
			}
			for _, r := range readLog(t, dir) {
				if r.Decision != Allowed || r.Method != "GET" || !strings.HasPrefix(r.URL, proxy.URL+"/") {
					t.Errorf("log entry %+v: want allowed GETs to the proxy", r)
				}
				if r.Status == 200 && len(r.SHA256) != 64 {
					t.Errorf("log entry %+v: no sha256", r)
				}
			}
			// Nothing changed: skipped, no request.
			before := len(proxy.Requests())
			rep, err = Step(context.Background(), spec)
			if err != nil || !rep.Outcomes[0].Skipped || len(proxy.Requests()) != before {
				t.Fatalf("second step: %+v, %v, %d requests after %d: want skipped", rep.Outcomes, err, len(proxy.Requests()), before)
			}
			// Offline: the proxy is gone, and the build uses the cache only.
			proxy.Close()
			env := append(os.Environ(), rep.Env...)
			cmd := exec.Command("go", "run", ".")
			cmd.Dir, cmd.Env = root, env
			cleanup, err := runBox.Wrap(cmd)
			if err != nil {
				t.Fatal(err)
			}
			defer cleanup()
			out, err := cmd.CombinedOutput()
			if err != nil || strings.TrimSpace(string(out)) != "hello, world" {
				t.Fatalf("go run offline: %v\n%s", err, out)
			}
		})
	}
}

func TestGoStepUnknownModule(t *testing.T) {
	goEnv(t)
	proxy := registrytest.NewGoProxy(t, goModules()...)
	root, dir := workTree(t, map[string]string{"go.mod": "module example.com/app\n\ngo 1.21\n\nrequire example.com/nosuch v0.1.0\n"}), t.TempDir()
	_, err := Step(context.Background(), Spec{Root: root, Opts: Options{Registries: map[Ecosystem]string{Go: proxy.URL + "/"}, Cache: t.TempDir()}, Env: os.Environ(), Dir: dir})
	var se *StepError
	if !errors.As(err, &se) || !errors.Is(err, ErrStep) || !strings.Contains(se.Message, "example.com/nosuch") {
		t.Fatalf("err = %v, want a StepError naming example.com/nosuch", err)
	}
	if strings.Count(se.Message, "\n") > 15 {
		t.Errorf("message has %d lines, want a few:\n%s", strings.Count(se.Message, "\n"), se.Message)
	}
}
