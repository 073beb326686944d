package workorder

import (
	"fmt"
	"path"
	"strings"
	"unicode"
)

// NormalizePath checks p against the path rules shared by work orders and
// proposals and returns its clean, slash-separated form. The rules are
// deliberately narrower than what a filesystem accepts: a path the model or
// planner writes must mean the same file on every machine.
func NormalizePath(p string) (string, error) {
	switch {
	case p == "":
		return "", fmt.Errorf("path is empty")
	case strings.ContainsRune(p, 0):
		return "", fmt.Errorf("path %q contains a NUL byte", p)
	case strings.Contains(p, `\`):
		return "", fmt.Errorf("path %q contains a backslash; use forward slashes", p)
	case strings.HasPrefix(p, "/"):
		return "", fmt.Errorf("path %q is absolute; paths must be relative to the repository root", p)
	case hasDriveLetter(p):
		return "", fmt.Errorf("path %q starts with a drive letter", p)
	case strings.ContainsAny(p, "*?["):
		return "", fmt.Errorf("path %q contains a glob character (*, ? or [); list explicit files", p)
	}
	if err := checkInvisible("path", p); err != nil {
		return "", err
	}
	clean := path.Clean(p)
	if clean == "." {
		return "", fmt.Errorf("path %q names the repository root, not a file", p)
	}
	if clean == ".." || strings.HasPrefix(clean, "../") {
		return "", fmt.Errorf("path %q escapes the repository (\"..\" after normalisation)", p)
	}
	if hasDriveLetter(clean) {
		// "./C:x" and "a/../C:x" clean to "C:x"; without this check the
		// result would be rejected when normalised again.
		return "", fmt.Errorf("path %q starts with a drive letter after normalisation", p)
	}
	for _, part := range strings.Split(clean, "/") {
		if strings.EqualFold(part, ".git") {
			return "", fmt.Errorf("path %q is inside a .git directory", p)
		}
		if len(part) > maxNameBytes {
			return "", fmt.Errorf("path %q has a component of %d bytes; file systems allow at most %d", p, len(part), maxNameBytes)
		}
	}
	return clean, nil
}

// checkInvisible refuses characters that make a path look like another one:
// control characters (C0, DEL, C1), bidirectional overrides, isolates and
// marks (which can display "gpj.exe" as "exe.jpg") and zero-width
// characters (which make two different names look the same).
// what names s in the error: "path" or "entry".
func checkInvisible(what, s string) error {
	for _, r := range s {
		switch {
		case unicode.IsControl(r):
			return fmt.Errorf("%s %q contains a control character", what, s)
		case r >= 0x202A && r <= 0x202E, r >= 0x2066 && r <= 0x2069, r == 0x200E, r == 0x200F, r == 0x061C:
			return fmt.Errorf("%s %q contains the bidirectional control character U+%04X, which changes how it is displayed", what, s, r)
		case r >= 0x200B && r <= 0x200D, r == 0x2060, r == 0xFEFF:
			return fmt.Errorf("%s %q contains the zero-width character U+%04X, which makes it look like something else", what, s, r)
		}
	}
	return nil
}

// maxNameBytes is NAME_MAX on Linux and most file systems.
const maxNameBytes = 255

func isASCIILetter(b byte) bool { return (b|0x20) >= 'a' && (b|0x20) <= 'z' }

func hasDriveLetter(p string) bool { return len(p) >= 2 && p[1] == ':' && isASCIILetter(p[0]) }

// forbiddenPattern turns a forbidden entry into the path segments of a
// pattern, or returns ok=false for prose (an entry with whitespace). The
// syntax is .gitignore's: "*", "?" and "[...]" within a segment, "**" for any
// number of directories, a trailing "/" for a directory, a leading "/" or
// "./" anchoring at the root, and a pattern without a slash matching a name
// at any depth. A pattern covers a path when it matches the path or one of
// its parent directories.
func forbiddenPattern(entry string) (segs []string, ok bool, err error) {
	if err := checkInvisible("entry", entry); err != nil {
		return nil, false, err // prose too: a rule shown to the model must read as it is
	}
	entry = strings.TrimSpace(entry)
	if entry == "" || strings.ContainsFunc(entry, unicode.IsSpace) {
		return nil, false, nil
	}
	body := strings.TrimSuffix(entry, "/")
	anchored := strings.Contains(body, "/")
	body = path.Clean("/" + strings.TrimPrefix(body, "./"))[1:]
	if body == "" {
		return nil, false, fmt.Errorf("pattern %q names the repository root", entry)
	}
	segs = strings.Split(body, "/")
	for _, seg := range segs {
		if _, err := path.Match(seg, ""); err != nil || seg == "" {
			return nil, false, fmt.Errorf("pattern %q is not a valid path pattern", entry)
		}
	}
	if !anchored {
		segs = append([]string{"**"}, segs...)
	}
	return segs, true, nil
}

// matchPrefix reports whether the pattern segments match p's segments or a
// leading part of them (a parent directory of p).
func matchPrefix(pat, p []string) bool {
	if len(pat) == 0 {
		return true // the pattern matched a parent directory, or p itself
	}
	if pat[0] == "**" {
		for i := 0; i <= len(p); i++ {
			if matchPrefix(pat[1:], p[i:]) {
				return true
			}
		}
		return false
	}
	if len(p) == 0 {
		return false
	}
	ok, _ := path.Match(pat[0], p[0])
	return ok && matchPrefix(pat[1:], p[1:])
}

// forbiddenMatch reports whether the normalised path p is covered by one
// forbidden entry.
func forbiddenMatch(entry, p string) bool {
	segs, ok, err := forbiddenPattern(entry)
	return ok && err == nil && matchPrefix(segs, strings.Split(p, "/"))
}

// IsForbidden reports whether the normalised path p matches any entry of the
// work order's forbidden list.
func (w *WorkOrder) IsForbidden(p string) bool {
	for _, f := range w.Forbidden {
		if forbiddenMatch(f, p) {
			return true
		}
	}
	return false
}
