package forge

import (
	"bytes"
	"encoding/json"
	"fmt"
	"html"
	"slices"
	"strings"
)

// The markers around the part of a pull request's body factory owns; the
// rest is the user's and is left as it is.
const (
	BeginMarker = "<!-- factory:begin -->"
	EndMarker   = "<!-- factory:end -->"
	statePrefix = "<!-- factory:state "
)

// Body is what the managed block says.
type Body struct {
	// Build is the build's plan hash.
	Build string
	// Refs is "Fixes #N" or "Refs #N" (or empty).
	Refs string
	// Source says where the work came from: the spec's path or the issue.
	Source string
	// Spec is the spec's text, shown folded (bounded by the caller).
	Spec   string
	Orders []Order
	// Tokens and CostUSD are what the build spent (CostUSD nil: unknown).
	Tokens  int64
	CostUSD *float64
	// Failed describes the order that stopped the build, if one did.
	Failed string
	// Rerun is the command that reproduces or resumes the build.
	Rerun  string
	Ledger Ledger
}

// Order is one work order's line.
type Order struct {
	ID, Title, Status, Commit string
	Stage                     string // a failed order's failure stage
	Evidence                  []Evidence
}

// Evidence is one command that checked an order, and its outcome.
type Evidence struct {
	Kind     string // verify or acceptance
	Command  string
	ExitCode int
}

// Ledger is what the harness remembers between runs, kept in the block.
type Ledger struct {
	// Handled are the ids of the review comments already turned into a
	// follow-up, so each is handled once.
	Handled []int64 `json:"handled,omitempty"`
	// Failure is the key of the last failure commented on, so a rerun
	// does not comment twice.
	Failure string `json:"failure,omitempty"`
	// Replied are the follow-up builds already answered.
	Replied []string `json:"replied,omitempty"`
	// Issue and Refs are the issue the pull request resolves and how it
	// says so (Fixes or Refs), kept for the builds that follow.
	Issue int    `json:"issue,omitempty"`
	Refs  string `json:"refs,omitempty"`
	// Build and Orders are the build the block shows, and Earlier the
	// builds it showed before (a follow-up builds on the same branch):
	// the block keeps their plans, oldest first.
	Build   string      `json:"build,omitempty"`
	Orders  []OrderLine `json:"orders,omitempty"`
	Earlier []Earlier   `json:"earlier,omitempty"`
}

// OrderLine is an order of a build as the block showed it.
type OrderLine struct {
	ID     string `json:"id"`
	Title  string `json:"title"`
	Status string `json:"status"`
	Commit string `json:"commit,omitempty"`
}

// Earlier is a build the block showed before.
type Earlier struct {
	Build  string      `json:"build"`
	Orders []OrderLine `json:"orders"`
}

// maxEarlier bounds the earlier builds a block keeps, and the state they
// take half of what a ledger may hold: the oldest go first, so that the
// ledger (the comments handled) always reads back.
const (
	maxEarlier      = 20
	maxEarlierBytes = maxStateBytes / 2
	maxTitleBytes   = 100
)

// Shows returns l for a block showing build with orders: the build it
// showed before, when another, joins the earlier ones.
func (l Ledger) Shows(build string, orders []Order) Ledger {
	if l.Build != "" && l.Build != build {
		l.Earlier = append(slices.Clone(l.Earlier), Earlier{Build: l.Build, Orders: l.Orders})
		l.Earlier = l.Earlier[max(0, len(l.Earlier)-maxEarlier):]
	}
	l.Build, l.Orders = build, nil
	for _, o := range orders {
		title := o.Title
		if len(title) > maxTitleBytes {
			title = strings.ToValidUTF8(title[:maxTitleBytes], "") + "…"
		}
		l.Orders = append(l.Orders, OrderLine{ID: o.ID, Title: title, Status: o.status(), Commit: short(o.Commit)})
	}
	for len(l.Earlier) > 0 {
		data, _ := json.Marshal(l) // plain types: cannot fail
		if len(data) <= maxEarlierBytes {
			break
		}
		l.Earlier = l.Earlier[1:]
	}
	return l
}

// status is the order's status as the block shows it: a failed one's
// with its stage.
func (o Order) status() string {
	if o.Stage != "" {
		return o.Status + " (" + o.Stage + ")"
	}
	return o.Status
}

// maxStateBytes bounds the state a body may carry: a body is written by
// anyone who can edit the pull request.
const maxStateBytes = 64 << 10

