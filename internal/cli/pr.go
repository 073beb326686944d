package cli

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/factory-harness/factory/internal/artifact"
	"github.com/factory-harness/factory/internal/builder"
	"github.com/factory-harness/factory/internal/forge"
	"github.com/factory-harness/factory/internal/gitws"
	"github.com/factory-harness/factory/internal/temporal"
)

// forgeFlags say where a build's pull request goes: shared by pr, issue
// and build --pr.
type forgeFlags struct {
	remote, base         string
	kind, api, forgeRepo string
	draft, reopen        bool
}

// add registers the flags; withBase false leaves --base to the command
// (build's --base also serves --temporal).
func (f *forgeFlags) add(fs *pflag.FlagSet, withBase bool) {
	fs.StringVar(&f.remote, "remote", "origin", "the git remote to push the build's branch to; the forge and repository come from its URL")
	if withBase {
		fs.StringVar(&f.base, "base", "", baseHelp)
	}
	fs.BoolVar(&f.draft, "draft", false, "open the pull request as a draft (a build that did not pass opens one whatever this says)")
	fs.BoolVar(&f.reopen, "reopen", false, "reopen the branch's pull request if it was closed (a merged one is never reopened)")
	fs.StringVar(&f.kind, "forge", "", "the forge's kind when its host does not tell: github, gitea (Forgejo too) or gitlab")
	fs.StringVar(&f.api, "forge-api", "", "the forge's API base URL (GitHub Enterprise: https://HOST/api/v3; Gitea: https://HOST/api/v1; GitLab: https://HOST/api/v4); default: derived from the remote")
	fs.StringVar(&f.forgeRepo, "forge-repo", "", "the repository on the forge as OWNER/NAME (GitLab: the project's path); default: from the remote's URL")
}

const baseHelp = "the branch the pull request merges into (default: the repository's default branch)"

// forgeConn is a forge reached with a token, and how a push to it
// authenticates.
type forgeConn struct {
	client    forge.Client
	target    forge.Target
	remoteURL string
	auth      gitws.Auth
}

// connectForge finds the forge of the remote and reads its token. It
// changes nothing, so it runs before a build: a missing token is refused
// before any model call, commit or push.
func connectForge(ctx context.Context, env Env, repo *gitws.Repo, f *forgeFlags) (*forgeConn, error) {
	remoteURL, err := repo.RemoteURL(ctx, f.remote)
	if err != nil {
		return nil, usagef("--remote: %v", err)
	}
	return connectForgeURL(env, remoteURL, f)
}

// connectForgeURL is connectForge for a remote given by its URL.
func connectForgeURL(env Env, remoteURL string, f *forgeFlags) (*forgeConn, error) {
	kind := forge.Kind(f.kind)
	if f.kind != "" && !slices.Contains(forge.Kinds, kind) {
		return nil, usagef("--forge %q: want github, gitea or gitlab", f.kind)
	}
	target, err := forge.Detect(remoteURL, kind, f.api, f.forgeRepo)
	if err != nil {
		return nil, usagef("%v", err)
	}
	vars := forge.TokenVars(target.Kind)
	for _, name := range vars {
		if target.Token = env.Getenv(name); target.Token != "" {
			break
		}
	}
	if target.Token == "" {
		return nil, usagef("no %s token: set %s (it is read by factory only, never passed to commands)", target.Kind, strings.Join(vars, " or "))
	}
	auth, err := forge.PushAuth(target.Kind, remoteURL, target.Token)
	if err != nil {
		return nil, usagef("%v", err)
	}
	client, err := forge.New(target, nil)
	if err != nil {
		return nil, usagef("%v", err)
	}
	return &forgeConn{client: client, target: target, remoteURL: remoteURL, auth: auth}, nil
}

// forgeTokens are the forge tokens in factory's environment: no command
// may see them (proc.EnvPolicy.Withhold).
func forgeTokens(env Env) []string {
	var out []string
	for _, k := range forge.Kinds {
		for _, name := range forge.TokenVars(k) {
			if v := env.Getenv(name); v != "" && !slices.Contains(out, v) {
				out = append(out, v)
			}
		}
	}
	return out
}

