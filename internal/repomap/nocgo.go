//go:build !cgo

package repomap

import (
	"context"
	"errors"
)

// Available reports whether this binary can map repositories: tree-sitter
// needs cgo, and a binary built with CGO_ENABLED=0 knows no language, so
// its maps are empty.
const Available = false

type grammar struct{ name string }

func grammarFor(string) *grammar { return nil }

type parsers map[*grammar]struct{}

func (parsers) close() {}

func extract(context.Context, parsers, *grammar, []byte) ([]Def, error) {
	return nil, errors.New("factory was built without cgo, so it has no parsers")
}
