package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/spf13/cobra"

	"github.com/factory-harness/factory/internal/builder"
	"github.com/factory-harness/factory/internal/gitws"
	"github.com/factory-harness/factory/internal/repomap"
	"github.com/factory-harness/factory/internal/repomap/gitsrc"
	"github.com/factory-harness/factory/internal/workorder"
)

const mapTokensHelp = "token budget of the repository map the model sees (definitions and signatures of the tracked source files, ranked for the task; 0 turns it off)"

type mapOptions struct {
	repo, forFile string
	tokens        int
	jsonOut       bool
}

func newMapCmd(env Env) *cobra.Command {
	o := &mapOptions{}
	cmd := &cobra.Command{
		Use:   "map [--repo DIR] [--for SPEC|WO] [--map-tokens N]",
		Short: "Print the repository map a model would see: definitions and signatures, ranked, within a token budget",
		Long: `Print the repository map of the commit HEAD of --repo, as the planner (for a spec)
or the SE (for a work order) would see it, so that you can check it.

The map lists, for every tracked source file (Go, Python, JavaScript, TypeScript,
Rust, C, C++, Java), its top-level definitions with their signatures, methods under
their types, read with tree-sitter. Files that are huge (over 256 KiB), generated
("Code generated ... DO NOT EDIT", "@generated", *.min.js), vendored (vendor/,
node_modules/, third_party/) or binary are skipped and counted.

With --for SPEC, the definitions of the files and identifiers the spec names come
first, then what they use and what uses them (a PageRank over the files, in which a
file that uses a name links to the files that define it), then the rest, until the
budget is spent. With --for WO (a work order JSON file) the map is ranked for its
allowed and context files and the names in its intent and notes, and leaves out its
context files, which the SE sees in full. Without --for, the files are ranked by how
much the rest of the repository uses them.

Parsed files are cached by blob hash in <git dir>/factory/repomap, so a second run
parses only the files that changed. Statistics go to stderr. Exit codes: 0 printed,
2 usage (not a git repository or no commit, unreadable --for), 3 git failed to list or
read the files.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return runMap(cmd.Context(), o, env)
		},
	}
	f := cmd.Flags()
	f.StringVar(&o.repo, "repo", ".", "the git repository to map (its HEAD commit)")
	f.StringVar(&o.forFile, "for", "", "a spec, or a work order JSON file, to rank the map for")
	f.IntVar(&o.tokens, "map-tokens", repomap.DefaultTokens, mapTokensHelp)
	f.BoolVar(&o.jsonOut, "json", false, "print the files and definitions shown, and the counts, as JSON instead of the text")
	return cmd
}

func runMap(ctx context.Context, o *mapOptions, env Env) error {
	if o.tokens < 0 {
		return usagef("--map-tokens must not be negative")
	}
	var text []byte
	if o.forFile != "" {
		var err error
		if text, err = os.ReadFile(o.forFile); err != nil {
			return usagef("--for: %v", err)
		}
	}
	repo, err := gitws.Open(ctx, o.repo)
	if err != nil {
		return usagef("--repo: %v", err)
	}
	head, err := repo.Head(ctx)
	if err != nil {
		return usagef("--repo: %v", err)
	}
	m, err := buildMap(ctx, repo, head, env.Stderr)
	if err != nil {
		return &internalError{err: err}
	}
	focus := m.FocusFromText(string(text))
	if wo, err := workorder.ParseWorkOrder(text); err == nil {
		focus = builder.WorkOrderFocus(m, wo)
	}
	v := m.Render(focus, o.tokens)
	if !o.jsonOut {
		fmt.Fprint(env.Stdout, v.Text)
		return nil
	}
	out, err := json.MarshalIndent(struct {
		repomap.View
		Tokens int           `json:"tokens"`
		Focus  repomap.Focus `json:"focus"`
	}{v, repomap.EstimateTokens(v.Text), focus}, "", "  ")
	if err != nil {
		return &internalError{err: fmt.Errorf("encode the map: %w", err)}
	}
	fmt.Fprintf(env.Stdout, "%s\n", out)
	return nil
}

// buildMap maps commit rev of repo, saying on progress (nil: nowhere) how
// long it took and how much the cache saved.
func buildMap(ctx context.Context, repo *gitws.Repo, rev string, progress io.Writer) (*repomap.Map, error) {
	start := time.Now()
	m, err := gitsrc.Build(ctx, repo, rev)
	if err != nil {
		return nil, err
	}
	reportMap(progress, m, start)
	return m, nil
}

func reportMap(progress io.Writer, m *repomap.Map, start time.Time) {
	if progress == nil {
		return
	}
	if !repomap.Available {
		fmt.Fprintln(progress, "map: this factory was built without cgo (CGO_ENABLED=0), so it has no parsers and the map is empty")
	}
	fmt.Fprintf(progress, "map: %d source files (%d parsed, %d from the cache, %d skipped) in %.2fs\n",
		len(m.Files), m.Parsed, m.Cached, m.Skipped.Total(), time.Since(start).Seconds())
}