// publication is what publish needs besides the build's status.
type publication struct {
	issue      int    // the issue the build resolves, 0 for none
	issueTitle string // its title
	refs       string // "Fixes" or "Refs"
	// rerun is the command that resumes or repeats the build.
	rerun string
	// followUp is set when the build answered review comments.
	followUp *followUp
}

// ownCommentMarker ends every comment factory writes, so that a follow-up
// never takes factory's own words for a review.
const ownCommentMarker = "<!-- factory:comment -->"

// refusedPRError is a publication refused before anything changed.
type refusedPRError struct{ msg string }

func (e *refusedPRError) Error() string { return e.msg }

// publish pushes the build's branch and creates or updates its pull
// request, then records it in the build's directory. A failed or
// unfinished build is published as a draft with a comment saying where it
// stopped (once per failure).
func publish(ctx context.Context, env Env, conn *forgeConn, repo *gitws.Repo, st *builder.Status, f *forgeFlags, p publication) (*forge.Record, error) {
	tip, ok, err := repo.BranchCommit(ctx, st.Branch)
	if err != nil {
		return nil, err
	}
	if !ok || tip == st.BaseCommit && p.followUp == nil {
		return nil, &refusedPRError{fmt.Sprintf("the build's branch %s has no commit of the build to publish yet", st.Branch)}
	}
	t, err := findPRTarget(ctx, conn.client, f, st.Branch)
	if err != nil {
		return nil, err
	}
	pushed, err := pushBranch(ctx, env, repo, conn, st.Branch, tip)
	if err != nil {
		return nil, err
	}
	checks, err := builder.Evidence(ctx, repo, st)
	if err != nil {
		return nil, err
	}
	b := builtFrom(st.Branch, tip, st.PlanHash, st.Spec, st.PlanDir, st.WorkOrders, st.Complete, p)
	b.body.Tokens = st.Spend.Total.TotalTokens
	if t := st.Spend.Total; t.UnpricedCalls == 0 {
		b.body.CostUSD = &t.CostUSD
	}
	for i, o := range b.body.Orders {
		for _, c := range checks[o.ID] {
			b.body.Orders[i].Evidence = append(b.body.Orders[i].Evidence, forge.Evidence{Kind: c.Kind, Command: strings.Join(c.Command, " "), ExitCode: c.ExitCode})
		}
	}
	if p.followUp != nil {
		b.followUpNote = followUpReply(st, p.followUp)
	}
	rec, err := openPR(ctx, env, conn, f, t, b, p)
	if err != nil {
		return nil, err
	}
	rec.Pushed = pushed
	if err := artifact.WriteJSON(filepath.Join(st.BuildDir, forge.RecordFile), rec); err != nil {
		return nil, err
	}
	return rec, nil
}

// publishTemporal creates or updates the pull request of a build that ran
// on workers (build --temporal --pr): they pushed its branch to the
// remote, so nothing is pushed here, and the evidence of each order stays
// in the artifacts on the workers.
func publishTemporal(ctx context.Context, env Env, conn *forgeConn, res temporal.BuildResult, f *forgeFlags, spec, planDir string, p publication) (*forge.Record, error) {
	if res.Head == "" || res.Head == res.BaseCommit {
		return nil, &refusedPRError{fmt.Sprintf("the build's branch %s has no commit of the build to publish yet", res.Branch)}
	}
	t, err := findPRTarget(ctx, conn.client, f, res.Branch)
	if err != nil {
		return nil, err
	}
	orders := make([]builder.WorkOrder, len(res.WorkOrders))
	for i, w := range res.WorkOrders {
		orders[i] = w.WorkOrder
	}
	b := builtFrom(res.Branch, res.Head, res.PlanHash, spec, planDir, orders, res.Verdict == builder.VerdictPass, p)
	b.body.Tokens, b.body.CostUSD = res.Tokens, res.CostUSD
	return openPR(ctx, env, conn, f, t, b, p)
}

// built is what a pull request shows of a build, wherever it ran.
type built struct {
	branch, tip, planHash string
	complete              bool
	title                 string
	body                  forge.Body
	// failure is the key of the order that stopped the build ("" when
	// none did), failureNote the comment that says so, and followUpNote
	// a follow-up build's reply.
	failure, failureNote, followUpNote string
}

