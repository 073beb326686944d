package cli

import (
	"bufio"
	"context"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/cdproto/page"
	"github.com/chromedp/chromedp"

	"github.com/factory-harness/factory/internal/builder"
	"github.com/factory-harness/factory/internal/gitws"
	"github.com/factory-harness/factory/internal/llmtest"
)

var updateServePNG = flag.Bool("update-serve-png", false, "write docs/img/serve.png, the README's screenshot of factory serve")

// The payloads of a hostile reply: each would change the page if it ran.
const (
	xssScript = `<script>document.title="pwned";document.body.dataset.pwned="script"</script>`
	xssImg    = `<img src=x onerror="alert('xss');document.body.dataset.pwned='img'">`
	xssLink   = `<a href="javascript:alert('link')">javascript-link</a>`
)

// serveFixture holds what factory serve is tested on: the bundled example
// built for real (replayed transcript), a build that failed with a hostile
// reply, a finished loop run and a build that is "running".
type serveFixture struct {
	exampleOut, exampleHash string
	failOut, failHash       string
	loopRepo                string
	liveOut, liveHash       string
	liveRepo                string
}

func newServeFixture(t *testing.T) *serveFixture {
	t.Helper()
	fx := &serveFixture{}
	// The bundled example, as a user runs it.
	cmd := exec.Command("bash", filepath.Join("..", "..", "examples", "build.sh"))
	cmd.Env = append(os.Environ(), "FACTORY=factory", "TMPDIR="+t.TempDir())
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("examples/build.sh: %v\n%s", err, out)
	}
	fx.exampleOut = outputField(t, string(out), "artifacts: ")
	fx.exampleHash = onlyBuild(t, fx.exampleOut)

	// A build whose WO-02 fails twice with a reply full of markup.
	f := newBuildFixture(t, buildPlan(""))
	hostile := llmtest.Reply{Content: llmtest.Proposal("multiply "+xssScript+xssImg+xssLink,
		llmtest.Write{Path: "calc.py", BaseSHA256: sha(bCalcAdd), Content: bCalcMulX + "# " + xssScript + xssImg + "\n"},
		llmtest.Write{Path: "tests/test_multiply.py", BaseSHA256: sha(""), Content: bTestMul})}
	srv := llmtest.Start(t, replyWO01, hostile, hostile, hostile)
	if res := f.build(t, srv.URL, "--repair", "off"); res.code != ExitFail {
		t.Fatalf("the failing build: exit %d\n%s%s", res.code, res.stdout, res.stderr)
	}
	fx.failOut, fx.failHash = f.out, onlyBuild(t, f.out)

	// A loop run driven to the end by the scripted executor.
	lf := newLoopFixture(t, t.TempDir(), twoLevelScript, "")
	lf.mustRun(t, 0, "loop", "run")
	fx.loopRepo = lf.repo

	// A "running" build: the first lines of the example's events, in a
	// repository whose lock this test process holds and whose build
	// pointer names this build.
	fx.liveRepo = newRepo(t, map[string]string{"README.md": "live\n"})
	fx.liveOut, fx.liveHash = filepath.Join(t.TempDir(), "out"), "feedfacefeedface"
	liveDir := filepath.Join(fx.liveOut, "builds", fx.liveHash)
	now := time.Now().UTC()
	ts := func(d time.Duration) string { return now.Add(d).Format(time.RFC3339Nano) }
	writeFiles(t, liveDir, map[string]string{"events.jsonl": fmt.Sprintf(
		`{"event":"build_start","plan_hash":"%s","branch":"factory/%s","base_commit":"abc","repo":%q,"ts":%q}
{"event":"plan","source":"given","work_orders":2,"ts":%q}
{"event":"wo_start","wo":"WO-01","ts":%q}
{"attempt":1,"event":"node","node":"se","tokens":120,"duration_ms":30,"wo":"WO-01","verdict":"","stage":"","cost_usd":null,"ts":%q}
{"attempt":1,"event":"node","node":"tr","tokens":0,"duration_ms":20,"wo":"WO-01","verdict":"","stage":"","cost_usd":null,"ts":%q}
`, fx.liveHash, fx.liveHash, fx.liveRepo, ts(-9*time.Second), ts(-9*time.Second), ts(-8*time.Second), ts(-7*time.Second), ts(-6*time.Second))})
	return fx
}

