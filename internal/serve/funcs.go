package serve

import (
	"fmt"
	"html/template"
	"strings"
	"time"

	"github.com/factory-harness/factory/internal/gitws"
)

// linker turns site URLs into what a page links to: the URL itself when
// served, an anchor of the same file in a report.
type linker struct{ report bool }

// Link is where a link to the page at u goes.
func (l linker) Link(u string) string {
	if !l.report {
		return u
	}
	if u == "/" || u == "" {
		return "#top"
	}
	return "#" + anchor(u)
}

// Anchor is the id of the section showing the page at u in a report.
func (l linker) Anchor(u string) string { return anchor(u) }

// File is the link to a whole artifact file; "" in a report (which holds
// only what it shows).
func (l linker) File(u string) string {
	if l.report {
		return ""
	}
	return u
}

// Report says whether this is a one-file report.
func (l linker) Report() bool { return l.report }

func anchor(u string) string {
	return "p" + strings.NewReplacer("/", "-", ".", "_").Replace(u)
}

var funcs = template.FuncMap{
	"dur": func(sec float64) string {
		d := time.Duration(sec * float64(time.Second))
		switch {
		case d <= 0:
			return "—"
		case d < time.Second:
			return fmt.Sprintf("%d ms", d.Milliseconds())
		case d < time.Minute:
			return fmt.Sprintf("%.1f s", d.Seconds())
		case d < time.Hour:
			return fmt.Sprintf("%dm %02ds", int(d.Minutes()), int(d.Seconds())%60)
		}
		return fmt.Sprintf("%dh %02dm", int(d.Hours()), int(d.Minutes())%60)
	},
	"ts": func(t time.Time) string {
		if t.IsZero() {
			return "—"
		}
		return t.UTC().Format("2006-01-02 15:04:05Z")
	},
	"rfc": func(t time.Time) string {
		if t.IsZero() {
			return ""
		}
		return t.UTC().Format(time.RFC3339Nano)
	},
	"cost": func(c *float64) string {
		if c == nil {
			return "—"
		}
		return fmt.Sprintf("$%.4f", *c)
	},
	"short":  gitws.ShortHash,
	"status": statusClass,
	"join":   strings.Join,
	"intp": func(p *int) string {
		if p == nil {
			return "—"
		}
		return fmt.Sprint(*p)
	},
	"kib":   func(n int64) string { return fmt.Sprintf("%.1f KiB", float64(n)/1024) },
	"size":  byteSize,
	"upper": strings.ToUpper,
	"dict": func(kv ...any) map[string]any {
		m := map[string]any{}
		for i := 0; i+1 < len(kv); i += 2 {
			m[kv[i].(string)] = kv[i+1]
		}
		return m
	},
}

// statusClass is the CSS class of a status or verdict.
func statusClass(s string) string {
	switch strings.ToUpper(s) {
	case "PASS", "PASSED", "APPLIED":
		return "pass"
	case "FAIL", "FAILED", "ERROR", "BUDGET", "PLAN_INVALID", "GAVE_UP", "REJECTED":
		return "fail"
	case "RUNNING":
		return "running"
	case "STUCK":
		return "stuck"
	case "INTERRUPTED", "STOPPED":
		return "interrupted"
	}
	return "neutral"
}
