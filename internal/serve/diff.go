package serve

import (
	"bufio"
	"strconv"
	"strings"

	"github.com/pmezard/go-difflib/difflib"
)

// maxDiffLines bounds the lines one file's diff shows.
const maxDiffLines = 4000

// DiffFile is one file's unified diff, ready to show with line numbers.
type DiffFile struct {
	Path  string     `json:"path"`
	New   bool       `json:"new,omitempty"`
	Note  string     `json:"note,omitempty"`
	Lines []DiffLine `json:"lines"`
}

// DiffLine is one line of a diff: Kind is ' ', '+', '-' or '@' (a hunk
// header); Old and New are line numbers, 0 where the side has none.
type DiffLine struct {
	Kind string `json:"kind"`
	Old  int    `json:"old,omitempty"`
	New  int    `json:"new,omitempty"`
	Text string `json:"text"`
}

// textDiff diffs two texts with three lines of context.
func textDiff(path, before, after string) DiffFile {
	d := DiffFile{Path: path, New: before == ""}
	ud := difflib.UnifiedDiff{A: splitLines(before), B: splitLines(after), Context: 3}
	text, err := difflib.GetUnifiedDiffString(ud)
	if err != nil {
		d.Note = "diff failed: " + err.Error()
		return d
	}
	files := parsePatch("--- a\n+++ b\n" + text)
	if len(files) == 1 {
		d.Lines, d.Note = files[0].Lines, files[0].Note
	} else if before == after {
		d.Note = "unchanged"
	}
	return d
}

// parsePatch reads a unified diff (git's or difflib's) into files with
// line numbers.
func parsePatch(patch string) []DiffFile {
	var files []DiffFile
	var cur *DiffFile
	oldN, newN, inHunk := 0, 0, false
	sc := bufio.NewScanner(strings.NewReader(patch))
	sc.Buffer(make([]byte, 64<<10), 16<<20)
	for sc.Scan() {
		line := sc.Text()
		switch {
		case strings.HasPrefix(line, "diff --git "):
			files = append(files, DiffFile{Path: gitPath(line)})
			cur, inHunk = &files[len(files)-1], false
		case !inHunk && strings.HasPrefix(line, "--- "):
			if cur == nil {
				files = append(files, DiffFile{})
				cur = &files[len(files)-1]
			}
			if strings.TrimPrefix(line, "--- ") == "/dev/null" {
				cur.New = true
			}
		case !inHunk && strings.HasPrefix(line, "+++ "):
			if cur != nil && cur.Path == "" {
				cur.Path = strings.TrimPrefix(strings.TrimPrefix(line, "+++ "), "b/")
			}
		case !inHunk && strings.HasPrefix(line, "new file mode") && cur != nil:
			cur.New = true
		case !inHunk && strings.HasPrefix(line, "Binary files") && cur != nil:
			cur.Note = "binary file"
		case strings.HasPrefix(line, "@@") && cur != nil:
			oldN, newN = hunkStart(line)
			inHunk = true
			cur.add(DiffLine{Kind: "@", Text: line})
		case inHunk && len(line) > 0 && (line[0] == '+' || line[0] == '-' || line[0] == ' '):
			l := DiffLine{Kind: line[:1], Text: line[1:]}
			switch line[0] {
			case '+':
				l.New = newN
				newN++
			case '-':
				l.Old = oldN
				oldN++
			default:
				l.Old, l.New = oldN, newN
				oldN++
				newN++
			}
			cur.add(l)
		}
	}
	return files
}

func (d *DiffFile) add(l DiffLine) {
	if len(d.Lines) == maxDiffLines {
		d.Note = "diff cut at " + strconv.Itoa(maxDiffLines) + " lines"
	}
	if len(d.Lines) >= maxDiffLines {
		return
	}
	d.Lines = append(d.Lines, l)
}

// hunkStart reads "@@ -a,b +c,d @@".
func hunkStart(h string) (oldStart, newStart int) {
	f := strings.Fields(h)
	if len(f) < 3 {
		return 0, 0
	}
	num := func(s string) int {
		s = strings.TrimLeft(s, "+-")
		s, _, _ = strings.Cut(s, ",")
		n, _ := strconv.Atoi(s)
		return n
	}
	return num(f[1]), num(f[2])
}

// gitPath takes the b/ path of "diff --git a/x b/x".
func gitPath(line string) string {
	rest := strings.TrimPrefix(line, "diff --git ")
	if i := strings.LastIndex(rest, " b/"); i >= 0 {
		return rest[i+3:]
	}
	return rest
}

// splitLines splits s after each newline; a last line without one gets it
// (difflib.SplitLines would add an empty line after a final newline).
func splitLines(s string) []string {
	if s == "" {
		return nil
	}
	lines := strings.SplitAfter(s, "\n")
	if lines[len(lines)-1] == "" {
		lines = lines[:len(lines)-1]
	} else {
		lines[len(lines)-1] += "\n"
	}
	return lines
}
