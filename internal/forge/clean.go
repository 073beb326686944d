package forge

import (
	"strings"
	"unicode"
)

// CleanText is issue or comment text made fit to become a spec: HTML
// comments (which a forge does not show, so a reader cannot see what they
// ask) removed, an unclosed one to the end; invisible and
// direction-changing characters (Unicode's format class: zero-width
// spaces and joiners, bidi overrides, tag characters) and control
// characters but tab and newline removed; line ends made \n. What is left
// is what a person reading the issue on the forge sees.
func CleanText(s string) string {
	s = strings.Map(func(r rune) rune {
		switch {
		case r == '\n' || r == '\t':
			return r
		case r == '\r':
			return '\n'
		case unicode.IsControl(r), unicode.Is(unicode.Cf, r):
			return -1
		}
		return r
	}, strings.ReplaceAll(strings.ToValidUTF8(s, "\uFFFD"), "\r\n", "\n"))
	var b strings.Builder
	for {
		i := strings.Index(s, "<!--")
		if i < 0 {
			break
		}
		b.WriteString(s[:i])
		j := strings.Index(s[i+4:], "-->")
		if j < 0 {
			s = ""
			break
		}
		s = s[i+4+j+3:]
	}
	b.WriteString(s)
	// A removal can join "<!" and "--" into a new opening: shown as text.
	return strings.ReplaceAll(b.String(), "<!--", "<!- -")
}
