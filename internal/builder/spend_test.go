package builder

import (
	"context"
	"os"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/factory-harness/factory/internal/gitws"
	"github.com/factory-harness/factory/internal/llm"
)

// A record left by a process that died during a call counts the call's
// estimate as spent; --reset-budget stops counting, the record keeps all.
func TestTrackSpend(t *testing.T) {
	t.Setenv("GIT_AUTHOR_NAME", "t")
	t.Setenv("GIT_AUTHOR_EMAIL", "t@example.invalid")
	t.Setenv("GIT_COMMITTER_NAME", "t")
	t.Setenv("GIT_COMMITTER_EMAIL", "t@example.invalid")
	ctx := context.Background()
	repo, err := gitws.Init(ctx, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	const hash = "0123456789abcdef"
	lock, err := repo.Lock() // as the build holds it; it makes the factory directory
	if err != nil {
		t.Fatal(err)
	}
	defer lock.Unlock()
	left := SpendRecord{PlanHash: hash, Counted: llm.Tally{Calls: 2, TotalTokens: 500}, Total: llm.Tally{Calls: 2, TotalTokens: 500},
		InFlight: llm.Tally{TotalTokens: 300}}
	if err := gitws.WriteJournalFile(repo.FactoryFile(spendFile(hash)), left); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name    string
		reset   bool
		counted int64 // what the meter starts from
		want    SpendRecord
	}{
		{"resume", false, 800, SpendRecord{PlanHash: hash, Counted: llm.Tally{Calls: 2, TotalTokens: 800}, Total: llm.Tally{Calls: 2, TotalTokens: 800}}},
		{"reset", true, 0, SpendRecord{PlanHash: hash, Total: llm.Tally{Calls: 2, TotalTokens: 800}, Resets: 1}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if err := gitws.WriteJournalFile(repo.FactoryFile(spendFile(hash)), left); err != nil {
				t.Fatal(err)
			}
			m := llm.NewMeter(nil, nil, llm.Budget{})
			b := &builder{o: Options{Meter: m, ResetBudget: tt.reset}, repo: repo, progress: func(string, ...any) {}}
			b.sum.PlanHash = hash
			if err := b.trackSpend(); err != nil {
				t.Fatal(err)
			}
			if got := m.Snapshot().TotalTokens; got != tt.counted {
				t.Errorf("meter starts at %d tokens, want %d", got, tt.counted)
			}
			got, err := ReadSpend(repo, hash)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("record (-want +got):\n%s", diff)
			}
		})
	}
	// A damaged record is refused, not silently taken as zero.
	negative := left
	negative.Counted.TotalTokens = -1_000_000
	if err := gitws.WriteJournalFile(repo.FactoryFile(spendFile(hash)), negative); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name   string
		damage func() error
	}{
		{"negative", func() error { return nil }},
		{"cut short", func() error {
			return os.WriteFile(repo.FactoryFile(spendFile(hash)), []byte(`{"plan_hash":`), 0o644)
		}},
	} {
		name, damage := c.name, c.damage
		if err := damage(); err != nil {
			t.Fatal(err)
		}
		b := &builder{o: Options{Meter: llm.NewMeter(nil, nil, llm.Budget{})}, repo: repo, progress: func(string, ...any) {}}
		b.sum.PlanHash = hash
		if err := b.trackSpend(); err == nil || !strings.Contains(err.Error(), "--reset-budget") {
			t.Errorf("%s: a damaged spend record: %v", name, err)
		}
	}
}
