package cli

import (
	"encoding/json"
	"errors"
	"fmt"

	"github.com/spf13/cobra"

	"github.com/factory-harness/factory/internal/factory"
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
the journal. Without a journal it says so and changes nothing. With --json it prints
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
			res, err := factory.Recover(cmd.Context(), o.repo, progress)
			var pre *factory.PreflightError
			switch {
			case errors.As(err, &pre):
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
