package eval

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math"
	"os"
	"slices"
	"sort"
	"strings"
)

// Statuses of a run.
const (
	StatusSolved   = "solved"   // the build passed and every check exited 0
	StatusUnsolved = "unsolved" // the build did not pass, or a check failed
	// StatusError is a run that could not be judged: the provider was down
	// or refused, a replay did not match, or the harness failed. It is
	// counted apart from unsolved, and run again by the next invocation.
	StatusError = "error"
)

// FailedCheck is the first check that did not pass.
type FailedCheck struct {
	Index      int      `json:"index"` // 1-based
	Name       string   `json:"name,omitempty"`
	Command    []string `json:"command"`
	ExitCode   int      `json:"exit_code"`
	Error      string   `json:"error,omitempty"` // timed out, killed, could not start
	OutputTail string   `json:"output_tail"`
}

// Result is one line of results.jsonl: one case × model × run.
type Result struct {
	Case             string       `json:"case"`
	Model            string       `json:"model"`
	Run              int          `json:"run"`
	Status           string       `json:"status"`
	Solved           bool         `json:"solved"`
	BuildVerdict     string       `json:"build_verdict"`
	ChecksPassed     int          `json:"checks_passed"`
	ChecksTotal      int          `json:"checks_total"`
	FailedCheck      *FailedCheck `json:"failed_check,omitempty"`
	WorkOrdersPassed int          `json:"work_orders_passed"`
	WorkOrdersTotal  int          `json:"work_orders_total"`
	Attempts         int          `json:"attempts"`
	FirstAttemptPass bool         `json:"first_attempt_pass"`
	// Repairs is how many repairs of the plan the build used (its
	// summary's repairs: applied, given up or rejected; see `factory build
	// --repair`).
	Repairs int      `json:"repairs"`
	Tokens  int64    `json:"tokens"`
	CostUSD *float64 `json:"cost_usd"` // null when a price is unknown
	// InputTokens is the prompt tokens of Tokens; CachedInputTokens and
	// CacheWriteTokens the parts of them read from and written to the
	// providers' prompt caches.
	InputTokens       int64 `json:"input_tokens"`
	CachedInputTokens int64 `json:"cached_input_tokens"`
	CacheWriteTokens  int64 `json:"cache_write_tokens"`
	// OutputTokens is the generated tokens of Tokens: what the proposal
	// form (whole writes or edits) costs.
	OutputTokens int64   `json:"output_tokens"`
	WallSeconds  float64 `json:"wall_seconds"`
	BuildDir     string  `json:"build_dir"` // the build's artifacts
	Repo         string  `json:"repo"`
	Error        string  `json:"error,omitempty"`
}

func (r Result) key() RunKey { return RunKey{Case: r.Case, Model: r.Model, Run: r.Run} }

// readResults reads results.jsonl; a line cut short by a crash (the last)
// is dropped, so that its run is done again.
func readResults(path string) ([]Result, error) {
	data, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var out []Result
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(make([]byte, 0, 1<<20), 64<<20)
	n := 1
	for ; sc.Scan(); n++ {
		line := bytes.TrimSpace(sc.Bytes())
		if len(line) == 0 {
			continue
		}
		var r Result
		if err := json.Unmarshal(line, &r); err != nil {
			if !sc.Scan() { // the last line: cut short
				break
			}
			return nil, fmt.Errorf("%s line %d: %w", path, n, err)
		}
		// A whole line that no run writes is damage, not a crash: taken
		// as done, it would stand for a run that never happened.
		if msg := r.problem(); msg != "" {
			return nil, fmt.Errorf("%s line %d: %s", path, n, msg)
		}
		out = append(out, r)
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("%s line %d: %w", path, n, err)
	}
	return out, nil
}

