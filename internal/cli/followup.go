package cli

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/spf13/cobra"

	"github.com/factory-harness/factory/internal/artifact"
	"github.com/factory-harness/factory/internal/builder"
	"github.com/factory-harness/factory/internal/forge"
)

// followUp is a build that answers review comments.
type followUp struct {
	handled []int64 // the comments it answers, by id
}

// runFollowUp turns the pull request's new review comments into the spec
// of a build on the same branch, then publishes it with one reply.
func runFollowUp(cmd *cobra.Command, env Env, b *buildOptions, conn *forgeConn, st *builder.Status) error {
	ctx := cmd.Context()
	pr, err := conn.client.FindPR(ctx, st.Branch)
	if err != nil {
		return &internalError{err: err}
	}
	if pr == nil || pr.State != forge.Open {
		return usagef("--follow-up: the build's branch %s has no open pull request; publish it first with 'factory pr'", st.Branch)
	}
	ledger, _ := forge.ReadLedger(pr.Body)
	comments, err := reviewComments(ctx, conn.client, pr.Number, ledger.Handled)
	if err != nil {
		return &internalError{err: fmt.Errorf("read the comments of #%d: %w", pr.Number, err)}
	}
	if len(comments) == 0 {
		fmt.Fprintf(env.Stderr, "no new review comments on #%d by users who may write to %s: nothing to follow up\n", pr.Number, conn.target.Repo)
		return nil
	}
	ids := make([]int64, len(comments))
	for i, c := range comments {
		ids[i] = c.ID
	}
	spec := followUpSpec(pr, comments, conn.target.Repo)
	sum := sha256.Sum256([]byte(spec))
	path := filepath.Join(b.run.out, "followups", strconv.Itoa(pr.Number), hex.EncodeToString(sum[:6])+".md")
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return &internalError{err: err}
	}
	if err := artifact.WriteFileAtomic(path, []byte(spec), 0o644); err != nil {
		return &internalError{err: err}
	}
	fmt.Fprintf(env.Stderr, "follow-up of #%d: %d review comment(s) (spec: %s)\n", pr.Number, len(comments), path)
	b.spec, b.branch, b.pr, b.conn = path, st.Branch, true, conn
	b.pub = publication{followUp: &followUp{handled: ids},
		rerun: fmt.Sprintf("factory pr --follow-up --repo . --out %s --llm-model MODEL", shellWord(filepath.Base(b.run.out)))}
	return runBuild(cmd, b, env)
}

// reviewComments are the comments of pull request n a follow-up answers:
// by users who may write to the repository, not bots, not factory's own,
// not handled before; oldest first.
func reviewComments(ctx context.Context, c forge.Client, n int, handled []int64) ([]forge.Comment, error) {
	all, err := c.Comments(ctx, n, true)
	if err != nil {
		return nil, err
	}
	var fresh []forge.Comment
	for _, cm := range all {
		if !slices.Contains(handled, cm.ID) && !strings.Contains(cm.Body, ownCommentMarker) && strings.TrimSpace(forge.CleanText(cm.Body)) != "" {
			fresh = append(fresh, cm)
		}
	}
	return byWriters(ctx, c, fresh)
}

// byWriters keeps, in order, the comments of users who may write to the
// repository (each asked once), bots' left out.
func byWriters(ctx context.Context, c forge.Client, comments []forge.Comment) ([]forge.Comment, error) {
	writers := map[string]bool{}
	var out []forge.Comment
	for _, cm := range comments {
		if cm.Author.Bot {
			continue
		}
		ok, seen := writers[cm.Author.Login]
		if !seen {
			var err error
			if ok, err = c.CanWrite(ctx, cm.Author.Login); err != nil {
				return nil, err
			}
			writers[cm.Author.Login] = ok
		}
		if ok {
			out = append(out, cm)
		}
	}
	return out, nil
}

// followUpSpec is the spec of a follow-up build: what the branch is, and
// each review comment, cleaned, with where on the diff it was made.
func followUpSpec(pr *forge.PR, comments []forge.Comment, repo string) string {
	var w strings.Builder
	fmt.Fprintf(&w, "# Follow-up: %s\n\n", strings.Join(strings.Fields(forge.CleanText(pr.Title)), " "))
	fmt.Fprintf(&w, "The branch %s of %s (pull request #%d) already holds the work so far. Reviewers asked for the changes below: make them, and change nothing else.\n", pr.Head, repo, pr.Number)
	for _, c := range comments {
		where := ""
		if c.Review && c.Path != "" {
			where = " on " + c.Path
			if c.Line > 0 {
				where += fmt.Sprintf(" line %d", c.Line)
			}
		}
		fmt.Fprintf(&w, "\n## Review comment by @%s%s\n\n%s\n", c.Author.Login, where, strings.TrimSpace(forge.CleanText(c.Body)))
	}
	return w.String()
}

// followUpReply is the one comment a follow-up build leaves: what
// changed (the orders committed, with their commits) and what did not.
func followUpReply(st *builder.Status, fu *followUp) string {
	var done, notDone []string
	for _, wo := range st.WorkOrders {
		title := strings.Join(strings.Fields(wo.Title), " ")
		switch wo.Outcome {
		case builder.OutcomePassed:
			done = append(done, fmt.Sprintf("- %s %s (%s)", wo.ID, title, wo.Commit))
		case builder.OutcomeFailed:
			notDone = append(notDone, fmt.Sprintf("- %s %s: failed at %s", wo.ID, title, wo.Stage))
		default:
			notDone = append(notDone, fmt.Sprintf("- %s %s: not run", wo.ID, title))
		}
	}
	var w strings.Builder
	fmt.Fprintf(&w, "factory: follow-up build `%s` for %d review comment(s).\n", st.PlanHash, len(fu.handled))
	if len(done) > 0 {
		w.WriteString("\nChanged:\n" + strings.Join(done, "\n") + "\n")
	}
	if len(notDone) > 0 {
		w.WriteString("\nNot changed:\n" + strings.Join(notDone, "\n") + "\n")
	}
	return w.String()
}
