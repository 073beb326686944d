package cli

import (
	"testing"

	"github.com/factory-harness/factory/internal/llm"
	"github.com/factory-harness/factory/internal/repomap"
)

// The map's budget is counted as the budget meter counts prompts, so a
// map within --map-tokens is within what the meter will charge for it.
func TestMapTokensCountedAsTheMeterDoes(t *testing.T) {
	if repomap.BytesPerToken != llm.BytesPerToken {
		t.Errorf("repomap.BytesPerToken = %d, llm.BytesPerToken = %d", repomap.BytesPerToken, llm.BytesPerToken)
	}
}
