package builder

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/factory-harness/factory/internal/gitws"
	"github.com/factory-harness/factory/internal/llm"
)

// FuzzReadSpend feeds ReadSpend (what a resumed build counts against
// --max-tokens and --max-cost-usd) arbitrary spend records. With resum set
// the input is the record's JSON and the harness appends its true checksum,
// so the fuzzer reaches the decoder and not only the checksum check. The
// properties: a refusal names the file and returns a zero record of the
// build; an accepted record is exactly what WriteJournalFile writes for the
// values read (so it round-trips, byte for byte), names the build, and
// holds no negative amount.
func FuzzReadSpend(f *testing.F) {
	const hash = "0123456789abcdef"
	dir := f.TempDir()
	git(f, dir, "init", "-q", "-b", "main")
	repo, err := gitws.Open(context.Background(), dir)
	if err != nil {
		f.Fatal(err)
	}
	path := repo.FactoryFile(spendFile(hash))
	// Records as trackSpend writes them: fresh, resumed, in flight, reset.
	for _, rec := range []SpendRecord{
		{PlanHash: hash},
		{PlanHash: hash, Counted: llm.Tally{Calls: 2, PromptTokens: 300, CompletionTokens: 200, TotalTokens: 500, CostUSD: 0.0125},
			Total: llm.Tally{Calls: 2, PromptTokens: 300, CompletionTokens: 200, TotalTokens: 500, CostUSD: 0.0125}},
		{PlanHash: hash, Counted: llm.Tally{Calls: 1, TotalTokens: 90, UnpricedCalls: 1}, Total: llm.Tally{Calls: 3, TotalTokens: 900, UnpricedCalls: 1},
			InFlight: llm.Tally{TotalTokens: 300}, Resets: 1},
	} {
		if err := gitws.WriteJournalFile(path, rec); err != nil {
			f.Fatal(err)
		}
		data, err := os.ReadFile(path)
		if err != nil {
			f.Fatal(err)
		}
		body, _, _ := bytes.Cut(data, []byte("\nsha256 "))
		f.Add(data, false)
		f.Add(data[:len(data)-1], false)
		f.Add(data[:len(data)/2], false)
		f.Add(bytes.Replace(data, []byte(`"calls":`), []byte(`"calls":1`), 1), false)
		f.Add(body, true)
		f.Add(bytes.Replace(body, []byte(`"total_tokens":`), []byte(`"total_tokens":-`), 1), true)
		f.Add(bytes.Replace(body, []byte(`"cost_usd":`), []byte(`"cost_usd":-`), 1), true)
		f.Add(bytes.Replace(body, []byte(`"counted"`), []byte(`"Counted"`), 1), true)
		f.Add(bytes.Replace(body, []byte(`"resets"`), []byte(`"extra":1,"resets"`), 1), true)
		f.Add(bytes.Replace(body, []byte(hash), []byte("fedcba9876543210"), 1), true)
	}
	for _, s := range []string{"", "null", "{}", `{"plan_hash":"` + hash + `"}`, `{"plan_hash":"` + hash + `","counted":{"cost_usd":NaN}}`,
		`{"plan_hash":"` + hash + `","counted":{"cost_usd":1e400}}`, `{"plan_hash":"x","plan_hash":"` + hash + `"}`} {
		f.Add([]byte(s), true)
	}
	check := filepath.Join(f.TempDir(), "rewritten.json")
	f.Fuzz(func(t *testing.T, data []byte, resum bool) {
		if resum {
			sum := sha256.Sum256(data)
			data = append(append(bytes.Clone(data), "\nsha256 "...), hex.EncodeToString(sum[:])+"\n"...)
		}
		if err := os.WriteFile(path, data, 0o644); err != nil {
			t.Fatal(err)
		}
		rec, err := ReadSpend(repo, hash)
		if err != nil {
			if !strings.Contains(err.Error(), path) {
				t.Fatalf("refusal does not name the file: %v", err)
			}
			if rec != (SpendRecord{PlanHash: hash}) {
				t.Fatalf("refusal %v came with the record %+v", err, rec)
			}
			return
		}
		if rec.PlanHash != hash {
			t.Fatalf("accepted the record of build %q for build %q", rec.PlanHash, hash)
		}
		if negative(rec.Counted) || negative(rec.Total) || negative(rec.InFlight) || rec.Resets < 0 {
			t.Fatalf("accepted a negative amount: %+v", rec)
		}
		if err := gitws.WriteJournalFile(check, rec); err != nil {
			t.Fatal(err)
		}
		want, err := os.ReadFile(check)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(data, want) {
			t.Fatalf("accepted a record WriteJournalFile did not write:\n%q\nit writes for %+v:\n%q", data, rec, want)
		}
	})
}