// problem says what makes r a result no run writes; "" if nothing.
func (r Result) problem() string {
	switch {
	case r.Case == "" || r.Model == "":
		return "a result names its case and model"
	case r.Run < 1:
		return fmt.Sprintf("run %d: runs count from 1", r.Run)
	case r.Status != StatusSolved && r.Status != StatusUnsolved && r.Status != StatusError:
		return fmt.Sprintf("unknown status %q", r.Status)
	case r.Solved != (r.Status == StatusSolved):
		return fmt.Sprintf("solved is %v but the status is %q", r.Solved, r.Status)
	}
	return ""
}

// sortResults orders results by case, then model in the order given, then
// run: the order of results.jsonl whatever order the runs finished in.
func sortResults(rs []Result, models []string) {
	sort.SliceStable(rs, func(i, j int) bool {
		a, b := rs[i], rs[j]
		if a.Case != b.Case {
			return a.Case < b.Case
		}
		if a.Model != b.Model {
			return slices.Index(models, a.Model) < slices.Index(models, b.Model)
		}
		return a.Run < b.Run
	})
}

// ModelStats is one model's line of the summary.
type ModelStats struct {
	Model    string `json:"model"`
	Runs     int    `json:"runs"` // finished runs, errors included
	Solved   int    `json:"solved"`
	Unsolved int    `json:"unsolved"`
	Errors   int    `json:"errors"`
	// SolveRate is solved / (solved + unsolved), null without a judged
	// run; the Wilson score interval at 95% bounds it.
	SolveRate          *float64 `json:"solve_rate"`
	SolveRateLow       *float64 `json:"solve_rate_low"`
	SolveRateHigh      *float64 `json:"solve_rate_high"`
	SolvedFirstAttempt int      `json:"solved_first_attempt"`
	// Repairs counts the repairs of the plan the judged runs' builds used;
	// SolvedAfterRepair the solved runs whose build used at least one.
	// RepairsPerRun is their mean over the judged runs, RepairsPerSolved
	// the mean over the solved runs of the repairs each used (null without
	// such a run).
	Repairs           int      `json:"repairs"`
	SolvedAfterRepair int      `json:"solved_after_repair"`
	RepairsPerRun     *float64 `json:"repairs_per_run"`
	RepairsPerSolved  *float64 `json:"repairs_per_solved"`
	// Means over the judged runs, and per solved run (null without one);
	// a cost is null when a price is unknown.
	MeanTokensPerRun *float64 `json:"mean_tokens_per_run"`
	MeanCostPerRun   *float64 `json:"mean_cost_usd_per_run"`
	TokensPerSolved  *float64 `json:"tokens_per_solved"`
	// OutputTokensPerSolved is the output part of TokensPerSolved.
	OutputTokensPerSolved *float64 `json:"output_tokens_per_solved"`
	CostPerSolved         *float64 `json:"cost_usd_per_solved"`
	MedianWallSeconds     *float64 `json:"median_wall_seconds"`
	// CacheHitRate is the share of the judged runs' input read from the
	// providers' prompt caches; null without input.
	CacheHitRate *float64 `json:"cache_hit_rate"`
}

// CaseStats is one case's line: solved runs per model.
type CaseStats struct {
	Case   string           `json:"case"`
	Models []CaseModelStats `json:"models"`
}

// CaseModelStats counts one model's runs of a case.
type CaseModelStats struct {
	Model  string `json:"model"`
	Runs   int    `json:"runs"`
	Solved int    `json:"solved"`
	Errors int    `json:"errors"`
}

// Summary is summary.json.
type Summary struct {
	EvalID   string       `json:"eval_id"`
	Suite    string       `json:"suite"`
	Models   []string     `json:"models"`
	Runs     int          `json:"runs"` // per case and model
	Cases    []string     `json:"cases"`
	Invalid  []Invalid    `json:"invalid_cases"`
	Planned  int          `json:"planned_runs"`
	Finished int          `json:"finished_runs"`
	Complete bool         `json:"complete"` // every planned run finished without error
	PerModel []ModelStats `json:"per_model"`
	PerCase  []CaseStats  `json:"per_case"`
	Results  string       `json:"results"` // results.jsonl
}

