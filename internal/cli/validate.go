package cli

import (
	"encoding/json"
	"errors"
	"fmt"

	"github.com/spf13/cobra"

	"github.com/factory-harness/factory/internal/planner"
)

// validateExitInvalid is the exit code of `factory validate` when it finds
// errors. The others follow the one scheme: 0 no errors (warnings allowed),
// 2 refused (usagef: bad flags, unreadable or missing input).
const validateExitInvalid = 1

// repoSkippedNote is printed when validate runs without --repo.
const repoSkippedNote = "no --repo given: repository-dependent checks (E101 and E106 for files that must already exist, W101, verify_exempt) skipped"

type validateOptions struct {
	repo    string
	jsonOut bool
}

func newValidateCmd(env Env) *cobra.Command {
	o := &validateOptions{}
	cmd := &cobra.Command{
		Use:   "validate DIR|FILE",
		Short: "Check a plan offline with the planner's validators (no model)",
		Long: `Run the planner's deterministic validators on an existing plan, offline.

DIR is a directory of WO-NN.json files (the verify_contract comes from its
WORK_ORDERS_MANIFEST.json, if any); FILE is a manifest or a single work order.
Users edit plans by hand; this is how they check them.

Without --repo the starting files are unknown, so the checks that depend on
them (E101 and E106 for files that must already exist, W101, verify_exempt)
are skipped.

Prints one line per error and warning ([CODE] WO-NN field: message), or
{"errors": [...], "warnings": [...]} with --json. Exit codes: 0 no errors
(warnings allowed), 1 errors found, 2 usage error, unreadable or missing input,
or python3 missing or broken.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return runValidate(cmd, o, args[0], env)
		},
	}
	cmd.Flags().StringVar(&o.repo, "repo", "", "target git repository: its tracked files are the state preconditions are checked against")
	cmd.Flags().BoolVar(&o.jsonOut, "json", false, `print {"errors": [...], "warnings": [...]} as JSON`)
	return cmd
}

func runValidate(cmd *cobra.Command, o *validateOptions, path string, env Env) error {
	raw, lone, err := planner.LoadPlan(path)
	if err != nil {
		return usagef("read plan: %v", err)
	}
	repoFiles, err := trackedFiles(cmd.Context(), o.repo)
	if err != nil {
		return err
	}
	if o.repo == "" {
		fmt.Fprintln(env.Stderr, repoSkippedNote)
	}
	res := planner.Validate(cmd.Context(), raw, planner.Env{
		RepoFiles: repoFiles, RepoUnknown: o.repo == "", LoneOrder: lone, Python: planner.NewPython3Inspector(),
	})
	errs, warnings := res.Errors(), res.Warnings()
	if o.jsonOut {
		out, err := json.MarshalIndent(struct {
			Errors   []planner.Issue `json:"errors"`
			Warnings []planner.Issue `json:"warnings"`
		}{errs, warnings}, "", "  ")
		if err != nil {
			return &internalError{err: fmt.Errorf("encode the result: %w", err)}
		}
		fmt.Fprintf(env.Stdout, "%s\n", out)
	} else {
		for _, i := range res.Issues {
			fmt.Fprintf(env.Stdout, "%s\n", i)
		}
	}
	if res.PythonErr != nil {
		// The plan could not be checked, which says nothing about it.
		return usagef("%s: cannot check the python -c acceptance commands: %v", path, res.PythonErr)
	}
	// verify_exempt switches global verification off; a hand edit must not
	// do that silently. Without --repo the starting files are unknown.
	if res.Manifest != nil && o.repo != "" {
		for i, wo := range planner.ComputeVerifyExempt(res.Manifest, repoFiles) {
			if got := res.Manifest.WorkOrders[i].VerifyExempt; got != wo.VerifyExempt {
				fmt.Fprintf(env.Stderr, "warning: %s verify_exempt is %v, but the verify_contract says %v\n", wo.ID, got, wo.VerifyExempt)
			}
		}
	}
	if len(errs) > 0 {
		return &exitError{code: validateExitInvalid, err: errors.New(path + ": " + plural(len(errs), "error") + ", " + plural(len(warnings), "warning"))}
	}
	if !o.jsonOut {
		fmt.Fprintf(env.Stdout, "%s: valid (%s)\n", path, plural(len(warnings), "warning"))
	}
	return nil
}

// plural writes n and noun, plural unless n is 1: "1 warning", "2 warnings".
func plural(n int, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return fmt.Sprintf("%d %ss", n, noun)
}
