package loop

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"

	"github.com/factory-harness/factory/internal/gitws"
)

// agentHomePrefix begins the name of every agent's private home in
// $TMPDIR: factory-loop-home-<repository tag>-, where the tag is the first
// 12 hex digits of the SHA-256 of the common git directory, so that
// 'factory loop recover' finds the homes of this repository's killed
// iterations, and only those.
func agentHomePrefix(repo *gitws.Repo) string {
	sum := sha256.Sum256([]byte(repo.CommonDir))
	return "factory-loop-home-" + hex.EncodeToString(sum[:6]) + "-"
}

// agentHomePattern is the os.MkdirTemp pattern of the private home of
// iteration n of run runID: the prefix, the run and the iteration, and a
// random suffix.
func agentHomePattern(repo *gitws.Repo, runID string, n int) string {
	return fmt.Sprintf("%s%s-%d-", agentHomePrefix(repo), runID, n)
}

// removeAgentHomes removes the private homes of this repository's
// iterations left in $TMPDIR by a runner that was killed, and returns
// their paths. The caller holds the repository lock: no iteration of this
// repository is running, so every such home is a leftover.
func removeAgentHomes(repo *gitws.Repo) ([]string, error) {
	homes, err := filepath.Glob(filepath.Join(os.TempDir(), agentHomePrefix(repo)+"*"))
	if err != nil {
		return nil, err
	}
	var removed []string
	for _, h := range homes {
		if err := os.RemoveAll(h); err != nil {
			return removed, fmt.Errorf("remove the agent home %s left by a killed iteration: %w", h, err)
		}
		removed = append(removed, h)
	}
	return removed, nil
}