// summarize computes the statistics of results.
func summarize(s Summary, results []Result) Summary {
	s.Finished = len(results)
	s.Complete = s.Finished == s.Planned
	s.PerModel = []ModelStats{}
	for _, m := range s.Models {
		st := ModelStats{Model: m}
		var tokens, output, cost float64
		var input, cached int64
		costKnown := true
		var walls []float64
		solvedRepairs := 0
		for _, r := range results {
			if r.Model != m {
				continue
			}
			st.Runs++
			switch r.Status {
			case StatusError:
				st.Errors++
				s.Complete = false
				continue
			case StatusSolved:
				st.Solved++
				if r.FirstAttemptPass {
					st.SolvedFirstAttempt++
				}
				solvedRepairs += r.Repairs
				if r.Repairs > 0 {
					st.SolvedAfterRepair++
				}
			default:
				st.Unsolved++
			}
			st.Repairs += r.Repairs
			tokens, output = tokens+float64(r.Tokens), output+float64(r.OutputTokens)
			input, cached = input+r.InputTokens, cached+r.CachedInputTokens
			if r.CostUSD == nil {
				costKnown = false
			} else {
				cost += *r.CostUSD
			}
			walls = append(walls, r.WallSeconds)
		}
		if judged := st.Solved + st.Unsolved; judged > 0 {
			rate := float64(st.Solved) / float64(judged)
			lo, hi := Wilson(st.Solved, judged)
			st.SolveRate, st.SolveRateLow, st.SolveRateHigh = &rate, &lo, &hi
			st.MeanTokensPerRun = ptr(tokens / float64(judged))
			st.RepairsPerRun = ptr(float64(st.Repairs) / float64(judged))
			if costKnown {
				st.MeanCostPerRun = ptr(cost / float64(judged))
			}
			st.MedianWallSeconds = ptr(median(walls))
			if input > 0 {
				st.CacheHitRate = ptr(float64(cached) / float64(input))
			}
		}
		if st.Solved > 0 {
			st.TokensPerSolved = ptr(tokens / float64(st.Solved))
			st.RepairsPerSolved = ptr(float64(solvedRepairs) / float64(st.Solved))
			st.OutputTokensPerSolved = ptr(output / float64(st.Solved))
			if costKnown {
				st.CostPerSolved = ptr(cost / float64(st.Solved))
			}
		}
		s.PerModel = append(s.PerModel, st)
	}
	s.PerCase = []CaseStats{}
	for _, c := range s.Cases {
		cs := CaseStats{Case: c}
		for _, m := range s.Models {
			cm := CaseModelStats{Model: m}
			for _, r := range results {
				if r.Case == c && r.Model == m {
					cm.Runs++
					switch r.Status {
					case StatusSolved:
						cm.Solved++
					case StatusError:
						cm.Errors++
					}
				}
			}
			cs.Models = append(cs.Models, cm)
		}
		s.PerCase = append(s.PerCase, cs)
	}
	return s
}

func ptr(f float64) *float64 { return &f }

func median(xs []float64) float64 {
	s := slices.Sorted(slices.Values(xs))
	n := len(s)
	if n%2 == 1 {
		return s[n/2]
	}
	return (s[n/2-1] + s[n/2]) / 2
}

// z95 is the standard normal quantile of 0.975.
const z95 = 1.959963984540054

// Wilson is the Wilson score interval at 95% for k successes in n trials
// (n > 0): unlike the normal approximation it stays inside [0, 1] and is
// not empty at k = 0 or k = n.
func Wilson(k, n int) (low, high float64) {
	p, nf, z2 := float64(k)/float64(n), float64(n), z95*z95
	center := (p + z2/(2*nf)) / (1 + z2/nf)
	half := z95 * math.Sqrt(p*(1-p)/nf+z2/(4*nf*nf)) / (1 + z2/nf)
	return math.Max(0, center-half), math.Min(1, center+half)
}

