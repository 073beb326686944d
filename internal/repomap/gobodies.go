package repomap

import "bytes"

// The map shows no code inside a Go function, yet parsing the bodies is
// most of the work: in Go's own source tree about two thirds of the bytes.
// blankGoBodies finds the bodies of a file's top-level functions with a
// lexical scan (strings, runes and comments skipped; a function's body is
// the first brace at the top level of its declaration that does not open
// a struct or interface type; a declaration without a body ends, as Go's
// semicolon rule says, at a line break after an identifier, a literal or
// a closing bracket) and blanks them: every byte but a line break becomes
// a space, so every offset, row and column stays where it was and
// tree-sitter reads an empty block. For a file that parses without an
// error the definitions and signatures are the same (the headers are not
// touched, and signatures are read from the original bytes): extract
// checks that, and the differential test checks it on many files.

// blankGoBodies returns a copy of src with the bodies of its top-level
// functions (and function literals at the top level of var declarations)
// blanked, and false when the scan finds something it does not expect
// (unbalanced brackets, an unterminated string or comment), in which case
// the caller parses src as it is.
func blankGoBodies(src []byte) ([]byte, bool) {
	var bodies [][2]int   // [open brace + 1, close brace)
	depth, braces := 0, 0 // ( and [ nesting; { nesting
	inFunc := false       // after a top-level func keyword, before its body
	// The last token: what decides whether a line break ends a
	// declaration, and whether a brace opens a struct or interface.
	const (
		tokOther = iota
		tokEnds  // an identifier, a literal, ) ] or }: a line break after it ends a statement
		tokType  // struct or interface
	)
	last := tokOther
	n := len(src)
	for i := 0; i < n; {
		c := src[i]
		switch {
		case c == '\n':
			if inFunc && depth == 0 && braces == 0 && last == tokEnds {
				inFunc = false // a declaration without a body (assembly)
			}
			last = tokOther
			i++
		case c == ' ' || c == '\t' || c == '\r':
			i++
		case c == '/' && i+1 < n && src[i+1] == '/':
			for i < n && src[i] != '\n' {
				i++
			}
		case c == '/' && i+1 < n && src[i+1] == '*':
			end := indexFrom(src, i+2, "*/")
			if end < 0 {
				return nil, false
			}
			for _, b := range src[i:end] {
				if b == '\n' { // a comment with a line break is one
					if inFunc && depth == 0 && braces == 0 && last == tokEnds {
						inFunc = false
					}
					last = tokOther
					break
				}
			}
			i = end + 2
		case c == '"' || c == '\'' || c == '`':
			j, ok := skipGoQuoted(src, i)
			if !ok {
				return nil, false
			}
			i, last = j, tokEnds
		case c == '_' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= 0x80:
			j := i + 1
			for j < n && (src[j] == '_' || src[j] >= 'a' && src[j] <= 'z' || src[j] >= 'A' && src[j] <= 'Z' || src[j] >= '0' && src[j] <= '9' || src[j] >= 0x80) {
				j++
			}
			switch string(src[i:j]) {
			case "func":
				if depth == 0 && braces == 0 {
					inFunc = true
				}
				last = tokOther
			case "struct", "interface":
				last = tokType
			default:
				last = tokEnds
			}
			i = j
		case c >= '0' && c <= '9' || c == '.' && i+1 < n && src[i+1] >= '0' && src[i+1] <= '9':
			j := i + 1
			for j < n && (src[j] == '_' || src[j] == '.' || src[j] >= 'a' && src[j] <= 'z' || src[j] >= 'A' && src[j] <= 'Z' || src[j] >= '0' && src[j] <= '9' ||
				(src[j] == '+' || src[j] == '-') && (src[j-1]|0x20 == 'e' || src[j-1]|0x20 == 'p')) {
				j++
			}
			i, last = j, tokEnds
		case c == '(' || c == '[':
			depth++
			i, last = i+1, tokOther
		case c == ')' || c == ']':
			if depth--; depth < 0 {
				return nil, false
			}
			i, last = i+1, tokEnds
		case c == '{':
			if inFunc && depth == 0 && braces == 0 && last != tokType {
				end, ok := matchGoBrace(src, i)
				if !ok {
					return nil, false
				}
				bodies = append(bodies, [2]int{i + 1, end})
				inFunc = false
				i, last = end+1, tokEnds
				continue
			}
			braces++
			i, last = i+1, tokOther
		case c == '}':
			if braces--; braces < 0 {
				return nil, false
			}
			i, last = i+1, tokEnds
		case (c == '+' || c == '-') && i+1 < n && src[i+1] == c:
			i, last = i+2, tokEnds
		default:
			i, last = i+1, tokOther
		}
	}
	if depth != 0 || braces != 0 {
		return nil, false
	}
	if len(bodies) == 0 {
		return src, true
	}
	out := make([]byte, n)
	copy(out, src)
	for _, b := range bodies {
		for k := b[0]; k < b[1]; k++ {
			if out[k] != '\n' {
				out[k] = ' '
			}
		}
	}
	return out, true
}

// matchGoBrace returns the index of the brace closing the one at open.
func matchGoBrace(src []byte, open int) (int, bool) {
	level := 0
	for i := open; i < len(src); {
		switch c := src[i]; {
		case c == '{':
			level++
			i++
		case c == '}':
			if level--; level == 0 {
				return i, true
			}
			i++
		case c == '/' && i+1 < len(src) && src[i+1] == '/':
			for i < len(src) && src[i] != '\n' {
				i++
			}
		case c == '/' && i+1 < len(src) && src[i+1] == '*':
			end := indexFrom(src, i+2, "*/")
			if end < 0 {
				return 0, false
			}
			i = end + 2
		case c == '"' || c == '\'' || c == '`':
			j, ok := skipGoQuoted(src, i)
			if !ok {
				return 0, false
			}
			i = j
		default:
			i++
		}
	}
	return 0, false
}

// skipGoQuoted returns the index just past the string, raw string or rune
// literal starting at i.
func skipGoQuoted(src []byte, i int) (int, bool) {
	q := src[i]
	for j := i + 1; j < len(src); j++ {
		switch src[j] {
		case q:
			return j + 1, true
		case '\\':
			if q != '`' {
				j++
			}
		case '\n':
			if q != '`' {
				return 0, false
			}
		}
	}
	return 0, false
}

func indexFrom(src []byte, from int, s string) int {
	if i := bytes.Index(src[from:], []byte(s)); i >= 0 {
		return from + i
	}
	return -1
}
