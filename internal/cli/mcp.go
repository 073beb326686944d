package cli

import (
	"cmp"
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strings"
	"sync"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/factory-harness/factory/internal/builder"
	"github.com/factory-harness/factory/internal/gitws"
	"github.com/factory-harness/factory/internal/mcp"
	"github.com/factory-harness/factory/internal/redact"
	"github.com/factory-harness/factory/internal/version"
)

type mcpOptions struct {
	roots     []string
	http      string
	tokenFile string
	sandbox   sandboxFlags
}

func newMCPCmd(env Env) *cobra.Command {
	o := &mcpOptions{}
	cmd := &cobra.Command{
		Use:   "mcp --root DIR [--root DIR]... [--http HOST:PORT]",
		Short: "Serve plan, validate, build, status, pr and issue to coding agents over the Model Context Protocol",
		Long: `Serve factory as an MCP server, for coding agents (Claude Code, Codex CLI, Cursor, ...):
over stdio by default (the agent starts 'factory mcp' and talks on its stdin and stdout),
or over Streamable HTTP with --http.

Tools (arguments are the CLI's flag names with underscores; see docs/mcp.md):
  factory_validate {plan_dir, repo?}                      what 'factory validate' checks
  factory_plan     {spec, out, llm_model, repo?, llm_base_url?, no_review?, overwrite?}
  factory_build    {repo, out, llm_model, spec | plan_dir, llm_base_url?, max_tokens?,
                    max_cost_usd?, no_review?, branch?}   the whole build, with progress
                                                          notifications; returns its summary
  factory_status   {repo}                                 what 'factory status --json' says
  factory_pr       {repo, build?, remote?, base?, draft?, reopen?, forge?, forge_api?,
                    forge_repo?}                          'factory pr': push the last build's
                                                          branch, open or update its pull
                                                          request; returns it
  factory_issue    {issue, repo, out, llm_model, llm_base_url?, max_tokens?, max_cost_usd?,
                    no_review?, branch?, remote?, base?, draft?, reopen?, forge?, forge_api?,
                    forge_repo?}                          'factory issue': the build, with
                                                          progress, then its pull request

Every path argument must resolve (symlinks followed) inside one of the --root
directories, or the call is refused with nothing done; relative paths are taken from
the first root. Provider API keys (OPENAI_API_KEY, ANTHROPIC_API_KEY) and forge tokens
(GITHUB_TOKEN or GH_TOKEN, GITEA_TOKEN, GITLAB_TOKEN) are read from this server's
environment only, never from arguments, and are redacted from every result; a missing
one is an error result naming the variable, with nothing changed.
Builds run as 'factory build' runs them with its default flags (confined commands:
--sandbox sets how). A client that disconnects during a build cancels it as Ctrl-C
does: the repository is rolled back to its last commit and the same call resumes it.

--http HOST:PORT listens there (port 0 picks a free one) and prints
'serving http://HOST:PORT/mcp' on stdout. A non-loopback address needs a token, as
'factory serve' does: --token-file FILE, or one is generated and printed; clients send
'Authorization: Bearer TOKEN' (or ?token=TOKEN).

Stop it by closing its stdin (stdio) or with Ctrl-C. Exit codes: 0 stopped, 2 usage
(no --root, a root that is not a directory, a bad address or token file).`,
		Args: noArgs("mcp"),
		RunE: func(cmd *cobra.Command, _ []string) error {
			return runMCP(cmd.Context(), env, o)
		},
	}
	f := cmd.Flags()
	f.StringArrayVar(&o.roots, "root", nil, "a directory the tools may read and write in (required, repeatable): every path argument must resolve inside one")
	f.StringVar(&o.http, "http", "", "serve Streamable HTTP on this address instead of stdio (e.g. 127.0.0.1:7071)")
	f.StringVar(&o.tokenFile, "token-file", "", "with --http: a file holding the token every request needs (default for a non-loopback address: a generated one)")
	o.sandbox.add(f)
	return cmd
}

