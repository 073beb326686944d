package builder

import (
	"errors"
	"fmt"
	"io/fs"
	"os"

	"github.com/factory-harness/factory/internal/gitws"
	"github.com/factory-harness/factory/internal/llm"
)

// SpendRecord is what a build's model calls have spent, in every process
// that worked on it. It lives in the git directory with the build's other
// state, checksummed like the journal, and is rewritten before each call
// is sent and after it returns, so
// a resumed build — after an interrupt, a crash or `factory recover` —
// counts the earlier spending against --max-tokens and --max-cost-usd.
type SpendRecord struct {
	PlanHash string `json:"plan_hash"`
	// Counted is held against the budget; --reset-budget zeroes it.
	Counted llm.Tally `json:"counted"`
	// Total is every call of the build, resets included.
	Total llm.Tally `json:"total"`
	// InFlight is the estimate of calls sent and not yet answered. Left
	// non-zero only by a process that died during a call: the next one
	// counts the estimate as spent, since the provider may have charged it.
	InFlight llm.Tally `json:"in_flight"`
	Resets   int       `json:"resets"`
}

func spendFile(planHash string) string { return "spend-" + planHash + ".json" }

// ReadSpend reads the spend record of build planHash; a build that has
// made no call has a zero record.
func ReadSpend(repo *gitws.Repo, planHash string) (SpendRecord, error) {
	rec := SpendRecord{PlanHash: planHash}
	path := repo.FactoryFile(spendFile(planHash))
	if _, err := os.Stat(path); errors.Is(err, fs.ErrNotExist) {
		return rec, nil
	}
	err := gitws.ReadJournalFile(path, &rec)
	if err == nil && rec.PlanHash != planHash {
		err = fmt.Errorf("it names build %q", rec.PlanHash)
	}
	if err == nil && (negative(rec.Counted) || negative(rec.Total) || negative(rec.InFlight) || rec.Resets < 0) {
		err = errors.New("it holds a negative amount")
	}
	if err != nil {
		return SpendRecord{PlanHash: planHash}, fmt.Errorf("the build's spending record %s is damaged (%v); pass --reset-budget to count from zero", path, err)
	}
	return rec, nil
}

func negative(t llm.Tally) bool {
	return t.Calls < 0 || t.PromptTokens < 0 || t.CompletionTokens < 0 || t.TotalTokens < 0 || t.CostUSD < 0 || t.UnpricedCalls < 0
}

// trackSpend resumes the meter with the build's earlier spending (none
// with reset) and keeps the record up to date on every call.
func (b *builder) trackSpend() error {
	m := b.o.Meter
	if m == nil {
		return nil
	}
	rec, err := ReadSpend(b.repo, b.sum.PlanHash)
	if err != nil {
		if !b.o.ResetBudget {
			return refusef("%v", err)
		}
		rec = SpendRecord{PlanHash: b.sum.PlanHash}
	}
	if rec.InFlight != (llm.Tally{}) {
		b.progress("build: the previous build process died during a model call; counting its estimate (%d tokens) as spent", rec.InFlight.TotalTokens)
		rec.Counted, rec.Total, rec.InFlight = rec.Counted.Add(rec.InFlight), rec.Total.Add(rec.InFlight), llm.Tally{}
	}
	if b.o.ResetBudget && rec.Counted != (llm.Tally{}) {
		b.progress("build: --reset-budget: not counting the %d tokens earlier processes spent (the record keeps them)", rec.Counted.TotalTokens)
		rec.Counted = llm.Tally{}
		rec.Resets++
	} else if rec.Counted.Calls > 0 {
		b.progress("build: earlier processes spent %s; counting it against the budget (--reset-budget to start again)", describeTally(rec.Counted))
	}
	path := b.repo.FactoryFile(spendFile(b.sum.PlanHash))
	if err := gitws.WriteJournalFile(path, rec); err != nil {
		return fmt.Errorf("record the build's spending: %w", err)
	}
	m.Resume(rec.Counted)
	baseTotal, baseCounted := rec.Total, rec.Counted
	m.Observe(func(spent, inFlight llm.Tally) error {
		rec.Counted, rec.InFlight = spent, inFlight
		rec.Total = baseTotal.Add(spent.Sub(baseCounted))
		return gitws.WriteJournalFile(path, rec)
	})
	return nil
}

func describeTally(t llm.Tally) string {
	if c := t.Cost(); c != nil {
		return fmt.Sprintf("%d tokens, $%.4f", t.TotalTokens, *c)
	}
	return fmt.Sprintf("%d tokens, cost unknown", t.TotalTokens)
}
