package eval

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/factory-harness/factory/internal/proc"
	"github.com/factory-harness/factory/internal/proc/sandbox"
)

// checkTailBytes is how much of a failing check's output a result keeps.
const checkTailBytes = 2000

// check copies the built tree (without .git) to checks/…/tree, adds the
// hidden files and runs every check there, confined, recording the first
// that fails. The built repository itself is left as the build made it,
// and the tree is removed afterwards (the check logs stay): no copy of the
// hidden files outlives the checks, for another eval's builds to find.
func (e *eval) check(ctx context.Context, c *Case, p runPaths, r *Result) (err error) {
	defer func() {
		if rerr := os.RemoveAll(p.tree); rerr != nil && err == nil {
			err = fmt.Errorf("remove the check tree: %w", rerr)
		}
	}()
	if _, err := copyTree(p.repo, p.tree, func(rel string) bool { return rel == ".git" }); err != nil {
		return fmt.Errorf("copy the built tree for the checks: %w", err)
	}
	if c.Hidden != "" {
		if _, err := copyTree(c.HiddenDir(), p.tree, nil); err != nil {
			return fmt.Errorf("copy the hidden files of %s: %w", c.Name, err)
		}
	}
	req := e.o.Sandbox
	req.WorkTree = p.tree
	req.Hide = append(append([]string(nil), req.Hide...), e.o.Suite.Dir)
	box, err := sandbox.Prepare(req)
	if err != nil {
		return fmt.Errorf("confine the checks: %w", err)
	}
	for i, ch := range c.Checks {
		timeout := ch.TimeoutSeconds
		if timeout == 0 {
			timeout = DefaultCheckTimeoutSeconds
		}
		logPath := filepath.Join(p.checks, fmt.Sprintf("check-%d.log", i+1))
		res := proc.Run(ctx, proc.Spec{
			Argv: ch.Command, Dir: p.tree, Timeout: time.Duration(timeout) * time.Second,
			Stdout: logPath, Stderr: logPath, Env: e.o.Env, MaxOutputBytes: proc.DefaultMaxOutputBytes, Sandbox: box,
		})
		if ctx.Err() != nil {
			return context.Cause(ctx)
		}
		if res.ExitCode == 0 && res.Err == "" {
			r.ChecksPassed++
			continue
		}
		if r.FailedCheck == nil {
			tail, err := proc.Tail(logPath, checkTailBytes)
			if err != nil {
				return fmt.Errorf("read the log of check %d: %w", i+1, err)
			}
			// Paths relative to the tree, so that results do not depend on --out.
			tail = strings.ReplaceAll(tail, p.tree+string(filepath.Separator), "")
			r.FailedCheck = &FailedCheck{Index: i + 1, Name: ch.Name, Command: ch.Command, ExitCode: res.ExitCode, Error: res.Err, OutputTail: tail}
		}
	}
	return nil
}

// copyTree copies the regular files, directories and symlinks under src
// into dst (created), skipping the top-level entries skip names, and
// returns the copied files as slash paths. Existing files are replaced.
func copyTree(src, dst string, skip func(rel string) bool) ([]string, error) {
	var files []string
	err := filepath.WalkDir(src, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(src, path)
		if err != nil {
			return err
		}
		if rel == "." {
			return os.MkdirAll(dst, 0o755)
		}
		if skip != nil && skip(filepath.ToSlash(rel)) {
			if d.IsDir() {
				return filepath.SkipDir
			}
			return nil
		}
		target := filepath.Join(dst, rel)
		info, err := d.Info()
		if err != nil {
			return err
		}
		switch {
		case d.IsDir():
			return os.MkdirAll(target, info.Mode().Perm()|0o700)
		case d.Type()&fs.ModeSymlink != 0:
			link, err := os.Readlink(path)
			if err != nil {
				return err
			}
			_ = os.Remove(target)
			files = append(files, filepath.ToSlash(rel))
			return os.Symlink(link, target)
		case d.Type().IsRegular():
			files = append(files, filepath.ToSlash(rel))
			return copyFile(path, target, info.Mode().Perm())
		}
		return nil // sockets, devices: not part of a case
	})
	return files, err
}

func copyFile(src, dst string, perm fs.FileMode) error {
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	_ = os.Remove(dst) // a symlink must not be written through
	out, err := os.OpenFile(dst, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, perm)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return err
	}
	return out.Close()
}

func compactJSON(b []byte) ([]byte, error) {
	var buf bytes.Buffer
	if err := json.Compact(&buf, b); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}
