package factory

import (
	"os"
	"regexp"
	"strings"

	"github.com/factory-harness/factory/internal/canon"
)

// StoppedIdenticalFailure is RunSummary.StoppedEarly when two consecutive
// attempts failed at the same stage with the same (normalised) excerpt.
const StoppedIdenticalFailure = "identical failure"

// Parts of a failure excerpt that differ between two runs of the same
// failing test, replaced before comparing: "Ran 3 tests in 0.002s" must not
// make two identical failures differ.
var volatile = []struct {
	re   *regexp.Regexp
	with string
}{
	// Temporary paths: tempfile names, pytest's tmp_path, mktemp.
	{regexp.MustCompile(`(/private)?/(tmp|var/tmp|var/folders)/[^\s'"):,]*`), "<tmp>"},
	// Memory addresses: <object at 0x7f3a...>, Go's 0xc000012345.
	{regexp.MustCompile(`0x[0-9a-fA-F]+`), "0x?"},
	// Durations: 0.002s, 12ms, 1.5 seconds, 3m2.5s.
	{regexp.MustCompile(`\b\d+(\.\d+)?\s?(ns|µs|us|ms|s|sec|secs|seconds?|m|min|minutes?|h)\b`), "<dur>"},
	// Process ids as printed by most runtimes.
	{regexp.MustCompile(`\b(pid|PID|process) ?[=:]? ?\d+\b`), "$1 <pid>"},
	// Timestamps: 2026-11-23 10:01:02,345 and 10:01:02.345.
	{regexp.MustCompile(`\b\d{4}-\d{2}-\d{2}[T ]\d{2}:\d{2}:\d{2}([.,]\d+)?Z?`), "<time>"},
	{regexp.MustCompile(`\b\d{2}:\d{2}:\d{2}([.,]\d+)?\b`), "<time>"},
}

// normalizeExcerpt removes what differs between two runs of the same
// failure (see volatile); out, the run's output directory, is replaced too,
// as attempt directories differ by number.
func normalizeExcerpt(s, out string) string {
	if out != "" {
		s = strings.ReplaceAll(s, out, "<out>")
	}
	if tmp := os.TempDir(); tmp != "/tmp" {
		s = strings.ReplaceAll(s, tmp, "<tmp>")
	}
	for _, v := range volatile {
		s = v.re.ReplaceAllString(s, v.with)
	}
	return s
}

// failureKey fingerprints a failed attempt: its stage and normalised excerpt.
func failureKey(b *FailureBrief, out string) string {
	return canon.SHA256Hex([]byte(b.Stage + "\x00" + normalizeExcerpt(b.PrimaryErrorExcerpt, out)))
}
