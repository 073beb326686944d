package cli

import (
	"encoding/json"
	"fmt"

	"github.com/spf13/cobra"

	"github.com/factory-harness/factory/internal/version"
)

type versionOptions struct {
	jsonOut bool
}

func newVersionCmd(env Env) *cobra.Command {
	o := &versionOptions{}
	cmd := &cobra.Command{
		Use:   "version [--json]",
		Short: "Print what factory binary this is: version, commit, Go version, platform",
		Long: `Print the version of this binary from the build information Go embeds: the module
version (v1.2.3 when installed with 'go install ...@v1.2.3'; built in a git checkout, the
pseudo-version Go derives from the commit; devel when none was recorded), the VCS commit,
its time and whether the work tree had uncommitted changes (when the build recorded them),
the Go version and the OS/architecture. 'factory --version' prints the same line.

Put it in every bug report. Exit codes: 0 printed, 2 usage.`,
		Args: noArgs("version"),
		RunE: func(cmd *cobra.Command, _ []string) error {
			return runVersion(env, o)
		},
	}
	cmd.Flags().BoolVar(&o.jsonOut, "json", false, `print {"version", "revision", "time", "modified", "go", "platform"} as JSON`)
	return cmd
}

func runVersion(env Env, o *versionOptions) error {
	info := version.Read()
	if !o.jsonOut {
		fmt.Fprintln(env.Stdout, info)
		return nil
	}
	b, err := json.MarshalIndent(info, "", "  ")
	if err != nil {
		return &internalError{err: err}
	}
	fmt.Fprintf(env.Stdout, "%s\n", b)
	return nil
}