func onlyBuild(t *testing.T, out string) string {
	t.Helper()
	dirs, _ := filepath.Glob(filepath.Join(out, "builds", "*"))
	if len(dirs) != 1 {
		t.Fatalf("builds in %s: %v, want one", out, dirs)
	}
	return filepath.Base(dirs[0])
}

// startServe runs factory serve and returns the URL it printed.
func startServe(t *testing.T, args ...string) string {
	t.Helper()
	cmd := factoryCmd(t, nil, append([]string{"serve"}, args...)...)
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr syncBuffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cmd.Process.Signal(os.Interrupt)
		done := make(chan error, 1)
		go func() { done <- cmd.Wait() }()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("factory serve after Ctrl-C: %v\n%s", err, stderr.String())
			}
		case <-time.After(10 * time.Second):
			cmd.Process.Kill()
			t.Errorf("factory serve did not stop on Ctrl-C")
		}
	})
	line, err := bufio.NewReader(stdout).ReadString('\n')
	if err != nil {
		t.Fatalf("factory serve printed nothing: %v\n%s", err, stderr.String())
	}
	url, ok := strings.CutPrefix(strings.TrimSpace(line), "serving ")
	if !ok || !regexp.MustCompile(`^http://[^/]+:\d+/(\?token=[0-9a-f]+)?$`).MatchString(url) {
		t.Fatalf("first line %q, want 'serving http://HOST:PORT/'", line)
	}
	go io.Copy(io.Discard, stdout)
	return url
}

// chromium finds Debian's chromium (or another Chrome) or skips.
func chromium(t *testing.T) string {
	t.Helper()
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	t.Skip("no chromium binary found: install Debian's chromium (apt-get install chromium) to run the browser tests")
	return ""
}

// browser starts headless Chromium; extra flags are added to the usual.
func browser(t *testing.T, extra ...chromedp.ExecAllocatorOption) context.Context {
	t.Helper()
	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(chromium(t)), chromedp.NoSandbox, chromedp.DisableGPU, chromedp.NoFirstRun,
		chromedp.Flag("disable-background-networking", true), chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true), chromedp.UserDataDir(t.TempDir()), chromedp.WindowSize(1280, 900))
	actx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), append(opts, extra...)...)
	ctx, cancel := chromedp.NewContext(actx)
	t.Cleanup(func() { cancel(); cancelAlloc() })
	if err := chromedp.Do(ctx); err != nil {
		t.Fatalf("start chromium: %v", err)
	}
	return ctx
}

// tab opens a new tab of the browser, with a deadline.
func tab(t *testing.T, b context.Context) context.Context {
	t.Helper()
	ctx, cancel := chromedp.NewContext(b)
	ctx, cancelT := context.WithTimeout(ctx, 60*time.Second)
	t.Cleanup(func() { cancelT(); cancel() })
	return ctx
}

func visibleText(t *testing.T, ctx context.Context, url string) string {
	t.Helper()
	if err := chromedp.Do(ctx, chromedp.Navigate(url)); err != nil {
		t.Fatalf("open %s: %v", url, err)
	}
	return jsEval[string](t, ctx, "document.body.innerText")
}

func jsEval[T any](t *testing.T, ctx context.Context, js string) T {
	t.Helper()
	v, err := chromedp.Run(ctx, chromedp.Evaluate[T](js))
	if err != nil {
		t.Fatalf("evaluate %s: %v", js, err)
	}
	return v
}

func mustContain(t *testing.T, what, text string, wants ...string) {
	t.Helper()
	for _, w := range wants {
		if !strings.Contains(text, w) {
			t.Errorf("%s lacks %q; it shows:\n%.3000s", what, w, text)
		}
	}
}

// screenshotDir is where the screenshots go: $FACTORY_SCREENSHOTS, else a
// test temp dir.
func screenshotDir(t *testing.T) string {
	if d := os.Getenv("FACTORY_SCREENSHOTS"); d != "" {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
		return d
	}
	return t.TempDir()
}

