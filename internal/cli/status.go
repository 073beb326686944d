package cli

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/spf13/cobra"

	"github.com/factory-harness/factory/internal/builder"
	"github.com/factory-harness/factory/internal/forge"
)

type statusOptions struct {
	repo     string
	jsonOut  bool
	temporal statusTemporalFlags // --temporal: a build on workers (temporal.go)
}

func newStatusCmd(env Env) *cobra.Command {
	o := &statusOptions{}
	cmd := &cobra.Command{
		Use:   "status --repo DIR",
		Short: "Show the progress of the last 'factory build' in a repository",
		Long: `Show where the last build's plan came from and each work order's outcome:
passed (with its commit), failed (with the stage, e.g. acceptance_failed) or pending.

Progress is read from the build branch's commits (their Factory-Work-Order and
Factory-Plan trailers); the build leaves only a pointer to its plan and output in the
git directory. The pull request 'factory pr' last published the build to is shown as
it was then (pull_request in --json). Safe to run while a build works: it takes no lock and changes nothing.

Exit codes: 0 printed (whatever the build's state), 2 not a repository or no build
has run in it.`,
		Args: noArgs("status"),
		RunE: func(cmd *cobra.Command, _ []string) error {
			if o.temporal.hostPort != "" {
				return runStatusTemporal(cmd, &o.temporal, o.jsonOut, env)
			}
			if err := requireFlags("status", required{"--repo", o.repo}); err != nil {
				return err
			}
			st, err := builder.ReadStatus(cmd.Context(), o.repo)
			if errors.Is(err, builder.ErrNoBuild) {
				return usagef("%v (run 'factory build' first)", err)
			}
			if err != nil {
				return usagef("%v", err)
			}
			pr, err := forge.ReadRecord(st.BuildDir)
			if err != nil { // the build's status stands without it
				fmt.Fprintf(env.Stderr, "warning: the pull request record: %v\n", err)
			}
			if o.jsonOut {
				b, err := json.MarshalIndent(struct {
					*builder.Status
					PR *forge.Record `json:"pull_request,omitempty"`
				}{st, pr}, "", "  ")
				if err != nil {
					return &internalError{err: err}
				}
				fmt.Fprintf(env.Stdout, "%s\n", b)
				return nil
			}
			printStatus(env, st)
			if pr != nil {
				state := string(pr.State)
				if pr.Draft {
					state += ", draft"
				}
				fmt.Fprintf(env.Stdout, "pull request: #%d (%s when last published by factory): %s\n", pr.Number, state, pr.URL)
			}
			return nil
		},
	}
	cmd.Flags().StringVar(&o.repo, "repo", "", "the repository a build ran in (required)")
	cmd.Flags().BoolVar(&o.jsonOut, "json", false, "print the status as JSON")
	o.temporal.add(cmd.Flags())
	return cmd
}

func printStatus(env Env, st *builder.Status) {
	from := st.PlanSource
	if st.Spec != "" {
		from += " from " + st.Spec
	}
	fmt.Fprintf(env.Stdout, "repository: %s\nbranch: %s\nplan: %s %s (%s)\n", st.Repo, st.Branch, st.PlanHash, st.PlanDir, from)
	if !st.Planned {
		fmt.Fprintln(env.Stdout, "no plan written yet")
		printSpend(env, st.Spend)
		return
	}
	passed := 0
	for _, w := range st.WorkOrders {
		if w.Outcome == builder.OutcomePassed {
			passed++
		}
		fmt.Fprintf(env.Stdout, "  %s\n", workOrderLine(w))
		if len(w.DependsOn) > 0 {
			fmt.Fprintf(env.Stdout, "         after %s\n", strings.Join(w.DependsOn, ", "))
		}
	}
	state := "in progress"
	if st.Complete {
		state = "complete"
	}
	fmt.Fprintf(env.Stdout, "%d/%d work orders passed (%s)\n", passed, len(st.WorkOrders), state)
	printRepairs(env, st.Repairs)
	printSpend(env, st.Spend)
}

// cacheText says how much of the input the providers read from their
// prompt caches, or nothing when none was.
func cacheText(cached int64, rate float64) string {
	if cached == 0 {
		return ""
	}
	return fmt.Sprintf(" (%d cached, %.0f%% of the input)", cached, 100*rate)
}

// printSpend says what the build's model calls spent, in every process.
func printSpend(env Env, rec builder.SpendRecord) {
	cost := "cost unknown"
	if c := rec.Counted.Cost(); c != nil {
		cost = fmt.Sprintf("$%.4f", *c)
	}
	fmt.Fprintf(env.Stdout, "spent: %d model calls, %d tokens%s, %s (counted against --max-tokens / --max-cost-usd)\n",
		rec.Counted.Calls, rec.Counted.TotalTokens, cacheText(rec.Counted.CachedInputTokens, rec.Counted.CacheHitRate()), cost)
	if rec.Resets > 0 {
		fmt.Fprintf(env.Stdout, "spent in all: %d tokens over %d budget resets\n", rec.Total.TotalTokens, rec.Resets)
	}
}
