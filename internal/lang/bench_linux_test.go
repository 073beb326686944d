package lang_test

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/factory-harness/factory/internal/lang"
	"github.com/factory-harness/factory/internal/proc"
	"github.com/factory-harness/factory/internal/proc/sandbox"
)

// BenchmarkToolchainCommands runs each toolchain's test command on a warm cache unconfined and
// confined in turn, b.N pairs after one warm-up pair, and reports the median wall time of each
// and the median of the pairs' ratios (confined / unconfined): pairing keeps the ratio sound on
// a machine whose speed drifts. Run it with
//
//	go test -run '^$' -bench ToolchainCommands -benchtime 5x ./internal/lang/
func BenchmarkToolchainCommands(b *testing.B) {
	if sup := sandbox.Detect(); !sup.UserNamespaces {
		b.Skipf("user namespaces unavailable here: %s", sup.UserNamespacesError)
	}
	repo, err := filepath.Abs("../..") // this module: a real multi-package one
	if err != nil {
		b.Fatal(err)
	}
	goPkgs := []string{"./internal/graph/...", "./internal/workorder/...", "./internal/artifact/...", "./internal/canon/..."}
	crate := b.TempDir()
	writeB(b, crate, "Cargo.toml", "[package]\nname = \"tiny\"\nversion = \"0.1.0\"\nedition = \"2021\"\n")
	writeB(b, crate, "src/lib.rs", "pub fn add(a: i32, b: i32) -> i32 { a + b }\n#[cfg(test)]\nmod tests { #[test] fn adds() { assert_eq!(super::add(1, 2), 3); } }\n")
	node := b.TempDir()
	writeB(b, node, "package.json", `{"name": "tiny", "version": "1.0.0"}`+"\n")
	writeB(b, node, "test/add.test.js", "const test = require('node:test');\nconst assert = require('node:assert');\ntest('adds', () => assert.strictEqual(1 + 2, 3));\n")
	jest := b.TempDir()
	writeB(b, jest, "package.json", `{"name": "tiny", "version": "1.0.0"}`+"\n")
	writeB(b, jest, "add.test.js", "test('adds', () => expect(1 + 2).toBe(3));\n")
	for _, w := range []struct {
		name, dir string
		argv      []string
		setup     []string // run unconfined first, in dir
	}{
		{"go-test-cached", repo, append([]string{"go", "test"}, goPkgs...), nil},
		{"go-test-count1", repo, append([]string{"go", "test", "-count=1"}, goPkgs...), nil},
		{"cargo-test", crate, []string{"cargo", "test", "--offline", "-q"}, nil},
		{"node-test", node, []string{"node", "--test"}, nil},
		// jest from npm's cache: nothing is fetched.
		{"npx-jest", jest, []string{"npx", "--no", "jest"}, []string{"npm", "install", "--offline", "--no-audit", "--no-fund", "jest@29"}},
	} {
		b.Run(w.name, func(b *testing.B) {
			if !proc.Found(w.argv[0]) {
				b.Skipf("%s is not installed", w.argv[0])
			}
			if w.setup != nil {
				if out, err := proc.Output(context.Background(), w.dir, w.setup, nil); err != nil {
					b.Skipf("%v (is it in npm's cache?): %s", err, out)
				}
			}
			tc := lang.MachineToolchains()
			p, err := sandbox.Prepare(sandbox.Request{Mode: sandbox.ModeRequired, WorkTree: w.dir, Caches: tc.Caches, Env: tc.Env})
			if err != nil {
				b.Fatal(err)
			}
			env := []string{"PATH=" + os.Getenv("PATH"), "HOME=" + os.Getenv("HOME")}
			timed := func(p *sandbox.Policy) time.Duration {
				log := filepath.Join(b.TempDir(), "out.txt")
				start := time.Now()
				res := proc.Run(context.Background(), proc.Spec{Argv: w.argv, Dir: w.dir, Env: env, Stdout: log, Stderr: log,
					Timeout: 10 * time.Minute, Sandbox: p})
				d := time.Since(start)
				if res.ExitCode != 0 {
					out, _ := os.ReadFile(log)
					b.Fatalf("%v (confined: %v): exit %d: %s", w.argv, p != nil, res.ExitCode, out)
				}
				return d
			}
			timed(nil) // warm-up: the caches and, for cargo, target/
			timed(p)
			var plain, confined, ratios []float64
			b.ResetTimer()
			for range b.N {
				u, c := timed(nil), timed(p)
				plain, confined = append(plain, u.Seconds()), append(confined, c.Seconds())
				ratios = append(ratios, c.Seconds()/u.Seconds())
			}
			b.ReportMetric(median(plain), "unconfined-s")
			b.ReportMetric(median(confined), "confined-s")
			b.ReportMetric(median(ratios), "ratio")
		})
	}
}

func median(xs []float64) float64 {
	s := slices.Clone(xs)
	slices.Sort(s)
	return s[len(s)/2]
}

func writeB(b *testing.B, dir, name, content string) {
	b.Helper()
	path := filepath.Join(dir, name)
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		b.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		b.Fatal(err)
	}
}