func runMCP(ctx context.Context, env Env, o *mcpOptions) error {
	if len(o.roots) == 0 {
		return usagef("give at least one --root DIR: the directories the tools may work in (see 'factory mcp --help')")
	}
	if o.tokenFile != "" && o.http == "" {
		return usagef("--token-file needs --http")
	}
	if _, err := o.sandbox.request(env); err != nil {
		return err
	}
	if _, err := o.sandbox.depsOptions(); err != nil {
		return err
	}
	// Everything the server logs (stdout is the protocol's) is redacted,
	// the model clients' retry lines included.
	red := redact.New(os.Environ())
	logw := &lockedWriter{w: red.Writer(env.Stderr)}
	menv := env
	menv.Stderr = logw
	srv, err := mcp.New(mcp.Options{
		Roots: o.roots, Connect: mcpConnect(menv, o.sandbox), ConnectForge: mcpConnectForge(menv), Version: version.Read().Version,
		Redact: red.String, Log: logw,
	})
	if err != nil {
		return usagef("%v", err)
	}
	fmt.Fprintf(env.Stderr, "factory mcp: serving tools in %s\n", strings.Join(srv.Roots(), ", "))
	if o.http == "" {
		if err := srv.Serve(ctx, &sdk.StdioTransport{}); err != nil {
			return &internalError{err: fmt.Errorf("mcp: %w", err)}
		}
		return nil
	}
	return serveMCPHTTP(ctx, env, o, srv)
}

// serveMCPHTTP serves Streamable HTTP at /mcp until ctx ends.
func serveMCPHTTP(ctx context.Context, env Env, o *mcpOptions, srv *mcp.Server) error {
	ln, token, loopback, err := listenWithToken("--http", o.http, o.tokenFile)
	if err != nil {
		return err
	}
	defer ln.Close()
	mux := http.NewServeMux()
	mux.Handle("/mcp", requireToken(token, srv.Handler()))
	url := "http://" + ln.Addr().String() + "/mcp"
	fmt.Fprintf(env.Stdout, "serving %s\n", url)
	if !loopback && o.tokenFile == "" {
		fmt.Fprintf(env.Stderr, "factory mcp: %s is not a loopback address: every request needs 'Authorization: Bearer %s' (shown once)\n", ln.Addr(), token)
	}
	hs := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second, BaseContext: func(net.Listener) context.Context { return ctx }}
	done := make(chan error, 1)
	go func() { done <- hs.Serve(ln) }()
	select {
	case err := <-done:
		srv.Close()
		if !errors.Is(err, http.ErrServerClosed) {
			return &internalError{err: fmt.Errorf("mcp: %w", err)}
		}
	case <-ctx.Done():
		srv.Close() // builds in flight roll back first
		sctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		if err := hs.Shutdown(sctx); err != nil {
			hs.Close()
		}
	}
	return nil
}

// lockedWriter serializes writes to w: the server's log, written by its
// concurrent calls and by the model clients they start.
type lockedWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

// requireToken refuses a request without the token ("" requires none) in
// an Authorization: Bearer header or a ?token= parameter.
func requireToken(token string, h http.Handler) http.Handler {
	if token == "" {
		return h
	}
	want := sha256.Sum256([]byte(token))
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got := r.URL.Query().Get("token")
		if b, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer "); ok {
			got = b
		}
		sum := sha256.Sum256([]byte(got))
		if subtle.ConstantTimeCompare(sum[:], want[:]) != 1 {
			http.Error(w, "401 unauthorized: send Authorization: Bearer <token>", http.StatusUnauthorized)
			return
		}
		h.ServeHTTP(w, r)
	})
}

