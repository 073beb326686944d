package bench

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/factory-harness/factory/internal/artifact"
	"github.com/factory-harness/factory/internal/gitws"
)

// BenchmarkStep times the pieces an attempt is made of, on the same
// 10,000-file repository, to show where BenchmarkAttempt* spends its time.
// The tree is clean throughout, so each step does its full-tree work
// (status, ls-files, add -A, reset) as it would after a one-file write.
func BenchmarkStep(b *testing.B) {
	repo := benchRepo(b)
	ctx := context.Background()
	r, err := gitws.Open(ctx, repo)
	if err != nil {
		b.Fatal(err)
	}
	base, err := r.Snapshot(ctx)
	if err != nil {
		b.Fatal(err)
	}
	steps := []struct {
		name string
		fn   func() error
	}{
		{"Open", func() error { _, err := gitws.Open(ctx, repo); return err }},
		{"Dirty", func() error { _, err := r.Dirty(ctx); return err }},
		{"Snapshot", func() error { _, err := r.Snapshot(ctx); return err }},
		{"TreeHash", func() error { _, err := r.TreeHash(ctx); return err }},
		{"Rollback", func() error { _, err := r.Rollback(ctx, base); return err }},
	}
	for _, s := range steps {
		b.Run(s.name, func(b *testing.B) {
			for range b.N {
				if err := s.fn(); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
	// One audit-trail file: the harness writes about ten per attempt.
	b.Run("WriteJSON", func(b *testing.B) {
		path := filepath.Join(b.TempDir(), "x.json")
		v := map[string]string{"verdict": "PASS"}
		for range b.N {
			if err := artifact.WriteJSON(path, v); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.StopTimer()
	requireClean(b, repo)
}
