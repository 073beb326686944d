// Command factory is a deterministic, git-safe harness that turns work
// orders into code with LLMs.
package main

import (
	"os"

	"github.com/factory-harness/factory/internal/cli"
	"github.com/factory-harness/factory/internal/proc/sandbox"
)

func main() {
	sandbox.Init() // in a confined command's init, confines it and never returns
	os.Exit(cli.Main())
}