// prTarget is where a branch's pull request goes: the base branch, and
// the pull request the branch already has (nil for none).
type prTarget struct {
	base     string
	existing *forge.PR
	reopen   bool
}

// findPRTarget finds the base branch and the branch's pull request. A
// branch that is the base or the default one, a merged pull request, and
// a closed one without --reopen are refused before anything changes.
func findPRTarget(ctx context.Context, c forge.Client, f *forgeFlags, branch string) (prTarget, error) {
	defaultBranch, err := c.DefaultBranch(ctx)
	if err != nil {
		return prTarget{}, err
	}
	t := prTarget{base: cmp.Or(f.base, defaultBranch)}
	if branch == t.base || branch == defaultBranch || builder.IsProtectedBranch(branch) {
		return t, &refusedPRError{fmt.Sprintf("the build's branch %s is the base branch or the default one; factory never pushes there", branch)}
	}
	if t.existing, err = c.FindPR(ctx, branch); err != nil || t.existing == nil {
		return t, err
	}
	switch {
	case t.existing.State == forge.Merged:
		return t, &refusedPRError{fmt.Sprintf("the pull request for %s (%s) was merged; build on a new branch (--branch) to open another", branch, t.existing.URL)}
	case t.existing.State == forge.Closed && !f.reopen:
		return t, &refusedPRError{fmt.Sprintf("the pull request for %s (%s) is closed; pass --reopen to reopen it, or build on a new branch", branch, t.existing.URL)}
	}
	t.reopen = t.existing.State == forge.Closed
	return t, nil
}

// openPR creates or updates the pull request of b, whose branch is on the
// remote at b.tip, and leaves the comments it owes, each once: the ledger
// in the body remembers them.
func openPR(ctx context.Context, env Env, conn *forgeConn, f *forgeFlags, t prTarget, b built, p publication) (*forge.Record, error) {
	c, body := conn.client, b.body
	draft := f.draft || !b.complete
	var ledger forge.Ledger
	if t.existing != nil {
		var ok bool
		if ledger, ok = forge.ReadLedger(t.existing.Body); !ok {
			fmt.Fprintf(env.Stderr, "note: the factory block of %s was edited and cannot be read; it is written again\n", t.existing.URL)
		}
	}
	body.Ledger = ledger.Shows(body.Build, body.Orders)
	if p.issue == 0 && ledger.Issue > 0 {
		// A follow-up keeps what the pull request resolves.
		p.issue, p.refs = ledger.Issue, ledger.Refs
		body.Refs, body.Source = fmt.Sprintf("%s #%d", cmp.Or(p.refs, "Fixes"), p.issue), fmt.Sprintf("issue #%d", p.issue)
	}
	if p.issue > 0 {
		body.Ledger.Issue, body.Ledger.Refs = p.issue, cmp.Or(p.refs, "Fixes")
	}
	rec := &forge.Record{Forge: conn.target.Kind, Repo: conn.target.Repo, Head: b.branch, Base: t.base, Commit: b.tip}
	var pr *forge.PR
	var err error
	if t.existing == nil {
		pr, err = c.CreatePR(ctx, forge.NewPR{Title: b.title, Body: forge.Render(body), Head: b.branch, Base: t.base, Draft: draft})
		rec.Action = "created"
	} else {
		pr, rec.Action, err = updatePR(ctx, c, t.existing, forge.Merge(t.existing.Body, forge.Render(body)), draft, t.reopen)
	}
	if err != nil {
		return nil, err
	}
	// Comments first, then the ledger that remembers them: a crash in
	// between repeats a comment rather than losing one.
	var notes []string
	if b.failure != "" && ledger.Failure != b.failure+"@"+b.tip {
		notes = append(notes, b.failureNote)
		body.Ledger.Failure = b.failure + "@" + b.tip
	}
	if p.followUp != nil && !slices.Contains(ledger.Replied, b.planHash) {
		notes = append(notes, b.followUpNote)
		body.Ledger.Replied = append(slices.Clone(ledger.Replied), b.planHash)
		body.Ledger.Handled = append(slices.Clone(ledger.Handled), p.followUp.handled...)
	}
	for _, note := range notes {
		if _, err := c.Comment(ctx, pr.Number, true, note+"\n\n"+ownCommentMarker); err != nil {
			return nil, err
		}
	}
	if len(notes) > 0 {
		if pr, _, err = updatePR(ctx, c, pr, forge.Merge(pr.Body, forge.Render(body)), draft, false); err != nil {
			return nil, err
		}
		if rec.Action == "unchanged" {
			rec.Action = "updated"
		}
	}
	rec.Number, rec.URL, rec.State, rec.Draft = pr.Number, pr.URL, pr.State, pr.Draft
	return rec, nil
}

