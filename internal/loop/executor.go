package loop

import (
	"fmt"
	"strconv"
)

// Invocation is one fresh agent session: what every executor is told.
type Invocation struct {
	Root       string // the repository root, the session's working directory
	PromptFile string // the prompt pack (also on stdin for the command executor)
	RunID      string
	Iteration  int
	NodeID     string // the selected leaf; "" in REPAIR mode
	Mode       string // ModeExecute or ModeRepair
	Model      string // [executor] model, for the agent CLIs
}

// FACTORY_LOOP_MODE values. The runner cannot know beforehand whether the
// agent will decompose, so every normal iteration is "execute".
const (
	ModeExecute = "execute"
	ModeRepair  = "repair"
)

// Command is the process an executor wants run for an Invocation.
type Command struct {
	Argv []string
	// Env is added to the environment the runner builds (the core
	// allow-list, [executor] pass_env and the FACTORY_LOOP_* variables);
	// later entries win. Agent CLIs put their private HOME or CLI config
	// directory and the credentials they need here.
	Env   []string
	Stdin string // a file fed on stdin; "" for /dev/null
}

// Executor builds the command of one fresh agent session. The runner runs
// it in the repository with the iteration's budget (SIGTERM to its process
// group, SIGKILL 5 s later), its output capped and logged to executor.log.
// Adding an agent CLI means adding an Executor, nothing else.
type Executor interface {
	Command(inv Invocation) (Command, error)
}

// NewExecutor returns the executor of c.Kind. The codex and claude kinds are
// accepted by the configuration; their argv/env builders plug in here.
func NewExecutor(c ExecutorConfig) (Executor, error) {
	switch c.Kind {
	case KindCommand:
		if len(c.Command) == 0 {
			return nil, fmt.Errorf("executor kind %s needs [executor] command", KindCommand)
		}
		return commandExecutor{argv: c.Command}, nil
	case KindCodex, KindClaude:
		return nil, fmt.Errorf("executor kind %s is not available in this build yet", c.Kind)
	}
	return nil, fmt.Errorf("unknown executor kind %q", c.Kind)
}

// commandExecutor runs a fixed argv with the prompt pack on stdin.
type commandExecutor struct{ argv []string }

func (e commandExecutor) Command(inv Invocation) (Command, error) {
	return Command{Argv: e.argv, Stdin: inv.PromptFile}, nil
}

// loopEnv is what every executor's process learns about its iteration.
func loopEnv(inv Invocation) []string {
	return []string{
		"FACTORY_LOOP_PROMPT_FILE=" + inv.PromptFile,
		"FACTORY_LOOP_NODE_ID=" + inv.NodeID,
		"FACTORY_LOOP_ITERATION=" + strconv.Itoa(inv.Iteration),
		"FACTORY_LOOP_MODE=" + inv.Mode,
		"FACTORY_LOOP_RUN_ID=" + inv.RunID,
	}
}
