package serve

import (
	"bufio"
	"bytes"
	"strconv"
	"strings"

	"github.com/pmezard/go-difflib/difflib"
)

// maxDiffLines bounds the lines one file's diff shows.
const maxDiffLines = 4000

// maxPatchLine bounds one line of a patch parsePatch reads; the diff is cut
// there, with a note.
const maxPatchLine = 16 << 20

// maxLineNumber bounds a hunk's start line: beyond it (or unreadable) the
// hunk's lines get no numbers, rather than numbers that overflow.
const maxLineNumber = 1 << 31

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
	sc.Buffer(make([]byte, min(len(patch)+1, 64<<10)), maxPatchLine) // grown for a longer line
	sc.Split(scanLF)
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
			// git ends a name holding a space with a tab here (GNU diff
			// puts a timestamp after one): the name is before it, and
			// unambiguous, where "diff --git a/x b/y b/x b/y" is not.
			name, _, _ := strings.Cut(strings.TrimPrefix(line, "+++ "), "\t")
			if cur != nil && name != "/dev/null" {
				cur.Path = strings.TrimPrefix(name, "b/")
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
	if sc.Err() != nil { // a line over maxPatchLine: say where the diff stops
		if cur == nil {
			files = append(files, DiffFile{})
			cur = &files[len(files)-1]
		}
		cur.Note = "diff cut at a line over " + strconv.Itoa(maxPatchLine>>20) + " MiB"
	}
	return files
}

// scanLF splits at "\n" only: a carriage return is part of the line, as
// it is of the file (bufio.ScanLines would drop one ending a line).
func scanLF(data []byte, atEOF bool) (advance int, token []byte, err error) {
	if i := bytes.IndexByte(data, '\n'); i >= 0 {
		return i + 1, data[:i], nil
	}
	if atEOF && len(data) > 0 {
		return len(data), data, nil
	}
	return 0, nil, nil
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
		n, err := strconv.Atoi(s)
		if err != nil || n > maxLineNumber { // no number to count from (nor to overflow)
			return 0
		}
		return n
	}
	return num(f[1]), num(f[2])
}

// gitPath takes the b/ path of "diff --git a/x b/x".
func gitPath(line string) string {
	rest := strings.TrimPrefix(line, "diff --git ")
	// "a/P b/P": the one reading where both names are the same (a name
	// may hold " b/" itself).
	if n := (len(rest) - 5) / 2; len(rest) >= 5 && len(rest)%2 == 1 && strings.HasPrefix(rest, "a/") &&
		rest[2+n:5+n] == " b/" && rest[2:2+n] == rest[5+n:] {
		return rest[5+n:]
	}
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
