package eval

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// A line cut short by a crash is dropped (its run is done again); a bad
// line in the middle is an error.
func TestReadResults(t *testing.T) {
	dir := t.TempDir()
	good := `{"case":"a","model":"m","run":1,"status":"solved","solved":true}` + "\n"
	path := filepath.Join(dir, "r.jsonl")
	os.WriteFile(path, []byte(good+`{"case":"a","mod`), 0o644)
	rs, err := readResults(path)
	if err != nil || len(rs) != 1 || rs[0].Case != "a" {
		t.Errorf("truncated last line: %v, %v", rs, err)
	}
	os.WriteFile(path, []byte(`{"case":`+"\n"+good), 0o644)
	if _, err := readResults(path); err == nil || !strings.Contains(err.Error(), "line 1") {
		t.Errorf("bad first line: %v", err)
	}
	if rs, err := readResults(filepath.Join(dir, "none")); err != nil || rs != nil {
		t.Errorf("missing file: %v, %v", rs, err)
	}
}

func TestSummarize(t *testing.T) {
	cost := func(f float64) *float64 { return &f }
	rs := []Result{
		{Case: "b", Model: "m2", Run: 1, Status: StatusError},
		{Case: "a", Model: "m2", Run: 1, Status: StatusSolved, Tokens: 100, CostUSD: cost(0.5), WallSeconds: 4, InputTokens: 80, CachedInputTokens: 60},
		{Case: "a", Model: "m1", Run: 2, Status: StatusUnsolved, Tokens: 300, WallSeconds: 3},
		{Case: "a", Model: "m1", Run: 1, Status: StatusSolved, FirstAttemptPass: true, Tokens: 100, CostUSD: cost(0.1), WallSeconds: 1},
		{Case: "b", Model: "m1", Run: 1, Status: StatusSolved, Tokens: 200, CostUSD: cost(0.2), WallSeconds: 2},
	}
	sortResults(rs, []string{"m2", "m1"})
	var order []string
	for _, r := range rs {
		order = append(order, r.key().String())
	}
	if got := strings.Join(order, " "); got != "a/m2/1 a/m1/1 a/m1/2 b/m2/1 b/m1/1" {
		t.Errorf("sorted: %s", got)
	}
	s := summarize(Summary{Models: []string{"m1", "m2"}, Cases: []string{"a", "b"}, Planned: 6}, rs)
	m1, m2 := s.PerModel[0], s.PerModel[1]
	if m1.Runs != 3 || m1.Solved != 2 || m1.Unsolved != 1 || m1.SolvedFirstAttempt != 1 || *m1.SolveRate != 2.0/3 {
		t.Errorf("m1: %+v", m1)
	}
	if *m1.MeanTokensPerRun != 200 || *m1.TokensPerSolved != 300 || m1.MeanCostPerRun != nil || *m1.MedianWallSeconds != 2 {
		t.Errorf("m1 means: tokens %v per solved %v cost %v median %v (a run without a price makes the cost unknown)",
			*m1.MeanTokensPerRun, *m1.TokensPerSolved, m1.MeanCostPerRun, *m1.MedianWallSeconds)
	}
	if m2.Runs != 2 || m2.Errors != 1 || m2.Solved != 1 || *m2.SolveRate != 1 || *m2.CostPerSolved != 0.5 || *m2.MedianWallSeconds != 4 {
		t.Errorf("m2 (an error is not a judged run): %+v", m2)
	}
	if m2.CacheHitRate == nil || *m2.CacheHitRate != 0.75 || m1.CacheHitRate != nil {
		t.Errorf("cache hit rates: m1 %v (no input reported: unknown), m2 %v (want 0.75)", m1.CacheHitRate, m2.CacheHitRate)
	}
	if s.Complete || s.Finished != 5 {
		t.Errorf("complete %v finished %d: a run is missing and one errored", s.Complete, s.Finished)
	}
	if b := s.PerCase[1]; b.Case != "b" || b.Models[0].Solved != 1 || b.Models[1].Errors != 1 {
		t.Errorf("per case b: %+v", b)
	}
	var table strings.Builder
	PrintTable(&table, s)
	for _, want := range []string{"m1     3     2       1         0       66.7%", "a     1/2  1/1", "b     1/1  0/0 (+1 error)", "cached", "75.0%"} {
		if !strings.Contains(table.String(), want) {
			t.Errorf("table lacks %q:\n%s", want, table.String())
		}
	}
}

// Repairs of the plan: the runs' repairs per judged run and per solved
// run; an error's repairs do not count.
func TestSummarizeRepairs(t *testing.T) {
	rs := []Result{
		{Case: "a", Model: "m1", Run: 1, Status: StatusSolved, Repairs: 2},
		{Case: "a", Model: "m1", Run: 2, Status: StatusSolved},
		{Case: "a", Model: "m1", Run: 3, Status: StatusUnsolved, Repairs: 2},
		{Case: "a", Model: "m1", Run: 4, Status: StatusError, Repairs: 1},
		{Case: "a", Model: "m2", Run: 1, Status: StatusUnsolved, Repairs: 1},
	}
	s := summarize(Summary{Models: []string{"m1", "m2", "m3"}, Cases: []string{"a"}, Planned: 12}, rs)
	m1, m2, m3 := s.PerModel[0], s.PerModel[1], s.PerModel[2]
	if m1.Repairs != 4 || m1.SolvedAfterRepair != 1 || *m1.RepairsPerRun != 4.0/3 || *m1.RepairsPerSolved != 1 {
		t.Errorf("m1: repairs %d, solved after repair %d, per run %v, per solved %v", m1.Repairs, m1.SolvedAfterRepair, *m1.RepairsPerRun, *m1.RepairsPerSolved)
	}
	if m2.Repairs != 1 || *m2.RepairsPerRun != 1 || m2.RepairsPerSolved != nil || m3.RepairsPerRun != nil {
		t.Errorf("m2: repairs %d per run %v per solved %v; m3 per run %v", m2.Repairs, *m2.RepairsPerRun, m2.RepairsPerSolved, m3.RepairsPerRun)
	}
	var table strings.Builder
	PrintTable(&table, s)
	for _, want := range []string{"repairs/run", "repairs/solved", "1.33", "1.00"} {
		if !strings.Contains(table.String(), want) {
			t.Errorf("table lacks %q:\n%s", want, table.String())
		}
	}
	if d := describe(rs[0]); !strings.Contains(d, "2 repair(s)") {
		t.Errorf("progress line %q does not count the repairs", d)
	}
}
