package gitws

import (
	"context"
	"fmt"
	"os"
)

// InitBare creates dir (and its parents) as a new bare repository whose
// HEAD names branch (which does not exist until pushed): a remote that a
// submitter creates for its workers. An existing dir is refused.
func InitBare(ctx context.Context, dir, branch string) error {
	if _, err := os.Lstat(dir); err == nil {
		return fmt.Errorf("create bare repository %s: it exists already", dir)
	}
	if err := CheckBranchName(ctx, branch); err != nil {
		return fmt.Errorf("create bare repository %s: %w", dir, err)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("create bare repository %s: %w", dir, err)
	}
	if _, err := runGit(ctx, dir, gitEnv(false), nil, "init", "-q", "--bare", "--initial-branch="+branch, "."); err != nil {
		return fmt.Errorf("git init --bare %s: %w", dir, err)
	}
	return nil
}
