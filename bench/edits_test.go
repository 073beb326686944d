//go:build unix

package bench

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/factory-harness/factory/internal/edit"
	"github.com/factory-harness/factory/internal/workorder"
)

// BenchmarkEditProposal measures issue 37's targets on one real file
// (FACTORY_BENCH_EDIT_FILE; default Go's net/http/server.go): for one-line
// changes at 25 places spread over the file, the bytes of the proposal the
// model sends as an edit against the same change sent as a whole write
// (both as JSON without HTML escaping, as a model writes them), and the time
// edit.Apply takes to splice the edit into the file, per MB of base.
//
// Each edit's old text is the changed line with one line before and after,
// widened a line at a time until it occurs once: the context a model
// usually sends, not the least that would do.
//
// Metrics: edit/whole-% (median and largest over the places), whole-bytes,
// edit-bytes (median), apply-ms/MB (median of the places).
func BenchmarkEditProposal(b *testing.B) {
	path := os.Getenv("FACTORY_BENCH_EDIT_FILE")
	if path == "" {
		out, err := exec.Command("go", "env", "GOROOT").Output()
		if err != nil {
			b.Skipf("no FACTORY_BENCH_EDIT_FILE and no go env GOROOT: %v", err)
		}
		path = filepath.Join(strings.TrimSpace(string(out)), "src", "net", "http", "server.go")
	}
	data, err := os.ReadFile(path)
	if err != nil {
		b.Fatal(err)
	}
	base := string(data)
	sum := sha256.Sum256(data)
	sha := hex.EncodeToString(sum[:])
	rel := filepath.Base(path)
	places := changes(base, 25)
	if len(places) == 0 {
		b.Fatalf("%s: no line to change", path)
	}
	b.Logf("%s: %d bytes, %d lines, %d places", path, len(base), strings.Count(base, "\n"), len(places))
	var ratios, editBytes, applyMsPerMB []float64
	var whole int
	for b.Loop() {
		ratios, editBytes, applyMsPerMB = ratios[:0], editBytes[:0], applyMsPerMB[:0]
		for _, r := range places {
			want := strings.Replace(base, r.Old, r.New, 1)
			start := time.Now()
			got, _, err := edit.Apply(base, []edit.Replace{r})
			elapsed := time.Since(start)
			if err != nil || got != want {
				b.Fatalf("edit at %q: %v (or a result other than the splice)", firstLine(r.Old), err)
			}
			w := marshal(b, workorder.WriteProposal{Summary: "Change one line.",
				Writes: []workorder.FileWrite{{Path: rel, BaseSHA256: sha, Content: want}}})
			e := marshal(b, workorder.WriteProposal{Summary: "Change one line.",
				Edits: []workorder.FileEdit{{Path: rel, BaseSHA256: sha, Replace: []workorder.Replacement{{Old: r.Old, New: r.New}}}}})
			whole = w
			ratios = append(ratios, 100*float64(e)/float64(w))
			editBytes = append(editBytes, float64(e))
			applyMsPerMB = append(applyMsPerMB, float64(elapsed.Nanoseconds())/1e6/(float64(len(base))/(1<<20)))
		}
	}
	b.ReportMetric(median(ratios, id), "edit/whole-%")
	b.ReportMetric(slices.Max(ratios), "max-edit/whole-%")
	b.ReportMetric(float64(whole), "whole-bytes")
	b.ReportMetric(median(editBytes, id), "edit-bytes")
	b.ReportMetric(median(applyMsPerMB, id), "apply-ms/MB")
}

// changes picks n lines spread over base, each changed by a marker at its
// end, with their context widened until unique.
func changes(base string, n int) []edit.Replace {
	lines := strings.SplitAfter(base, "\n")
	var out []edit.Replace
	for i := range n {
		at := (2*i + 1) * len(lines) / (2 * n)
		for at < len(lines)-1 && strings.TrimSpace(lines[at]) == "" {
			at++
		}
		lo, hi := max(at-1, 0), min(at+2, len(lines))
		for {
			old := strings.Join(lines[lo:hi], "")
			if strings.Count(base, old) == 1 {
				changed := strings.TrimRight(lines[at], "\n") + " // changed\n"
				out = append(out, edit.Replace{Old: old, New: strings.Join(lines[lo:at], "") + changed + strings.Join(lines[at+1:hi], "")})
				break
			}
			if lo == 0 && hi == len(lines) {
				break
			}
			lo, hi = max(lo-1, 0), min(hi+1, len(lines))
		}
	}
	return out
}

func marshal(b *testing.B, p workorder.WriteProposal) int {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(p); err != nil {
		b.Fatal(err)
	}
	return buf.Len() - 1 // the encoder's newline
}

// id is the identity, for median over plain numbers.
func id(x float64) float64 { return x }

func firstLine(s string) string {
	line, _, _ := strings.Cut(s, "\n")
	return line
}