// updatePR changes only what differs, so a rerun with nothing new makes
// no change on the forge.
func updatePR(ctx context.Context, c forge.Client, pr *forge.PR, body string, draft, reopen bool) (*forge.PR, string, error) {
	var u forge.PRUpdate
	changed := false
	if body != pr.Body {
		u.Body, changed = &body, true
	}
	if pr.Draft != draft {
		u.Draft, changed = &draft, true
	}
	if reopen {
		open := forge.Open
		u.State, changed = &open, true
	}
	if !changed {
		return pr, "unchanged", nil
	}
	got, err := c.UpdatePR(ctx, pr.Number, u)
	return got, "updated", err
}

// pushBranch puts the remote's branch at tip: created when absent, moved
// forward when it is an ancestor of tip, left when already there. A remote
// branch holding commits the build lacks is refused, never overwritten,
// and the push is a compare-and-swap (--force-with-lease) on what was
// seen.
func pushBranch(ctx context.Context, env Env, repo *gitws.Repo, conn *forgeConn, branch, tip string) (bool, error) {
	remoteTip, exists, err := repo.RemoteTip(ctx, conn.remoteURL, branch, conn.auth)
	if err != nil {
		return false, err
	}
	if exists && remoteTip == tip {
		return false, nil
	}
	if exists {
		ok, err := repo.IsAncestor(ctx, remoteTip, tip)
		if err != nil {
			return false, err
		}
		if !ok {
			return false, &refusedPRError{fmt.Sprintf("the remote's branch %s is at %s, which the build's branch does not contain: someone pushed to it; fetch and look before publishing again (factory never overwrites a branch)", branch, gitws.ShortHash(remoteTip))}
		}
	}
	fmt.Fprintf(env.Stderr, "pushing %s (%s) to %s\n", branch, gitws.ShortHash(tip), forge.Redact(conn.remoteURL))
	if err := repo.PushLeaseAuth(ctx, conn.remoteURL, branch, tip, remoteTip, conn.auth); err != nil {
		if errors.Is(err, gitws.ErrPushRejected) {
			return false, &refusedPRError{fmt.Sprintf("%v; fetch and look before publishing again", err)}
		}
		return false, err
	}
	return true, nil
}

// maxSpecInBody bounds the spec shown in a pull request's body.
const maxSpecInBody = 8 << 10

// builtFrom gathers what the pull request shows of a build, but for the
// spend and the evidence, which the caller knows: where the work came
// from, the orders with their outcomes, and the order that stopped it.
func builtFrom(branch, tip, planHash, spec, planDir string, orders []builder.WorkOrder, complete bool, p publication) built {
	var specText string
	if spec != "" {
		if data, err := os.ReadFile(spec); err == nil {
			specText = string(data)
		}
	}
	b := built{branch: branch, tip: tip, planHash: planHash, complete: complete, title: prTitle(specText, planHash, p),
		body: forge.Body{Build: planHash, Rerun: p.rerun}, failureNote: failureComment(orders, p)}
	if p.issue > 0 {
		b.body.Source = fmt.Sprintf("issue #%d", p.issue)
		b.body.Refs = fmt.Sprintf("%s #%d", cmp.Or(p.refs, "Fixes"), p.issue)
	} else if spec != "" {
		b.body.Source = "the spec " + filepath.Base(spec)
	} else {
		b.body.Source = "the plan " + filepath.Base(planDir)
	}
	if p.issue == 0 {
		b.body.Spec = specText
		if len(specText) > maxSpecInBody {
			b.body.Spec = strings.ToValidUTF8(specText[:maxSpecInBody], "") + "\n…"
		}
	}
	for _, wo := range orders {
		if wo.Outcome == builder.OutcomeFailed && b.failure == "" {
			b.failure = wo.ID + "/" + wo.Stage
			b.body.Failed = fmt.Sprintf("%s failed at %s; the orders before it are on this branch", wo.ID, wo.Stage)
		}
		b.body.Orders = append(b.body.Orders, forge.Order{ID: wo.ID, Title: wo.Title, Status: wo.Outcome, Commit: wo.Commit, Stage: wo.Stage})
	}
	if !complete && b.failure == "" {
		b.body.Failed = "the build has orders still pending"
	}
	return b
}

