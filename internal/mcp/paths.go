package mcp

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
)

// RootRule is the rule a path argument outside every root breaks; refusals
// name it.
const RootRule = "every path argument must resolve (symlinks followed) inside one of the server's --root directories"

// roots are the directories path arguments must resolve inside, each
// absolute with its symlinks resolved.
type roots []string

// resolveRoots makes dirs absolute and resolves their symlinks; each must
// be an existing directory.
func resolveRoots(dirs []string) (roots, error) {
	if len(dirs) == 0 {
		return nil, errors.New("give at least one root directory")
	}
	var rs roots
	for _, d := range dirs {
		abs, err := filepath.Abs(d)
		if err != nil {
			return nil, fmt.Errorf("root %s: %w", d, err)
		}
		real, err := filepath.EvalSymlinks(abs)
		if err != nil {
			return nil, fmt.Errorf("root %s: %w", d, err)
		}
		if info, err := os.Stat(real); err != nil || !info.IsDir() {
			return nil, fmt.Errorf("root %s is not a directory", d)
		}
		rs = append(rs, real)
	}
	return rs, nil
}

// pathError is a path argument refused by the root rule or because it is
// not usable; its message names the argument.
type pathError struct{ msg string }

func (e *pathError) Error() string { return e.msg }

// resolve returns the real path of the argument name=p: relative paths are
// taken from the first root, symlinks of every existing part are followed
// (a part that does not exist yet cannot be one), and the result must lie
// inside a root. Callers use the returned path, never p, so what is
// checked is what is used.
func (rs roots) resolve(name, p string) (string, error) {
	if strings.TrimSpace(p) == "" {
		return "", &pathError{fmt.Sprintf("%s is empty: give a path inside %s", name, rs.list())}
	}
	if strings.ContainsRune(p, 0) {
		return "", &pathError{fmt.Sprintf("%s contains a NUL byte", name)}
	}
	if !filepath.IsAbs(p) {
		p = filepath.Join(rs[0], p)
	}
	real, err := realPath(filepath.Clean(p))
	if err != nil {
		return "", &pathError{fmt.Sprintf("%s %s: %v", name, p, err)}
	}
	for _, r := range rs {
		if real == r || strings.HasPrefix(real, r+string(filepath.Separator)) {
			return real, nil
		}
	}
	return "", &pathError{fmt.Sprintf("%s %s is refused: it resolves to %s, outside the roots (%s); %s. Nothing was done.",
		name, p, real, rs.list(), RootRule)}
}

// realPath resolves the symlinks of the longest existing prefix of the
// clean absolute path p and appends the rest.
func realPath(p string) (string, error) {
	rest := ""
	for cur := p; ; {
		real, err := filepath.EvalSymlinks(cur)
		if err == nil {
			return filepath.Join(real, rest), nil
		}
		if !errors.Is(err, fs.ErrNotExist) {
			return "", err
		}
		parent := filepath.Dir(cur)
		if parent == cur {
			return "", err
		}
		rest = filepath.Join(filepath.Base(cur), rest)
		cur = parent
	}
}

func (rs roots) list() string { return strings.Join(rs, ", ") }
