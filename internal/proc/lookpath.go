package proc

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
)

// Found reports whether name resolves to an executable on PATH. A name that
// exists but cannot be run counts as found: running it reports the reason.
func Found(name string) bool {
	_, err := exec.LookPath(name)
	return err == nil || !errors.Is(err, exec.ErrNotFound)
}

// envPath is the value of PATH in env, if env sets it.
func envPath(env []string) (string, bool) {
	for i := len(env) - 1; i >= 0; i-- { // the last entry wins, as for exec
		if v, ok := strings.CutPrefix(env[i], "PATH="); ok {
			return v, true
		}
	}
	return "", false
}

// lookPathIn is exec.LookPath of name in the directories of path, a relative directory taken
// relative to dir: the first regular file there with an execute bit.
func lookPathIn(name, path, dir string) (string, error) {
	for _, d := range filepath.SplitList(path) {
		if d == "" {
			d = "."
		}
		if !filepath.IsAbs(d) {
			d = filepath.Join(dir, d)
		}
		p := filepath.Join(d, name)
		if info, err := os.Stat(p); err == nil && info.Mode().IsRegular() && info.Mode().Perm()&0o111 != 0 {
			return p, nil
		}
	}
	return "", &exec.Error{Name: name, Err: exec.ErrNotFound}
}
