// Package gitsrc builds the repository map of a git commit: its files and
// their contents from git, the parse cache in the repository's git
// directory (<git dir>/factory/repomap).
package gitsrc

import (
	"context"
	"fmt"

	"github.com/factory-harness/factory/internal/gitws"
	"github.com/factory-harness/factory/internal/repomap"
)

// Build maps the tracked files of commit rev of repo.
func Build(ctx context.Context, repo *gitws.Repo, rev string) (*repomap.Map, error) {
	blobs, err := repo.BlobsAt(ctx, rev)
	if err != nil {
		return nil, fmt.Errorf("repository map: %w", err)
	}
	files := make([]repomap.Entry, len(blobs))
	for i, b := range blobs {
		files[i] = repomap.Entry{Path: b.Path, Blob: b.ID, Size: b.Size}
	}
	m, err := repomap.Build(ctx, repomap.Options{Files: files, Read: repo.ReadBlobs, CacheDir: repo.FactoryFile("repomap")})
	if err != nil {
		return nil, fmt.Errorf("repository map of %s at %s: %w", repo.Root, gitws.ShortHash(rev), err)
	}
	return m, nil
}

// ForSpec is the map of HEAD of repo ranked for spec within tokens, as the
// planner sees it, and the whole map it was cut from.
func ForSpec(ctx context.Context, repo *gitws.Repo, spec string, tokens int) (repomap.View, *repomap.Map, error) {
	head, err := repo.Head(ctx)
	if err != nil {
		return repomap.View{}, nil, fmt.Errorf("repository map: %w", err)
	}
	m, err := Build(ctx, repo, head)
	if err != nil {
		return repomap.View{}, nil, err
	}
	return m.Render(m.FocusFromText(spec), tokens), m, nil
}
