package cli

import (
	"bytes"
	"errors"
	"io"
	"regexp"
	"strings"
	"syscall"
	"testing"

	"github.com/creack/pty"

	"github.com/factory-harness/factory/internal/llmtest"
)

// screenLines is what a terminal shows of out: each line as left by its
// last carriage return and erase.
func screenLines(out string) []string {
	var lines []string
	for _, l := range strings.Split(strings.ReplaceAll(out, "\r\n", "\n"), "\n") {
		if i := strings.LastIndex(l, clearLine); i >= 0 {
			l = l[i+len(clearLine):]
		}
		if l != "" {
			lines = append(lines, l)
		}
	}
	return lines
}

// On a terminal a build draws one live line per work order, redrawn in
// place, that ends as one final line; the detailed lines are for -v.
func TestBuildLiveTerminal(t *testing.T) {
	f := newBuildFixture(t, buildPlan(""))
	srv := llmtest.Start(t, replyWO01, replyWO02, replyWO03)
	cmd := factoryCmd(t, append(gitEnv(t.TempDir()), "OPENAI_API_KEY=k"), f.args(srv.URL)...)
	tty, err := pty.StartWithSize(cmd, &pty.Winsize{Cols: 160, Rows: 40})
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	_, err = io.Copy(&out, tty) // until the child closes its side: EIO
	if err != nil && !errors.Is(err, syscall.EIO) {
		t.Fatal(err)
	}
	tty.Close()
	if err := cmd.Wait(); err != nil {
		t.Fatalf("build: %v\n%q", err, out.String())
	}
	raw := out.String()
	live := regexp.MustCompile(regexp.QuoteMeta(clearLine) + `[⠋⠙⠹⠸⠼⠴⠦⠧⠇⠏] WO-02 2/3 multiply\(\) · attempt 1 · po: python3 -m unittest tests.test_multiply -q \d+\.\ds · \d+\.\ds · 240 tokens`)
	if !live.MatchString(raw) {
		t.Errorf("no live line for WO-02's acceptance command:\n%q", raw)
	}
	if strings.Contains(raw, ": se: asking") {
		t.Errorf("detailed lines without -v:\n%q", raw)
	}
	final := regexp.MustCompile(`^✓ (WO-0\d) \d/3 .+ · PASS · \d+\.\ds · 1 attempt · [0-9a-f]{12} · \d+ tokens$`)
	var done []string
	for _, l := range screenLines(raw) {
		if m := final.FindStringSubmatch(l); m != nil {
			done = append(done, m[1])
		} else if strings.HasPrefix(l, "✓") || strings.HasPrefix(l, "✗") || strings.ContainsAny(l[:min(len(l), 3)], "⠋⠙⠹⠸⠼⠴⠦⠧⠇⠏") {
			t.Errorf("a live or final line left on screen: %q", l)
		}
	}
	if strings.Join(done, " ") != "WO-01 WO-02 WO-03" {
		t.Errorf("final lines for %v, want one per work order in order; screen:\n%s", done, strings.Join(screenLines(raw), "\n"))
	}
	if !strings.Contains(raw, "verdict: PASS") {
		t.Errorf("no summary:\n%q", raw)
	}

	// -v: the detailed lines, no live line.
	g := newBuildFixture(t, buildPlan(""))
	srv = llmtest.Start(t, replyWO01, replyWO02, replyWO03)
	cmd = factoryCmd(t, append(gitEnv(t.TempDir()), "OPENAI_API_KEY=k"), append(g.args(srv.URL), "-v")...)
	tty, err = pty.StartWithSize(cmd, &pty.Winsize{Cols: 160, Rows: 40})
	if err != nil {
		t.Fatal(err)
	}
	out.Reset()
	io.Copy(&out, tty)
	tty.Close()
	cmd.Wait()
	if raw := out.String(); strings.Contains(raw, clearLine) || !strings.Contains(raw, ": se: asking") {
		t.Errorf("-v on a terminal:\n%q", raw)
	}
}