// Render returns the managed block.
func Render(b Body) string {
	var w strings.Builder
	w.WriteString(BeginMarker + "\n")
	if b.Refs != "" {
		w.WriteString(inert(b.Refs) + "\n\n")
	}
	fmt.Fprintf(&w, "Built by [factory](https://github.com/factory-harness/factory), build `%s`", inert(b.Build))
	if b.Source != "" {
		fmt.Fprintf(&w, " from %s", inert(b.Source))
	}
	w.WriteString(".\n")
	if b.Failed != "" {
		fmt.Fprintf(&w, "\n**Not finished:** %s\n", inert(b.Failed))
	}
	if b.Spec != "" {
		w.WriteString("\n<details><summary>Spec</summary>\n\n")
		w.WriteString(fence(b.Spec, "text"))
		w.WriteString("</details>\n")
	}
	if len(b.Orders) > 0 {
		w.WriteString("\n### Plan\n\n| Order | Title | Status | Commit |\n|---|---|---|---|\n")
		for _, o := range b.Orders {
			fmt.Fprintf(&w, "| %s | %s | %s | %s |\n", cell(o.ID), cell(o.Title), cell(o.status()), cell(short(o.Commit)))
		}
		evidence := false
		for _, o := range b.Orders {
			if len(o.Evidence) == 0 {
				continue
			}
			if !evidence {
				w.WriteString("\n### Evidence\n\nThe commands that checked each order, run by the harness, and their exit codes:\n\n")
				evidence = true
			}
			fmt.Fprintf(&w, "- **%s**\n", cell(o.ID))
			for _, e := range o.Evidence {
				mark := "passed"
				if e.ExitCode != 0 {
					mark = "failed"
				}
				fmt.Fprintf(&w, "  - %s %s: exit %d, %s\n", e.Kind, code(e.Command), e.ExitCode, mark)
			}
		}
	}
	if len(b.Ledger.Earlier) > 0 {
		w.WriteString("\n### Earlier builds on this branch\n")
		for _, e := range b.Ledger.Earlier {
			fmt.Fprintf(&w, "\n<details><summary>build <code>%s</code></summary>\n\n| Order | Title | Status | Commit |\n|---|---|---|---|\n", html.EscapeString(inert(e.Build)))
			for _, o := range e.Orders {
				fmt.Fprintf(&w, "| %s | %s | %s | %s |\n", cell(o.ID), cell(o.Title), cell(o.Status), cell(short(o.Commit)))
			}
			w.WriteString("\n</details>\n")
		}
	}
	w.WriteString("\n### Spend\n\n")
	cost := "unknown (a model's price is not known)"
	if b.CostUSD != nil {
		cost = fmt.Sprintf("$%.4f", *b.CostUSD)
	}
	fmt.Fprintf(&w, "%d tokens, %s.\n", b.Tokens, cost)
	if b.Rerun != "" {
		w.WriteString("\n### Rerun\n\n")
		w.WriteString(fence(b.Rerun, "sh"))
	}
	st := b.Ledger
	st.Handled = slices.Clone(st.Handled)
	slices.Sort(st.Handled)
	st.Handled = slices.Compact(st.Handled)
	data, _ := json.Marshal(st) // plain types: cannot fail
	w.WriteString("\n" + statePrefix + inert(string(data)) + " -->\n")
	w.WriteString(EndMarker)
	return w.String()
}

// Merge puts block in place of the managed block of body, leaving the rest
// as it is; a body without one gets the block first, the user's text
// after it.
func Merge(body, block string) string {
	if start, end, ok := blockSpan(body); ok {
		return body[:start] + block + body[end:]
	}
	if strings.TrimSpace(body) == "" {
		return block
	}
	return block + "\n\n" + body
}

// ReadLedger returns the ledger the managed block of body holds; a body
// without a block, or with one that does not parse, holds the zero Ledger.
// ok is false in the latter case, so a caller can say so.
func ReadLedger(body string) (st Ledger, ok bool) {
	start, end, found := blockSpan(body)
	if !found {
		return Ledger{}, true
	}
	block := body[start:end]
	i := strings.LastIndex(block, statePrefix)
	if i < 0 {
		return Ledger{}, false
	}
	rest := block[i+len(statePrefix):]
	j := strings.Index(rest, " -->")
	if j < 0 || j > maxStateBytes {
		return Ledger{}, false
	}
	dec := json.NewDecoder(bytes.NewReader([]byte(rest[:j])))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&st); err != nil || dec.More() {
		return Ledger{}, false
	}
	return st, true
}

// blockSpan finds the managed block: the first begin marker and the first
// end marker after it. Text factory puts inside never holds a marker
// (inert), so only a user's edit can make this ambiguous.
func blockSpan(body string) (start, end int, ok bool) {
	start = strings.Index(body, BeginMarker)
	if start < 0 {
		return 0, 0, false
	}
	n := strings.Index(body[start:], EndMarker)
	if n < 0 {
		return 0, 0, false
	}
	return start, start + n + len(EndMarker), true
}

// inert makes text unable to open or close an HTML comment, so nothing
// factory copies into the block (a title, a command, an issue's words)
// can end the block or the state early.
func inert(s string) string {
	s = strings.ReplaceAll(s, "<!--", "<!- -")
	return strings.ReplaceAll(s, "-->", "- ->")
}

// cell makes s one table cell: one line, no pipes.
func cell(s string) string {
	s = strings.Join(strings.Fields(s), " ")
	return inert(strings.ReplaceAll(s, "|", `\|`))
}

// code is s as an inline code span, whatever backticks it holds.
func code(s string) string {
	s = strings.Join(strings.Fields(s), " ")
	ticks := strings.Repeat("`", longestRun(s, '`')+1)
	return ticks + " " + inert(s) + " " + ticks
}

// fence is s as a fenced block longer than any fence inside it.
func fence(s, lang string) string {
	ticks := strings.Repeat("`", max(3, longestRun(s, '`')+1))
	s = strings.TrimRight(inert(s), "\n")
	return ticks + lang + "\n" + s + "\n" + ticks + "\n"
}

func longestRun(s string, c byte) int {
	best, n := 0, 0
	for i := 0; i < len(s); i++ {
		if s[i] == c {
			n++
			best = max(best, n)
		} else {
			n = 0
		}
	}
	return best
}

func short(commit string) string {
	if len(commit) > 12 {
		return commit[:12]
	}
	return commit
}
