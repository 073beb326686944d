package cli

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/factory-harness/factory/internal/builder"
	"github.com/factory-harness/factory/internal/factory"
	"github.com/factory-harness/factory/internal/gitws"
)

type recoverOptions struct {
	repo    string
	quiet   bool
	jsonOut bool
}

// recoverJSON is the --json output of `factory recover`.
type recoverJSON struct {
	Found    bool                   `json:"found"`
	Tool     string                 `json:"tool"`
	RunDir   string                 `json:"run_dir"`
	Killed   bool                   `json:"killed"`
	Rollback factory.RollbackRecord `json:"rollback"`
}

func newRecoverCmd(env Env) *cobra.Command {
	o := &recoverOptions{}
	cmd := &cobra.Command{
		Use:   "recover --repo DIR",
		Short: "Restore a repository after factory was killed in the middle of a run",
		Long: `Restore a repository after a factory run was killed (SIGKILL, a crash, a power cut)
before it could roll back.

Before an attempt writes anything, factory keeps a journal in the git directory
(.git/factory/journal.json, as git keeps an interrupted rebase) with the baseline commit
and branch, the ignored files and file modes present at baseline, the git metadata,
the paths about to be written and backups of the ignored files they replace, and the
process group of the command running. 'factory run' refuses a repository with a journal.
'factory recover' kills the recorded command's process group if it still runs (only if
it is the same process), restores the baseline exactly as a rollback does, and removes
the journal. First go the lock files git leaves when it is killed (index.lock, HEAD.lock,
the branch's): at once when factory noted that it died inside a git step of its own, else,
with a journal, once they are 10 s old. Without a journal or such a note it says so and
changes nothing. With --json it prints
{"found": ..., "tool": ..., "run_dir": ..., "killed": ..., "rollback": {...}} instead.

Exit codes: 0 recovered, or nothing to recover; 2 refused (not a repository, another
factory holds the lock, unreadable journal); 3 the restore failed (the journal is kept,
so it can be run again).`,
		Args: noArgs("recover"),
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := requireFlags("recover", required{"--repo", o.repo}); err != nil {
				return err
			}
			progress := env.Stderr
			if o.quiet {
				progress = nil
			}
			res, err := recoverRepo(cmd.Context(), o.repo, progress)
			var pre *factory.PreflightError
			var refused *usageError
			switch {
			case errors.As(err, &pre), errors.As(err, &refused):
				return err
			case err != nil:
				return &internalError{err: fmt.Errorf("recover %s: %w (the journal is kept; run 'factory recover' again once the cause is fixed)", o.repo, err)}
			case o.jsonOut:
				out, err := json.MarshalIndent(recoverJSON{res.Found, res.Tool, res.RunDir, res.Killed, res.Rollback}, "", "  ")
				if err != nil {
					return &internalError{err: fmt.Errorf("encode the result: %w", err)}
				}
				fmt.Fprintf(env.Stdout, "%s\n", out)
				return nil
			case !res.Found:
				fmt.Fprintf(env.Stdout, "nothing to recover in %s: no journal of an interrupted run\n", o.repo)
				return nil
			}
			fmt.Fprintf(env.Stdout, "recovered: %s restored to its baseline (journal of %s removed; artifacts of that run in %s)\n", o.repo, res.Tool, res.RunDir)
			return nil
		},
	}
	cmd.Flags().StringVar(&o.repo, "repo", "", "root of the git work tree to recover (required)")
	cmd.Flags().BoolVarP(&o.quiet, "quiet", "q", false, "do not print progress to stderr")
	cmd.Flags().BoolVar(&o.jsonOut, "json", false, `print {"found", "tool", "run_dir", "killed", "rollback"} as JSON instead of the summary line`)
	return cmd
}

// noArgs refuses positional arguments with a usage error naming the command.
func noArgs(name string) cobra.PositionalArgs {
	return func(_ *cobra.Command, args []string) error {
		if len(args) > 0 {
			return usagef("%s takes only flags, not %q (see 'factory %s --help')", name, args[0], name)
		}
		return nil
	}
}

// recoverRepo is factory.Recover with the git lock files a killed factory
// left removed first (gitws.Repo.RecoverGitLocks decides which), so that
// the restore does not stop at git's "Another git process seems to be
// running". Refusals are usage errors or *factory.PreflightError.
func recoverRepo(ctx context.Context, dir string, progress io.Writer) (factory.RecoverResult, error) {
	say := func(format string, args ...any) {
		if progress != nil {
			fmt.Fprintf(progress, format+"\n", args...)
		}
	}
	repo, err := gitws.Open(ctx, dir)
	if err != nil {
		return factory.RecoverResult{}, usagef("--repo: %v", err)
	}
	lock, err := repo.Lock()
	if err != nil {
		return factory.RecoverResult{}, usagef("repository %s: %v", repo.Root, err)
	}
	defer lock.Unlock()
	if err := builder.RecoverWorktrees(ctx, repo, progress); err != nil {
		return factory.RecoverResult{}, err
	}
	_, found, err := factory.JournalTool(repo)
	if err != nil {
		return factory.RecoverResult{}, err
	}
	removed, err := repo.RecoverGitLocks(found, time.Now())
	if len(removed) > 0 {
		say("recover: removed the lock files git left when factory was killed: %s", strings.Join(repo.RelPaths(removed), ", "))
	}
	var young *gitws.YoungLockError
	var held *gitws.GitLockError
	switch {
	case errors.As(err, &held) && !found:
		say("recover: note: %v", err) // not ours to remove, and nothing to restore
	case errors.As(err, &young):
		return factory.RecoverResult{}, usagef("repository %s: %v", repo.Root, err)
	case err != nil:
		return factory.RecoverResult{}, err
	}
	if !found {
		return factory.RecoverResult{}, nil
	}
	return factory.RecoverHeld(ctx, repo, progress)
}