// PrintTable writes the summary as two tables: per model, then solved
// runs per case and model.
func PrintTable(w io.Writer, s Summary) {
	fmt.Fprintf(w, "eval %s: %d case(s) × %d model(s) × %d run(s); %d of %d runs finished\n",
		s.EvalID, len(s.Cases), len(s.Models), s.Runs, s.Finished, s.Planned)
	rows := [][]string{{"model", "runs", "solved", "unsolved", "errors", "solve rate", "95% CI", "1st try", "tokens/run", "cost/run", "tokens/solved", "output/solved", "cost/solved", "repairs/run", "repairs/solved", "cached", "median wall"}}
	for _, m := range s.PerModel {
		rows = append(rows, []string{m.Model, itoa(m.Runs), itoa(m.Solved), itoa(m.Unsolved), itoa(m.Errors),
			percent(m.SolveRate), interval(m.SolveRateLow, m.SolveRateHigh), itoa(m.SolvedFirstAttempt),
			number(m.MeanTokensPerRun), dollars(m.MeanCostPerRun), number(m.TokensPerSolved), number(m.OutputTokensPerSolved), dollars(m.CostPerSolved),
			decimal(m.RepairsPerRun), decimal(m.RepairsPerSolved), percent(m.CacheHitRate), seconds(m.MedianWallSeconds)})
	}
	writeRows(w, rows)
	fmt.Fprintln(w)
	head := []string{"case"}
	for _, m := range s.Models {
		head = append(head, m)
	}
	rows = [][]string{head}
	for _, c := range s.PerCase {
		row := []string{c.Case}
		for _, m := range c.Models {
			cell := fmt.Sprintf("%d/%d", m.Solved, m.Runs-m.Errors)
			if m.Errors > 0 {
				cell += fmt.Sprintf(" (+%d error)", m.Errors)
			}
			if m.Runs == 0 {
				cell = "-"
			}
			row = append(row, cell)
		}
		rows = append(rows, row)
	}
	writeRows(w, rows)
	for _, i := range s.Invalid {
		fmt.Fprintf(w, "invalid case %s: %s\n", i.Case, i.Error)
	}
}

// writeRows prints rows with columns padded to their widest cell.
func writeRows(w io.Writer, rows [][]string) {
	widths := map[int]int{}
	for _, r := range rows {
		for i, c := range r {
			widths[i] = max(widths[i], len([]rune(c)))
		}
	}
	for _, r := range rows {
		var sb strings.Builder
		for i, c := range r {
			if i > 0 {
				sb.WriteString("  ")
			}
			sb.WriteString(c)
			if i < len(r)-1 {
				sb.WriteString(strings.Repeat(" ", widths[i]-len([]rune(c))))
			}
		}
		fmt.Fprintln(w, sb.String())
	}
}

func itoa(n int) string { return fmt.Sprint(n) }

func percent(f *float64) string {
	if f == nil {
		return "-"
	}
	return fmt.Sprintf("%.1f%%", *f*100)
}

func interval(lo, hi *float64) string {
	if lo == nil || hi == nil {
		return "-"
	}
	return fmt.Sprintf("%.1f–%.1f%%", *lo*100, *hi*100)
}

func number(f *float64) string {
	if f == nil {
		return "-"
	}
	return fmt.Sprintf("%.0f", *f)
}

func decimal(f *float64) string {
	if f == nil {
		return "-"
	}
	return fmt.Sprintf("%.2f", *f)
}

func dollars(f *float64) string {
	if f == nil {
		return "?"
	}
	return fmt.Sprintf("$%.4f", *f)
}

func seconds(f *float64) string {
	if f == nil {
		return "-"
	}
	return fmt.Sprintf("%.1fs", *f)
}
