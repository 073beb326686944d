package loop

import (
	"fmt"
	"strings"
	"unicode/utf8"

	"github.com/factory-harness/factory/internal/loop/tree"
)

// Bounds of the prompt pack, in bytes (lines for the outline). A part cut
// short ends with a marker saying how much was left out.
const (
	goalMax        = 32 << 10
	memoryMax      = 16 << 10
	subtreeMax     = 64 << 10
	invalidTreeMax = 64 << 10
	outlineLines   = 200
	outlineTitle   = 100
)

// promptInput is everything a prompt pack is built from; identical inputs
// give identical bytes.
type promptInput struct {
	RunID     string
	Iteration int
	Guard     []string
	Goal      string
	Memory    map[string]string // by path, from memoryFiles
	// Normal mode.
	Tree      *tree.Node
	Selection tree.Selection
	// REPAIR mode.
	Repair   bool
	Problems []string
	Invalid  []byte
}

const contract = `You are one fresh session of an agent loop run by ` + "`factory loop`" + `. The runner, not you,
decides what counts as progress. Rules:

- The task tree is .runner/tree.json (schema: schemas/task_tree/v1.schema.json). Keep it strictly
  valid JSON that matches the schema: only the fields id, order, title, goal, acceptance, passes,
  attempts, max_attempts, children; ids match ^[a-z0-9][a-z0-9-]{0,63}$ and are unique.
- Work on the selected leaf only. Either EXECUTE it (change files outside .runner/ so that its
  acceptance holds) or DECOMPOSE it (add children to it in tree.json and change nothing outside
  .runner/). A DECOMPOSE that adds no children to the selected leaf costs it an attempt.
- passes, attempts and max_attempts are runner-owned: any change you make to them is overwritten.
  New nodes start with passes=false and attempts=0; you may set their max_attempts up to the default.
- A node with passes=true is immutable: do not change, move or remove it. Improve things with new
  nodes. Changing a passed node makes the tree invalid and costs the next iteration a repair.
- Do not commit, switch branches or touch .git: the runner commits every iteration itself, and an
  iteration that moved HEAD is undone and costs an attempt.
- Record assumptions in .runner/ASSUMPTIONS.md and questions for a human in
  .runner/HUMAN_QUESTIONS.md. Progress lives only in the tree.
`

func buildPrompt(in promptInput) []byte {
	var b strings.Builder
	mode := "EXECUTE or DECOMPOSE the selected leaf"
	if in.Repair {
		mode = "REPAIR TREE"
	}
	fmt.Fprintf(&b, "# factory loop: run %s, iteration %d (%s)\n\n", in.RunID, in.Iteration, mode)
	b.WriteString("## 1. Runner contract\n\n" + contract + "\n")
	b.WriteString("## 2. Goal (" + GoalPath + ")\n\n" + bounded(in.Goal, goalMax) + "\n\n")
	if in.Repair {
		b.WriteString("## 3. REPAIR TREE: the tree is invalid\n\n")
		b.WriteString("Make .runner/tree.json valid again; no leaf is selected. Restore passed nodes exactly as they\n" +
			"were. The runner validated it and found:\n\n")
		for _, p := range in.Problems {
			b.WriteString("- " + p + "\n")
		}
		b.WriteString("\n## 4. The invalid tree (" + TreePath + ")\n\n````\n" + bounded(string(in.Invalid), invalidTreeMax) + "\n````\n\n")
	} else {
		sel := in.Selection
		fmt.Fprintf(&b, "## 3. Selected leaf: %s (attempts %d/%d)\n\n", sel.PathString(), sel.Node.Attempts, sel.Node.MaxAttempts)
		b.WriteString("```json\n" + bounded(string(tree.Canonical(sel.Node)), subtreeMax) + "```\n\n")
		b.WriteString("## 4. The rest of the tree\n\n" + outline(in.Tree, sel.Node.ID) + "\n")
	}
	b.WriteString("## 5. Memory\n\n")
	for _, p := range memoryFiles {
		b.WriteString("### " + p + "\n\n" + bounded(in.Memory[p], memoryMax) + "\n\n")
	}
	b.WriteString("## 6. Guard contract\n\n")
	if in.Repair {
		b.WriteString("No guard runs after a REPAIR TREE iteration; the runner only validates the tree.\n")
	} else {
		fmt.Fprintf(&b, "If you change any file outside .runner/ (EXECUTE), the runner then runs the guard %s in the\n"+
			"repository root, within what is left of this iteration's time budget. Only its exit code 0 marks the\n"+
			"selected leaf passed. Run it yourself before you finish.\n", quoteArgv(in.Guard))
	}
	return []byte(b.String())
}

// outline renders the tree as an indented list, marking the selected node,
// bounded to outlineLines lines.
func outline(root *tree.Node, selected string) string {
	var lines []string
	root.Walk(func(n, _ *tree.Node, depth int) {
		lines = append(lines, fmt.Sprintf("%s- [%s] %s: %s (attempts %d/%d)%s", strings.Repeat("  ", depth-1),
			mark(n), n.ID, cut(n.Title, outlineTitle), n.Attempts, n.MaxAttempts, map[bool]string{true: "  <- selected"}[n.ID == selected]))
	})
	if len(lines) > outlineLines {
		extra := len(lines) - outlineLines
		lines = append(lines[:outlineLines], fmt.Sprintf("[... truncated by factory loop: %d more nodes]", extra))
	}
	return strings.Join(lines, "\n") + "\n"
}

func mark(n *tree.Node) string {
	switch {
	case n.Passes:
		return "pass"
	case n.Stuck():
		return "stuck"
	}
	return "open"
}

// bounded returns s cut to at most max bytes at a character boundary, with
// a marker when cut.
func bounded(s string, max int) string {
	if len(s) <= max {
		return strings.TrimRight(s, "\n")
	}
	cutAt := max
	for cutAt > 0 && !utf8.RuneStart(s[cutAt]) {
		cutAt--
	}
	return s[:cutAt] + fmt.Sprintf("\n[... truncated by factory loop: %d of %d bytes shown]", cutAt, len(s))
}

// cut shortens a one-line text to at most n bytes, marking the cut with "…".
func cut(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n] + "…"
}

func quoteArgv(argv []string) string {
	q := make([]string, len(argv))
	for i, a := range argv {
		q[i] = fmt.Sprintf("%q", a)
	}
	return "[" + strings.Join(q, ", ") + "]"
}
