// Command factory is a deterministic, git-safe harness that turns work
// orders into code with LLMs.
package main

import (
	"os"

	"github.com/factory-harness/factory/internal/cli"
)

func main() { os.Exit(cli.Main()) }
