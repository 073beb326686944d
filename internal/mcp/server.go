// Package mcp serves factory to coding agents over the Model Context
// Protocol: tools that validate and compile plans, run builds (with progress
// notifications), read their status and publish them as pull requests,
// confined to the server's roots.
package mcp

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"sync"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/factory-harness/factory/internal/builder"
)

// ModelArgs are the model arguments of a tool call that needs a model.
type ModelArgs struct {
	LLMModel   string
	LLMBaseURL string
	MaxTokens  int64
	MaxCostUSD float64
	NoReview   bool
}

// Options configure a Server.
type Options struct {
	// Roots are the directories every path argument must resolve inside.
	Roots []string
	// Connect returns the options of a build with its models connected, as
	// 'factory build' with its default flags and these model arguments
	// would have them; provider keys come from the server's environment
	// only. A refusal (no key, a bad model name) is returned as an error and
	// becomes the tool's error result. What to build and where (SpecPath,
	// PlanDir, Repo, Out) is left to the caller. Plan calls use its planner
	// settings.
	Connect func(ModelArgs) (builder.Options, error)
	// ConnectForge finds the forge of the remote of the repository repo,
	// as 'factory pr' and 'factory issue' do with these arguments as
	// their flags, and reads its token from the server's environment only.
	// It changes nothing: a refusal (no token, naming the variable; an
	// unknown remote or forge) is returned as an error and becomes the
	// tool's error result. nil leaves factory_pr and factory_issue out.
	ConnectForge func(ctx context.Context, repo string, a ForgeArgs) (Forge, error)
	// Version is the server's version, told to clients.
	Version string
	// Redact removes secrets from text a result carries; nil leaves it.
	Redact func(string) string
	// Log gets a line per tool call and the builds' progress, from calls
	// that run concurrently: it must be safe for concurrent use. nil is
	// quiet.
	Log io.Writer
}

// Server is factory's MCP server.
type Server struct {
	o     Options
	roots roots
	srv   *sdk.Server

	// calls are the tool calls in flight; Serve waits for them, so that a
	// build whose client went away has rolled back before the process ends.
	calls sync.WaitGroup
	// stop ends every call in flight when Serve's session ends.
	stopOnce sync.Once
	stopped  chan struct{}
}

// New checks the options and registers the tools.
func New(o Options) (*Server, error) {
	rs, err := resolveRoots(o.Roots)
	if err != nil {
		return nil, err
	}
	if o.Connect == nil {
		return nil, errors.New("mcp: Options.Connect is nil")
	}
	if o.Redact == nil {
		o.Redact = func(s string) string { return s }
	}
	if o.Log == nil {
		o.Log = io.Discard
	}
	s := &Server{o: o, roots: rs, stopped: make(chan struct{})}
	s.srv = sdk.NewServer(&sdk.Implementation{Name: "factory", Title: "factory", Version: o.Version}, &sdk.ServerOptions{
		Instructions: instructions(rs),
	})
	s.addTools()
	return s, nil
}

// Roots returns the resolved roots.
func (s *Server) Roots() []string { return append([]string(nil), s.roots...) }

// Serve serves one session over t (stdio: &sdk.StdioTransport{}) until the
// client disconnects or ctx ends. Calls still running are then cancelled
// as Ctrl-C cancels a command (a build rolls back and stays resumable), and
// Serve returns once they have ended.
func (s *Server) Serve(ctx context.Context, t sdk.Transport) error {
	err := s.srv.Run(ctx, t)
	s.stop()
	s.calls.Wait()
	if errors.Is(err, context.Canceled) && ctx.Err() != nil {
		return nil // stopped by a signal: a normal end
	}
	return err
}

// Handler serves Streamable HTTP sessions. Close ends the calls in flight.
func (s *Server) Handler() http.Handler {
	return sdk.NewStreamableHTTPHandler(func(*http.Request) *sdk.Server { return s.srv }, nil)
}

// Close cancels the calls in flight and waits for them to end.
func (s *Server) Close() {
	s.stop()
	s.calls.Wait()
}

func (s *Server) stop() { s.stopOnce.Do(func() { close(s.stopped) }) }

// track starts a call. Its context ends when the client cancels the call
// or goes away, or when the server stops, with a cause that says so (a
// build's summary and log carry it); done ends it.
func (s *Server) track(ctx context.Context) (context.Context, func()) {
	s.calls.Add(1)
	call, cancel := context.WithCancelCause(context.WithoutCancel(ctx))
	go func() {
		select {
		case <-s.stopped:
			cancel(errors.New("interrupted: the MCP session ended"))
		case <-ctx.Done():
			cancel(fmt.Errorf("interrupted: the MCP client cancelled the call or disconnected (%v)", context.Cause(ctx)))
		case <-call.Done():
		}
	}()
	return call, func() { cancel(nil); s.calls.Done() }
}

func (s *Server) logf(format string, args ...any) {
	fmt.Fprintf(s.o.Log, "factory mcp: "+format+"\n", args...)
}

func instructions(rs roots) string {
	return "factory turns a product spec into working software: it compiles the spec into validated work orders (a plan), " +
		"then runs each work order against a git repository with a model proposing whole-file writes and the harness " +
		"verifying them, rolling back failures and committing each passed work order. Use factory_validate to check a plan, " +
		"factory_plan to compile a spec into a plan, factory_build to build a repository from a spec or a plan (long-running; " +
		"resumable: call it again with the same arguments after a failure or an interruption) and factory_status to read a " +
		"build's progress; factory_pr opens or updates the pull request of a repository's last build, and factory_issue builds " +
		"what a forge issue asks for and opens its pull request. Every path must lie inside " +
		rs.list() + ". Provider API keys and forge tokens come from the server's environment; never pass them as arguments."
}
