package cli

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/factory-harness/factory/internal/serve"
)

type serveOptions struct {
	outs, repos []string
	addr        string
	tokenFile   string
}

func newServeCmd(env Env) *cobra.Command {
	o := &serveOptions{}
	cmd := &cobra.Command{
		Use:   "serve [--out DIR]... [--repo DIR]... [--addr HOST:PORT]",
		Short: "Watch builds, runs and loops live in a browser",
		Long: `Serve a web view of the builds and single runs under each --out dir and of the loop
runs in each --repo's .runner/: an index, each build (spec, plan, timeline, commits and
diffs, failures), each attempt (prompt, reply, proposed writes as diffs, commands and
logs), each loop run (task tree, memory files, iterations, agent transcripts), and a JSON
API behind every page (docs/serve.md). Running builds update live.

It only reads: nothing is written to an out dir or a repository, and it keeps working
while builds write to them. Pages, style and script are in the binary; nothing is loaded
from the network.

The first line on stdout is exactly 'serving http://HOST:PORT/' (port 0 picks a free
one). Without --addr it listens on 127.0.0.1:7070. A non-loopback address needs a token:
--token-file FILE, or one is generated; the printed URL carries it (?token=...), and
every request without it gets 401. Provider keys (sk-..., the values of *_API_KEY and
similar variables in this environment) are redacted from everything shown.

Stop it with Ctrl-C. Exit codes: 0 stopped, 2 usage (no directory, a bad address or
token file).`,
		Args: noArgs("serve"),
		RunE: func(cmd *cobra.Command, _ []string) error {
			return runServe(cmd.Context(), env, o)
		},
	}
	cmd.Flags().StringArrayVar(&o.outs, "out", nil, "an output dir of factory build or factory run (repeatable)")
	cmd.Flags().StringArrayVar(&o.repos, "repo", nil, "a repository whose .runner/ holds loop runs (repeatable)")
	cmd.Flags().StringVar(&o.addr, "addr", "127.0.0.1:7070", "the address to listen on; port 0 picks a free one")
	cmd.Flags().StringVar(&o.tokenFile, "token-file", "", "a file holding the access token (required on every request; default for a non-loopback --addr: a generated one)")
	return cmd
}

func runServe(ctx context.Context, env Env, o *serveOptions) error {
	if len(o.outs) == 0 && len(o.repos) == 0 {
		return usagef("give at least one --out DIR or --repo DIR (see 'factory serve --help')")
	}
	for _, d := range append(append([]string{}, o.outs...), o.repos...) {
		if info, err := os.Stat(d); err != nil || !info.IsDir() {
			return usagef("%s is not a directory", d)
		}
	}
	ln, token, loopback, err := listenWithToken("--addr", o.addr, o.tokenFile)
	if err != nil {
		return err
	}
	defer ln.Close()
	srv, err := serve.New(serve.Options{Outs: o.outs, Repos: o.repos, Token: token, LoopbackOnly: loopback && token == "", Environ: os.Environ()})
	if err != nil {
		return &internalError{err: err}
	}
	defer srv.Close()
	url := "http://" + ln.Addr().String() + "/"
	if token != "" {
		url += "?token=" + token
	}
	fmt.Fprintf(env.Stdout, "serving %s\n", url)
	if !loopback && o.tokenFile == "" {
		fmt.Fprintf(env.Stderr, "factory serve: %s is not a loopback address: every request needs the token in the URL above (shown once)\n", ln.Addr())
	}
	hs := &http.Server{Handler: srv.Handler(), ReadHeaderTimeout: 10 * time.Second, BaseContext: func(net.Listener) context.Context { return ctx }}
	done := make(chan error, 1)
	go func() { done <- hs.Serve(ln) }()
	select {
	case err := <-done:
		if !errors.Is(err, http.ErrServerClosed) {
			return &internalError{err: fmt.Errorf("serve: %w", err)}
		}
	case <-ctx.Done():
		// Ctrl-C is how a server stops: exit 0. Open event streams end with
		// the context; give the rest a moment.
		sctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		if err := hs.Shutdown(sctx); err != nil {
			hs.Close()
		}
	}
	return nil
}

// listenWithToken listens on addr, with the access token every request must
// carry: the one of tokenFile, else none on a loopback address, else a
// generated one. serve and mcp --http share it.
func listenWithToken(flag, addr, tokenFile string) (ln net.Listener, token string, loopback bool, err error) {
	if tokenFile != "" {
		data, err := os.ReadFile(tokenFile)
		if err != nil {
			return nil, "", false, usagef("--token-file: %v", err)
		}
		if token = strings.TrimSpace(string(data)); token == "" {
			return nil, "", false, usagef("--token-file %s is empty", tokenFile)
		}
	}
	ln, err = net.Listen("tcp", addr)
	if err != nil {
		return nil, "", false, usagef("%s %s: %v", flag, addr, err)
	}
	loopback = ln.Addr().(*net.TCPAddr).IP.IsLoopback()
	if !loopback && token == "" {
		b := make([]byte, 24)
		if _, err := rand.Read(b); err != nil {
			ln.Close()
			return nil, "", false, &internalError{err: fmt.Errorf("generate a token: %w", err)}
		}
		token = hex.EncodeToString(b)
	}
	return ln, token, loopback, nil
}
