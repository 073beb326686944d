package serve

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"html/template"
	"io"
	"strconv"
	"time"
)

// maxReportText bounds one text (prompt, reply, log) in a report; the cut
// is noted where it happens.
const maxReportText = 48 << 10

// ReportOptions choose what a report shows: a build (Out and Build), a
// single run (Out and Run) or a loop run (Repo and LoopRun).
type ReportOptions struct {
	Out, Build, Run string
	Repo, LoopRun   string
	Environ         []string
	Now             func() time.Time
}

// ErrNotFound is returned by Report when the build, run or loop run is
// not in the given directory.
var ErrNotFound = errors.New("not found")

// reportItem is one more section of a report: an attempt or an iteration.
type reportItem struct {
	Kind string // attempt or iteration
	URL  string // the page it stands for; its anchor
	View any
}

// Report writes one self-contained HTML file: inline style, no script, no
// reference to anything outside it, texts cut to maxReportText with a note.
func Report(ctx context.Context, w io.Writer, o ReportOptions) error {
	so := Options{Environ: o.Environ, Now: o.Now}
	if o.Out != "" {
		so.Outs = []string{o.Out}
	}
	if o.Repo != "" {
		so.Repos = []string{o.Repo}
	}
	s, err := New(so)
	if err != nil {
		return err
	}
	defer s.Close()
	s.maxText, s.maxDepsRows = maxReportText, depsRowsReport
	var page, title string
	var data any
	var items []reportItem
	switch {
	case o.Build != "":
		v, err := s.buildView(ctx, 0, o.Build)
		if err != nil {
			return fmt.Errorf("build %s in %s: %w", o.Build, o.Out, ErrNotFound)
		}
		page, title, data = "build", "build "+o.Build, v
		repo := v.Row.Repo
		for _, wo := range v.WOs {
			for _, run := range wo.Runs {
				dir := "builds/" + o.Build + "/" + wo.ID + "/" + run.ID
				for _, n := range attemptNumbers(s.st.outs[0], dir) {
					a, err := s.attemptView(ctx, 0, dir, n, repo)
					if err != nil {
						continue
					}
					a.URL = fmt.Sprintf("/builds/0/%s/%s/%s/%d", o.Build, wo.ID, run.ID, n)
					a.Title = fmt.Sprintf("%s attempt %d (run %s)", wo.ID, n, run.ID)
					a.Back = "/"
					items = append(items, reportItem{Kind: "attempt", URL: a.URL, View: a})
				}
			}
		}
	case o.Run != "":
		v, err := s.runView(0, o.Run)
		if err != nil {
			return fmt.Errorf("run %s in %s: %w", o.Run, o.Out, ErrNotFound)
		}
		page, title, data = "run", "run "+o.Run, v
		for _, n := range v.Attempts {
			a, err := s.attemptView(ctx, 0, o.Run, n, "")
			if err != nil {
				continue
			}
			a.URL = "/runs/0/" + o.Run + "/" + strconv.Itoa(n)
			a.Title, a.Back = fmt.Sprintf("run %s attempt %d", o.Run, n), "/"
			items = append(items, reportItem{Kind: "attempt", URL: a.URL, View: a})
		}
	case o.LoopRun != "":
		v, err := s.loopView(ctx, 0, o.LoopRun)
		if err != nil {
			return fmt.Errorf("loop run %s in %s: %w", o.LoopRun, o.Repo, ErrNotFound)
		}
		page, title, data = "loop", "loop run "+o.LoopRun, v
		for _, it := range v.Iterations {
			iv, err := s.iterView(0, o.LoopRun, it.Dir)
			if err != nil {
				continue
			}
			items = append(items, reportItem{Kind: "iteration", URL: iv.URL, View: iv})
		}
	default:
		return errors.New("report: nothing chosen")
	}
	nonce := make([]byte, 16) // hex: nothing the redactor could take for a key
	_, _ = rand.Read(nonce)
	anyItems := make([]any, len(items))
	for i := range items {
		anyItems[i] = items[i]
	}
	var buf bytes.Buffer
	err = s.pages.ExecuteTemplate(&buf, "layout", pageData{Page: page, Title: title, Data: data, R: linker{report: true},
		CSS: template.CSS(s.css), Nonce: hex.EncodeToString(nonce), Now: s.o.Now(), Items: anyItems})
	if err != nil {
		return fmt.Errorf("render the report: %w", err)
	}
	_, err = w.Write(s.red.Bytes(buf.Bytes()))
	return err
}