// prTitle is the new pull request's title: the issue's, else the spec's
// first heading or line.
func prTitle(specText, planHash string, p publication) string {
	if p.issueTitle != "" {
		return p.issueTitle
	}
	for _, line := range strings.Split(specText, "\n") {
		if line = strings.TrimSpace(strings.TrimLeft(line, "# ")); line != "" {
			if len(line) > 72 {
				line = strings.ToValidUTF8(line[:72], "") + "…"
			}
			return line
		}
	}
	return "factory build " + planHash
}

func failureComment(orders []builder.WorkOrder, p publication) string {
	for _, wo := range orders {
		if wo.Outcome != builder.OutcomeFailed {
			continue
		}
		msg := fmt.Sprintf("factory: **%s** (%s) failed at `%s`; the work orders before it are committed on this branch, and this pull request stays a draft.", wo.ID, strings.Join(strings.Fields(wo.Title), " "), wo.Stage)
		if p.rerun != "" {
			msg += "\n\nTo resume once the cause is fixed (a changed spec or plan, or a rerun):\n\n```sh\n" + p.rerun + "\n```"
		}
		return msg
	}
	return "factory: the build stopped before finishing."
}

type prOptions struct {
	// build holds --repo, --out and --json, and the follow-up build's
	// flags.
	build    buildOptions
	buildID  string
	followUp bool
}

func newPRCmd(env Env) *cobra.Command {
	o := &prOptions{}
	cmd := &cobra.Command{
		Use:   "pr --repo DIR [--remote NAME] [--base BRANCH] [--draft] [--follow-up --out DIR --llm-model NAME]",
		Short: "Push the last build's branch and open or update its pull request, with the evidence",
		Long: `Publish the last 'factory build' of a repository: push its branch to --remote and
create the pull request for it (GitHub, Gitea or Forgejo) or merge request (GitLab), or
update the one that exists for that branch.

The push never goes to the base or default branch, never overwrites commits the build
does not have (it is a compare-and-swap on what the remote had), and is skipped when
the remote is already there. The pull request's body holds a block factory owns, between
<!-- factory:begin --> and <!-- factory:end -->: where the work came from, the plan
with each order's status and commit, the commands that checked each order and their exit
codes, tokens and cost, and how to rerun the build. It is rewritten on every update;
the rest of the body is left as people edited it. Rerunning with nothing new changes
nothing. A build that did not pass every order is published as a draft with one comment
saying which order failed and at what stage.

A closed pull request for the branch is not reopened without --reopen; a merged one
never is.

--follow-up answers review: the comments on the pull request (conversation and diff)
by users who may write to the repository, bots' and factory's own left out, that no
earlier follow-up handled, become the spec of a build on the same branch, on top of its
commits (the build flags below apply: --out and --llm-model are required). The branch is
pushed, the pull request updated, and one comment says what changed and what did not.
The comments handled are remembered by id in the factory block, so each is handled once;
with none new, nothing happens.

The token comes from the environment only: GITHUB_TOKEN or GH_TOKEN, GITEA_TOKEN,
GITLAB_TOKEN. factory sends it to the forge's API and gives it to the one git process
that pushes, as an HTTP header in that process's environment, for the remote's own host
only; it is never on a command line, in a URL, a file or .git/config, and no command a
work order runs sees it, under any --env-policy or name. See docs/forges.md.

Exit codes: 0 published (or nothing new to follow up); 1 the follow-up build failed
(published as a draft); 2 refused before anything changed (no token, no build, a closed
or merged pull request, the remote branch moved, the base branch); 3 the forge or the
push failed.`,
		Args: noArgs("pr"),
		RunE: func(cmd *cobra.Command, _ []string) error {
			return runPR(cmd, env, o)
		},
	}
	f := cmd.Flags()
	f.StringVar(&o.buildID, "build", "", "the build to publish, by plan hash (default: the last build in --repo, the only one this version publishes)")
	f.BoolVar(&o.followUp, "follow-up", false, "build what the new review comments ask, on the same branch, and publish it (see above)")
	addBuildFlags(f, &o.build)
	f.Lookup("repo").Usage = "the repository the build ran in (required)"
	f.Lookup("out").Usage = "the build's output directory (required with --follow-up)"
	f.Lookup("json").Usage = "print the pull request as JSON (with --follow-up: the build summary)"
	o.build.forge.add(f, true)
	return cmd
}

