package eval

import (
	"fmt"
	"net/url"
	"path"
	"path/filepath"
	"strconv"
	"strings"
)

// RemoteName is run k's name in a distributed eval, slash-separated:
// <eval id>/<case>/<model dir>/<run>. Case and model directory names hold
// no slash, so no two runs share it.
func RemoteName(evalID string, k RunKey) string {
	return path.Join(evalID, k.Case, ModelDir(k.Model), strconv.Itoa(k.Run))
}

// WorkflowID is the id of run k's Build workflow:
// factory-eval-<eval id>/<case>/<model dir>/<run>. The same eval finds
// its runs' workflows again, so a second invocation follows them instead
// of starting new ones.
func WorkflowID(evalID string, k RunKey) string { return "factory-eval-" + RemoteName(evalID, k) }

// RemoteRepo is run k's bare repository under the remote root:
// <root>/<eval id>/<case>/<model dir>/<run>.git.
func RemoteRepo(root, evalID string, k RunKey) string {
	return filepath.Join(root, filepath.FromSlash(RemoteName(evalID, k))+".git")
}

// RemoteRoot is the directory --remote-root names: a path (made absolute)
// or a file:// URL. The submitter creates a bare repository per run
// there, so it must be a directory on this machine (which the workers see
// at the same path: a shared file system); other transports are refused.
func RemoteRoot(root string) (string, error) {
	if root == "" {
		return "", fmt.Errorf("--remote-root is empty")
	}
	dir := root
	if strings.Contains(root, "://") {
		u, err := url.Parse(root)
		switch {
		case err != nil:
			return "", fmt.Errorf("--remote-root %s: %v", root, err)
		case u.Scheme != "file":
			return "", fmt.Errorf("--remote-root %s: a %s:// remote cannot be used: factory creates a bare repository per run under the remote root, so it must be a directory (or file:// URL) that this machine writes and the workers read at the same path", root, u.Scheme)
		case u.Host != "" && u.Host != "localhost":
			return "", fmt.Errorf("--remote-root %s: a file:// URL names a path on this machine; give file:///PATH", root)
		case u.RawQuery != "" || u.Fragment != "" || u.Path == "":
			return "", fmt.Errorf("--remote-root %s: give file:///PATH", root)
		}
		dir = u.Path
	}
	if strings.HasPrefix(dir, "-") {
		return "", fmt.Errorf("--remote-root %s: a path cannot start with '-'", root)
	}
	abs, err := filepath.Abs(dir)
	if err != nil {
		return "", fmt.Errorf("--remote-root %s: %w", root, err)
	}
	return abs, nil
}

// RemoteURL is the file:// URL the workers fetch a bare repository from.
// (git takes the path after file:// as it is, unescaped).
func RemoteURL(bare string) string { return "file://" + bare }
