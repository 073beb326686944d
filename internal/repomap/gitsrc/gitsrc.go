// Package gitsrc builds the repository map of a git commit: its files and
// their contents from git, the parse cache in the repository's git
// directory (<git dir>/factory/repomap).
package gitsrc

import (
	"context"
	"fmt"
	"path"

	"github.com/factory-harness/factory/internal/gitws"
	"github.com/factory-harness/factory/internal/repomap"
)

// Build maps the tracked files of commit rev of repo.
//
// A commit names one tree for good, so when rev is a commit id the map is
// kept whole under it (repomap.SaveSnapshot): the next map of that commit
// reads one file and runs no git at all. Otherwise, or the first time, the
// files are listed with git ls-tree and only the contents the parse cache
// does not hold are read and parsed.
func Build(ctx context.Context, repo *gitws.Repo, rev string) (*repomap.Map, error) {
	o := repomap.Options{Read: repo.ReadBlobs, CacheDir: repo.FactoryFile("repomap")}
	var err error
	key := ""
	if isObjectID(rev) {
		key = rev
		if m := repomap.LoadSnapshot(o, key); m != nil {
			return m, nil
		}
	}
	if o.Files, o.Attributes, err = listTree(ctx, repo, rev); err != nil {
		return nil, err
	}
	m, err := repomap.Build(ctx, o)
	if err == nil && key != "" {
		err = m.SaveSnapshot(o, key)
	}
	if err != nil {
		return nil, fmt.Errorf("repository map of %s at %s: %w", repo.Root, gitws.ShortHash(rev), err)
	}
	return m, nil
}

// maxAttributesBytes bounds a .gitattributes file that is read.
const maxAttributesBytes = 1 << 20

// listTree lists the files of commit rev and reads its .gitattributes
// files (one more git cat-file, when it has any).
func listTree(ctx context.Context, repo *gitws.Repo, rev string) ([]repomap.Entry, *repomap.Attributes, error) {
	blobs, err := repo.BlobsAt(ctx, rev)
	if err != nil {
		return nil, nil, fmt.Errorf("repository map: %w", err)
	}
	files := make([]repomap.Entry, len(blobs))
	dirOf := map[string][]string{} // blob -> the directories of the .gitattributes files it is
	var ids []string
	for i, b := range blobs {
		files[i] = repomap.Entry{Path: b.Path, Blob: b.ID, Size: b.Size}
		if path.Base(b.Path) == ".gitattributes" && b.Size <= maxAttributesBytes {
			if dirOf[b.ID] == nil {
				ids = append(ids, b.ID)
			}
			dir := path.Dir(b.Path)
			if dir == "." {
				dir = ""
			}
			dirOf[b.ID] = append(dirOf[b.ID], dir)
		}
	}
	if len(ids) == 0 {
		return files, nil, nil
	}
	attrs := map[string][]byte{}
	err = repo.ReadBlobs(ctx, ids, func(id string, data []byte) error {
		for _, dir := range dirOf[id] {
			attrs[dir] = data
		}
		return nil
	})
	if err != nil {
		return nil, nil, fmt.Errorf("repository map: read .gitattributes: %w", err)
	}
	return files, repomap.ParseAttributes(attrs), nil
}

// isObjectID reports a full object id (SHA-1 or SHA-256, as git prints
// them), not a name that could move like HEAD or a branch.
func isObjectID(rev string) bool {
	if len(rev) != 40 && len(rev) != 64 {
		return false
	}
	for _, c := range []byte(rev) {
		if !(c >= '0' && c <= '9' || c >= 'a' && c <= 'f') {
			return false
		}
	}
	return true
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
