package cli

import (
	"strings"
	"testing"

	"github.com/factory-harness/factory/internal/builder"
)

func TestNoteFilter(t *testing.T) {
	var out strings.Builder
	f := &noteFilter{w: &out}
	for _, chunk := range []string{"WO-01: title\n    attempt 1/2: se: asking\n    warn", "ing: unconfined\nbuild: recovering\n", "note: the new branch", " starts\npartial"} {
		f.Write([]byte(chunk))
	}
	if want := "warning: unconfined\nbuild: recovering\nnote: the new branch starts\n"; out.String() != want {
		t.Errorf("passed %q, want %q", out.String(), want)
	}
}

func TestLiveViewFit(t *testing.T) {
	v := &liveView{width: func() int { return 12 }}
	if got := v.fit("⠋ WO-01 1/3 a long title"); got != "⠋ WO-01 1/…" {
		t.Errorf("fit = %q", got)
	}
	if got := v.fit("short"); got != "short" {
		t.Errorf("fit = %q", got)
	}
}

// The live line and factory status show the prompt cache's hit rate when
// part of the input came from a cache, and nothing about it otherwise.
func TestSpendTextCacheRate(t *testing.T) {
	cost := 0.5
	for _, tt := range []struct {
		s    builder.Spend
		want string
	}{
		{builder.Spend{Tokens: 120, InputTokens: 100}, "120 tokens"},
		{builder.Spend{Tokens: 120, InputTokens: 100, CachedInputTokens: 80, CostUSD: &cost}, "120 tokens (80% cached), $0.5000"},
	} {
		if got := spendText(tt.s); got != tt.want {
			t.Errorf("spendText = %q, want %q", got, tt.want)
		}
	}
	if got := cacheText(900, 0.9); got != " (900 cached, 90% of the input)" || cacheText(0, 0) != "" {
		t.Errorf("cacheText = %q", got)
	}
}