func screenshot(t *testing.T, ctx context.Context, dir, name string) {
	t.Helper()
	png, err := chromedp.Run(ctx, chromedp.FullScreenshot(100))
	if err != nil {
		t.Errorf("screenshot %s: %v", name, err)
		return
	}
	if err := os.WriteFile(filepath.Join(dir, name), png, 0o644); err != nil {
		t.Error(err)
	}
}

// TestServe builds the fixtures once and drives factory serve and factory
// report over them: plain HTTP for the security rules, a real headless
// Chromium for what a user sees.
func TestServe(t *testing.T) {
	fx := newServeFixture(t)
	url := startServe(t, "--out", fx.exampleOut, "--out", fx.failOut, "--out", fx.liveOut, "--repo", fx.loopRepo, "--addr", "127.0.0.1:0")
	base := strings.TrimSuffix(url, "/")
	exBuild := base + "/builds/0/" + fx.exampleHash
	failBuild := base + "/builds/1/" + fx.failHash
	shots := screenshotDir(t)

	// The running build: this process holds the repository's lock, and
	// the build pointer names the build.
	repo, err := gitws.Open(t.Context(), fx.liveRepo)
	if err != nil {
		t.Fatal(err)
	}
	lock, err := repo.Lock()
	if err != nil {
		t.Fatal(err)
	}
	defer lock.Unlock()
	writeFiles(t, repo.FactoryFile(""), map[string]string{builder.PointerFile: fmt.Sprintf(`{"plan_hash":%q,"build_dir":%q,"branch":"factory/x","plan_dir":"","plan_source":"given"}`,
		fx.liveHash, filepath.Join(fx.liveOut, "builds", fx.liveHash))})

	t.Run("traversal is 404", func(t *testing.T) {
		if err := os.Symlink("/etc/passwd", filepath.Join(fx.exampleOut, "builds", fx.exampleHash, "leak.txt")); err != nil {
			t.Fatal(err)
		}
		host := strings.TrimPrefix(base, "http://")
		for _, p := range []string{"/files/out/0/../../../../etc/passwd", "/files/out/0/%2e%2e/%2e%2e/%2e%2e/etc/passwd",
			"/files/out/0/%2e%2e%2f%2e%2e%2fetc%2fpasswd", "/files/out/0//etc/passwd", "/files/out/0/builds/" + fx.exampleHash + "/leak.txt",
			"/files/loop/0/../../.git/config", "/builds/0/..%2f..%2f..%2fetc"} {
			conn, err := net.Dial("tcp", host)
			if err != nil {
				t.Fatal(err)
			}
			fmt.Fprintf(conn, "GET %s HTTP/1.1\r\nHost: %s\r\nConnection: close\r\n\r\n", p, host)
			resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
			if err != nil {
				t.Fatal(err)
			}
			body, _ := io.ReadAll(resp.Body)
			conn.Close()
			if resp.StatusCode != http.StatusNotFound || strings.Contains(string(body), "root:") {
				t.Errorf("%s: %d, want 404", p, resp.StatusCode)
			}
		}
	})

	t.Run("token on a non-loopback address", func(t *testing.T) {
		open := startServe(t, "--out", fx.exampleOut, "--addr", "0.0.0.0:0")
		_, token, ok := strings.Cut(open, "?token=")
		if !ok || len(token) < 32 {
			t.Fatalf("URL %s carries no token", open)
		}
		port := open[strings.LastIndex(open[:strings.Index(open, "/?")], ":")+1 : strings.Index(open, "/?")]
		local := "http://127.0.0.1:" + port
		// A wrong token: the real one with its last digit changed (a fixed "0" was the real
		// token one time in sixteen).
		last := "0"
		if strings.HasSuffix(token, "0") {
			last = "1"
		}
		for _, p := range []string{"/", "/api/index", "/api/stream/index", "/builds/0/" + fx.exampleHash, "/static/app.js", "/?token=" + token[:len(token)-1] + last} {
			resp, err := http.Get(local + p)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if resp.StatusCode != http.StatusUnauthorized {
				t.Errorf("%s without the token: %d, want 401", p, resp.StatusCode)
			}
		}
		resp, err := http.Get(local + "/api/index?token=" + token)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != 200 {
			t.Errorf("with the token: %d", resp.StatusCode)
		}
	})

	t.Run("report", func(t *testing.T) {
		file := filepath.Join(t.TempDir(), "report.html")
		res := runFactory(t, nil, "report", "--out", fx.exampleOut, "--build", fx.exampleHash, "-o", file)
		if res.code != 0 {
			t.Fatalf("report: exit %d\n%s", res.code, res.stderr)
		}
		data, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		if len(data) > 5<<20 {
			t.Errorf("the report is %d bytes, over 5 MB", len(data))
		}
		t.Logf("report of the bundled example: %d bytes", len(data))
		if m := regexp.MustCompile(`(?i)(src|href|action)\s*=\s*["']?\s*(https?:|//)|url\(|@import|<script|<link`).Find(data); m != nil {
			t.Errorf("the report references something outside itself: %q", m)
		}
		for _, args := range [][]string{
			{"report", "--out", fx.exampleOut, "--build", "0000000000000000", "-o", file},
			{"report", "--out", fx.exampleOut, "-o", file},
			{"report", "--out", fx.exampleOut, "--build", fx.exampleHash, "--run", "x", "-o", file},
			{"report", "--repo", fx.loopRepo, "-o", file},
			{"report", "--out", fx.exampleOut, "--build", fx.exampleHash},
			{"serve"},
			{"serve", "--out", filepath.Join(t.TempDir(), "missing")},
			{"serve", "--out", fx.exampleOut, "--token-file", filepath.Join(t.TempDir(), "missing")},
		} {
			if res := runFactory(t, nil, args...); res.code != ExitUsage || res.stdout != "" {
				t.Errorf("factory %s: exit %d, want 2\n%s%s", strings.Join(args, " "), res.code, res.stdout, res.stderr)
			}
		}
		loopFile := filepath.Join(t.TempDir(), "loop.html")
		if res := runFactory(t, nil, "report", "--repo", fx.loopRepo, "--loop-run", "t1", "-o", loopFile); res.code != 0 {
			t.Fatalf("loop report: exit %d\n%s", res.code, res.stderr)
		}
		loopHTML, _ := os.ReadFile(loopFile)
		mustContain(t, "the loop report", string(loopHTML), "arithmetic", "iteration 5", "chore(loop): run t1 iter 5")
	})

	b := browser(t) // skips without a Chromium

	t.Run("index", func(t *testing.T) {
		ctx := tab(t, b)
		text := visibleText(t, ctx, url)
		mustContain(t, "the index", text, fx.exampleHash, fx.failHash, fx.liveHash, "t1", "PASS", "FAIL", "running", "4/4", "1/3", "loop", "3/3")
		screenshot(t, ctx, shots, "index.png")
	})

	t.Run("build", func(t *testing.T) {
		ctx := tab(t, b)
		text := visibleText(t, ctx, exBuild)
		mustContain(t, "the example build", text, "WO-01", "Project skeleton, verification script and tokenize", "WO-04",
			"Public API, README and end-to-end test", "4/4", "SE", "PO", "FINALIZE", "build_end", "scripts/verify.sh")
		// The spec and the plan's details are there, collapsed.
		mustContain(t, "the example build's collapsed sections", jsEval[string](t, ctx, "document.body.textContent"),
			"textstats — word and sentence statistics", "python3 -m unittest tests.test_cli", "file_exists")
		if *updateServePNG {
			if err := chromedp.Do(ctx, chromedp.EmulateViewport(1100, 700)); err != nil {
				t.Fatal(err)
			}
			png, err := chromedp.Run(ctx, chromedp.CaptureScreenshot())
			if err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join("..", "..", "docs", "img", "serve.png"), png, 0o644); err != nil {
				t.Fatal(err)
			}
		}
		screenshot(t, ctx, shots, "build.png")
		failed := visibleText(t, ctx, failBuild)
		mustContain(t, "the failed build", failed, "FAIL", "WO-02", "verify_failed", "WO-03", "pending")
		screenshot(t, ctx, shots, "build-failed.png")
	})

	t.Run("attempt", func(t *testing.T) {
		ctx := tab(t, b)
		if err := chromedp.Do(ctx, chromedp.Navigate(exBuild)); err != nil {
			t.Fatal(err)
		}
		href := jsEval[string](t, ctx, `document.querySelector('#wos a[href*="/WO-03/"]').getAttribute("href")`)
		text := visibleText(t, ctx, base+href)
		mustContain(t, "the WO-03 attempt", text, "WO-03 attempt 1", "PASS", "textstats/cli.py", "python3 -m unittest tests.test_cli",
			"exit 0", "Ran 11 tests", "HOME", "PATH", "full log")
		mustContain(t, "the collapsed SE prompt", jsEval[string](t, ctx, "document.body.textContent"), "You are the SE (software engineer) step")
		screenshot(t, ctx, shots, "attempt.png")
	})

	t.Run("hostile reply runs nothing", func(t *testing.T) {
		ctx := tab(t, b)
		dialogs := make(chan string, 10)
		if err := chromedp.Do(ctx); err != nil {
			t.Fatal(err)
		}
		if err := chromedp.Listen(ctx, func(ev any) {
			if d, ok := ev.(*page.EventJavascriptDialogOpening); ok {
				select {
				case dialogs <- d.Message:
				default:
				}
			}
		}); err != nil {
			t.Fatal(err)
		}
		if err := chromedp.Do(ctx, chromedp.Navigate(failBuild)); err != nil {
			t.Fatal(err)
		}
		href := jsEval[string](t, ctx, `document.querySelector('#wos a[href*="/WO-02/"]').getAttribute("href")`)
		text := visibleText(t, ctx, base+href)
		mustContain(t, "the hostile attempt", text, xssScript, xssImg, "javascript-link", "verify_failed")
		// Give an onerror handler a moment to fire if it were there.
		time.Sleep(300 * time.Millisecond)
		if got := jsEval[string](t, ctx, `document.title + "|" + (document.body.dataset.pwned || "") + "|" +
			document.querySelectorAll('img[src="x"], main script, a[href^="javascript:"]').length`); got != "WO-02 attempt 1 (run "+strings.Split(href, "/")[5]+") · factory||0" {
			t.Errorf("title|pwned|injected nodes = %q", got)
		}
		select {
		case m := <-dialogs:
			t.Errorf("a dialog opened: %q", m)
		default:
		}
		screenshot(t, ctx, shots, "hostile.png")
	})

	t.Run("loop", func(t *testing.T) {
		ctx := tab(t, b)
		text := visibleText(t, ctx, base+"/loops/0/t1")
		mustContain(t, "the loop run", text, "Loop run t1", "PASS", "arithmetic", "mul", "sub", "docs", "(0/3 attempts)", "decompose", "execute", "pass", "Build calc")
		screenshot(t, ctx, shots, "loop.png")
		iter := visibleText(t, ctx, base+"/loops/0/t1/3")
		mustContain(t, "iteration 3", iter, "iteration 3", "a1", "execute", "Guard log", "mul.py", "Prompt pack")
	})

	t.Run("live", func(t *testing.T) {
		ctx := tab(t, b)
		text := visibleText(t, ctx, base+"/builds/2/"+fx.liveHash)
		mustContain(t, "the running build", text, "running", "WO-01 attempt 1: PO (running commands)", "running for")
		if got := jsEval[string](t, ctx, `document.getElementById("activity-for").textContent`); !strings.HasSuffix(got, " s") {
			t.Errorf("the running node's time shows %q", got)
		}
		events := filepath.Join(fx.liveOut, "builds", fx.liveHash, "events.jsonl")
		f, err := os.OpenFile(events, os.O_APPEND|os.O_WRONLY, 0)
		if err != nil {
			t.Fatal(err)
		}
		now := time.Now().UTC().Format(time.RFC3339Nano)
		fmt.Fprintf(f, `{"attempt":1,"event":"node","node":"po","tokens":0,"duration_ms":6000,"wo":"WO-01","verdict":"","stage":"","cost_usd":null,"ts":%q}`+"\n", now)
		fmt.Fprintf(f, `{"attempt":1,"event":"node","node":"finalize","tokens":0,"duration_ms":5,"wo":"WO-01","verdict":"PASS","stage":"","cost_usd":null,"ts":%q}`+"\n", now)
		fmt.Fprintf(f, `{"commit":"0123456789abcdef0123456789abcdef01234567","event":"wo_end","wo":"WO-01","verdict":"PASS","ts":%q}`+"\n", now)
		f.Close()
		appended := time.Now()
		for {
			got := jsEval[string](t, ctx, `document.getElementById("events").innerText + "|" + document.querySelector('[data-wo="WO-01"]').textContent + "|" + document.getElementById("count").textContent`)
			if strings.Contains(got, `"wo_end"`) && strings.HasSuffix(got, "|PASS|1/2") {
				t.Logf("the appended events showed after %v", time.Since(appended).Round(10*time.Millisecond))
				break
			}
			if time.Since(appended) > 2*time.Second {
				t.Fatalf("2 s after the append the page shows %q", got)
			}
			time.Sleep(50 * time.Millisecond)
		}
		screenshot(t, ctx, shots, "live.png")
	})

	t.Run("report offline", func(t *testing.T) {
		file := filepath.Join(t.TempDir(), "report.html")
		if res := runFactory(t, nil, "report", "--out", fx.exampleOut, "--build", fx.exampleHash, "-o", file); res.code != 0 {
			t.Fatalf("report: exit %d\n%s", res.code, res.stderr)
		}
		failFile := filepath.Join(t.TempDir(), "failed.html")
		if res := runFactory(t, nil, "report", "--out", fx.failOut, "--build", fx.failHash, "-o", failFile); res.code != 0 {
			t.Fatalf("report: exit %d\n%s", res.code, res.stderr)
		}
		rows := `Array.from(document.querySelectorAll("#wos tbody tr")).map(r => Array.from(r.cells).slice(0, 3).map(c => c.innerText.trim()).join(" ")).join("\n")`
		served := tab(t, b)
		// A browser with every network request sent to a dead proxy.
		offline := tab(t, browser(t, chromedp.ProxyServer("http://127.0.0.1:9"), chromedp.Flag("proxy-bypass-list", "<-loopback>")))
		for _, c := range []struct{ page, file string }{{exBuild, file}, {failBuild, failFile}} {
			if err := chromedp.Do(served, chromedp.Navigate(c.page)); err != nil {
				t.Fatal(err)
			}
			want := jsEval[string](t, served, rows)
			if err := chromedp.Do(offline, chromedp.Navigate("file://"+c.file)); err != nil {
				t.Fatal(err)
			}
			if got := jsEval[string](t, offline, rows); got != want || want == "" {
				t.Errorf("the report's work orders:\n%s\nthe served page's:\n%s", got, want)
			}
		}
		text := jsEval[string](t, offline, "document.body.innerText")
		mustContain(t, "the failed build's report", text, xssScript, "verify_failed", "WO-02 attempt 2")
		if got := jsEval[int](t, offline, `document.querySelectorAll('img[src="x"], script').length`); got != 0 {
			t.Errorf("the report holds %d img/script elements", got)
		}
		screenshot(t, offline, shots, "report.png")
	})
	t.Logf("screenshots in %s", shots)
}

func TestServeReportHelp(t *testing.T) {
	for cmd, want := range map[string][]string{
		"serve":  {"Exit codes: 0 stopped, 2 usage", "serving http://HOST:PORT/", "401"},
		"report": {"Exit codes: 0 written, 2 usage or not found", "no reference to anything outside the file"},
	} {
		var stdout, stderr strings.Builder
		if code := Run(context.Background(), []string{cmd, "--help"}, Env{Stdout: &stdout, Stderr: &stderr, Getenv: func(string) string { return "" }}); code != 0 {
			t.Fatalf("%s --help: exit %d\n%s", cmd, code, stderr.String())
		}
		help := strings.Join(strings.Fields(stdout.String()), " ")
		for _, w := range want {
			if !strings.Contains(help, w) {
				t.Errorf("%s --help lacks %q", cmd, w)
			}
		}
	}
}
