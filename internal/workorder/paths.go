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
	for _, r := range p {
		if unicode.IsControl(r) {
			return "", fmt.Errorf("path %q contains a control character", p)
		}
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

// maxNameBytes is NAME_MAX on Linux and most file systems.
const maxNameBytes = 255

func isASCIILetter(b byte) bool { return (b|0x20) >= 'a' && (b|0x20) <= 'z' }

func hasDriveLetter(p string) bool { return len(p) >= 2 && p[1] == ':' && isASCIILetter(p[0]) }

// forbiddenMatch reports whether the normalised path p is covered by one
// forbidden entry. Entries without whitespace are path patterns: an exact
// file, a directory prefix ("secrets/" or "secrets"), or a path.Match glob.
// Entries with whitespace are prose constraints, shown to the model only.
func forbiddenMatch(entry, p string) bool {
	entry = strings.TrimSpace(entry)
	if entry == "" || strings.ContainsFunc(entry, unicode.IsSpace) {
		return false
	}
	entry = strings.TrimPrefix(entry, "./")
	if strings.ContainsAny(entry, "*?[") {
		ok, err := path.Match(entry, p)
		if !strings.Contains(entry, "/") && err == nil && !ok {
			// As in .gitignore, a pattern without a slash matches the
			// name at any depth: "*.lock" also covers "sub/x.lock".
			ok, err = path.Match(entry, path.Base(p))
		}
		return err == nil && ok
	}
	dir := strings.TrimSuffix(entry, "/")
	if dir == "" {
		return false
	}
	dir = path.Clean(dir)
	return p == dir || strings.HasPrefix(p, dir+"/")
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
