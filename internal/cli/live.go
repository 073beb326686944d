package cli

import (
	"bytes"
	"fmt"
	"io"
	"slices"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"golang.org/x/term"

	"github.com/factory-harness/factory/internal/builder"
	"github.com/factory-harness/factory/internal/gitws"
)

// stderrTerminalWidth reports whether the process's stderr is a terminal,
// and its width in columns.
func stderrTerminalWidth() (int, bool) {
	if !term.IsTerminal(2) {
		return 0, false
	}
	cols, _, err := term.GetSize(2)
	if err != nil || cols == 0 {
		return 80, true
	}
	return cols, true
}

// liveView draws a build on a terminal: one line per running work order
// (several in a parallel build), redrawn in place while it runs (spinner,
// elapsed time, the node or command running, the build's tokens and cost
// so far) and left as a final line when it ends. Lines written to it
// (notes and warnings) are printed above the live lines.
type liveView struct {
	mu    sync.Mutex
	w     io.Writer
	width func() int
	now   func() time.Time

	lines []*liveLine // running, in the order they started
	frame int
	drawn int // live lines on screen

	stop      chan struct{}
	done      chan struct{}
	closeOnce sync.Once
}

// liveLine is one running work order, or planning.
type liveLine struct {
	u        builder.Update
	started  time.Time // of its work order (or planning)
	since    time.Time // of its node or command
	attempts int
}

var spinner = []string{"⠋", "⠙", "⠹", "⠸", "⠼", "⠴", "⠦", "⠧", "⠇", "⠏"}

// clearLine returns the cursor to the start of the line and erases it.
const clearLine = "\r\x1b[2K"

func newLiveView(w io.Writer, width func() int) *liveView {
	v := &liveView{w: w, width: width, now: time.Now, stop: make(chan struct{}), done: make(chan struct{})}
	go v.tick(150 * time.Millisecond)
	return v
}

func (v *liveView) tick(every time.Duration) {
	defer close(v.done)
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-v.stop:
			return
		case <-t.C:
			v.mu.Lock()
			v.frame++
			v.draw()
			v.mu.Unlock()
		}
	}
}

// Update is a builder.Options.OnUpdate.
func (v *liveView) Update(u builder.Update) {
	v.mu.Lock()
	defer v.mu.Unlock()
	now := v.now()
	if !u.Planning { // planning is over
		v.lines = slices.DeleteFunc(v.lines, func(x *liveLine) bool { return x.u.Planning })
	}
	var l *liveLine
	for _, x := range v.lines {
		if x.u.Planning == u.Planning && x.u.WO == u.WO {
			l = x
		}
	}
	if l == nil {
		l = &liveLine{started: now, since: now}
		v.lines = append(v.lines, l)
	}
	if u.Attempt > l.attempts {
		l.attempts = u.Attempt
	}
	if u.Done {
		v.clear()
		fmt.Fprintln(v.w, v.fit(v.finalLine(u, l.attempts, now.Sub(l.started))))
		v.lines = slices.DeleteFunc(v.lines, func(x *liveLine) bool { return x == l })
		v.draw()
		return
	}
	if l.u.Node != u.Node || !slices.Equal(l.u.Command, u.Command) {
		l.since = now
	}
	l.u = u
	v.draw()
}

// Write prints whole lines above the live lines.
func (v *liveView) Write(p []byte) (int, error) {
	v.mu.Lock()
	defer v.mu.Unlock()
	v.clear()
	v.w.Write(p)
	v.draw()
	return len(p), nil
}

// Close stops redrawing and erases the live lines. A nil view, or one
// already closed, does nothing.
func (v *liveView) Close() {
	if v == nil {
		return
	}
	v.closeOnce.Do(func() {
		close(v.stop)
		<-v.done
		v.mu.Lock()
		defer v.mu.Unlock()
		v.clear()
	})
}

// cursorUp moves the cursor to the line above.
const cursorUp = "\x1b[1A"

// erase erases the live lines on screen, leaving the cursor at the start
// of the first.
func (v *liveView) erase() string {
	if v.drawn == 0 {
		return ""
	}
	return clearLine + strings.Repeat(cursorUp+clearLine, v.drawn-1)
}

