package serve

import (
	"fmt"
	"net/http/httptest"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"testing"
	"time"
)

// manyBuilds writes n finished builds of four work orders each.
func manyBuilds(tb testing.TB, out string, n int) {
	tb.Helper()
	for i := range n {
		hash := fmt.Sprintf("%016x", i)
		dir := filepath.Join(out, "builds", hash)
		if err := os.MkdirAll(dir, 0o755); err != nil {
			tb.Fatal(err)
		}
		var b strings.Builder
		t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC).Add(time.Duration(i) * time.Minute)
		line := func(s string, args ...any) { fmt.Fprintf(&b, s+"\n", args...) }
		line(`{"event":"build_start","plan_hash":"%s","branch":"factory/%s","base_commit":"abc","ts":"%s"}`, hash, hash, t0.Format(time.RFC3339Nano))
		line(`{"event":"plan","source":"compiled","tokens":120,"work_orders":4,"ts":"%s"}`, t0.Format(time.RFC3339Nano))
		for w := 1; w <= 4; w++ {
			line(`{"event":"wo_start","wo":"WO-0%d","ts":"%s"}`, w, t0.Format(time.RFC3339Nano))
			for _, node := range []string{"se", "tr", "po", "finalize"} {
				line(`{"attempt":1,"cost_usd":0.01,"duration_ms":30,"event":"node","node":"%s","stage":"","tokens":120,"ts":"%s","verdict":"","wo":"WO-0%d"}`, node, t0.Format(time.RFC3339Nano), w)
			}
			line(`{"commit":"76dd83e72e83c4768140d07006c08f1e1e4d2838","event":"wo_end","ts":"%s","verdict":"PASS","wo":"WO-0%d"}`, t0.Format(time.RFC3339Nano), w)
		}
		line(`{"event":"build_end","ts":"%s","verdict":"PASS"}`, t0.Add(time.Minute).Format(time.RFC3339Nano))
		if err := os.WriteFile(filepath.Join(dir, "events.jsonl"), []byte(b.String()), 0o644); err != nil {
			tb.Fatal(err)
		}
		sum := fmt.Sprintf(`{"verdict":"PASS","plan_hash":"%s","branch":"factory/%s","repo":"/nonexistent/repo","tokens":600,"cost_usd":0.04,"work_orders":[]}`, hash, hash)
		if err := os.WriteFile(filepath.Join(dir, "build_summary.json"), []byte(sum), 0o644); err != nil {
			tb.Fatal(err)
		}
	}
}

// BenchmarkIndex1000 renders the index of 1,000 builds: the first render
// (cold: every events.jsonl and summary read) and then the steady state
// (each build's files only stat'ed).
func BenchmarkIndex1000(b *testing.B) {
	out := b.TempDir()
	manyBuilds(b, out, 1000)
	render := func(s *Server) {
		rec := httptest.NewRecorder()
		s.Handler().ServeHTTP(rec, httptest.NewRequest("GET", "/", nil))
		if rec.Code != 200 || strings.Count(rec.Body.String(), "data-url=") != 1000 {
			b.Fatalf("index: %d, %d rows", rec.Code, strings.Count(rec.Body.String(), "data-url="))
		}
	}
	b.Run("cold", func(b *testing.B) {
		for b.Loop() {
			s, err := New(Options{Outs: []string{out}})
			if err != nil {
				b.Fatal(err)
			}
			render(s)
			s.Close()
		}
	})
	b.Run("warm", func(b *testing.B) {
		s, err := New(Options{Outs: []string{out}})
		if err != nil {
			b.Fatal(err)
		}
		defer s.Close()
		render(s)
		cpu0 := cpuTime()
		for b.Loop() {
			render(s)
		}
		// CPU time per render: what the wall-clock figure is on an idle machine.
		b.ReportMetric(float64((cpuTime()-cpu0).Milliseconds())/float64(b.N), "cpu-ms/op")
	})
}

// cpuTime is the process's user and system CPU time so far.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// TestLargeEventLogIsStreamed folds an events.jsonl of 100,000 lines and
// checks the build page and the stream's state hold a bounded amount of
// memory: the file is never loaded whole.
func TestLargeEventLogIsStreamed(t *testing.T) {
	if testing.Short() {
		t.Skip("writes a 20 MB file")
	}
	out := t.TempDir()
	dir := filepath.Join(out, "builds", "bbbb000000000001")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	f, err := os.Create(filepath.Join(dir, "events.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	fmt.Fprintf(f, `{"event":"build_start","plan_hash":"bbbb000000000001","ts":"2026-01-01T00:00:00Z"}`+"\n")
	const lines = 100_000
	for i := range lines - 1 {
		fmt.Fprintf(f, `{"attempt":%d,"cost_usd":null,"duration_ms":30,"event":"node","node":"po","stage":"verify_failed","tokens":120,"ts":"2026-01-01T00:00:01Z","verdict":"","wo":"WO-%02d","padding":"%s"}`+"\n", i%5+1, i%20, strings.Repeat("p", 80))
	}
	f.Close()
	info, _ := os.Stat(f.Name())
	s, err := New(Options{Outs: []string{out}, Now: func() time.Time { return time.Date(2026, 1, 1, 0, 1, 0, 0, time.UTC) }})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	start := time.Now()
	v, err := s.buildView(t.Context(), 0, "bbbb000000000001")
	if err != nil {
		t.Fatal(err)
	}
	took := time.Since(start)
	runtime.GC()
	runtime.ReadMemStats(&after)
	retained := int64(after.HeapAlloc) - int64(before.HeapAlloc)
	t.Logf("events.jsonl: %d lines, %.1f MB; build view in %v; heap retained after it: %.2f MB (cache and view included)",
		lines, float64(info.Size())/1e6, took.Round(time.Millisecond), float64(retained)/1e6)
	if len(v.Events) != maxEventTail || v.EventsFrom != info.Size() {
		t.Errorf("events tail %d lines to offset %d, want %d to %d", len(v.Events), v.EventsFrom, maxEventTail, info.Size())
	}
	if retained > info.Size()/4 {
		t.Errorf("%d bytes retained for a %d-byte log: not bounded", retained, info.Size())
	}
	if v.Row.Status != StatusRunning || len(v.WOs) != 20 {
		t.Errorf("status %s, %d work orders", v.Row.Status, len(v.WOs))
	}
}
