package cli

import (
	"bytes"
	"errors"
	"fmt"
	"os"

	"github.com/spf13/cobra"

	"github.com/factory-harness/factory/internal/artifact"
	"github.com/factory-harness/factory/internal/serve"
)

type reportOptions struct {
	out, build, run string
	repo, loopRun   string
	output          string
}

func newReportCmd(env Env) *cobra.Command {
	o := &reportOptions{}
	cmd := &cobra.Command{
		Use:   "report (--out DIR (--build HASH | --run RUN_ID) | --repo DIR --loop-run RUN_ID) -o FILE",
		Short: "Write one self-contained HTML file showing a build, a run or a loop run",
		Long: `Write the views of 'factory serve' for one build, single run or loop run into one HTML
file: inline style, no script, no reference to anything outside the file, so it opens
anywhere without a network (a CI artifact, a file to hand a colleague). Every attempt (or
loop iteration) follows the main view in the same file. Long prompts, replies and logs are
cut with a visible note; provider keys are redacted.

Exit codes: 0 written, 2 usage or not found.`,
		Args: noArgs("report"),
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := requireFlags("report", required{"-o", o.output}); err != nil {
				return err
			}
			byOut := o.out != "" || o.build != "" || o.run != ""
			byRepo := o.repo != "" || o.loopRun != ""
			switch {
			case byOut && byRepo:
				return usagef("give --out with --build or --run, or --repo with --loop-run, not both")
			case byOut && (o.out == "" || (o.build == "") == (o.run == "")):
				return usagef("--out DIR needs exactly one of --build HASH and --run RUN_ID")
			case byRepo && (o.repo == "" || o.loopRun == ""):
				return usagef("--repo DIR and --loop-run RUN_ID go together")
			case !byOut && !byRepo:
				return usagef("say what to report: --out DIR --build HASH, --out DIR --run RUN_ID or --repo DIR --loop-run RUN_ID")
			}
			var buf bytes.Buffer
			err := serve.Report(cmd.Context(), &buf, serve.ReportOptions{Out: o.out, Build: o.build, Run: o.run,
				Repo: o.repo, LoopRun: o.loopRun, Environ: os.Environ()})
			if errors.Is(err, serve.ErrNotFound) {
				return usagef("%v", err)
			}
			if err != nil {
				return &internalError{err: err}
			}
			if err := artifact.WriteFileAtomic(o.output, buf.Bytes(), 0o644); err != nil {
				return usagef("-o: %v", err)
			}
			fmt.Fprintf(env.Stderr, "report: %s (%d bytes)\n", o.output, buf.Len())
			return nil
		},
	}
	cmd.Flags().StringVar(&o.out, "out", "", "the output dir of a build or run")
	cmd.Flags().StringVar(&o.build, "build", "", "the build's plan hash (out/builds/HASH)")
	cmd.Flags().StringVar(&o.run, "run", "", "a single run's id (out/RUN_ID)")
	cmd.Flags().StringVar(&o.repo, "repo", "", "the repository of a loop run")
	cmd.Flags().StringVar(&o.loopRun, "loop-run", "", "the loop run id (.runner/iterations/RUN_ID)")
	cmd.Flags().StringVarP(&o.output, "output", "o", "", "the HTML file to write (required)")
	return cmd
}