// mcpConnect gives the MCP server the options of a build as 'factory build'
// would have them with its default flags, the server's --sandbox flags and
// the call's model arguments: the same flag registrations, checks and model
// connection as build, so a tool call and a command line build alike.
func mcpConnect(env Env, box sandboxFlags) func(mcp.ModelArgs) (builder.Options, error) {
	return func(a mcp.ModelArgs) (builder.Options, error) {
		o := &buildOptions{}
		f := pflag.NewFlagSet("build", pflag.ContinueOnError)
		addAttemptFlags(f, &o.run)
		addPlannerFlags(f, o)
		o.run.sandbox = box
		o.run.model, o.run.baseURL, o.run.maxTokens, o.run.maxCostUSD = a.LLMModel, a.LLMBaseURL, a.MaxTokens, a.MaxCostUSD
		if a.NoReview {
			o.review = false
		}
		fail := func(err error) (builder.Options, error) {
			msg := strings.NewReplacer("--llm-model", "llm_model", "--max-cost-usd", "max_cost_usd", "--max-tokens", "max_tokens",
				" or use --replay FILE", "").Replace(err.Error())
			return builder.Options{}, errors.New(msg + " (provider keys are read from the factory mcp server's environment, never from arguments)")
		}
		tmpl, err := o.loadTemplate()
		if err != nil {
			return fail(err)
		}
		attempt, err := attemptOptions(&o.run, env)
		if err != nil {
			return fail(err)
		}
		se, plan, meter, err := o.models(env, attempt.Progress)
		if err != nil {
			return fail(err)
		}
		return o.builderOptions(tmpl, attempt, se, plan, meter), nil
	}
}

// mcpConnectForge gives the MCP tools factory_pr and factory_issue the
// forge of a repository's remote as 'factory pr' and 'factory issue' reach
// it with these arguments as flags: the token from factory's environment
// (env.Getenv) only, checked before anything changes.
func mcpConnectForge(env Env) func(context.Context, string, mcp.ForgeArgs) (mcp.Forge, error) {
	return func(ctx context.Context, dir string, a mcp.ForgeArgs) (mcp.Forge, error) {
		repo, err := gitws.Open(ctx, dir)
		if err != nil {
			return nil, fmt.Errorf("repo: %v (a pull request needs an existing repository with a remote)", err)
		}
		f := &forgeFlags{remote: cmp.Or(a.Remote, "origin"), base: a.Base, kind: a.Forge, api: a.ForgeAPI, forgeRepo: a.ForgeRepo,
			draft: a.Draft, reopen: a.Reopen}
		conn, err := connectForge(ctx, env, repo, f)
		if err != nil {
			msg := mcpArgNames(err.Error())
			if strings.Contains(msg, " token: set ") {
				msg += " (forge tokens are read from the factory mcp server's environment, never from arguments)"
			}
			return nil, errors.New(msg)
		}
		return &mcpForge{env: env, repo: repo, flags: f, conn: conn}, nil
	}
}

// mcpArgNames names the MCP arguments where a message names the flags.
var mcpArgNames = strings.NewReplacer("--forge-api", "forge_api", "--forge-repo", "forge_repo", "--forge", "forge",
	"--remote", "remote", "--reopen", "reopen", "--branch", "branch", "--base", "base").Replace

// mcpForge is one tool call's forge.
type mcpForge struct {
	env   Env
	repo  *gitws.Repo
	flags *forgeFlags
	conn  *forgeConn
	pub   publication // set by Issue
}

func (m *mcpForge) Issue(ctx context.Context, n int, out string) (mcp.IssueSpec, error) {
	path, pub, err := writeIssueSpec(ctx, m.conn, n, out, m.flags.base)
	if err != nil {
		return mcp.IssueSpec{}, err
	}
	m.pub = pub
	return mcp.IssueSpec{Path: path, Title: pub.issueTitle, Branch: issueBranch(n)}, nil
}

// Publish publishes the last build as 'factory pr' (after Issue, as
// 'factory issue') does.
func (m *mcpForge) Publish(ctx context.Context) (*mcp.PullRequest, error) {
	st, err := builder.ReadStatus(ctx, m.repo.Root)
	if err != nil {
		return nil, err
	}
	pub := m.pub
	if pub.rerun == "" {
		pub.rerun = rerunHint(st)
	}
	rec, err := publish(ctx, m.env, m.conn, m.repo, st, m.flags, pub)
	var refused *refusedPRError
	if errors.As(err, &refused) {
		return nil, errors.New(mcpArgNames(refused.msg))
	}
	if err != nil {
		return nil, fmt.Errorf("publish: %w", err)
	}
	return &mcp.PullRequest{Forge: string(rec.Forge), Repo: rec.Repo, Number: rec.Number, URL: rec.URL, State: string(rec.State), Draft: rec.Draft,
		Head: rec.Head, Base: rec.Base, Commit: rec.Commit, Action: rec.Action, Pushed: rec.Pushed}, nil
}
