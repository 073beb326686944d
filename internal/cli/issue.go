package cli

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/spf13/cobra"

	"github.com/factory-harness/factory/internal/artifact"
	"github.com/factory-harness/factory/internal/forge"
	"github.com/factory-harness/factory/internal/gitws"
)

type issueOptions struct {
	build  buildOptions
	number int
}

func newIssueCmd(env Env) *cobra.Command {
	o := &issueOptions{}
	cmd := &cobra.Command{
		Use:   "issue --repo DIR --out DIR --issue N --llm-model NAME [--remote NAME]",
		Short: "Build what an issue asks for on a repository and open a pull request for it",
		Long: `Read an issue from the forge of --remote (GitHub, Gitea/Forgejo, GitLab), build the
change it asks for on the existing repository, and open a pull request with the
evidence that says "Fixes #N" (or "Refs #N" when --base is not the default branch).

The spec of the build is the issue's title and body and the comments of users who may
write to the repository; bots' comments and everyone else's are left out. Issue text is
untrusted input: HTML comments (which the forge does not show) and invisible or
direction-changing characters are removed, so the model reads what a person reading
the issue sees. The spec is written to <out>/issues/<N>/spec.md.

The build runs as 'factory build' does (the repository map, dependencies and edits
apply) on the branch factory/issue-<N> unless --branch says otherwise, then publishes
as 'factory pr' does: a build that fails is published as a draft with what passed and a
comment saying where it stopped. Running the same command again resumes the same build
and updates the same pull request.

The token comes from the environment (GITHUB_TOKEN or GH_TOKEN, GITEA_TOKEN,
GITLAB_TOKEN) and is checked before anything starts; see 'factory pr --help' and
docs/forges.md for where it goes and where it never goes.

Exit codes: as 'factory build' (0 passed and published; 1 a work order failed, published
as a draft; 2 refused before anything was modified, a missing token included; 3 error,
the forge's included; 5 budget).`,
		Args: noArgs("issue"),
		RunE: func(cmd *cobra.Command, _ []string) error {
			return runIssue(cmd, env, o)
		},
	}
	f := cmd.Flags()
	f.IntVar(&o.number, "issue", 0, "the issue's number (required)")
	addBuildFlags(f, &o.build)
	f.StringVar(&o.build.branch, "branch", "", "branch to build on (default factory/issue-<N>)")
	o.build.forge.add(f, true)
	return cmd
}

func runIssue(cmd *cobra.Command, env Env, o *issueOptions) error {
	ctx := cmd.Context()
	b := &o.build
	if err := requireFlags("issue", required{"--repo", b.run.repo}, required{"--out", b.run.out},
		required{"--llm-model", b.run.model}); err != nil {
		return err
	}
	if o.number <= 0 {
		return usagef("--issue N is required: the number of the issue to build")
	}
	repo, err := gitws.Open(ctx, b.run.repo)
	if err != nil {
		return usagef("factory issue works on an existing repository with a remote: %v", err)
	}
	conn, err := connectForge(ctx, env, repo, &b.forge)
	if err != nil {
		return err
	}
	path, pub, err := writeIssueSpec(ctx, conn, o.number, b.run.out, b.forge.base)
	if err != nil {
		return &internalError{err: err}
	}
	fmt.Fprintf(env.Stderr, "issue #%d: %s (spec: %s)\n", o.number, pub.issueTitle, path)
	if b.branch == "" {
		b.branch = issueBranch(o.number)
	}
	b.spec, b.pr, b.conn, b.pub = path, true, conn, pub
	return runBuild(cmd, b, env)
}

// issueBranch is the branch the build of issue n goes on by default.
func issueBranch(n int) string { return fmt.Sprintf("factory/issue-%d", n) }

// writeIssueSpec reads issue n and writes it as a build's spec to
// <out>/issues/<n>/spec.md; pub is what the build's pull request says of
// the issue. Shared by factory issue and the MCP tool factory_issue.
func writeIssueSpec(ctx context.Context, conn *forgeConn, n int, out, base string) (path string, pub publication, err error) {
	spec, title, err := issueSpec(ctx, conn.client, n)
	if err != nil {
		return "", pub, fmt.Errorf("read issue #%d: %w", n, err)
	}
	refs := "Fixes"
	if base != "" {
		def, err := conn.client.DefaultBranch(ctx)
		if err != nil {
			return "", pub, err
		}
		if def != base {
			refs = "Refs" // closing keywords act only on the default branch
		}
	}
	path = filepath.Join(out, "issues", strconv.Itoa(n), "spec.md")
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return "", pub, err
	}
	if err := artifact.WriteFileAtomic(path, []byte(spec), 0o644); err != nil {
		return "", pub, err
	}
	return path, publication{issue: n, issueTitle: title, refs: refs,
		rerun: fmt.Sprintf("factory issue --issue %d --repo . --out %s --llm-model MODEL", n, shellWord(filepath.Base(out)))}, nil
}

// maxSpecBytes bounds the spec an issue makes: an issue with megabytes of
// comments is not a work request.
const maxSpecBytes = 256 << 10

// issueSpec writes issue n as a build's spec: its title, its body, and
// the comments of users who may write to the repository (bots' left out),
// every text cleaned (forge.CleanText).
func issueSpec(ctx context.Context, c forge.Client, n int) (spec, title string, err error) {
	is, err := c.Issue(ctx, n)
	if err != nil {
		return "", "", err
	}
	comments, err := c.Comments(ctx, n, false)
	if err != nil {
		return "", "", err
	}
	title = strings.Join(strings.Fields(forge.CleanText(is.Title)), " ")
	var w strings.Builder
	fmt.Fprintf(&w, "# %s\n\nIssue #%d of %s, opened by @%s.\n\n%s\n", title, n, c.Target().Repo, is.Author.Login, strings.TrimSpace(forge.CleanText(is.Body)))
	if comments, err = byWriters(ctx, c, comments); err != nil {
		return "", "", err
	}
	for _, cm := range comments {
		fmt.Fprintf(&w, "\n## Comment by @%s\n\n%s\n", cm.Author.Login, strings.TrimSpace(forge.CleanText(cm.Body)))
	}
	if w.Len() > maxSpecBytes {
		return "", "", fmt.Errorf("the issue and its comments by writers are %d bytes, over the %d a spec may have; write a shorter issue", w.Len(), maxSpecBytes)
	}
	return w.String(), title, nil
}
