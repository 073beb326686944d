package cli

import (
	"encoding/json"
	"fmt"

	"github.com/spf13/cobra"

	"github.com/factory-harness/factory/internal/planner"
)

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

Prints one line per error and warning ([CODE] WO-NN field: message), or a JSON list
with --json. Exit codes: 0 no errors (warnings allowed), 1 usage error, 2 errors found.`,
		Args:        cobra.ExactArgs(1),
		Annotations: map[string]string{usageExitAnnotation: "1"},
		RunE: func(cmd *cobra.Command, args []string) error {
			return runValidate(cmd, o, args[0], env)
		},
	}
	cmd.Flags().StringVar(&o.repo, "repo", "", "target git repository: its tracked files are the state preconditions are checked against")
	cmd.Flags().BoolVar(&o.jsonOut, "json", false, "print the issues as a JSON list")
	return cmd
}

func runValidate(cmd *cobra.Command, o *validateOptions, path string, env Env) error {
	raw, err := planner.LoadPlan(path)
	if err != nil {
		return usagef("read plan: %v", err)
	}
	repoFiles, err := trackedFiles(cmd.Context(), o.repo)
	if err != nil {
		return err
	}
	res := planner.Validate(cmd.Context(), raw, planner.Env{RepoFiles: repoFiles, Python: planner.NewPython3Inspector()})
	if o.jsonOut {
		out, _ := json.MarshalIndent(res.Issues, "", "  ") // never nil
		fmt.Fprintf(env.Stdout, "%s\n", out)
	} else {
		for _, i := range res.Issues {
			fmt.Fprintf(env.Stdout, "%s\n", i)
		}
	}
	// verify_exempt switches global verification off; a hand edit must not
	// do that silently.
	if res.Manifest != nil {
		for i, wo := range planner.ComputeVerifyExempt(res.Manifest, repoFiles) {
			if got := res.Manifest.WorkOrders[i].VerifyExempt; got != wo.VerifyExempt {
				fmt.Fprintf(env.Stderr, "warning: %s verify_exempt is %v, but the verify_contract says %v\n", wo.ID, got, wo.VerifyExempt)
			}
		}
	}
	if n := len(res.Errors()); n > 0 {
		return &exitError{code: PlanExitValidation, err: fmt.Errorf("%s: %d errors, %d warnings", path, n, len(res.Warnings()))}
	}
	if !o.jsonOut {
		fmt.Fprintf(env.Stdout, "%s: valid (%d warnings)\n", path, len(res.Warnings()))
	}
	return nil
}
