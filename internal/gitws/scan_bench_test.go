package gitws

import (
	"encoding/json"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// BenchmarkScanTree measures the baseline walk of a 10,000-file work tree
// (the size of bench/floor_ratio.sh's repository): one lstat per file.
func BenchmarkScanTree(b *testing.B) {
	root := b.TempDir()
	if err := os.Mkdir(filepath.Join(root, "src"), 0o755); err != nil {
		b.Fatal(err)
	}
	for i := range 10000 {
		if err := os.WriteFile(filepath.Join(root, "src", fmt.Sprintf("f%05d.py", i)), []byte("x = 1\n"), 0o644); err != nil {
			b.Fatal(err)
		}
	}
	var r0, r1 syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &r0)
	for b.Loop() {
		var empty []string
		modes := map[string]fs.FileMode{}
		if err := scanTree(root, ".", &empty, modes, nil, nil); err != nil {
			b.Fatal(err)
		}
		if len(modes) != 10001 {
			b.Fatalf("%d modes", len(modes))
		}
	}
	// CPU time, which unlike ns/op does not depend on what else the machine runs.
	syscall.Getrusage(syscall.RUSAGE_SELF, &r1)
	cpu := r1.Utime.Nano() + r1.Stime.Nano() - r0.Utime.Nano() - r0.Stime.Nano()
	b.ReportMetric(float64(cpu)/float64(b.N)/1e6, "cpu-ms/op")
}

// BenchmarkJournalBaseline measures encoding a 10,000-file baseline as the
// journal holds it (written before each attempt's first write).
func BenchmarkJournalBaseline(b *testing.B) {
	modes := map[string]fs.FileMode{}
	for i := range 10000 {
		modes[fmt.Sprintf("src/f%05d.py", i)] = 0o644
	}
	base := Baseline{Commit: strings.Repeat("a", 40), Ignored: []string{".env"}, Modes: modes,
		state: &baselineState{headRef: "refs/heads/main", refs: []string{"refs/heads/main"}}}
	type journal struct {
		Version  int      `json:"version"`
		Baseline Baseline `json:"baseline"`
	}
	var r0, r1 syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &r0)
	for b.Loop() {
		if _, err := json.Marshal(journal{1, base}); err != nil {
			b.Fatal(err)
		}
	}
	syscall.Getrusage(syscall.RUSAGE_SELF, &r1)
	cpu := r1.Utime.Nano() + r1.Stime.Nano() - r0.Utime.Nano() - r0.Stime.Nano()
	b.ReportMetric(float64(cpu)/float64(b.N)/1e6, "cpu-ms/op")
}
