package edit

import (
	"path"
	"strings"
	"unicode"
)

// minElidedBase is the fewest non-blank base lines for which a rewrite is
// judged: a smaller file is cheap to send whole, and a rewrite of it is
// plausible.
const minElidedBase = 10

// Elided reports whether content, a whole-file rewrite of base, contains an
// elision line base does not have ("... rest of code",
// "// ... existing code ...", "# ... unchanged", "/* ... */ remaining",
// "<!-- ... -->" and the like, in any common comment syntax: //, #, --, ;,
// /* */, <!-- -->, or bare) while fewer than half of base's non-blank lines
// survive in content. It returns the first such line: its 1-based number in
// content and its text. Code that merely uses "..." (Python's Ellipsis, a
// JavaScript spread, Go's variadic calls) is not an elision; in prose files
// (Markdown, text) only an HTML comment is. A base of fewer than 10
// non-blank lines is never judged.
func Elided(path, base, content string) (line int, text string, ok bool) {
	if base == "" || content == "" {
		return 0, "", false
	}
	have := map[string]int{} // non-blank trimmed base lines, counted
	nonBlank := 0
	for _, l := range splitLines(base) {
		if t := strings.TrimSpace(l); t != "" {
			have[t]++
			nonBlank++
		}
	}
	if nonBlank < minElidedBase {
		return 0, "", false
	}
	prose := isProse(path)
	lines := splitLines(content)
	for i, l := range lines {
		if t := strings.TrimSpace(l); t != "" && have[t] == 0 && isElision(t, prose) {
			line, text = i+1, strings.TrimSuffix(l, "\r")
			break
		}
	}
	if line == 0 {
		return 0, "", false
	}
	kept := 0
	for _, l := range lines {
		if t := strings.TrimSpace(l); have[t] > 0 {
			have[t]--
			kept++
		}
	}
	if 2*kept >= nonBlank {
		return 0, "", false
	}
	return line, text, true
}

// isProse reports whether the file is prose, where "..." is ordinary text.
func isProse(p string) bool {
	name := strings.ToLower(path.Base(p))
	switch path.Ext(name) {
	case ".md", ".markdown", ".txt", ".rst", ".adoc", ".asciidoc", ".org":
		return true
	}
	for _, n := range []string{"readme", "license", "licence", "changelog", "notice", "authors", "contributing"} {
		if name == n {
			return true
		}
	}
	return false
}

// lineComments open a comment running to the end of the line.
var lineComments = []string{"//", "#", "--", ";", "*"}

// elisionWords are the words that, next to "...", say code was left out.
var elisionWords = map[string]bool{
	"rest": true, "remaining": true, "remainder": true, "existing": true, "unchanged": true,
	"same": true, "omitted": true, "omit": true, "elided": true, "snip": true, "snipped": true,
	"truncated": true, "previous": true, "previously": true, "preceding": true, "other": true,
	"others": true, "more": true, "etc": true, "original": true, "untouched": true, "skip": true,
	"skipped": true, "brevity": true, "before": true, "above": true, "below": true, "kept": true,
	"keep": true, "unmodified": true, "retained": true,
}

// elisionPhrases say it without "...", in a comment.
var elisionPhrases = []string{
	"rest of the", "rest of code", "rest of file", "rest of this", "existing code", "existing implementation",
	"remains unchanged", "remain unchanged", "remains the same", "remain the same", "stays the same",
	"unchanged code", "code unchanged", "for brevity", "same as before", "as before", "previous code",
	"code omitted", "omitted code",
}

// isElision reports whether the trimmed line t says that code was left out.
func isElision(t string, prose bool) bool {
	if prose && !strings.HasPrefix(t, "<!--") {
		return false
	}
	s, comment := t, false
	for _, tok := range []string{"<!--", "-->", "/*", "*/"} {
		if strings.Contains(s, tok) {
			s, comment = strings.ReplaceAll(s, tok, " "), true
		}
	}
	s = strings.TrimSpace(s)
	if comment && strings.HasPrefix(s, "{") && strings.HasSuffix(s, "}") { // JSX: {/* ... */}
		s = strings.TrimSpace(s[1 : len(s)-1])
	}
	for stripped := true; stripped; {
		stripped = false
		for _, p := range lineComments {
			if strings.HasPrefix(s, p) {
				s, comment, stripped = strings.TrimSpace(s[len(p):]), true, true
			}
		}
	}
	dots := strings.Contains(s, "...") || strings.Contains(s, "…")
	words := strings.FieldsFunc(strings.ToLower(s), func(r rune) bool { return !unicode.IsLetter(r) })
	keyword := false
	for _, w := range words {
		keyword = keyword || elisionWords[w]
	}
	if comment {
		if dots && (keyword || strings.Trim(s, ".… \t") == "") {
			return true
		}
		low := strings.ToLower(s)
		for _, p := range elisionPhrases {
			if strings.Contains(low, p) {
				return true
			}
		}
		return false
	}
	// Bare: "... rest of code", "...remaining methods unchanged...": it opens
	// with an ellipsis followed by a space or closes with one, and the rest
	// is words.
	if !keyword || len(words) < 2 {
		return false
	}
	body, open := trimEllipsis(s, true)
	body, closed := trimEllipsis(body, false)
	if !open || (!closed && !strings.HasPrefix(body, " ")) {
		return false
	}
	for _, r := range body {
		if !unicode.IsLetter(r) && !unicode.IsDigit(r) && !strings.ContainsRune(" ()'-:", r) {
			return false
		}
	}
	return true
}

// trimEllipsis removes "..." or "…" from the start (or the end) of s.
func trimEllipsis(s string, start bool) (string, bool) {
	for _, e := range []string{"...", "…"} {
		if start && strings.HasPrefix(s, e) {
			return strings.TrimLeft(s[len(e):], "."), true
		}
		if !start && strings.HasSuffix(s, e) {
			return strings.TrimRight(s[:len(s)-len(e)], "."), true
		}
	}
	return s, false
}