func (v *liveView) clear() {
	io.WriteString(v.w, v.erase())
	v.drawn = 0
}

// draw redraws the live lines in place.
func (v *liveView) draw() {
	if len(v.lines) == 0 {
		return
	}
	now := v.now()
	var b strings.Builder
	if v.drawn > 1 {
		b.WriteString(v.erase())
	}
	for i, l := range v.lines {
		if i > 0 {
			b.WriteString("\n")
		}
		b.WriteString(clearLine + v.fit(v.liveText(l, now)))
	}
	io.WriteString(v.w, b.String())
	v.drawn = len(v.lines)
}

// liveText is l's live line.
func (v *liveView) liveText(l *liveLine, now time.Time) string {
	u := &l.u
	var what string
	switch {
	case u.Planning:
		what = "planning"
	case len(u.Command) > 0:
		what = fmt.Sprintf("attempt %d · %s: %s %s", l.attempts, u.Node, strings.Join(u.Command, " "), seconds(now.Sub(l.since)))
	case u.Node != "":
		what = fmt.Sprintf("attempt %d · %s", l.attempts, nodeActivity[u.Node])
	default:
		what = fmt.Sprintf("attempt %d", l.attempts)
	}
	return fmt.Sprintf("%s %s · %s · %s · %s", spinner[v.frame%len(spinner)], v.label(u), what, seconds(now.Sub(l.started)), spendText(u.Spend))
}

var nodeActivity = map[string]string{
	"se":       "se: asking the model",
	"tr":       "tr: checking and writing",
	"po":       "po: verifying",
	"finalize": "finalize",
}

func (v *liveView) label(u *builder.Update) string {
	if u.Planning {
		return "plan"
	}
	return fmt.Sprintf("%s %d/%d %s", u.WO, u.Index, u.Total, u.Title)
}

func (v *liveView) finalLine(u builder.Update, attempts int, took time.Duration) string {
	mark, verdict := "✗", u.Verdict
	switch {
	case u.Verdict == builder.VerdictPass:
		mark = "✓"
	case u.Stage != "":
		verdict += " (" + u.Stage + ")"
	}
	line := fmt.Sprintf("%s %s · %s · %s · %s", mark, v.label(&u), verdict, seconds(took), plural(attempts, "attempt"))
	if u.Commit != "" {
		line += " · " + gitws.ShortHash(u.Commit)
	}
	return line + " · " + spendText(u.Spend)
}

// fit cuts a line to the terminal's width: a line that wraps cannot be
// redrawn in place.
func (v *liveView) fit(line string) string {
	max := v.width() - 1
	if max < 10 || utf8.RuneCountInString(line) <= max {
		return line
	}
	r := []rune(line)
	return string(r[:max-1]) + "…"
}

func spendText(s builder.Spend) string {
	cached := ""
	if s.CachedInputTokens > 0 {
		cached = fmt.Sprintf(" (%.0f%% cached)", 100*s.CacheHitRate())
	}
	if s.CostUSD == nil {
		return fmt.Sprintf("%d tokens%s", s.Tokens, cached)
	}
	return fmt.Sprintf("%d tokens%s, $%.4f", s.Tokens, cached, *s.CostUSD)
}

func seconds(d time.Duration) string { return fmt.Sprintf("%.1fs", d.Seconds()) }

// noteFilter passes on, whole, only the progress lines a user must see
// even when the live view replaces the detailed ones: notes, warnings and
// the build's own account of recovery and spending.
type noteFilter struct {
	mu      sync.Mutex // the work orders of a parallel build write at once
	w       io.Writer
	partial []byte
}

var notePrefixes = []string{"warning", "note:", "build:", "created repository"}

func (f *noteFilter) Write(p []byte) (int, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.partial = append(f.partial, p...)
	for {
		i := bytes.IndexByte(f.partial, '\n')
		if i < 0 {
			return len(p), nil
		}
		line := f.partial[:i+1]
		trimmed := strings.TrimLeft(string(line), " ")
		for _, prefix := range notePrefixes {
			if strings.HasPrefix(trimmed, prefix) {
				f.w.Write([]byte(trimmed))
				break
			}
		}
		f.partial = f.partial[i+1:]
	}
}