func runPR(cmd *cobra.Command, env Env, o *prOptions) error {
	ctx := cmd.Context()
	b := &o.build
	if err := requireFlags("pr", required{"--repo", b.run.repo}); err != nil {
		return err
	}
	if o.followUp {
		if err := requireFlags("pr --follow-up", required{"--out", b.run.out}, required{"--llm-model", b.run.model}); err != nil {
			return err
		}
	}
	repo, err := gitws.Open(ctx, b.run.repo)
	if err != nil {
		return usagef("%v", err)
	}
	st, err := builder.ReadStatus(ctx, repo.Root)
	if errors.Is(err, builder.ErrNoBuild) {
		return usagef("%v (run 'factory build' first)", err)
	}
	if err != nil {
		return usagef("%v", err)
	}
	if o.buildID != "" && o.buildID != st.PlanHash {
		return usagef("--build %s: the last build in %s is %s; publish a build right after it ran (or rerun it: a finished build's rerun changes nothing)", o.buildID, repo.Root, st.PlanHash)
	}
	conn, err := connectForge(ctx, env, repo, &b.forge)
	if err != nil {
		return err
	}
	if !o.followUp {
		rec, err := publish(ctx, env, conn, repo, st, &b.forge, publication{rerun: rerunHint(st)})
		return reportPR(env, b.run.jsonOut, rec, err)
	}
	return runFollowUp(cmd, env, b, conn, st)
}

// reportPR prints the outcome of a publication and maps its error to an
// exit code.
func reportPR(env Env, jsonOut bool, rec *forge.Record, err error) error {
	var refused *refusedPRError
	if errors.As(err, &refused) {
		return usagef("%s", refused.msg)
	}
	if err != nil {
		return &internalError{err: fmt.Errorf("publish: %w", err)}
	}
	if jsonOut {
		data, err := json.MarshalIndent(rec, "", "  ")
		if err != nil {
			return &internalError{err: err}
		}
		fmt.Fprintf(env.Stdout, "%s\n", data)
		return nil
	}
	state := string(rec.State)
	if rec.Draft {
		state += ", draft"
	}
	fmt.Fprintf(env.Stdout, "pull request #%d (%s, %s): %s\n", rec.Number, state, rec.Action, rec.URL)
	return nil
}

// rerunHint is the command that resumes the build (or repeats it: a
// finished build's rerun changes nothing), run from the repository's
// root. Paths are relative to it where they can be: the body is public,
// the user's directories are not.
func rerunHint(st *builder.Status) string {
	rel := func(p string) string {
		if r, err := filepath.Rel(st.Repo, p); err == nil && filepath.IsLocal(r) {
			return shellWord(r)
		}
		return shellWord(filepath.Base(p))
	}
	from := "--plan " + rel(st.PlanDir)
	if st.Spec != "" {
		from = "--spec " + rel(st.Spec)
	}
	return fmt.Sprintf("factory build %s --repo . --branch %s --out %s --llm-model MODEL", from, shellWord(st.Branch), rel(filepath.Dir(filepath.Dir(st.BuildDir))))
}

// shellWord quotes s for a POSIX shell when it needs it.
func shellWord(s string) string {
	if s != "" && strings.IndexFunc(s, func(r rune) bool {
		return !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || strings.ContainsRune("/._-+=:,@", r))
	}) < 0 {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}
