package tree

import "strings"

// Kind is what an iteration did, as the commit message names it.
type Kind string

const (
	Execute   Kind = "execute"   // changed a file outside .runner/
	Decompose Kind = "decompose" // changed only .runner/ files, or nothing
	Repair    Kind = "repair"    // a REPAIR TREE iteration (seed §5.1)
)

// RunnerDir is the directory of the runner's files; changes confined to it
// are planning (DECOMPOSE), anything else is work (EXECUTE).
const RunnerDir = ".runner"

// Classify returns Execute if any changed path (slash-separated, relative
// to the repository root) is outside .runner/, else Decompose.
func Classify(changed []string) Kind {
	for _, p := range changed {
		if p != RunnerDir && !strings.HasPrefix(p, RunnerDir+"/") {
			return Execute
		}
	}
	return Decompose
}
