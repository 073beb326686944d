package loop

import (
	"cmp"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"

	"github.com/factory-harness/factory/internal/agentcli"
	"github.com/factory-harness/factory/internal/llm/keyproxy"
	"github.com/factory-harness/factory/internal/proc"
)

// Invocation is one fresh agent session: what every executor is told.
type Invocation struct {
	Root       string // the repository root, the session's working directory
	PromptFile string // the prompt pack (also on stdin)
	Prompt     []byte // the prompt pack's bytes
	// Home is a private, empty directory outside the repository, created
	// for this session and removed after it: the agent CLIs' HOME.
	Home      string
	RunID     string
	Iteration int
	NodeID    string // the selected leaf; "" in REPAIR mode
	Mode      string // ModeExecute or ModeRepair
	Model     string // [executor] model, for the agent CLIs
	// ModelURL is the runner's key proxy for this session, forwarding to
	// the configured model endpoint with the real API key, and ModelKey
	// the stand-in key it accepts; "" when the executor is given no key.
	ModelURL, ModelKey string
	// Confined says the session runs in factory's sandbox (so Codex turns
	// its own off).
	Confined bool
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

// Default [executor] api_key_env of the agent CLIs.
const (
	DefaultCodexKeyEnv  = "OPENAI_API_KEY"
	DefaultClaudeKeyEnv = "ANTHROPIC_API_KEY"
)

// NewExecutor returns the executor of c.Kind. For the agent CLIs it finds
// the binary (the install directory of scripts/install-agent-clis.sh, else
// PATH) and checks that the API key variable is set in environ, so that a
// misconfiguration is refused before any iteration starts.
func NewExecutor(c ExecutorConfig, environ []string) (Executor, error) {
	switch c.Kind {
	case KindCommand:
		if len(c.Command) == 0 {
			return nil, fmt.Errorf("executor kind %s needs [executor] command", KindCommand)
		}
		keyEnv, _ := c.endpoint()
		if keyEnv != "" && getenv(environ, keyEnv) == "" {
			return nil, fmt.Errorf("executor kind %s: API key variable %s is not set or empty", KindCommand, keyEnv)
		}
		return commandExecutor{argv: c.Command, keyEnv: keyEnv}, nil
	case KindCodex, KindClaude:
		bin, err := agentBinary(c.Kind, environ)
		if err != nil {
			return nil, err
		}
		e := agentExecutor{cfg: c, binary: bin, environ: environ, asRoot: os.Geteuid() == 0}
		if _, err := e.build(Invocation{Model: c.Model, Home: probeHome, Prompt: []byte("probe")}); err != nil {
			return nil, err
		}
		return e, nil
	}
	return nil, fmt.Errorf("unknown executor kind %q", c.Kind)
}

// commandExecutor runs a fixed argv with the prompt pack on stdin; given a
// key, it gets the stand-in key in keyEnv and the proxy's URL.
type commandExecutor struct {
	argv   []string
	keyEnv string
}

func (e commandExecutor) Command(inv Invocation) (Command, error) {
	cmd := Command{Argv: e.argv, Stdin: inv.PromptFile}
	if e.keyEnv != "" && inv.ModelURL != "" {
		cmd.Env = []string{e.keyEnv + "=" + inv.ModelKey, "FACTORY_LOOP_MODEL_URL=" + inv.ModelURL}
	}
	return cmd, nil
}

// agentExecutor runs Codex CLI or Claude Code with the invocation that
// internal/agentcli builds: the CLI's own non-interactive argv, its exact
// environment with the private home, the prompt pack on stdin.
type agentExecutor struct {
	cfg     ExecutorConfig
	binary  string
	environ []string
	asRoot  bool
}

func (e agentExecutor) Command(inv Invocation) (Command, error) {
	ai, err := e.build(inv)
	if err != nil {
		return Command{}, err
	}
	return Command{Argv: ai.Argv, Env: ai.Env, Stdin: inv.PromptFile}, nil
}

// build builds the CLI's invocation; with a key proxy, the CLI talks to
// it with the stand-in key, and never gets the real one.
func (e agentExecutor) build(inv Invocation) (agentcli.Invocation, error) {
	c := e.cfg
	c.Model = inv.Model
	environ := e.environ
	if inv.ModelURL != "" {
		c.BaseURL = inv.ModelURL
		environ = append(slices.Clone(environ), apiKeyEnv(c)+"="+inv.ModelKey)
	}
	return buildAgent(c, e.binary, inv.Home, inv.Prompt, environ, e.asRoot, inv.Confined)
}

// probeHome stands for the private home when an invocation is built only to
// check the settings.
const probeHome = "/factory-loop-probe-home"

// buildAgent builds the invocation of the agent CLI c.Kind.
func buildAgent(c ExecutorConfig, binary, home string, prompt []byte, environ []string, asRoot, confined bool) (agentcli.Invocation, error) {
	if c.Kind == KindCodex {
		return agentcli.Codex(agentcli.CodexConfig{
			Binary: binary, Model: c.Model, BaseURL: c.BaseURL, APIKeyEnv: apiKeyEnv(c),
			Home: home, Prompt: prompt, Environ: environ, Confined: confined,
		})
	}
	return agentcli.Claude(agentcli.ClaudeConfig{
		Binary: binary, Model: c.Model, BaseURL: c.BaseURL, APIKeyEnv: apiKeyEnv(c),
		Home: home, Prompt: prompt, Environ: environ, AsRoot: asRoot,
	})
}

// agentSettingsProblem checks model, base_url and api_key_env of an agent
// kind without looking at the environment: "" when they are usable.
func agentSettingsProblem(c ExecutorConfig) string {
	_, err := buildAgent(c, "", probeHome, []byte("probe"), []string{apiKeyEnv(c) + "=probe"}, false, false)
	if err != nil {
		return err.Error()
	}
	return ""
}

// The model endpoints of the agent CLIs without [executor] base_url.
const (
	DefaultCodexEndpoint  = "https://api.openai.com/v1"
	DefaultClaudeEndpoint = "https://api.anthropic.com"
)

// endpoint returns the variable holding the executor's API key and the
// endpoint the key proxy forwards to: "" when the executor gets no key
// (a command without api_key_env).
func (c ExecutorConfig) endpoint() (keyEnv, upstream string) {
	switch c.Kind {
	case KindCodex:
		return apiKeyEnv(c), cmp.Or(c.BaseURL, DefaultCodexEndpoint)
	case KindClaude:
		return apiKeyEnv(c), cmp.Or(c.BaseURL, DefaultClaudeEndpoint)
	}
	return c.APIKeyEnv, c.BaseURL
}

// endpointProblem checks a command executor's base_url and api_key_env:
// "" when they are usable.
func endpointProblem(baseURL, keyEnv string) string {
	if err := keyproxy.CheckUpstream(baseURL); err != nil {
		return "base_url: " + err.Error()
	}
	if keyEnv == "" || strings.ContainsAny(keyEnv, "= ") {
		return fmt.Sprintf("api_key_env %q is not a variable name", keyEnv)
	}
	return ""
}

// apiKeyEnv is [executor] api_key_env, or the kind's default.
func apiKeyEnv(c ExecutorConfig) string {
	switch {
	case c.APIKeyEnv != "":
		return c.APIKeyEnv
	case c.Kind == KindCodex:
		return DefaultCodexKeyEnv
	}
	return DefaultClaudeKeyEnv
}

// agentBinary finds the CLI name ("codex" or "claude"): the one
// scripts/install-agent-clis.sh installed (in $FACTORY_AGENT_CLIS, else
// ~/.cache/factory/agent-clis) when present, else name on PATH.
func agentBinary(name string, environ []string) (string, error) {
	dir := agentcli.InstallDir(func(k string) string { return getenv(environ, k) })
	if dir != "" {
		bin := agentcli.InstalledBinary(dir, name)
		if _, err := os.Stat(bin); err == nil {
			return bin, nil
		}
	}
	if proc.Found(name) {
		return name, nil
	}
	return "", fmt.Errorf("executor kind %s: %s is neither in the install directory %q nor on PATH: run scripts/install-agent-clis.sh (see docs/agent-clis.md)", name, name, dir)
}

// getenv returns the value of name in environ (the last one wins).
func getenv(environ []string, name string) string {
	value := ""
	for _, kv := range environ {
		if n, v, ok := strings.Cut(kv, "="); ok && n == name {
			value = v
		}
	}
	return value
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
